/* Naive forward substitution, one right-hand side (column of B) at a time. */
void trsm_optimized(double *L, double *B, double *X, int N, int R) {
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            double sum = B[(long)i * R + r];
            for (int j = 0; j < i; j++)
                sum -= L[(long)i * N + j] * X[(long)j * R + r];
            X[(long)i * R + r] = sum / L[(long)i * N + i];
        }
}
