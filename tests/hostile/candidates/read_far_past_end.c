// expect: RUNTIME_ERROR
// Vector loads running a page past the end of B hit the guard page.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    double s = 0;
    for (long k = 0; k < (long)K * N + 4096; k++) s += B[k];
    for (int i = 0; i < M * N; i++) C[i] = s;
}
