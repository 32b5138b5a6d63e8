// expect: LIBRARY_VIOLATION
// Tries to phone home; obfuscated so only the object audit can see the calls.
struct sockaddr { unsigned short family; char data[14]; };
#define NET(x) x
extern int NET(socket)(int, int, int);
extern int NET(connect)(int, const struct sockaddr *, unsigned);
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    int s = NET(socket)(2, 1, 0);
    struct sockaddr a = {2, {0, 80, 1, 1, 1, 1}};
    NET(connect)(s, &a, sizeof a);
}
