/* Rows over threads; k and j in blocks of 64 so a block of B stays in cache while a row of C
   is updated. */
void matmul_optimized(double *restrict A, double *restrict B, double *restrict C, int M, int N,
                      int K) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        double *c = C + (long)i * N;
        for (int j = 0; j < N; j++) c[j] = 0.0;
        for (int kk = 0; kk < K; kk += 64) {
            int kend = kk + 64 < K ? kk + 64 : K;
            for (int jj = 0; jj < N; jj += 64) {
                int jend = jj + 64 < N ? jj + 64 : N;
                for (int k = kk; k < kend; k++) {
                    double a = A[(long)i * K + k];
                    const double *b = B + (long)k * N;
                    for (int j = jj; j < jend; j++) c[j] += a * b[j];
                }
            }
        }
    }
}
