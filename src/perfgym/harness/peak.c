/*
 * Machine micro-benchmarks (trusted code, not a kernel):
 *   peak THREADS  -> best FMA GFLOP/s over all threads, register-resident (FP64; built with
 *                    -DFP32: FP32)
 *   freq          -> GHz from a chain of dependent 1-cycle integer adds (x86 only)
 *   triad THREADS KIB -> best STREAM-triad GB/s, a[i] = b[i] + s*c[i] over arrays of KIB KiB
 *                    each (24 bytes per element, the STREAM convention)
 * Prints two numbers: the best rate by wall clock, and the best rate by each thread's own CPU
 * time. A program sharing our cores steals wall time but not CPU time, so the second figure
 * holds on a busy machine and the ratio of the two says how much of the CPU the probe got.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#define VEC_BYTES 64
#elif defined(__AVX__)
#define VEC_BYTES 32
#else
#define VEC_BYTES 16
#endif
#ifdef FP32
typedef float real;
#else
typedef double real;
#endif
typedef real vec __attribute__((vector_size(VEC_BYTES)));
#define LANES (VEC_BYTES / (int)sizeof(real))
#define CHAINS 16 /* independent FMA chains, one named register each: hides FMA latency on two ports */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    double wall, cpu; /* best rates: by wall clock, by CPU time */
} rates;

static void keep_best(rates *best, double wall_rate, double cpu_rate) {
    if (wall_rate > best->wall) best->wall = wall_rate;
    if (cpu_rate > best->cpu) best->cpu = cpu_rate;
}

#define STEP(x) x = x * mul + add;
static double fma_loop(long iters, double seed) {
    vec mul, add;
    for (int l = 0; l < LANES; l++) {
        mul[l] = 0.9999999;
        add[l] = 1e-9 * seed;
    }
    vec x0 = mul, x1 = mul + 1, x2 = mul + 2, x3 = mul + 3, x4 = mul + 4, x5 = mul + 5,
        x6 = mul + 6, x7 = mul + 7, x8 = mul + 8, x9 = mul + 9, x10 = mul + 10, x11 = mul + 11,
        x12 = mul + 12, x13 = mul + 13, x14 = mul + 14, x15 = mul + 15;
    for (long i = 0; i < iters; i++) {
        STEP(x0) STEP(x1) STEP(x2) STEP(x3) STEP(x4) STEP(x5) STEP(x6) STEP(x7)
        STEP(x8) STEP(x9) STEP(x10) STEP(x11) STEP(x12) STEP(x13) STEP(x14) STEP(x15)
    }
    vec r = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10 + x11 + x12 + x13 + x14 + x15;
    double s = 0;
    for (int l = 0; l < LANES; l++) s += (double)r[l];
    return s;
}

static rates peak(int threads) {
    long iters = 4000000;
    double sink = 0;
    rates best = {0, 0};
    /* 8 ms each with AVX-512 at 4 GHz, 16 with AVX2: the best of ten rides out noise. A loop
     * in registers is at its rate within microseconds, so a longer sample only adds the noise
     * it averages in; a fresh node's first reward waits for this probe. */
    for (int rep = 0; rep < 10; rep++) {
        double slowest_cpu = 0;
        double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink) reduction(max : slowest_cpu)
        {
            double c0 = thread_cpu();
            sink += fma_loop(iters, omp_get_thread_num() + 1.0);
            slowest_cpu = thread_cpu() - c0;
        }
        double t = now() - t0;
        double work = 2.0 * LANES * CHAINS * (double)iters * threads / 1e9;
        keep_best(&best, work / t, work / slowest_cpu);
    }
    if (sink == 42.0) puts("");
    return best;
}

static rates freq(void) {
    rates best = {0, 0};
#if defined(__x86_64__)
    long iters = 10000000, x = 0, one = 1; /* 10^8 adds: about 30 ms a sample at 3 GHz */
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now(), c0 = thread_cpu();
        for (long i = 0; i < iters; i++)
            __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                             "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                             "add %1, %0\n\tadd %1, %0\n\t" : "+r"(x) : "r"(one));
        double c = thread_cpu() - c0, t = now() - t0;
        keep_best(&best, 10.0 * iters / t / 1e9, 10.0 * iters / c / 1e9);
    }
#endif
    return best;
}

static rates triad(int threads, long kib) {
    rates best = {0, 0};
    long n = kib * 1024 / 8;
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)),
           *c = malloc(n * sizeof(double));
    if (!a || !b || !c) return best;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++) { /* first touch by the thread that will use the page */
        a[i] = 0;
        b[i] = 1;
        c[i] = 2;
    }
    /* small arrays: repeat the sweep inside one timing so a sample lasts about a millisecond */
    long inner = 1 + (1L << 17) / n;
    for (int rep = 0; rep < 10; rep++) {
        double slowest_cpu = 0;
        double t0 = now();
#pragma omp parallel num_threads(threads) reduction(max : slowest_cpu)
        {
            double c0 = thread_cpu();
            for (long r = 0; r < inner; r++) {
#pragma omp for schedule(static)
                for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
            }
            slowest_cpu = thread_cpu() - c0;
        }
        double gb = 24.0 * n * inner / 1e9;
        keep_best(&best, gb / (now() - t0), gb / slowest_cpu);
    }
    if (a[n / 2] != 7.0) best.wall = best.cpu = 0; /* the loop must have run */
    free(a);
    free(b);
    free(c);
    return best;
}

static void print(rates r) { printf("%.4f %.4f\n", r.wall, r.cpu); }

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "freq") == 0) print(freq());
    else if (argc >= 4 && strcmp(argv[1], "triad") == 0) print(triad(atoi(argv[2]), atol(argv[3])));
    else if (argc >= 3 && strcmp(argv[1], "peak") == 0) {
        int t = 0;
        sscanf(argv[2], "%d", &t);
        print(peak(t > 0 ? t : 1));
    } else {
        fprintf(stderr, "usage: peak freq | peak peak THREADS | peak triad THREADS KIB\n");
        return 2;
    }
    return 0;
}
