// expect: LIBRARY_VIOLATION
#include <stdio.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    FILE *f = fopen("/etc/shadow", "r");
    if (f) C[0] = fgetc(f);
}
