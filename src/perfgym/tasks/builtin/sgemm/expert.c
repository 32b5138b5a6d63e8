/*
 * Expert sgemm: packed, cache-blocked, register-tiled, OpenMP-parallel. With AVX-512 the 8 x 48
 * tile of C lives in 24 zmm registers (AVX-512 intrinsics); elsewhere a plain-C micro-kernel that
 * gcc -O3 -march=native vectorizes.
 *
 *   for each NC-wide column panel of B and KC-deep slice of K:
 *     pack B(KC x NC) into NR-wide strips (shared, packed in parallel)
 *     in parallel over MC-tall row blocks of A:
 *       pack A(MC x KC) into MR-tall strips (per thread)
 *       for each NR strip, MR strip: micro-kernel on the register tile
 * Edges are zero-padded in the packed copies, so every size works.
 */
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define MR 8
#define NR 48
#else
#define MR 6
#define NR 16
#endif
#define MC 64
#define KC 256
#define NC 1536

static void pack_b(const float *B, float *Bp, int N, int kc, int nc, int pc, int jc) {
#pragma omp for schedule(static)
    for (int jr = 0; jr < nc; jr += NR) {
        float *dst = Bp + (size_t)jr * kc;
        int nr = nc - jr < NR ? nc - jr : NR;
        for (int p = 0; p < kc; p++) {
            const float *src = B + (size_t)(pc + p) * N + jc + jr;
            int j = 0;
            for (; j < nr; j++) dst[p * NR + j] = src[j];
            for (; j < NR; j++) dst[p * NR + j] = 0.0;
        }
    }
}

static void pack_a(const float *A, float *Ap, int K, int mc, int kc, int ic, int pc) {
    for (int ir = 0; ir < mc; ir += MR) {
        float *dst = Ap + (size_t)ir * kc;
        int mr = mc - ir < MR ? mc - ir : MR;
        for (int p = 0; p < kc; p++) {
            int i = 0;
            for (; i < mr; i++) dst[p * MR + i] = A[(size_t)(ic + ir + i) * K + pc + p];
            for (; i < MR; i++) dst[p * MR + i] = 0.0;
        }
    }
}

/* C[0:mr, 0:nr] (=|+=) Ap(MR x kc) * Bp(kc x NR) */
#if defined(__AVX512F__)
#include <immintrin.h>
static void micro(int kc, const float *restrict a, const float *restrict b, float *restrict c,
                  int ldc, int mr, int nr, int accumulate) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00,
            c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00,
            c40 = c00, c41 = c00, c42 = c00, c50 = c00, c51 = c00, c52 = c00,
            c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
    for (int p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(b + p * NR), b1 = _mm512_load_ps(b + p * NR + 16),
               b2 = _mm512_load_ps(b + p * NR + 32);
        const float *ap = a + p * MR;
#define ROW(i) { __m512 ai = _mm512_set1_ps(ap[i]); \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0); c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1); \
        c##i##2 = _mm512_fmadd_ps(ai, b2, c##i##2); }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
    }
    float tile[MR][NR] __attribute__((aligned(64)));
#define STORE(i) _mm512_store_ps(tile[i], c##i##0); _mm512_store_ps(tile[i] + 16, c##i##1); \
        _mm512_store_ps(tile[i] + 32, c##i##2);
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
#undef STORE
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[(size_t)i * ldc + j] = accumulate ? c[(size_t)i * ldc + j] + tile[i][j] : tile[i][j];
}
#else
static void micro(int kc, const float *restrict a, const float *restrict b, float *restrict c,
                  int ldc, int mr, int nr, int accumulate) {
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = 0.0;
    for (int p = 0; p < kc; p++) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            float ai = a[p * MR + i];
            for (int j = 0; j < NR; j++) acc[i][j] += ai * b[p * NR + j];
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[(size_t)i * ldc + j] = accumulate ? c[(size_t)i * ldc + j] + acc[i][j] : acc[i][j];
}
#endif

void sgemm_optimized(float *A, float *B, float *C, int M, int N, int K) {
    if (K == 0) {
        memset(C, 0, sizeof(float) * (size_t)M * N);
        return;
    }
    int nc_max = N < NC ? N : NC;
    int kc_max = K < KC ? K : KC;
    float *Bp = aligned_alloc(64, sizeof(float) * (size_t)kc_max * ((nc_max + NR - 1) / NR * NR));
#pragma omp parallel
    {
        float *Ap = aligned_alloc(64, sizeof(float) * (size_t)KC * ((MC + MR - 1) / MR * MR));
        for (int jc = 0; jc < N; jc += NC) {
            int nc = N - jc < NC ? N - jc : NC;
            for (int pc = 0; pc < K; pc += KC) {
                int kc = K - pc < KC ? K - pc : KC;
                pack_b(B, Bp, N, kc, nc, pc, jc); /* ends with an implicit barrier */
#pragma omp for schedule(dynamic, 1) collapse(2)
                for (int ic = 0; ic < M; ic += MC)
                    for (int jr0 = 0; jr0 < nc; jr0 += 4 * NR) {
                        int mc = M - ic < MC ? M - ic : MC;
                        pack_a(A, Ap, K, mc, kc, ic, pc);
                        int jr_end = jr0 + 4 * NR < nc ? jr0 + 4 * NR : nc;
                        for (int jr = jr0; jr < jr_end; jr += NR)
                            for (int ir = 0; ir < mc; ir += MR) {
                                int mr = mc - ir < MR ? mc - ir : MR;
                                int nr = nc - jr < NR ? nc - jr : NR;
                                micro(kc, Ap + (size_t)ir * kc, Bp + (size_t)jr * kc,
                                      C + (size_t)(ic + ir) * N + jc + jr, N, mr, nr, pc > 0);
                            }
                    }
            }
        }
        free(Ap);
    }
    free(Bp);
}
