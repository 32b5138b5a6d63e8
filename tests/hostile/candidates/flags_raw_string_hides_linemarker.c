// expect: LIBRARY_VIOLATION
// A raw string (a GNU extension in C) holds a quote and a '/*', so a comment stripper thinks a
// comment starts there and misses the line marker below.
#include <stdlib.h>
#define CAT(a, b) a##b
static const char *note = R"x(" /* )x";
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
