// expect: LIBRARY_VIOLATION
// A raw system call in inline assembly: open("/tmp/perfgym-pwned", O_CREAT|O_WRONLY).
#define SYS __asm__
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    const char *path = "/tmp/perfgym-pwned";
    long ret;
    SYS volatile("syscall" : "=a"(ret) : "a"(2), "D"(path), "S"(0101), "d"(0644) : "rcx", "r11");
}
