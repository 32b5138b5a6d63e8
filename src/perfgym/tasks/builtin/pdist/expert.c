/*
 * Expert pairwise distances: Y is transposed once (DIM x M) so that, for a row of X, the
 * distances to a block of Y points accumulate along contiguous memory (vectorized over j);
 * rows of X are split over threads; blocks of 256 Y points keep the accumulators in L1.
 */
#include <stdlib.h>

#define JB 256

void pdist_optimized(double *X, double *Y, double *D, int N, int M, int DIM) {
    double *Yt = malloc(sizeof(double) * (size_t)M * DIM);
#pragma omp parallel if ((long)N * M * DIM > 100000)
    {
#pragma omp for schedule(static)
        for (int j = 0; j < M; j++)
            for (int k = 0; k < DIM; k++) Yt[(long)k * M + j] = Y[(long)j * DIM + k];
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++) {
            const double *x = X + (long)i * DIM;
            double *d = D + (long)i * M;
            for (int j0 = 0; j0 < M; j0 += JB) {
                int j1 = j0 + JB < M ? j0 + JB : M;
                for (int j = j0; j < j1; j++) d[j] = 0.0;
                for (int k = 0; k < DIM; k++) {
                    const double xk = x[k], *yk = Yt + (long)k * M;
#pragma omp simd
                    for (int j = j0; j < j1; j++) {
                        double t = xk - yk[j];
                        d[j] += t * t;
                    }
                }
            }
        }
    }
    free(Yt);
}
