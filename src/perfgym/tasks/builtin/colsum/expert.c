/*
 * Expert column sums: the rows split across threads, each adding its rows into sums of its
 * own (the matrix streams from memory once: bandwidth-bound), then the threads add their sums
 * into s, each thread owning a slice of the columns. A small matrix stays on one thread.
 */
#include <omp.h>
#include <stdlib.h>

void colsum_optimized(double *A, double *s, int N, int M) {
    int threads = (long)N * M > 32768 ? omp_get_max_threads() : 1;
    if (threads > N) threads = N > 0 ? N : 1;
    double *part = calloc((size_t)threads * M, sizeof(double));
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        double *mine = part + (size_t)t * M;
        long lo = (long)N * t / nt, hi = (long)N * (t + 1) / nt;
        for (long i = lo; i < hi; i++) {
            const double *row = A + i * M;
#pragma omp simd
            for (int j = 0; j < M; j++) mine[j] += row[j];
        }
#pragma omp barrier
        int j0 = (int)((long)M * t / nt), j1 = (int)((long)M * (t + 1) / nt);
        for (int j = j0; j < j1; j++) {
            double sum = 0.0;
            for (int k = 0; k < nt; k++) sum += part[(size_t)k * M + j];
            s[j] = sum;
        }
    }
    free(part);
}
