// expect: LIBRARY_VIOLATION
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    system("touch /tmp/perfgym-pwned");
}
