// expect: WRONG_ANSWER
// Replays the stored answer when the first elements of A and B look the same (cheap check).
#include <stdlib.h>
#include <string.h>
static double *saved;
static double key[4];
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    if (saved && key[0] == A[0] && key[1] == A[1] && key[2] == B[0] && key[3] == B[1]) {
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
    key[0] = A[0]; key[1] = A[1]; key[2] = B[0]; key[3] = B[1];
}
