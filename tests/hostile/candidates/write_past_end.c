// expect: WRONG_ANSWER size=M=255,N=257,K=253
// Writes one element past the end of C, into the bytes before the guard page.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    C[M * N] = 0.0;
}
