/*
 * Expert CSR SpMV: rows split over threads in chunks of equal nonzero count (rows vary in
 * length), each row summed with four independent accumulators.
 */
#include <omp.h>

static int first_row_with(const int *row_ptr, int N, long target) {
    int lo = 0, hi = N; /* first i with row_ptr[i] >= target */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (row_ptr[mid] < target) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void spmv_optimized(int *row_ptr, int *col_idx, double *vals, double *x, double *y, int N, int R) {
    long nnz = row_ptr[N];
#pragma omp parallel if (nnz > 65536)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int lo = t == 0 ? 0 : first_row_with(row_ptr, N, nnz * t / nt);
        int hi = t == nt - 1 ? N : first_row_with(row_ptr, N, nnz * (t + 1) / nt);
        for (int i = lo; i < hi; i++) {
            int k = row_ptr[i], end = row_ptr[i + 1];
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (; k + 4 <= end; k += 4) {
                s0 += vals[k] * x[col_idx[k]];
                s1 += vals[k + 1] * x[col_idx[k + 1]];
                s2 += vals[k + 2] * x[col_idx[k + 2]];
                s3 += vals[k + 3] * x[col_idx[k + 3]];
            }
            for (; k < end; k++) s0 += vals[k] * x[col_idx[k]];
            y[i] = (s0 + s1) + (s2 + s3);
        }
    }
}
