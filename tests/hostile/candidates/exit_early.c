// expect: LIBRARY_VIOLATION
#include <stdlib.h>
#define QUIT(x) ex##it(x)
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { QUIT(0); }
