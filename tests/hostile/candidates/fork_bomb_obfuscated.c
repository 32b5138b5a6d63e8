// expect: LIBRARY_VIOLATION
// The name is pasted together by the preprocessor, so no source regex sees "fork(":
// the object audit must see the undefined symbol.
#define PASTE(a, b) a##b
extern int PASTE(fo, rk)(void);
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (;;) PASTE(fo, rk)();
}
