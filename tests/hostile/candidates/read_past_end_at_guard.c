// expect: RUNTIME_ERROR
// At 256 the array ends exactly at its guard page: the access faults.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s + 0.0 * A[i * K + K];  /* row M-1 reads A[M*K] */
        }
}
