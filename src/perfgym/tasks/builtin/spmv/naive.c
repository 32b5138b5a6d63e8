/* Naive CSR SpMV: one row after another. */
void spmv_optimized(int *row_ptr, int *col_idx, double *vals, double *x, double *y, int N, int R) {
    for (int i = 0; i < N; i++) {
        double sum = 0.0;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++)
            sum += vals[k] * x[col_idx[k]];
        y[i] = sum;
    }
}
