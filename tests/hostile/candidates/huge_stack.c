// expect: RUNTIME_ERROR
// A 512 MiB array on the stack overflows the sandbox's stack limit.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    volatile double big[64 << 20];
    big[0] = 1.0;
    big[(64 << 20) - 1] = A[0];
    C[0] = big[0] + big[(64 << 20) - 1];
}
