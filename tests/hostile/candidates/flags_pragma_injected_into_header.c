// expect: LIBRARY_VIOLATION
// Redefines a macro the C library's headers expand at file scope: the O3 pragma comes out inside
// stdlib.h, where a scan of the kernel's own lines would not look, and lasts past its end.
#include <stdint.h>
#define CAT(a, b) a##b
#define STR(x) #x
#define PRAGMA(x) _Pragma(STR(x))
#undef __BEGIN_DECLS
#define __BEGIN_DECLS PRAGMA(GCC CAT(opt, imize)("O3"))
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++)
            C[i * N + j] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = A[i * K + k];
            for (int j = 0; j < N; j++)
                C[i * N + j] += a * B[k * N + j];
        }
    }
}
