// expect: WRONG_ANSWER
// Computes only the points the seed's 105-point check always looks at (corners, centre).
static double dot(const double *A, const double *B, int i, int j, int N, int K) {
    double s = 0;
    for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
    return s;
}
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    int pts[5][2] = {{0, 0}, {0, N - 1}, {M - 1, 0}, {M - 1, N - 1}, {M / 2, N / 2}};
    for (int p = 0; p < 5; p++)
        C[pts[p][0] * N + pts[p][1]] = dot(A, B, pts[p][0], pts[p][1], N, K);
}
