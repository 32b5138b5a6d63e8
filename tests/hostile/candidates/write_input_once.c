// expect: WRONG_ANSWER
// Uses B as scratch on one call in 16, a call the harness does not compare in full: the change
// stays behind, so the full comparison after the last timed call sees it.
static int calls;
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    if (++calls == 6) B[7] = 42.0;
}
