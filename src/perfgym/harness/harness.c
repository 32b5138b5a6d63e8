/*
 * perfgym harness: runs one untrusted kernel under the evaluation protocol.
 *
 *   harness MANIFEST
 *
 *   harness MANIFEST check
 *
 *   harness MANIFEST go FD
 *
 * The manifest (written by perfgym) names the arrays, the input files of two independent input
 * sets, the sizes and the timing policy. With `check`, the harness only calls the kernel once
 * on set 1 and saves its outputs, so the parent can reject a wrong answer before paying for the
 * timing loop (the full run repeats and verifies that call too). With `go FD`, it loads all
 * that, then waits for the parent's word on FD before it calls anything (see main): the
 * parent starts it beside the check call. Otherwise (and after the word) the harness:
 *   1. calls the kernel on set 1 once (correctness), saving the outputs (real outputs hold
 *      huge positive values before it, and huge negative ones before step 3: see poison);
 *   2. warms up, then times calls one by one with CLOCK_MONOTONIC until the median is known
 *      precisely enough (its 95% confidence interval within the target) or a cap is hit.
 *      Before every timed call one element of each perturbable input changes and the outputs
 *      are poisoned (NaN, or random bytes for integers), so no call can reuse an earlier
 *      answer; the state of one secretly chosen call and of the last call is kept for checking;
 *   3. calls the kernel on set 2 (different values, different buffers) and saves the outputs.
 * After every call it checks that inputs are unchanged and that nothing was written just before
 * or after any array. Arrays sit against PROT_NONE guard pages; the bytes between an array's end
 * and its guard page hold NaN so reading past the end poisons the answer.
 * Results go to files only after the last kernel call, so the kernel never sees an open file
 * (but a late call's answer: written and closed between two calls, see late_keep).
 * Timing state is kept in statics, out of reach of a kernel walking up the stack, and decoy
 * timestamps on the harness's stack are checked after every call to catch one that tries.
 *
 * The kernel runs in this process, so nothing measured here can be trusted on its own: a kernel
 * can reach these statics by pointer arithmetic from its own. So the harness also announces
 * its progress on stdout, one raw write(2) per line, and the parent timestamps each line as it
 * arrives, with its own clock (see evaluate.cross_check):
 *   "@c 0", "@c d SECONDS"  before and after each dry round: the work around a timed call, with
 *                           a busy wait of SECONDS (measured here) in place of the kernel, done
 *                           before any kernel code has run (the calibration);
 *   "@t 0", "@t k"          before the first timed call and after each one;
 *   "@l k"                  after "@t k+1" where late call k's answer was kept (late_keep);
 *   "@s k"                  before timed call k where the harness did work of its own after
 *                           "@t k" (a probe's inputs, its check; a late call's answer kept);
 *   "@r 0"                  with `go FD`, first: loaded, waiting for the word to go.
 * The markers are written after a call, never just before one (but "@s", which starts the
 * parent's interval for the call after it, and only after work of the harness's own): waking
 * the parent then would slow the call it times.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Generated per task: casts the array pointers and sizes and calls the entry. pg_before and
 * pg_after run around every call, outside the timed region: they move the arrays into and out
 * of the containers a C++ entry takes (std::vector), and do nothing for pointers. */
extern void pg_call(void **arrays, const long long *sizes);
extern void pg_before(void **arrays, const long long *counts);
extern void pg_after(void **arrays, const long long *counts);

#define MAX_ARRAYS 16
#define MAX_SIZES 16
#define MAX_SAMPLES 100000
#define GUARD_FILL 0xFF /* all-ones bytes: NaN for float and double */
#define EDGE 64         /* bytes checked on the unguarded side of an array */
#define DRY_ROUNDS 9    /* calibration rounds; the parent takes the median */
#define STAND_IN 1e-3   /* seconds a dry round waits in place of a kernel call */

/* An array's kind (the manifest's first field): 0 input, 1 output poisoned before each call
 * (poison below), 2 output zeroed before each call, 3 in place (restored to its input before
 * each call, then overwritten by the kernel). */
#define IS_OUT(a) ((a)->is_output == 1 || (a)->is_output == 2)
#define IN_PLACE(a) ((a)->is_output == 3)
#define HAS_INPUT(a) ((a)->is_output == 0 || IN_PLACE(a))
#define WRITTEN(a) ((a)->is_output != 0)

typedef struct {
    int is_output, is_float, perturb; /* is_float: 0 integer or bool, 1 real, 2 complex */
    size_t elem, count, bytes, align;
    double low, high;
    unsigned char *buf[2];      /* the live buffers of input set 1 and 2 */
    unsigned char *pristine[2]; /* what an input must still hold after a call */
    unsigned char *snapshot;    /* state after the secretly chosen timed call */
    unsigned char *snapshot_in; /* in place: what the chosen call was given */
    unsigned char *fresh[2];    /* mode 3: the two probe calls' inputs, drawn anew */
    unsigned char *snapshot_probe, *snapshot_probe_in; /* as snapshot, of the other probe */
    unsigned char *base[2];     /* start of the mapping */
    size_t map_len[2];
    char file[2][512];
} Array;

static Array arrays[MAX_ARRAYS];
static int n_arrays;
static long long sizes[MAX_SIZES];
static int n_sizes;
static long long counts[MAX_ARRAYS]; /* elements per array, for pg_before and pg_after */
static void *call_args[2][MAX_ARRAYS];
static double samples[MAX_SAMPLES];
static uint64_t rng_state;
static uint64_t change_state; /* the one-element changes' own stream: the parent repeats it */
/* Late checks (the manifest's "late K BYTES"; K 0: none): a uniform sample of late_k of the
 * late calls keeps its answers, at most late_bytes of them written a run (late_keep). */
#define MAX_LATE 16
static int late_k;
static long long late_bytes;
static char violation[512];
/* Timing state lives here, not on the stack: a kernel can reach the stack by walking up from
 * its own locals, but has no way to this memory without symbols (which the audit refuses). */
static volatile double t_call, t_warm, t_loop;
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }

/* The stream the one-element changes are drawn from (perturb_inputs), splitmix64 from the
 * bitwise complement of the manifest's seed. Nothing else draws from it, so the parent can
 * work out every timed call's inputs from the seed it gave (backends/c/replay.py) and check a
 * late call's answer against them. */
static uint64_t change_next(void) {
    uint64_t z = (change_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double change_uniform(void) { return (double)(change_next() >> 11) * 0x1.0p-53; }

#define DECOYS 48

/* Honeypots on the harness's stack: values shaped like the timestamps a stack-walking kernel
 * would look for. Any change means the kernel wrote into the harness's frame. */
static double armed[DECOYS]; /* what the decoys must still hold: off the stack, of course */

static void arm_decoys(volatile double *decoys) {
    double base = now();
    for (int i = 0; i < DECOYS; i++)
        decoys[i] = armed[i] = base - 1e-3 * (double)(rng_next() % 1000);
}

static void check_decoys(volatile const double *decoys, const char *phase) {
    for (int i = 0; i < DECOYS; i++)
        if (decoys[i] != armed[i] && !violation[0]) {
            snprintf(violation, sizeof violation, "%s stack written", phase);
            return;
        }
}

static void die(const char *what) {
    fprintf(stderr, "perfgym harness: %s\n", what);
    exit(3);
}

/* One marker line for the parent, e.g. "@t 17" (with `seconds` >= 0: "@c 3 0.001000042"). A
 * single write(2) of a few bytes reaches the pipe whole and at once: no stdio buffer holds it. */
static void mark(char kind, int i, double seconds) {
    char line[64];
    int len = seconds < 0 ? snprintf(line, sizeof line, "@%c %d\n", kind, i)
                          : snprintf(line, sizeof line, "@%c %d %.9f\n", kind, i, seconds);
    if (write(1, line, (size_t)len) != len) die("cannot write a progress marker");
}

/* A dry round's stand-in for the kernel: busy, like a kernel, long enough that the parent sees
 * each marker on its own, as it does between timed calls. */
static void stand_in(void) {
    double start = now();
    while (now() - start < STAND_IN) {}
}

/* Place `bytes` so that it ends as close to a guard page as `align` allows. */
static unsigned char *guarded_alloc(Array *a, int set) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = ((a->bytes + a->align + EDGE + page - 1) / page) * page;
    size_t total = data + 2 * page;
    unsigned char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                               -1, 0);
    if (base == MAP_FAILED) die("cannot map array memory");
    if (mprotect(base, page, PROT_NONE) || mprotect(base + page + data, page, PROT_NONE))
        die("cannot protect guard pages");
    memset(base + page, GUARD_FILL, data);
    uintptr_t end = (uintptr_t)(base + page + data);
    uintptr_t start = (end - a->bytes) & ~(uintptr_t)(a->align - 1);
    a->base[set] = base;
    a->map_len[set] = total;
    return (unsigned char *)start;
}

/* The unguarded bytes right before and after an array must still hold the fill. */
static int edges_intact(const Array *a, int set) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const unsigned char *p = a->buf[set];
    const unsigned char *lo = a->base[set] + page;
    const unsigned char *hi = a->base[set] + a->map_len[set] - page;
    for (const unsigned char *q = (p - EDGE > lo ? p - EDGE : lo); q < p; q++)
        if (*q != GUARD_FILL) return 0;
    for (const unsigned char *q = p + a->bytes; q < hi; q++)
        if (*q != GUARD_FILL) return 0;
    return 1;
}

static void read_file(const char *path, unsigned char *dst, size_t bytes) {
    FILE *f = fopen(path, "rb");
    if (!f || fread(dst, 1, bytes, f) != bytes) die("cannot read an input file");
    fclose(f);
}

static void write_file(const char *path, const unsigned char *src, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(src, 1, bytes, f) != bytes) die("cannot write an output file");
    fclose(f);
}

/* What an output holds before a call. Reals: NaN in the timed loop, and in the two calls
 * whose answers are judged whole, huge finite values: positive on set 1, negative on set 2.
 * NaN alone was a value to count on: fmax/fmin drop it, so a max fold into an uncleared output
 * passed; +huge defeats a max fold, -huge a min fold, NaN any arithmetic. Integers, bools and
 * structs: bytes drawn again for every call, each with its top bit set (never a bool's 0 or 1).
 * A constant was a value to count on: with all-ones bytes an int32 held -1, and a GRPO
 * student's histogram wrote counts[b]++ where the bins are cleared, right only because
 * -1 + 1 is 0. */
enum garbage { GARBAGE_NAN, GARBAGE_HIGH, GARBAGE_LOW };

static void poison(const Array *a, unsigned char *buf, enum garbage kind) {
    /* a complex's parts are reals; a real of another width (none is built in) gets NaN */
    size_t part = a->is_float == 2 ? a->elem / 2 : a->elem;
    if (a->is_float && (kind == GARBAGE_NAN || (part != 4 && part != 8))) {
        memset(buf, GUARD_FILL, a->bytes);
        return;
    }
    if (a->is_float) { /* a random mantissa; an exponent from 2^961 (double), 2^113 (float) */
        uint64_t sign = kind == GARBAGE_LOW;
        for (size_t i = 0; i + part <= a->bytes; i += part) {
            uint64_t r = rng_next();
            if (part == 8) {
                uint64_t bits = sign << 63 | (0x7C0 + r % 0x3F) << 52 | (r >> 12);
                memcpy(buf + i, &bits, 8);
            } else {
                uint32_t bits = (uint32_t)(sign << 31 | (0xF0 + r % 0xF) << 23 | (r >> 41));
                memcpy(buf + i, &bits, 4);
            }
        }
        return;
    }
    for (size_t i = 0; i < a->bytes; i += 8) {
        uint64_t r = rng_next() | 0x8080808080808080ULL;
        memcpy(buf + i, &r, a->bytes - i < 8 ? a->bytes - i : 8);
    }
}

/* Outputs before a call: garbage (is_output 1: every element must be written) or zeros
 * (is_output 2: the task's contract is an output that starts zeroed). */
static void prepare_call(int set, enum garbage kind) {
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (IN_PLACE(a)) memcpy(a->buf[set], a->pristine[set], a->bytes);
        else if (a->is_output == 2) memset(a->buf[set], 0, a->bytes);
        else if (a->is_output == 1) poison(a, a->buf[set], kind);
    }
}

/* Store v at element idx of an array of any element type (of a complex one: its real part). */
static void store(Array *a, unsigned char *buf, size_t idx, double v) {
    if (a->is_float == 2 && a->elem == 16) ((double *)buf)[2 * idx] = v;
    else if (a->is_float == 2 && a->elem == 8) ((float *)buf)[2 * idx] = (float)v;
    else if (a->is_float && a->elem == 8) ((double *)buf)[idx] = v;
    else if (a->is_float && a->elem == 4) ((float *)buf)[idx] = (float)v;
    else if (a->elem == 8) ((int64_t *)buf)[idx] = (int64_t)v;
    else if (a->elem == 4) ((int32_t *)buf)[idx] = (int32_t)v;
    else if (a->elem == 1) buf[idx] = (unsigned char)v;
}

static double load(const Array *a, const unsigned char *buf, size_t idx) {
    if (a->is_float == 2 && a->elem == 16) return ((const double *)buf)[2 * idx];
    if (a->is_float == 2 && a->elem == 8) return ((const float *)buf)[2 * idx];
    if (a->is_float && a->elem == 8) return ((const double *)buf)[idx];
    if (a->is_float && a->elem == 4) return ((const float *)buf)[idx];
    if (a->elem == 8) return (double)((const int64_t *)buf)[idx];
    if (a->elem == 4) return (double)((const int32_t *)buf)[idx];
    return (double)buf[idx];
}

/* Read every cache line of buf from each of the OpenMP threads a kernel would use. The calls
 * around a probe find their input where the last call left it, read by every thread, in every
 * core's cache; the probe's input was just written by this thread alone, which leaves it in
 * this core's cache only, and a threaded dgemm's probes took up to 2.3x the calls around them.
 * Read by every thread, it is where theirs is. (Writing every call's input whole instead would
 * slow the calls the figure is made of: 1.7x for the threaded dgemm, on an AVX-512 EPYC.) */
static volatile uint64_t share_sink;
static void share(const unsigned char *buf, size_t bytes) {
    uint64_t sum = 0;
#pragma omp parallel reduction(+ : sum)
    for (size_t o = 0; o < bytes; o += 64) sum += buf[o];
    share_sink = sum;
}

/* Change each perturbable input (and its pristine copy) before a call:
 *   mode 1: a random element gets a random value in [low, high) (integers: floor of it);
 *   mode 2: a random diagonal element of a square matrix grows by a value in [low, high),
 *           which keeps a symmetric positive definite or triangular matrix well posed;
 *   mode 3: as mode 1, but before a probe call (`probe` 0 or 1) every element is that
 *           probe's value drawn anew (draw_fresh), then read by every thread (share). The
 *           parent asks for it where a call does far more work than it has input elements (a
 *           matrix product): there a kernel that finds the one changed element and corrects
 *           its saved answer for it does a sliver of the work and is right every time, but
 *           takes the whole work's time on the probes; the parent compares the probes' times
 *           with the other calls' (measure.reuse_problem). */
static void perturb_inputs(int probe) {
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (!HAS_INPUT(a) || !a->perturb || a->count == 0) continue;
        if (a->perturb == 3 && probe >= 0) { /* its pristine copy after the call: probed */
            if (IN_PLACE(a)) { /* (written whole before every call: prepare_call) */
                memcpy(a->pristine[0], a->fresh[probe], a->bytes);
            } else {
                memcpy(a->buf[0], a->fresh[probe], a->bytes);
                share(a->buf[0], a->bytes);
            }
            continue;
        }
        double u = a->low + (a->high - a->low) * change_uniform();
        size_t idx;
        double v;
        if (a->perturb == 2) {
            size_t n = (size_t)llround(sqrt((double)a->count));
            size_t d = (size_t)(change_next() % n);
            idx = d * n + d;
            v = load(a, a->buf[0], idx) + u;
        } else {
            idx = (size_t)(change_next() % a->count);
            v = a->is_float ? u : floor(u);
        }
        store(a, a->buf[0], idx, v);
        store(a, a->pristine[0], idx, v);
    }
}

/* After a probe call, before it is checked: what each mode-3 input was given is what it must
 * still hold. (Copied here, not before the call: the probe's work before its call stays
 * close to the other calls' one copy.) */
static void probed(int probe) {
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (HAS_INPUT(a) && a->perturb == 3 && a->count && !IN_PLACE(a))
            memcpy(a->pristine[0], a->fresh[probe], a->bytes);
    }
}

/* Late checks. The checked timed calls above are among the first s_min and the last, which a
 * kernel that counts its calls can tell: it could hand back a stale answer on the others. So
 * the answers of late_k of the later calls (past the probes and the chosen call), a uniform
 * sample of them (reservoir sampling), are kept: a kernel stale on a share f of those calls
 * is seen unless none of the sample is stale, about f^late_k (1 in 16 for half the calls,
 * what it takes to move the median, with late_k 4). The i-th late call takes the place of
 * slot r % i when that is below late_k, r drawn from getrandom(2) after the call returned,
 * so nothing in this process says beforehand which call is kept; its answer is written to
 * late_K_I.bin (call K, array I) at once, so a later call cannot mend it, and the file of the
 * call it replaces is removed. The parent works out the kept calls' inputs itself
 * (change_next's stream) and checks their answers against them, and it counts the files:
 * min(late_k, late calls), as late_bytes of writing allows (a kernel that turned the checks
 * off in this process's memory leaves too few). */
static int late_slot[MAX_LATE]; /* the call each slot holds */
static long long late_written;

static void late_files(int k, int keep) {
    char path[64];
    for (int i = 0; i < n_arrays; i++)
        if (WRITTEN(&arrays[i])) {
            snprintf(path, sizeof path, "late_%d_%d.bin", k, i);
            if (keep) write_file(path, arrays[i].buf[0], arrays[i].bytes);
            else if (unlink(path) != 0) die("cannot remove a late call's answer");
        }
}

/* After late call i (from 1), call k: whether its answer was kept (and written). */
static int late_keep(int i, int k) {
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) die("cannot draw a late check");
    uint64_t slot = r % (uint64_t)i;
    if (i <= late_k) slot = (uint64_t)(i - 1);
    else if (slot >= (uint64_t)late_k) return 0;
    long long bytes = 0;
    for (int a = 0; a < n_arrays; a++)
        if (WRITTEN(&arrays[a])) bytes += (long long)arrays[a].bytes;
    if (late_written + bytes > late_bytes) return 0;
    late_written += bytes;
    if (i > late_k) late_files(late_slot[slot], 0);
    late_slot[slot] = k;
    late_files(k, 1);
    mark('l', k, -1);
    return 1;
}

/* Each mode-3 input's two probe values, every element drawn as mode 1 draws one. */
static void draw_fresh(void) {
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (!HAS_INPUT(a) || a->perturb != 3) continue;
        for (int p = 0; p < 2; p++) {
            a->fresh[p] = malloc(a->bytes + 1);
            if (!a->fresh[p]) die("out of memory");
            memcpy(a->fresh[p], a->pristine[0], a->bytes); /* (a complex one's imaginary parts) */
            for (size_t x = 0; x < a->count; x++) {
                double u = a->low + (a->high - a->low) * rng_uniform();
                store(a, a->fresh[p], x, a->is_float ? u : floor(u));
            }
        }
    }
}

/* Bytes next to every array are checked after every call (cheap). Inputs are compared with
 * their pristine copies only when `full`: that reads twice the inputs and would flush the
 * kernel's working set from the caches between timed calls. A change to an input persists, so
 * the full checks (first call, the secretly chosen timed call, after the last timed call, the
 * second input set) still see any change the kernel leaves behind. */
static void check_call(int set, const char *phase, int full) {
    if (violation[0]) return; /* keep the first one */
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (!edges_intact(a, set)) {
            snprintf(violation, sizeof violation, "%s array %d wrote outside its bounds", phase, i);
            return;
        }
        if (full && !WRITTEN(a) && memcmp(a->buf[set], a->pristine[set], a->bytes) != 0) {
            snprintf(violation, sizeof violation, "%s array %d input modified", phase, i);
            return;
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The stop rule: half the width of the median's 95% confidence interval over the median. The
 * interval is [j-th smallest, j-th largest] with j the largest rank for which
 * P(Binomial(n, 1/2) < j) <= 2.5%: it holds whatever the distribution of the calls (a rare
 * preemption moves it by one rank at most). Exact to 100 samples, then the normal
 * approximation; INFINITY below 6 samples, where no such interval exists. The same as
 * perfgym.outcome.median_halfwidth, which recomputes it from the samples the parent charges. */
static int median_ci_rank(int n) {
    if (n > 100) return (int)((double)n / 2 - 0.98 * sqrt((double)n));
    double pmf = ldexp(1.0, -n), below = 0; /* P(B = i), P(B < i) */
    int j = 0;
    for (int i = 0; i <= n; i++) {
        below += pmf;
        if (below > 0.025) break;
        j = i + 1;
        pmf = pmf * (double)(n - i) / (double)(i + 1);
    }
    return j;
}

static double median_halfwidth(const double *x, int n) {
    static double sorted[MAX_SAMPLES];
    int j = median_ci_rank(n);
    if (j < 1) return INFINITY;
    memcpy(sorted, x, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmp_double);
    double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    return median > 0 ? (sorted[n - j] - sorted[j - 1]) / 2 / median : INFINITY;
}

int main(int argc, char **argv) {
    int check_only = argc == 3 && strcmp(argv[2], "check") == 0;
    int go_fd = argc == 4 && strcmp(argv[2], "go") == 0 ? atoi(argv[3]) : -1;
    if (argc != 2 && !check_only && go_fd < 0) die("usage: harness MANIFEST [check | go FD]");
    FILE *m = fopen(argv[1], "r");
    if (!m) die("cannot open manifest");
    unsigned long long seed;
    int warm_min, s_min, s_max;
    double warm_sec, t_max, precision;
    if (fscanf(m, " seed %llu", &seed) != 1) die("manifest: seed");
    if (fscanf(m, " warmup %d %lf", &warm_min, &warm_sec) != 2) die("manifest: warmup");
    if (fscanf(m, " samples %d %d %lf %lf", &s_min, &s_max, &t_max, &precision) != 4)
        die("manifest: samples");
    if (s_min < 1) s_min = 1;
    if (s_max > MAX_SAMPLES) s_max = MAX_SAMPLES;
    if (fscanf(m, " late %d %lld", &late_k, &late_bytes) != 2 || late_k < 0 ||
        late_k > MAX_LATE)
        die("manifest: late");
    if (fscanf(m, " sizes %d", &n_sizes) != 1 || n_sizes > MAX_SIZES) die("manifest: sizes");
    for (int i = 0; i < n_sizes; i++)
        if (fscanf(m, " %lld", &sizes[i]) != 1) die("manifest: size value");
    if (fscanf(m, " arrays %d", &n_arrays) != 1 || n_arrays > MAX_ARRAYS) die("manifest: arrays");
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (fscanf(m, " array %d %d %d %zu %zu %zu %lf %lf %511s %511s", &a->is_output,
                   &a->is_float, &a->perturb, &a->elem, &a->count, &a->align, &a->low, &a->high,
                   a->file[0], a->file[1]) != 10)
            die("manifest: array");
        a->bytes = a->elem * a->count;
        counts[i] = (long long)a->count;
        /* the check call uses the first set only: the second's buffers (guard-filled, read,
         * copied: 3x its bytes of fresh memory) are left out, and its file may be absent */
        for (int s = 0; s < (check_only ? 1 : 2); s++) {
            a->buf[s] = guarded_alloc(a, s);
            call_args[s][i] = a->buf[s];
            if (HAS_INPUT(a)) {
                read_file(a->file[s], a->buf[s], a->bytes);
                a->pristine[s] = malloc(a->bytes + 1);
                memcpy(a->pristine[s], a->buf[s], a->bytes);
            }
        }
        a->snapshot = malloc(a->bytes + 1);
        a->snapshot_in = malloc(a->bytes + 1);
        if (!a->snapshot || !a->snapshot_in) die("out of memory");
    }
    fclose(m);
    rng_state = seed;
    change_state = ~(uint64_t)seed;

    /* With `go FD` the parent starts the harness before the timing lane is its own: the process
     * start and the loading above overlap its other work. Here it says it is ready and waits
     * for one byte, 'g', sent once nothing else of the parent's runs; anything else (the pipe
     * closed: the check call found a wrong answer) ends it. No kernel code has run yet, and the
     * descriptor is closed before any does. */
    if (go_fd >= 0) {
        mark('r', 0, -1);
        char go = 0;
        ssize_t got;
        do got = read(go_fd, &go, 1);
        while (got < 0 && errno == EINTR);
        close(go_fd);
        if (got != 1 || go != 'g') return 4;
    }

    volatile double decoys[DECOYS];
#define CALL_IF(kernel, set, phase)                 \
    do {                                            \
        arm_decoys(decoys);                         \
        pg_before(call_args[set], counts);          \
        t_call = now();                             \
        if (kernel) pg_call(call_args[set], sizes); \
        else stand_in();                            \
        t_call = now() - t_call;                    \
        pg_after(call_args[set], counts);           \
        check_decoys(decoys, phase);                \
    } while (0)
#define CALL(set, phase) CALL_IF(1, set, phase)

    /* 0. calibration: the rounds of the timed loop below (perturb, poison, call, check, marker,
     * stop test) with a stand-in for the call, whose length goes to the parent in the marker:
     * what the parent sees beyond it is the harness's own work per call. Runs before any
     * kernel code, so the kernel can neither stretch it nor rewrite the stand-in's length. */
    if (check_only) {
        prepare_call(0, GARBAGE_HIGH);
        CALL(0, "first call:");
        check_call(0, "first call:", 1);
        char path[64];
        for (int i = 0; i < n_arrays; i++)
            if (WRITTEN(&arrays[i])) {
                snprintf(path, sizeof path, "out1_%d.bin", i);
                write_file(path, arrays[i].buf[0], arrays[i].bytes);
            }
        FILE *r = fopen("result.txt", "w");
        if (!r) die("cannot write result.txt");
        fprintf(r, "check\nviolation %s\ndone\n", violation[0] ? violation : "none");
        fclose(r);
        return 0;
    }

    double dry[DRY_ROUNDS];
    t_loop = now();
    mark('c', 0, -1);
    for (int d = 0; d < DRY_ROUNDS; d++) {
        perturb_inputs(-1);
        prepare_call(0, GARBAGE_NAN);
        CALL_IF(0, 0, "dry round:");
        dry[d] = t_call;
        check_call(0, "dry round:", 0);
        mark('c', d + 1, t_call);
        volatile double stop_test = (now() - t_loop) + median_halfwidth(dry, d + 1);
        (void)stop_test;
    }
    /* The dry rounds perturbed set 1: reload it, so the first call sees what the parent holds. */
    for (int i = 0; i < n_arrays; i++)
        if (HAS_INPUT(&arrays[i])) {
            read_file(arrays[i].file[0], arrays[i].buf[0], arrays[i].bytes);
            memcpy(arrays[i].pristine[0], arrays[i].buf[0], arrays[i].bytes);
        }

    /* 1. correctness on set 1 */
    prepare_call(0, GARBAGE_HIGH);
    CALL(0, "first call:");
    check_call(0, "first call:", 1);
    unsigned char *first_out[MAX_ARRAYS] = {0};
    for (int i = 0; i < n_arrays; i++)
        if (WRITTEN(&arrays[i])) {
            first_out[i] = malloc(arrays[i].bytes + 1);
            memcpy(first_out[i], arrays[i].buf[0], arrays[i].bytes);
        }

    /* The chosen timed call's state is copied into the snapshots: their pages are touched
     * here, before the timed loop, so that round does not also pay their first-touch faults
     * (64 MB of fresh memory took 50-250 ms on a VM, charged to the CPU time the parent's
     * witness allows the timed calls: evaluate.cross_check). */
    for (int i = 0; i < n_arrays; i++) {
        memset(arrays[i].snapshot, 0, arrays[i].bytes);
        if (IN_PLACE(&arrays[i])) memset(arrays[i].snapshot_in, 0, arrays[i].bytes);
    }

    /* The probe calls, whose inputs are drawn anew where the parent asked (mode 3): the chosen
     * call and one other of the first s_min, both secret. */
    int fresh_arrays = 0;
    for (int i = 0; i < n_arrays; i++)
        fresh_arrays |= HAS_INPUT(&arrays[i]) && arrays[i].perturb == 3;
    if (fresh_arrays) draw_fresh();
    int probe_snapshot = fresh_arrays && s_min >= 2; /* the other probe is checked too */
    for (int i = 0; probe_snapshot && i < n_arrays; i++) {
        Array *a = &arrays[i];
        a->snapshot_probe = calloc(1, a->bytes + 1); /* touched now, as the snapshots above */
        a->snapshot_probe_in = calloc(1, a->bytes + 1);
        if (!a->snapshot_probe || !a->snapshot_probe_in) die("out of memory");
        memset(a->snapshot_probe, 0, a->bytes);
        if (IN_PLACE(a)) memset(a->snapshot_probe_in, 0, a->bytes);
    }

    /* 2. warm-up, then timed calls */
    int warmups = 0;
    t_warm = now();
    while (warmups < warm_min || now() - t_warm < warm_sec) {
        perturb_inputs(-1);
        prepare_call(0, GARBAGE_NAN);
        CALL(0, "warm-up:");
        check_call(0, "warm-up:", 0);
        warmups++;
    }
    int chosen = (int)(rng_next() % (uint64_t)s_min);
    int probe = !fresh_arrays ? -1 : !probe_snapshot ? chosen
        : (chosen + 1 + (int)(rng_next() % (uint64_t)(s_min - 1))) % s_min;
    int last_probe = probe > chosen ? probe : chosen;
    int n = 0;
    t_loop = now();
    mark('t', 0, -1);
    /* A probe's work of the harness's own (its inputs drawn anew before the call; after it,
     * the check and the snapshot) lies between "@t k" and "@s k", outside the parent's
     * interval for call k, which begins at "@s k": the parent judges the probes on its own
     * clock (measure.reuse_problem), and that work would make an honest kernel's probes look
     * slow. Only around the probes, which the parent knows from result.txt: an "@s" anywhere
     * else is out of order. */
    int resume = 0;
    for (;;) {
        int probing = !fresh_arrays ? -1 : n == chosen ? 0 : n == probe ? 1 : -1;
        perturb_inputs(probing);
        if (resume || probing >= 0) mark('s', n, -1);
        prepare_call(0, GARBAGE_NAN);
        CALL(0, "timed call:");
        samples[n] = t_call;
        if (probing < 0) check_call(0, "timed call:", n == chosen);
        if (n == chosen && probing < 0)
            for (int i = 0; i < n_arrays; i++) {
                memcpy(arrays[i].snapshot, arrays[i].buf[0], arrays[i].bytes);
                if (IN_PLACE(&arrays[i]))
                    memcpy(arrays[i].snapshot_in, arrays[i].pristine[0], arrays[i].bytes);
            }
        n++;
        mark('t', n, -1);
        resume = probing >= 0;
        if (resume) {
            probed(probing);
            check_call(0, "timed call:", 1);
            for (int i = 0; i < n_arrays; i++) {
                Array *a = &arrays[i];
                /* (probe 1 is a call of its own only with probe_snapshot) */
                memcpy(probing == 0 ? a->snapshot : a->snapshot_probe, a->buf[0], a->bytes);
                if (IN_PLACE(a))
                    memcpy(probing == 0 ? a->snapshot_in : a->snapshot_probe_in,
                           a->pristine[0], a->bytes);
            }
        }
        double spent = now() - t_loop;
        if (n >= s_max) break;
        if (n >= s_min && median_halfwidth(samples, n) <= precision) break;
        if (n > last_probe && spent >= t_max && (n >= 3 || spent >= 3 * t_max)) break;
        /* (the last call is left out: it is checked whole below) */
        if (late_k && !resume && n - 1 > last_probe)
            resume = late_keep(n - 1 - last_probe, n - 1); /* (outside the next call's interval) */
    }
    check_call(0, "timed call:", 1);

    /* 3. correctness on set 2 */
    prepare_call(1, GARBAGE_LOW);
    CALL(1, "second input set:");
    check_call(1, "second input set:", 1);

    /* Only now, with every kernel call finished, touch files. */
    char path[64];
    for (int i = 0; i < n_arrays; i++) {
        Array *a = &arrays[i];
        if (WRITTEN(a)) {
            snprintf(path, sizeof path, "out1_%d.bin", i);
            write_file(path, first_out[i], a->bytes);
            snprintf(path, sizeof path, "out2_%d.bin", i);
            write_file(path, a->buf[1], a->bytes);
        }
        snprintf(path, sizeof path, "snap_chosen_%d.bin", i);
        write_file(path, a->snapshot, a->bytes);
        snprintf(path, sizeof path, "snap_last_%d.bin", i);
        write_file(path, a->buf[0], a->bytes);
        if (IN_PLACE(a)) { /* what those two calls were given */
            snprintf(path, sizeof path, "snap_chosen_in_%d.bin", i);
            write_file(path, a->snapshot_in, a->bytes);
            snprintf(path, sizeof path, "snap_last_in_%d.bin", i);
            write_file(path, a->pristine[0], a->bytes);
        }
        if (probe_snapshot) {
            snprintf(path, sizeof path, "snap_probe_%d.bin", i);
            write_file(path, a->snapshot_probe, a->bytes);
            if (IN_PLACE(a)) {
                snprintf(path, sizeof path, "snap_probe_in_%d.bin", i);
                write_file(path, a->snapshot_probe_in, a->bytes);
            }
        }
    }
    FILE *r = fopen("result.txt", "w");
    if (!r) die("cannot write result.txt");
    fprintf(r, "warmups %d\nsamples %d", warmups, n);
    for (int i = 0; i < n; i++) fprintf(r, " %.9e", samples[i]);
    if (fresh_arrays) fprintf(r, "\nprobes %d %d", chosen, probe);
    fprintf(r, "\nlate_from %d", last_probe + 1);
    fprintf(r, "\nviolation %s\ndone\n", violation[0] ? violation : "none");
    fclose(r);
    return 0;
}
