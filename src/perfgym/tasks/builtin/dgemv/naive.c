/* Naive matrix-vector product: one dot product per row. */
void dgemv_optimized(double *A, double *x, double *y, int M, int N) {
    for (int i = 0; i < M; i++) {
        double sum = 0.0;
        for (int j = 0; j < N; j++)
            sum += A[(long)i * N + j] * x[j];
        y[i] = sum;
    }
}
