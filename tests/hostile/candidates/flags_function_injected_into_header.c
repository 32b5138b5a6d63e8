// expect: LIBRARY_VIOLATION
// Redefines a macro the C library's headers expand at file scope so that an O3 copy of the kernel
// is defined inside stdlib.h (one per expansion, numbered by __COUNTER__); the entry calls it.
#include <stdint.h>
#define CAT(a, b) a##b
#define NAME(n) CAT(mm_, n)
#undef __BEGIN_DECLS
#define __BEGIN_DECLS \
    __attribute__((CAT(opt, imize)("O3"), unused)) static void NAME(__COUNTER__)( \
        double *A, double *B, double *C, int M, int N, int K) { \
        for (int i = 0; i < M; i++) { \
            for (int j = 0; j < N; j++) C[i * N + j] = 0.0; \
            for (int k = 0; k < K; k++) \
                for (int j = 0; j < N; j++) C[i * N + j] += A[i * K + k] * B[k * N + j]; \
        } \
    }
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    mm_0(A, B, C, M, N, K);
}
