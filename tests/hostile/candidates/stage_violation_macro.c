// expect: STAGE_VIOLATION stage=1
// OpenMP at stage 1, hidden behind a stringizing macro: no source rule sees "omp parallel",
// the object's GOMP_ calls give it away.
#define PRAGMA(x) _Pragma(#x)
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    PRAGMA(omp parallel for)
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
