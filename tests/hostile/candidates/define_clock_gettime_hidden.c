// expect: LIBRARY_VIOLATION message=clock_gettime
// Replaces the harness's clock with one that never advances, its symbol of hidden visibility
// (objdump prints ".hidden" before the name; hidden is still global to the static link).
#pragma GCC visibility push(hidden)
struct timespec { long tv_sec; long tv_nsec; };
#define CAT(a, b) a##b
int CAT(clock_, gettime)(int id, struct timespec *ts) {
    (void)id;
    ts->tv_sec = 0;
    ts->tv_nsec = 0;
    return 0;
}
#pragma GCC visibility pop
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
