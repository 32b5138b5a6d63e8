/* Naive Jacobi: each sweep writes a temporary grid, then copies it back. */
#include <stdlib.h>
#include <string.h>

void jacobi2d_optimized(double *in, double *out, int N, int M, int T) {
    double *tmp = malloc(sizeof(double) * N * M);
    memcpy(out, in, sizeof(double) * N * M);
    memcpy(tmp, in, sizeof(double) * N * M);
    for (int t = 0; t < T; t++) {
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < M - 1; j++)
                tmp[i * M + j] = 0.25 * (out[(i - 1) * M + j] + out[(i + 1) * M + j] +
                                         out[i * M + j - 1] + out[i * M + j + 1]);
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < M - 1; j++)
                out[i * M + j] = tmp[i * M + j];
    }
    free(tmp);
}
