// expect: LIBRARY_VIOLATION
// The attribute in C23 syntax (gcc accepts it in gnu11 too).
[[gnu::optimize("O3")]] void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++)
            C[i * N + j] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = A[i * K + k];
            for (int j = 0; j < N; j++)
                C[i * N + j] += a * B[k * N + j];
        }
    }
}
