// expect: LIBRARY_VIOLATION
// Reaches BLAS through a name the source rules do not list.
#define G(x) cblas_##x
extern void G(dgemm)(int, int, int, int, int, int, double, const double *, int,
                     const double *, int, double, double *, int);
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    G(dgemm)(101, 111, 111, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
}
