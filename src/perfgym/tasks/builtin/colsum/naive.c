/* Naive column sums: clear, then add each row into the sums, row by row. */
void colsum_optimized(double *A, double *s, int N, int M) {
    for (int j = 0; j < M; j++) s[j] = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++)
            s[j] += A[(long)i * M + j];
}
