/*
 * Expert triangular solve: all right-hand sides advance together, row by row, so the inner
 * loop runs along a row of X (contiguous, vectorized). Columns of X are split into panels, one
 * panel per task, sized so a panel of X stays in cache across the rows.
 */
#define PANEL 64

void trsm_optimized(double *L, double *B, double *X, int N, int R) {
    int panels = (R + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(dynamic, 1) if ((long)N * N * R > 100000)
    for (int p = 0; p < panels; p++) {
        int c0 = p * PANEL, c1 = c0 + PANEL < R ? c0 + PANEL : R;
        for (int i = 0; i < N; i++) {
            double *xi = X + (long)i * R;
            const double *li = L + (long)i * N;
            for (int c = c0; c < c1; c++) xi[c] = B[(long)i * R + c];
            for (int j = 0; j < i; j++) {
                double lij = li[j];
                const double *xj = X + (long)j * R;
#pragma omp simd
                for (int c = c0; c < c1; c++) xi[c] -= lij * xj[c];
            }
            double inv = 1.0 / li[i];
            for (int c = c0; c < c1; c++) xi[c] *= inv;
        }
    }
}
