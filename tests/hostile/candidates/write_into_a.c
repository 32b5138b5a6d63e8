// expect: WRONG_ANSWER
// Scribbles into A (e.g. to use it as scratch space); inputs must be left unchanged.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    A[0] = 0.0;
}
