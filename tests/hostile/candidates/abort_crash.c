// expect: RUNTIME_ERROR
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { abort(); }
