// expect: WRONG_ANSWER size=M=255,N=257,K=253
// Reads one element past the end of A (an off-by-one most allocators forgive). At this size A
// ends a few bytes before its guard page and those bytes hold NaN, so the answer shows it.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s + 0.0 * A[i * K + K];  /* row M-1 reads A[M*K] */
        }
}
