// expect: LIBRARY_VIOLATION
// Reads the time-stamp counter through a pasted builtin name; the instruction scan sees it.
#define TSC(x) __builtin_ia32_rd##x
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    unsigned long long t = TSC(tsc)();
    C[0] = (double)t;
}
