// expect: LIBRARY_VIOLATION
// Returns at once and lets a detached thread compute C later (after the timer stopped).
#include <pthread.h>
struct job { double *A, *B, *C; int M, N, K; };
static struct job job;
static void *work(void *arg) {
    for (int i = 0; i < job.M; i++)
        for (int j = 0; j < job.N; j++) {
            double s = 0;
            for (int k = 0; k < job.K; k++) s += job.A[i * job.K + k] * job.B[k * job.N + j];
            job.C[i * job.N + j] = s;
        }
    return 0;
}
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    pthread_t t;
    job = (struct job){A, B, C, M, N, K};
    pthread_create(&t, 0, work, 0);
}
