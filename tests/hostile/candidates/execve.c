// expect: LIBRARY_VIOLATION
#define CALL(f) f
extern int execve(const char *, char *const[], char *const[]);
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    char *argv[] = {"/bin/sh", "-c", "touch /tmp/perfgym-pwned", 0};
    CALL(execve)("/bin/sh", argv, 0);
}
