/* Two rows of C per thread step: each row of B loaded once serves both. */
void matmul_optimized(double *restrict A, double *restrict B, double *restrict C, int M, int N,
                      int K) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M - 1; i += 2) {
        double *c0 = C + (long)i * N, *c1 = c0 + N;
        for (int j = 0; j < N; j++) { c0[j] = 0.0; c1[j] = 0.0; }
        for (int k = 0; k < K; k++) {
            double a0 = A[(long)i * K + k], a1 = A[(long)(i + 1) * K + k];
            const double *b = B + (long)k * N;
            for (int j = 0; j < N; j++) { c0[j] += a0 * b[j]; c1[j] += a1 * b[j]; }
        }
    }
    if (M % 2) {
        int i = M - 1;
        double *c = C + (long)i * N;
        for (int j = 0; j < N; j++) c[j] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = A[(long)i * K + k];
            for (int j = 0; j < N; j++) c[j] += a * B[(long)k * N + j];
        }
    }
}
