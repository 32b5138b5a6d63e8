// expect: WRONG_ANSWER
// Computes once per buffer and replays the stored answer on later calls with the same pointers:
// the timed calls would cost nothing. Inputs change between timed calls, so the replay is wrong.
#include <stdlib.h>
#include <string.h>
static double *saved;
static const double *saved_a;
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    if (saved && saved_a == A) {
        memcpy(C, saved, sizeof(double) * M * N);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    free(saved);
    saved = malloc(sizeof(double) * M * N);
    memcpy(saved, C, sizeof(double) * M * N);
    saved_a = A;
}
