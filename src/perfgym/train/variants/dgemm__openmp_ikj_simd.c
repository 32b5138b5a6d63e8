/* i-k-j order over threads, restrict pointers and an explicit simd inner loop. */
void matmul_optimized(double *restrict A, double *restrict B, double *restrict C, int M, int N,
                      int K) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        double *c = C + (long)i * N;
        for (int j = 0; j < N; j++) c[j] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = A[(long)i * K + k];
            const double *b = B + (long)k * N;
#pragma omp simd
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}
