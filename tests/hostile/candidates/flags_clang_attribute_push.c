// expect: LIBRARY_VIOLATION
// clang's way to put an attribute on every following function (gcc ignores it).
#pragma clang attribute push (__attribute__((optimize("O3"))), apply_to = function)
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
#pragma clang attribute pop
