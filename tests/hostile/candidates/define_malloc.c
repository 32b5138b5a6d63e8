// expect: LIBRARY_VIOLATION
// Interposes malloc to corrupt the harness's memory.
#include <stddef.h>
static char arena[1 << 20];
void *malloc(size_t n) { return arena; }
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { }
