// expect: LIBRARY_VIOLATION
// Finds the harness through its own return address, to rewrite the timer's state next to it.
// The builtin's name is pasted together, so only the preprocessed source shows it.
#define FRAME(x) __builtin_##x
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    char *harness_code = (char *)FRAME(return_address)(0);
    C[0] = (double)(long)harness_code;
}
