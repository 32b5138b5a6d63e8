// expect: TIMEOUT
// Never returns: the wall-clock limit must end it and kill its whole group.
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    volatile int spin = 1;
    while (spin) { }
}
