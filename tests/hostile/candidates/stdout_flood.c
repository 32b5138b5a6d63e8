// expect: LIBRARY_VIOLATION
#include <stdio.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (;;) puts("flood flood flood flood flood flood flood flood flood flood");
}
