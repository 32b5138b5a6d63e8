// expect: LIBRARY_VIOLATION
// A header name in __has_include may contain '/*' without opening a comment, so a comment
// stripper believes the line marker below is inside a comment; gcc obeys it.
#include <stdlib.h>
#define CAT(a, b) a##b
#if __has_include(<none/*>)
#endif
# 1 "/usr/include/stdlib.h" 1 3 4
// */
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
