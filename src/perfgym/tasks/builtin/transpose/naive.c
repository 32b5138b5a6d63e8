/* Naive transpose: reads A row by row, writes B a column at a time (stride N). */
void transpose_optimized(double *A, double *B, int N, int M) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++)
            B[(long)j * N + i] = A[(long)i * M + j];
}
