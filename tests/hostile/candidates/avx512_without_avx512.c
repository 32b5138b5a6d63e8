// expect: COMPILE_ERROR march=x86-64-v3
// AVX-512 intrinsics built for a CPU without AVX-512: a clear message, not a mystery crash.
#include <immintrin.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            __m512d acc = _mm512_setzero_pd();
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s + _mm512_reduce_add_pd(acc);
        }
}
