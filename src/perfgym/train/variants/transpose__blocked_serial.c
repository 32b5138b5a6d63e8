/* 32 x 32 tiles, one thread: each cache line of B is written whole while it is in cache. */
void transpose_optimized(double *A, double *B, int N, int M) {
    for (int i0 = 0; i0 < N; i0 += 32)
        for (int j0 = 0; j0 < M; j0 += 32)
            for (int j = j0; j < (j0 + 32 < M ? j0 + 32 : M); j++)
                for (int i = i0; i < (i0 + 32 < N ? i0 + 32 : N); i++)
                    B[(long)j * N + i] = A[(long)i * M + j];
}
