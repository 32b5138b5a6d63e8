// expect: LIBRARY_VIOLATION
#include <unistd.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    while (1) fork();
}
