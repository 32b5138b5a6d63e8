/*
 * Expert inclusive scan, two passes over per-thread chunks:
 *   1. each thread sums its chunk (a vectorizable reduction with 8 accumulators);
 *   2. after an exclusive scan of the chunk sums, each thread scans its chunk from its offset.
 * Pass 2 scans blocks of 8 with a log-step in-register scan, so the running sum advances one
 * add per 8 elements instead of one per element.
 */
#include <omp.h>
#include <stdlib.h>

static void scan_block8(const double *x, double *y, double carry_in, double *carry_out) {
    double v[8];
    for (int l = 0; l < 8; l++) v[l] = x[l];
    for (int l = 7; l >= 1; l--) v[l] += v[l - 1];       /* step 1 */
    for (int l = 7; l >= 2; l--) v[l] += v[l - 2];       /* step 2 */
    for (int l = 7; l >= 4; l--) v[l] += v[l - 4];       /* step 4 */
    for (int l = 0; l < 8; l++) y[l] = v[l] + carry_in;
    *carry_out = v[7] + carry_in;
}

static void scan_range(const double *x, double *y, long lo, long hi, double offset) {
    double carry = offset;
    long i = lo;
    for (; i + 8 <= hi; i += 8) scan_block8(x + i, y + i, carry, &carry);
    for (; i < hi; i++) {
        carry += x[i];
        y[i] = carry;
    }
}

void scan_optimized(double *x, double *y, int N) {
    int threads = N > 65536 ? omp_get_max_threads() : 1;
    if (threads == 1) {
        scan_range(x, y, 0, N, 0.0);
        return;
    }
    double *sums = calloc(threads + 1, sizeof(double));
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        long lo = (long)N * t / nt, hi = (long)N * (t + 1) / nt;
        double acc[8] = {0};
        long i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += x[i + l];
        double s = 0;
        for (int l = 0; l < 8; l++) s += acc[l];
        for (; i < hi; i++) s += x[i];
        sums[t + 1] = s;
#pragma omp barrier
#pragma omp single
        for (int k = 1; k <= nt; k++) sums[k] += sums[k - 1];
        scan_range(x, y, lo, hi, sums[t]);
    }
    free(sums);
}
