/*
 * Expert column sums: the rows split across threads, each thread adding its rows into its own
 * copy of the sums (an array-section reduction; the matrix streams from memory once, so this
 * is bandwidth-bound), the inner loop vectorized. A small matrix never enters the OpenMP
 * runtime: a team, even of one thread, costs more than its whole sum.
 */
void colsum_optimized(double *A, double *s, int N, int M) {
    for (int j = 0; j < M; j++) s[j] = 0.0;
    if ((long)N * M <= 32768) {
        for (int i = 0; i < N; i++) {
            const double *row = A + (long)i * M;
#pragma omp simd
            for (int j = 0; j < M; j++) s[j] += row[j];
        }
        return;
    }
#pragma omp parallel for schedule(static) reduction(+ : s[:M])
    for (int i = 0; i < N; i++) {
        const double *row = A + (long)i * M;
#pragma omp simd
        for (int j = 0; j < M; j++) s[j] += row[j];
    }
}
