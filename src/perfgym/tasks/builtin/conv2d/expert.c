/*
 * Expert direct convolution: (filter, output row) pairs split over threads; each output row is
 * accumulated in place, four filters at a time, looping over input channels and taps with the
 * output column innermost (contiguous, vectorized). Each loaded input row feeds four filters.
 */
#include <string.h>

#define FB 4

void conv2d_optimized(double *X, double *K, double *Y, int C, int H, int W, int F, int S) {
    int OH = H - S + 1, OW = W - S + 1;
    int fblocks = (F + FB - 1) / FB;
#pragma omp parallel for schedule(static) collapse(2) if ((long)F * OH * OW * C * S * S > 100000)
    for (int fb = 0; fb < fblocks; fb++)
        for (int i = 0; i < OH; i++) {
            int f0 = fb * FB, nf = F - f0 < FB ? F - f0 : FB;
            double *y[FB];
            for (int q = 0; q < FB; q++) {
                y[q] = Y + ((long)(f0 + (q < nf ? q : 0)) * OH + i) * OW;
                if (q < nf) memset(y[q], 0, sizeof(double) * OW);
            }
            for (int c = 0; c < C; c++)
                for (int u = 0; u < S; u++) {
                    const double *x = X + ((long)c * H + i + u) * W;
                    for (int v = 0; v < S; v++) {
                        double k[FB];
                        for (int q = 0; q < FB; q++)
                            k[q] = q < nf ? K[(((long)(f0 + q) * C + c) * S + u) * S + v] : 0.0;
                        if (nf == FB) {
#pragma omp simd
                            for (int j = 0; j < OW; j++) {
                                double xv = x[j + v];
                                y[0][j] += k[0] * xv;
                                y[1][j] += k[1] * xv;
                                y[2][j] += k[2] * xv;
                                y[3][j] += k[3] * xv;
                            }
                        } else {
                            for (int q = 0; q < nf; q++)
#pragma omp simd
                                for (int j = 0; j < OW; j++) y[q][j] += k[q] * x[j + v];
                        }
                    }
                }
        }
}
