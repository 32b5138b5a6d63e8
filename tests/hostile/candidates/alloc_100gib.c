// expect: RUNTIME_ERROR
// Asks for 100 GiB and touches every page: the address-space limit makes malloc fail and the
// kernel crashes on its own null pointer instead of taking the host's memory.
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    size_t n = (size_t)100 << 30;
    char *volatile big = malloc(n);
    for (size_t i = 0; i < n; i += 4096) big[i] = 1;
    C[0] = big[n - 1];
}
