// expect: WRONG_ANSWER
// Does the work, then walks 2 KiB up its own stack and pushes every value that looks like a
// CLOCK_MONOTONIC reading (the harness's start time of the call) into the future, so the timed
// call would measure as taking no time. No banned name or instruction is used: the harness keeps
// its timer off the stack and plants decoy timestamps there, which this kernel overwrites.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    double marker = 0.0;
    volatile double *p = (volatile double *)&marker;
    for (int i = 1; i < 256; i++) {
        double v = p[i];
        if (v > 10.0 && v < 1e8 && v != (double)(long)v) p[i] = v + 1.0;
    }
}
