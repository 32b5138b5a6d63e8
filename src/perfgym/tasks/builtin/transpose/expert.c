/*
 * Expert transpose: 64 x 64 tiles (one tile of A and one of B fit in L1 together), tiles spread
 * over threads; inside a tile, 8 x 8 blocks so each cache line read or written is used whole.
 */
#define TILE 64
#define SUB 8

void transpose_optimized(double *A, double *B, int N, int M) {
    long tiles_i = (N + TILE - 1) / TILE, tiles_j = (M + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) collapse(2) if ((long)N * M > 16384)
    for (long ti = 0; ti < tiles_i; ti++)
        for (long tj = 0; tj < tiles_j; tj++) {
            long i0 = ti * TILE, j0 = tj * TILE;
            long i1 = i0 + TILE < N ? i0 + TILE : N, j1 = j0 + TILE < M ? j0 + TILE : M;
            for (long ii = i0; ii < i1; ii += SUB)
                for (long jj = j0; jj < j1; jj += SUB) {
                    long ie = ii + SUB < i1 ? ii + SUB : i1, je = jj + SUB < j1 ? jj + SUB : j1;
                    for (long j = jj; j < je; j++)
                        for (long i = ii; i < ie; i++)
                            B[j * N + i] = A[i * M + j];
                }
        }
}
