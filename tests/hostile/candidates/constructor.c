// expect: LIBRARY_VIOLATION
// Code that runs before main (to patch the harness), spelled so that no source rule sees it.
static volatile int armed;
static void __attribute__((__constructor__)) early(void) { armed = 1; }
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { C[0] = armed; }
