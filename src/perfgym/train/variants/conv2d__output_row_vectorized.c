/* Loop order f, c, u, v, i, j: the innermost loop runs along an output row and vectorizes. */
#include <string.h>
void conv2d_optimized(double *X, double *K, double *Y, int C, int H, int W, int F, int S) {
    int OH = H - S + 1, OW = W - S + 1;
    memset(Y, 0, sizeof(double) * (size_t)F * OH * OW);
    for (int f = 0; f < F; f++)
        for (int c = 0; c < C; c++)
            for (int u = 0; u < S; u++)
                for (int v = 0; v < S; v++) {
                    double k = K[(((long)f * C + c) * S + u) * S + v];
                    for (int i = 0; i < OH; i++) {
                        const double *x = X + ((long)c * H + i + u) * W + v;
                        double *y = Y + ((long)f * OH + i) * OW;
                        for (int j = 0; j < OW; j++) y[j] += k * x[j];
                    }
                }
}
