/* Naive pairwise distances: one pair at a time. */
void pdist_optimized(double *X, double *Y, double *D, int N, int M, int DIM) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            double sum = 0.0;
            for (int k = 0; k < DIM; k++) {
                double d = X[(long)i * DIM + k] - Y[(long)j * DIM + k];
                sum += d * d;
            }
            D[(long)i * M + j] = sum;
        }
}
