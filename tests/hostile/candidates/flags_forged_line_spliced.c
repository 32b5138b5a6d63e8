// expect: LIBRARY_VIOLATION
// The line directive split by a backslash-newline and a comment between '#' and 'line'.
#include <stdlib.h>
#define CAT(a, b) a##b
#\
/* nothing to see */ line 1 "/usr/include/stdlib.h"
__attribute__((CAT(opt, imize)("O3"))) void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
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
