// expect: WRONG_ANSWER size=256 message=tampering:
// Does the work, and on its last call (input set 2, other buffers) rewrites the times the harness
// measured: the harness's statics share .bss with the kernel's own, so pointer arithmetic from a
// static of its own finds call_args[] (it holds this call's three pointers) and, just below it,
// samples[], which it divides by 50. No banned name or instruction; the harness's decoys are not
// touched. Only the parent's clock, which saw every timed call take its real time, catches it.
// At 256 its hidden work (about 12 ms a call on a Zen 4) is far past the CPU witness's slack;
// at 192 (5 ms a call there) it sat at the edge, and the run was judged a parent kept from its
// CPU: OK, charged the parent's time, marked disturbed. No gain, but not the verdict asserted.
#include <stdint.h>
static const double *first_a;

static void multiply(const double *A, const double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    multiply(A, B, C, M, N, K);
    if (!first_a) first_a = A;
    if (A == first_a) return;
    volatile uintptr_t *p = (volatile uintptr_t *)&first_a;
    for (int i = 0; i < (1 << 16); i++, p--)  // call_args[1][0..2]: 20 KiB below, past arrays[]
        if (p[0] == (uintptr_t)A && p[1] == (uintptr_t)B && p[2] == (uintptr_t)C) break;
    volatile double *s = (volatile double *)(p - 16);  // call_args[0]; samples[] ends there
    int skipped = 0;
    while (*--s == 0.0 && ++skipped < 200000) {}  // the unused tail of samples[]
    for (; *s > 1e-9 && *s < 100.0; s--) *s /= 50.0;  // every reported time, down to samples[0]
}
