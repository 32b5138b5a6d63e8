// expect: WRONG_ANSWER size=192 message=tamper
// Does the work, then moves the harness's clock instead of its results: from a static of its own
// it finds call_args[] (this call's pointers) and samples[] below it in .bss, learns its real
// call time from the first timed sample, and on every later call pushes the timed call's start
// time (the latest CLOCK_MONOTONIC reading among the harness's statics, just below samples[])
// forward by 90% of it. The harness then reports a tenth of the real time; the parent does not
// ("tampering: ..."). A call faster than 90% of the first leaves a sample of no time, which the
// plausibility guard catches first ("... the timer was tampered with"): either is the catch.
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
    if (i == (1 << 16)) return;  // the input set 2 call: its pointers sit in call_args[1]
    volatile double *s = (volatile double *)p;  // call_args[0]: samples[] ends here
    int skipped = 0;
    while (*--s == 0.0 && ++skipped < 200000) {}
    if (skipped >= 100000 || !(*s > 1e-9 && *s < 100.0)) return;  // no timed sample yet
    while (s[-1] > 1e-9 && s[-1] < 100.0) s--;  // samples[0], the first timed call, untouched
    if (real_time == 0.0) real_time = *s;
    volatile double *start = 0;
    for (volatile double *q = s - 2; q > s - 1024; q--)  // rng_state, violation, t_call...
        if (is_clock_reading(*q) && (!start || *q > *start)) start = q;
    if (start) *start += 0.9 * real_time;
}
