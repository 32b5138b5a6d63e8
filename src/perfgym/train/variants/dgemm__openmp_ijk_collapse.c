/* The naive i-j-k loops with both outer loops split over threads: parallel, but B is still read
   down its columns. */
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++)
                sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
        }
}
