// expect: LIBRARY_VIOLATION
#define ENTRY ma##in
int ENTRY(void) { return 0; }
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { }
