// expect: LIBRARY_VIOLATION
#include <stddef.h>
extern void cblas_dgemm(int, int, int, int, int, int, double, const double *, int,
                        const double *, int, double, double *, int);
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    cblas_dgemm(101, 111, 111, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
}
