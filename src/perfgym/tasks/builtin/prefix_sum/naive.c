/* Naive inclusive scan: one running sum. */
void scan_optimized(double *x, double *y, int N) {
    double sum = 0.0;
    for (int i = 0; i < N; i++) {
        sum += x[i];
        y[i] = sum;
    }
}
