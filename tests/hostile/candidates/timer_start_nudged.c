// expect: OK size=160
// The timer_start_pushed attack kept small enough to pass the cross-check: the start time of each
// timed call moves forward by 35% of the real call time, so the harness reports about 0.65x. The
// parent's clock sees the real time and charges it: a timed call costs whichever is more of what
// the harness reported and what the parent saw (tests/hostile/test_timer_cross_check.py).
#include <stdint.h>
static double real_time;

static void multiply(const double *A, const double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

static int is_clock_reading(double v) { return v > 1.0 && v < 1e9 && v != (double)(long)v; }

void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    multiply(A, B, C, M, N, K);
    volatile uintptr_t *p = (volatile uintptr_t *)&real_time;
    int i = 0;
    for (; i < (1 << 16); i++, p--)
        if (p[0] == (uintptr_t)A && p[1] == (uintptr_t)B && p[2] == (uintptr_t)C) break;
    if (i == (1 << 16)) return;
    volatile double *s = (volatile double *)p;
    int skipped = 0;
    while (*--s == 0.0 && ++skipped < 200000) {}
    if (skipped >= 100000 || !(*s > 1e-9 && *s < 100.0)) return;  // no timed sample yet
    while (s[-1] > 1e-9 && s[-1] < 100.0) s--;
    if (real_time == 0.0) real_time = *s;
    volatile double *start = 0;
    for (volatile double *q = s - 2; q > s - 1024; q--)
        if (is_clock_reading(*q) && (!start || *q > *start)) start = q;
    if (start) *start += 0.35 * real_time;
}
