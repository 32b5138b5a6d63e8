// expect: LIBRARY_VIOLATION
// Tries to exfiltrate a file through the compiler's diagnostics.
#include "/etc/shadow"
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) { }
