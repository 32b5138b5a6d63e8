// expect: RUNTIME_ERROR message=SIGSEGV
// The first step of hooking the harness's imports (its clock_gettime, or the write() that
// announces each timed call to the parent): find the harness's GOT from the kernel's own GOT
// slot for memset (scanning down from a static of its own for memset's address), then GOT[0]
// next to it (it holds the link-time address of _DYNAMIC, a small number), and write GOT[3],
// the first import. Here it writes the slot's own value back; a real attack would write a hook.
// Lazily bound, those slots are writable (this kernel ends OK); the harness is linked with full
// RELRO (-z now), so by the time the kernel runs they are read-only and the write faults.
#include <stdint.h>
#include <string.h>
static uintptr_t libc;

static int link_time_address(uintptr_t v) { return v >= 0x1000 && v < 0x100000; }

void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    if (!libc) {
        void *(*volatile fn)(void *, int, size_t) = memset;
        libc = (uintptr_t)fn;
        volatile uintptr_t *m = &libc - 1, *got = 0;
        while (*m != libc) m--;  // this kernel's own GOT slot for memset
        for (int i = 1; i <= 64 && !got; i++)  // lazily bound: .got.plt sits just above .got
            if (link_time_address(m[i])) got = m + i;
        for (int i = 1; i <= 64 && !got; i++)  // bound at load time: one .got, GOT[0] below
            if (link_time_address(m[-i])) got = m - i;
        if (got) got[3] = got[3];
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
