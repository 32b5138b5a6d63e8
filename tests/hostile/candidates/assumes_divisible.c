// expect: RUNTIME_ERROR size=M=255,N=257,K=253
// Unrolls k by 4 with no remainder loop: right at 256; at K=253 it reads rows past the end of B
// and runs into the guard page.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k += 4)
                s += A[i * K + k] * B[k * N + j] + A[i * K + k + 1] * B[(k + 1) * N + j]
                   + A[i * K + k + 2] * B[(k + 2) * N + j] + A[i * K + k + 3] * B[(k + 3) * N + j];
            C[i * N + j] = s;
        }
}
