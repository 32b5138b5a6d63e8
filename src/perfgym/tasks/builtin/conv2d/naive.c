/* Naive direct convolution: one output element at a time, summing over c, u, v. */
void conv2d_optimized(double *X, double *K, double *Y, int C, int H, int W, int F, int S) {
    int OH = H - S + 1, OW = W - S + 1;
    for (int f = 0; f < F; f++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++) {
                double sum = 0.0;
                for (int c = 0; c < C; c++)
                    for (int u = 0; u < S; u++)
                        for (int v = 0; v < S; v++)
                            sum += X[((long)c * H + i + u) * W + j + v] *
                                   K[(((long)f * C + c) * S + u) * S + v];
                Y[((long)f * OH + i) * OW + j] = sum;
            }
}
