/* Naive 7-point stencil: one loop nest with the boundary test inside. */
void stencil3d_optimized(double *in, double *out, int NX, int NY, int NZ) {
    for (int x = 0; x < NX; x++)
        for (int y = 0; y < NY; y++)
            for (int z = 0; z < NZ; z++) {
                long c = ((long)x * NY + y) * NZ + z;
                if (x == 0 || y == 0 || z == 0 || x == NX - 1 || y == NY - 1 || z == NZ - 1)
                    out[c] = in[c];
                else
                    out[c] = 0.4 * in[c] + 0.1 * (in[c - (long)NY * NZ] + in[c + (long)NY * NZ] +
                                                  in[c - NZ] + in[c + NZ] + in[c - 1] + in[c + 1]);
            }
}
