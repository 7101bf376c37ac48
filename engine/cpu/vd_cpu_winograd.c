/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Winograd F(4x4, 3x3) convolution on oneDNN's blocked layouts (see
 * vd_cpu_winograd.h).
 *
 * With d a 6x6 input tile, g a 3x3 kernel and Y the 4x4 output tile,
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A
 * (. elementwise). The weights' transform U = G g G^T is computed once, in double
 * precision; for each chunk of tiles the input transform V = B^T d B is written as
 * 36 matrices [tiles][in channels], multiplied by the 36 matrices U [in][out] by
 * sgemm (K_BLOCK channels at a time), and the output transform reads the 36
 * products [tiles][out channels]. A
 * thread runs a chunk from the input transform to the output, so that its
 * matrices stay in its caches; sgemm runs single-threaded inside the parallel
 * region (oneDNN does not nest its OpenMP parallelism). */
#include "cpu/vd_cpu_winograd.h"
#include "cpu/vd_cpu_layers.h"
#include "cpu/vd_cpu_ops.h"
#include "vd_config.h"
#include "visiondetect/vd.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define MAX_ALPHA 6 /* input tile of F(4x4, 3x3); F(2x2, 3x3)'s is 4 */
/* product matrices per tile: alpha^2, or 46 for VD_WINO_4X3_COMPLEX (below) */
#define COMPLEX_MATS 46
/* Input channels per sgemm call: each call sums its block from zero and adds the
 * sum to the product so far, so that a product of C channels accumulates blocks
 * of K_BLOCK rather than C terms one after the other (the float32 error of that
 * sum, amplified by the output transform, is most of the error of F(4x4, 3x3)):
 * with the points below, at most 1.9e-6 of max |y| against 4.9e-6, as oneDNN 2.x's
 * own F(4x4, 3x3) and in the same time (blocks of 32 would cost 10 % more). */
#define K_BLOCK 64

struct vd_wino {
    int ref_count;
    int in_c, out_c, cb;
    vd_wino_kind kind;
    int tile, alpha; /* output and input tile: 4 and 6, or 2 and 4 */
    int n_mats;      /* product matrices per tile: 36, 16 or 46 */
    int chunk;       /* tiles per chunk */
    float *u;        /* [n_mats][in_c][out_c] */
    float *bias;     /* [out_c] */
};

/* Tiles per chunk: the chunk's two sets of matrices (n_mats x tiles x (in + out)
 * floats) within about 4 MB, at least 32 tiles: the tiles are the rows of each
 * sgemm call, which packs its block of weights (K_BLOCK x out_c) every time, and 16
 * rows (what 4 MB gave 512 channels) made ResNet's last stage 1.35x slower with the
 * real points' F(4x4, 3x3) and 1.3x with the complex ones (tools/bench/CPU.md). */
static int chunk_tiles(int in_c, int out_c, int n_mats)
{
    size_t per_tile = (size_t)n_mats * (size_t)(in_c + out_c) * sizeof(float);
    size_t n = ((size_t)4 << 20) / per_tile;
    return (int)CLAMP(n, 32, 128) / 8 * 8;
}

/* The interpolation points, in the order of the 36 matrices' rows and columns: 0,
 * 1, -1, 1/2, -2 and infinity. Lavin and Gray's 0, +-1, +-2 and infinity (oneDNN's
 * jit_wino_4x3) make the products at +-2 large against the output (the output
 * transform multiplies them by up to 8 each way); 1/2 instead of 2 (Barabasz et al.,
 * "Error analysis and improving the accuracy of Winograd convolution for deep
 * neural networks") keeps them smaller: 4.9e-6 of max |y| against 1.2e-5 (256
 * channels on 22x34, tests/engine/test_winograd.c), with the same number of
 * operations.
 * Every coefficient of B and A is a power of two or a small odd multiple of one
 * (exact in float32); the others, thirds and fifteenths, are G's, applied in
 * double to the weights.
 * G (6x3): row a is the kernel's polynomial at point a over the product of the
 * other finite points' differences. */
static const double G4[6][3] = {
    {1.0, 0, 0},
    {1.0 / 3, 1.0 / 3, 1.0 / 3},
    {-1.0 / 3, 1.0 / 3, -1.0 / 3},
    {-16.0 / 15, -8.0 / 15, -4.0 / 15},
    {1.0 / 15, -2.0 / 15, 4.0 / 15},
    {0, 0, 1},
};

/* G (4x3) of F(2x2, 3x3), the points 0, 1, -1 and infinity (Lavin and Gray's):
 * every coefficient of its B and A is 0 or +-1, and its error that of the direct
 * kernels (tests/engine/test_winograd.c). */
static const double G2[4][3] = {
    {1.0, 0, 0},
    {0.5, 0.5, 0.5},
    {0.5, -0.5, 0.5},
    {0, 0, 1},
};

/* F(4x4, 3x3) on the points 0, 1, -1, i, -i and infinity (VD_WINO_4X3_COMPLEX):
 * interpolation on Gaussian integers (Meng and Brothers, "Efficient Winograd
 * convolution via integer arithmetic", 2019). Every coefficient of B and A is 0 or
 * +-1 (+-i), G's 0, +-1/4, +-1/2 and 1: as well conditioned as F(2x2, 3x3), whose
 * error it has (2.4e-7 to 3.3e-7 of max |y| on the networks' channel counts,
 * tests/engine/test_winograd.c) where the real points' F(4x4, 3x3) has 1.9e-6.
 * With real inputs the values at -i are the conjugates of those at i, so each
 * transform is real: the rows 0, 1, -1, Re(i), Im(i) and infinity, here G's; the
 * factor 2 of the conjugate pair's sum (y = ... + 2 Re(a_i m_i)) is in Re(i) and
 * Im(i)'s rows of G, so that A's are 0 and +-1. The 6x6 products are then 16
 * real ones (both points in 0, +-1, infinity) and 10 complex ones: (p, i) and
 * (i, p) for the four real p, (i, i) and (i, -i); each complex one as three real
 * products (Gauss's: x u, y v and (x + y)(u + v) for (x + i y)(u + i v)): 46
 * matrices against the real points' 36, for a tile of 16 outputs (F(2x2, 3x3): 64
 * for 16 outputs; direct: 144, 3.13 times as many). */
static const double GC[6][3] = {
    {1.0, 0, 0},          {0.25, 0.25, 0.25}, {0.25, -0.25, 0.25}, {0.5, 0, -0.5} /* Re */,
    {0, 0.5, 0} /* Im */, {0, 0, 1},
};
/* the real points' rows and columns (0, 1, -1, infinity) in the 6x6 transforms */
static const int REAL_POINTS[4] = {0, 1, 2, 5};
#define RE_I 3
#define IM_I 4

/* U[p][i][.] = (G g G^T)[p] of input channel @i for every output channel, in
 * double, vectorised over the output channels (G: @alpha x 3): @work holds
 * (9 + 3 alpha + alpha^2) x out_c. VD_WINO_4X3_COMPLEX: the 6x6 real form of the
 * transform, then its 46 matrices (complex_pairs()). */
VD_CPU_HOT static void transform_weights(const float *weight, int in_c, int out_c, int i,
                                         const vd_wino *wino, double *work, float *u)
{
    const int alpha = wino->alpha;
    const double(*G)[3] = wino->kind == VD_WINO_2X3 ? G2 : wino->kind == VD_WINO_4X3 ? G4 : GC;
    double *g = work;                            /* [9][out_c]: the kernels, transposed */
    double *gg = work + 9 * (size_t)out_c;       /* [alpha][3][out_c]: G g */
    double *ww = gg + (size_t)alpha * 3 * out_c; /* [alpha][alpha][out_c]: G g G^T */
    for (int o = 0; o < out_c; o++)
        for (int k = 0; k < 9; k++)
            g[(size_t)k * out_c + o] = weight[((size_t)o * in_c + i) * 9 + k];
    for (int a = 0; a < alpha; a++)
        for (int c = 0; c < 3; c++) {
            double *dst = gg + (size_t)(a * 3 + c) * out_c;
            const double *g0 = g + (size_t)(0 * 3 + c) * out_c,
                         *g1 = g + (size_t)(1 * 3 + c) * out_c,
                         *g2 = g + (size_t)(2 * 3 + c) * out_c;
            for (int o = 0; o < out_c; o++)
                dst[o] = G[a][0] * g0[o] + G[a][1] * g1[o] + G[a][2] * g2[o];
        }
    for (int a = 0; a < alpha; a++)
        for (int b = 0; b < alpha; b++) {
            const double *r0 = gg + (size_t)(a * 3 + 0) * out_c,
                         *r1 = gg + (size_t)(a * 3 + 1) * out_c,
                         *r2 = gg + (size_t)(a * 3 + 2) * out_c;
            double *dst = ww + (size_t)(a * alpha + b) * out_c;
            for (int o = 0; o < out_c; o++)
                dst[o] = r0[o] * G[b][0] + r1[o] * G[b][1] + r2[o] * G[b][2];
        }
#define U_AT(p) (u + ((size_t)(p)*in_c + i) * out_c)
#define WW(a, b) (ww + (size_t)((a)*alpha + (b)) * out_c)
    if (wino->kind != VD_WINO_4X3_COMPLEX) {
        for (int p = 0; p < alpha * alpha; p++)
            for (int o = 0; o < out_c; o++)
                U_AT(p)[o] = (float)ww[(size_t)p * out_c + o];
        return;
    }
    int p = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++, p++)
            for (int o = 0; o < out_c; o++)
                U_AT(p)[o] = (float)WW(REAL_POINTS[a], REAL_POINTS[b])[o];
    /* complex_pairs(): x, y and x + y of each complex value, in double */
    for (int pair = 0; pair < 10; pair++, p += 3)
        for (int o = 0; o < out_c; o++) {
            double x, y;
            if (pair < 4) { /* (real point, i) */
                x = WW(REAL_POINTS[pair], RE_I)[o];
                y = WW(REAL_POINTS[pair], IM_I)[o];
            } else if (pair < 8) { /* (i, real point) */
                x = WW(RE_I, REAL_POINTS[pair - 4])[o];
                y = WW(IM_I, REAL_POINTS[pair - 4])[o];
            } else if (pair == 8) { /* (i, i); halved: G's rows hold the 2 twice */
                x = 0.5 * (WW(RE_I, RE_I)[o] - WW(IM_I, IM_I)[o]);
                y = 0.5 * (WW(RE_I, IM_I)[o] + WW(IM_I, RE_I)[o]);
            } else { /* (i, -i) */
                x = 0.5 * (WW(RE_I, RE_I)[o] + WW(IM_I, IM_I)[o]);
                y = 0.5 * (WW(IM_I, RE_I)[o] - WW(RE_I, IM_I)[o]);
            }
            U_AT(p)[o] = (float)x;
            U_AT(p + 1)[o] = (float)y;
            U_AT(p + 2)[o] = (float)(x + y);
        }
#undef U_AT
#undef WW
}

vd_wino *vd_wino_new(const float *weight, const float *bias, int out_c, int in_c, int cb,
                     vd_wino_kind kind, GError **error)
{
    if ((cb != 8 && cb != 16) ||
        (kind != VD_WINO_2X3 && kind != VD_WINO_4X3 && kind != VD_WINO_4X3_COMPLEX) || in_c <= 0 ||
        out_c <= 0 || in_c % cb != 0 || out_c % cb != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "Winograd convolution (kind %d) %d->%d channels in blocks of %d", (int)kind,
                    in_c, out_c, cb);
        return NULL;
    }
    vd_wino *wino = g_new0(vd_wino, 1);
    wino->ref_count = 1;
    wino->in_c = in_c;
    wino->out_c = out_c;
    wino->cb = cb;
    wino->kind = kind;
    wino->tile = kind == VD_WINO_2X3 ? 2 : 4;
    wino->alpha = wino->tile + 2;
    wino->n_mats = kind == VD_WINO_4X3_COMPLEX ? COMPLEX_MATS : wino->alpha * wino->alpha;
    size_t n_mats = (size_t)wino->n_mats;
    wino->chunk = chunk_tiles(in_c, out_c, (int)n_mats);
    wino->u = g_try_malloc(n_mats * in_c * out_c * sizeof(float));
    wino->bias = g_try_malloc((size_t)out_c * sizeof(float));
    if (wino->u == NULL || wino->bias == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory: %zu bytes of Winograd weights",
                    n_mats * in_c * out_c * sizeof(float));
        vd_wino_unref(wino);
        return NULL;
    }
    memcpy(wino->bias, bias, (size_t)out_c * sizeof(float));
#pragma omp parallel
    {
        double *work =
            g_malloc(sizeof(double) * (9 + MAX_ALPHA * 3 + MAX_ALPHA * MAX_ALPHA) * (size_t)out_c);
#pragma omp for
        for (int i = 0; i < in_c; i++)
            transform_weights(weight, in_c, out_c, i, wino, work, wino->u);
        g_free(work);
    }
    return wino;
}

vd_wino *vd_wino_ref(vd_wino *wino)
{
    wino->ref_count++;
    return wino;
}

void vd_wino_unref(vd_wino *wino)
{
    if (wino == NULL || --wino->ref_count > 0)
        return;
    g_free(wino->u);
    g_free(wino->bias);
    g_free(wino);
}

const char *vd_wino_name(const vd_wino *wino)
{
    switch (wino->kind) {
    case VD_WINO_2X3:
        return "vd_winograd_2x3:sgemm";
    case VD_WINO_4X3:
        return "vd_winograd_4x3:sgemm";
    default:
        return "vd_winograd_4x3_complex:sgemm";
    }
}

size_t vd_wino_workspace_size(const vd_wino *wino, int n_threads)
{
    size_t per_thread =
        (size_t)wino->n_mats * wino->chunk * (wino->in_c + wino->out_c) * sizeof(float);
    per_thread = (per_thread + 63) / 64 * 64;
    return per_thread * (size_t)MAX(n_threads, 1);
}

/* B^T x for one column x[0..5] of CB-wide vectors, into r[0..5] (F(4x4, 3x3)). */
#define WINO_BT6(x, r, c)                                                                          \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c], x4 = x[4][c], x5 = x[5][c];  \
        float d31 = x3 - x1, d42 = x4 - x2;                                                        \
        r[0][c] = ((x0 + x4) - 2.0f * x2) + 1.5f * d31;                                            \
        r[1][c] = (x4 - x1) + (0.5f * x2 + 2.5f * x3);                                             \
        r[2][c] = (x4 + x1) - (2.5f * x2 - 0.5f * x3);                                             \
        r[3][c] = 2.0f * d31 + d42;                                                                \
        r[4][c] = d42 - 0.5f * d31;                                                                \
        r[5][c] = ((x1 + x5) - 2.0f * x3) + 1.5f * d42;                                            \
    } while (0)

/* The same for x[0..3], F(2x2, 3x3). */
#define WINO_BT4(x, r, c)                                                                          \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c];                              \
        r[0][c] = x0 - x2;                                                                         \
        r[1][c] = x1 + x2;                                                                         \
        r[2][c] = x2 - x1;                                                                         \
        r[3][c] = x1 - x3;                                                                         \
    } while (0)

/* The same for the points 0, 1, -1, i (real and imaginary parts) and infinity
 * (VD_WINO_4X3_COMPLEX): additions alone. */
#define WINO_BTC6(x, r, c)                                                                         \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c], x4 = x[4][c], x5 = x[5][c];  \
        r[0][c] = x0 - x4;                                                                         \
        r[1][c] = (x1 + x2) + (x3 + x4);                                                           \
        r[2][c] = (x2 + x4) - (x1 + x3);                                                           \
        r[3][c] = x4 - x2;                                                                         \
        r[4][c] = x3 - x1;                                                                         \
        r[5][c] = x5 - x1;                                                                         \
    } while (0)

/* VD_WINO_4X3_COMPLEX: the 46 matrices of a tile from the real form @V of its
 * transform ([6][6][CB]), each at v + index * p_stride: the 16 real points' values,
 * then x, y and x + y of each complex value x + i y: at (p, i) and (i, p) for the
 * real points p, at (i, i) and at (i, -i) (transform_weights() in the same order). */
static inline __attribute__((always_inline)) void
complex_pairs(const float (*restrict V)[6][16], float *restrict v, size_t p_stride, const int CB)
{
    int p = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++, p++)
            memcpy(v + (size_t)p * p_stride, V[REAL_POINTS[a]][REAL_POINTS[b]], sizeof(float) * CB);
    /* (p, i) and (i, p) for the four real points p */
    for (int k = 0; k < 8; k++, p += 3) {
        const float *x = k < 4 ? V[REAL_POINTS[k]][RE_I] : V[RE_I][REAL_POINTS[k - 4]];
        const float *y = k < 4 ? V[REAL_POINTS[k]][IM_I] : V[IM_I][REAL_POINTS[k - 4]];
        float *vx = v + (size_t)p * p_stride;
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            vx[c] = x[c];
            vx[p_stride + c] = y[c];
            vx[2 * p_stride + c] = x[c] + y[c];
        }
    }
    /* (i, i) and (i, -i) */
    float *vp = v + (size_t)p * p_stride, *vq = vp + 3 * p_stride;
#pragma omp simd
    for (int c = 0; c < CB; c++) {
        float rr = V[RE_I][RE_I][c], ii = V[IM_I][IM_I][c], ri = V[RE_I][IM_I][c],
              ir = V[IM_I][RE_I][c];
        float px = rr - ii, py = ri + ir, qx = rr + ii, qy = ir - ri;
        vp[c] = px;
        vp[p_stride + c] = py;
        vp[2 * p_stride + c] = px + py;
        vq[c] = qx;
        vq[p_stride + c] = qy;
        vq[2 * p_stride + c] = qx + qy;
    }
}

/* The input transform of one ALPHA x ALPHA tile (6: F(4x4, 3x3), 4: F(2x2, 3x3);
 * COMPLEX: VD_WINO_4X3_COMPLEX) whose top-left input pixel is (y0, x0) (may be
 * outside: zero padding), for the channel block @blk ([h][w][CB]); matrix p of this
 * tile and block at v + p * p_stride. */
static inline __attribute__((always_inline)) void
input_tile(const float *restrict blk, int h, int w, int y0, int x0, float *restrict v,
           size_t p_stride, const int CB, const int ALPHA, const gboolean COMPLEX)
{
    float d[MAX_ALPHA][MAX_ALPHA][16]; /* [x][y][c]: columns first */
    float t[MAX_ALPHA][MAX_ALPHA][16]; /* B^T d: [y'][x][c] */
    float V[6][6][16];                 /* COMPLEX: B^T d B, [y'][x'][c] */
    for (int j = 0; j < ALPHA; j++) {
        int x = x0 + j;
        for (int i = 0; i < ALPHA; i++) {
            int y = y0 + i;
            if (y >= 0 && y < h && x >= 0 && x < w)
                memcpy(d[j][i], blk + ((size_t)y * w + x) * CB, sizeof(float) * CB);
            else
                memset(d[j][i], 0, sizeof(float) * CB);
        }
    }
    for (int j = 0; j < ALPHA; j++) {
        float r[MAX_ALPHA][16];
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            if (COMPLEX)
                WINO_BTC6(d[j], r, c);
            else if (ALPHA == 6)
                WINO_BT6(d[j], r, c);
            else
                WINO_BT4(d[j], r, c);
        }
        for (int i = 0; i < ALPHA; i++)
            memcpy(t[i][j], r[i], sizeof(float) * CB);
    }
    for (int i = 0; i < ALPHA; i++) {
        float r[MAX_ALPHA][16];
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            if (COMPLEX)
                WINO_BTC6(t[i], r, c);
            else if (ALPHA == 6)
                WINO_BT6(t[i], r, c);
            else
                WINO_BT4(t[i], r, c);
        }
        for (int j = 0; j < ALPHA; j++)
            memcpy(COMPLEX ? V[i][j] : v + (size_t)(i * ALPHA + j) * p_stride, r[j],
                   sizeof(float) * CB);
    }
    if (COMPLEX)
        complex_pairs((const float(*)[6][16])V, v, p_stride, CB);
}

/* A^T x for x[0..5], into r[0..3] (F(4x4, 3x3)). */
#define WINO_AT6(x, r, c)                                                                          \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c], x4 = x[4][c], x5 = x[5][c];  \
        float s12 = x1 + x2, d12 = x1 - x2;                                                        \
        r[0][c] = (x0 + s12) + (x3 + x4);                                                          \
        r[1][c] = d12 + (0.5f * x3 - 2.0f * x4);                                                   \
        r[2][c] = s12 + (0.25f * x3 + 4.0f * x4);                                                  \
        r[3][c] = (d12 + (0.125f * x3 - 8.0f * x4)) + x5;                                          \
    } while (0)

/* The same for x[0..3], into r[0..1], F(2x2, 3x3). */
#define WINO_AT4(x, r, c)                                                                          \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c];                              \
        r[0][c] = (x0 + x1) + x2;                                                                  \
        r[1][c] = (x1 - x2) - x3;                                                                  \
    } while (0)

/* The same for the points 0, 1, -1, i (real and imaginary parts) and infinity
 * (VD_WINO_4X3_COMPLEX). */
#define WINO_ATC6(x, r, c)                                                                         \
    do {                                                                                           \
        float x0 = x[0][c], x1 = x[1][c], x2 = x[2][c], x3 = x[3][c], x4 = x[4][c], x5 = x[5][c];  \
        float s12 = x1 + x2, d12 = x1 - x2;                                                        \
        r[0][c] = (x0 + s12) + x3;                                                                 \
        r[1][c] = d12 - x4;                                                                        \
        r[2][c] = s12 - x3;                                                                        \
        r[3][c] = (d12 + x4) + x5;                                                                 \
    } while (0)

/* VD_WINO_4X3_COMPLEX: the real form @M ([6][6][CB]) of a tile's products from its 46
 * matrices at m + index * p_stride (complex_pairs()' order): each complex product
 * is x u - y v + i ((x + y)(u + v) - x u - y v); those at (i, i) and (i, -i), P and
 * Q, give the four values of the Re(i) and Im(i) rows and columns: P + Q, their
 * imaginary parts' sum, their difference and Q's real part less P's. */
static inline __attribute__((always_inline)) void
complex_products(const float *restrict m, size_t p_stride, float (*restrict M)[6][16], const int CB)
{
    int p = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++, p++)
            memcpy(M[REAL_POINTS[a]][REAL_POINTS[b]], m + (size_t)p * p_stride, sizeof(float) * CB);
    for (int pair = 0; pair < 8; pair++, p += 3) {
        const float *t1 = m + (size_t)p * p_stride, *t2 = t1 + p_stride, *t3 = t2 + p_stride;
        float *re = pair < 4 ? M[REAL_POINTS[pair]][RE_I] : M[RE_I][REAL_POINTS[pair - 4]];
        float *im = pair < 4 ? M[REAL_POINTS[pair]][IM_I] : M[IM_I][REAL_POINTS[pair - 4]];
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            re[c] = t1[c] - t2[c];
            im[c] = t3[c] - (t1[c] + t2[c]);
        }
    }
    const float *pm = m + (size_t)p * p_stride, *qm = pm + 3 * p_stride;
#pragma omp simd
    for (int c = 0; c < CB; c++) {
        float p1 = pm[c], p2 = pm[p_stride + c], p3 = pm[2 * p_stride + c];
        float q1 = qm[c], q2 = qm[p_stride + c], q3 = qm[2 * p_stride + c];
        float pr = p1 - p2, pi = p3 - (p1 + p2), qr = q1 - q2, qi = q3 - (q1 + q2);
        M[RE_I][RE_I][c] = pr + qr;
        M[IM_I][RE_I][c] = pi + qi;
        M[RE_I][IM_I][c] = pi - qi;
        M[IM_I][IM_I][c] = qr - pr;
    }
}

/* The output transform of one TILE x TILE tile (ALPHA = TILE + 2; COMPLEX:
 * VD_WINO_4X3_COMPLEX) whose top-left output pixel is (y0, x0), for the output
 * channel block @blk ([h][w][CB]); the products of this tile and block at m + p *
 * p_stride. */
static inline __attribute__((always_inline)) void
output_tile(const float *restrict m, size_t p_stride, const float *restrict bias,
            float *restrict blk, int h, int w, int y0, int x0, gboolean sum, gboolean relu,
            const int CB, const int TILE, const int ALPHA, const gboolean COMPLEX)
{
    float t[MAX_ALPHA - 2][MAX_ALPHA][16]; /* A^T M: [y][x'][c] */
    float M[6][6][16];                     /* COMPLEX: the products' real form */
    if (COMPLEX)
        complex_products(m, p_stride, M, CB);
    for (int j = 0; j < ALPHA; j++) {
        float col[MAX_ALPHA][16], r[MAX_ALPHA - 2][16];
        for (int i = 0; i < ALPHA; i++)
            memcpy(col[i], COMPLEX ? M[i][j] : m + (size_t)(i * ALPHA + j) * p_stride,
                   sizeof(float) * CB);
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            if (COMPLEX)
                WINO_ATC6(col, r, c);
            else if (ALPHA == 6)
                WINO_AT6(col, r, c);
            else
                WINO_AT4(col, r, c);
        }
        for (int i = 0; i < TILE; i++)
            memcpy(t[i][j], r[i], sizeof(float) * CB);
    }
    for (int i = 0; i < TILE; i++) {
        int y = y0 + i;
        if (y >= h)
            break;
        float r[MAX_ALPHA - 2][16];
#pragma omp simd
        for (int c = 0; c < CB; c++) {
            if (COMPLEX)
                WINO_ATC6(t[i], r, c);
            else if (ALPHA == 6)
                WINO_AT6(t[i], r, c);
            else
                WINO_AT4(t[i], r, c);
        }
        for (int j = 0; j < TILE; j++) {
            int x = x0 + j;
            if (x >= w)
                break;
            float *out = blk + ((size_t)y * w + x) * CB;
#pragma omp simd
            for (int c = 0; c < CB; c++) {
                float value = r[j][c] + bias[c];
                if (sum)
                    value += out[c];
                out[c] = relu && value < 0.0f ? 0.0f : value; /* NaN stays NaN */
            }
        }
    }
}

/* Tiles are numbered image by image, row by row: tile @t of images of @tiles_h x
 * @tiles_w tiles is tile (ty, tx) of image *@image. */
static inline void tile_position(int t, int tiles_h, int tiles_w, int *image, int *ty, int *tx)
{
    int per_image = tiles_h * tiles_w;
    *image = t / per_image;
    *ty = t % per_image / tiles_w;
    *tx = t % tiles_w;
}

VD_CPU_HOT static void input_chunk(const vd_wino *wino, const float *src, int h, int w, int tiles_h,
                                   int tiles_w, int first, int n, float *v)
{
    const int C = wino->in_c, cb = wino->cb, T = wino->tile;
    size_t p_stride = (size_t)n * C;
    for (int k = 0; k < n; k++) {
        int image, ty, tx;
        tile_position(first + k, tiles_h, tiles_w, &image, &ty, &tx);
        int y0 = ty * T - 1, x0 = tx * T - 1;
        const float *img = src + (size_t)image * C * h * w;
        for (int b = 0; b < C / cb; b++) {
            const float *blk = img + (size_t)b * h * w * cb;
            float *at = v + (size_t)k * C + (size_t)b * cb;
            if (wino->kind == VD_WINO_4X3_COMPLEX && cb == 16)
                input_tile(blk, h, w, y0, x0, at, p_stride, 16, 6, TRUE);
            else if (wino->kind == VD_WINO_4X3_COMPLEX)
                input_tile(blk, h, w, y0, x0, at, p_stride, 8, 6, TRUE);
            else if (cb == 16 && T == 4)
                input_tile(blk, h, w, y0, x0, at, p_stride, 16, 6, FALSE);
            else if (cb == 16)
                input_tile(blk, h, w, y0, x0, at, p_stride, 16, 4, FALSE);
            else if (T == 4)
                input_tile(blk, h, w, y0, x0, at, p_stride, 8, 6, FALSE);
            else
                input_tile(blk, h, w, y0, x0, at, p_stride, 8, 4, FALSE);
        }
    }
}

VD_CPU_HOT static void output_chunk(const vd_wino *wino, const float *m, float *dst, int h, int w,
                                    int tiles_h, int tiles_w, int first, int n, gboolean sum,
                                    gboolean relu)
{
    const int K = wino->out_c, cb = wino->cb, T = wino->tile;
    size_t p_stride = (size_t)n * K;
    for (int k = 0; k < n; k++) {
        int image, ty, tx;
        tile_position(first + k, tiles_h, tiles_w, &image, &ty, &tx);
        int y0 = ty * T, x0 = tx * T;
        float *img = dst + (size_t)image * K * h * w;
        for (int b = 0; b < K / cb; b++) {
            float *blk = img + (size_t)b * h * w * cb;
            const float *at = m + (size_t)k * K + (size_t)b * cb;
            const float *bias = wino->bias + b * cb;
            if (wino->kind == VD_WINO_4X3_COMPLEX && cb == 16)
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 16, 4, 6, TRUE);
            else if (wino->kind == VD_WINO_4X3_COMPLEX)
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 8, 4, 6, TRUE);
            else if (cb == 16 && T == 4)
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 16, 4, 6, FALSE);
            else if (cb == 16)
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 16, 2, 4, FALSE);
            else if (T == 4)
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 8, 4, 6, FALSE);
            else
                output_tile(at, p_stride, bias, blk, h, w, y0, x0, sum, relu, 8, 2, 4, FALSE);
        }
    }
}

gboolean vd_wino_run(const vd_wino *wino, const float *src, float *dst, int h, int w, gboolean sum,
                     gboolean relu, void *workspace, int n_threads, GError **error)
{
    return vd_wino_run_batch(wino, src, dst, 1, h, w, sum, relu, workspace, n_threads, error);
}

gboolean vd_wino_run_batch(const vd_wino *wino, const float *src, float *dst, int n_images, int h,
                           int w, gboolean sum, gboolean relu, void *workspace, int n_threads,
                           GError **error)
{
    const int C = wino->in_c, K = wino->out_c, T = wino->tile;
    const int n_points = wino->n_mats;
    int tiles_h = (h + T - 1) / T, tiles_w = (w + T - 1) / T;
    /* the chunks run across images: a small map's few tiles (a RoI head's 14x14:
     * 49 of F(2x2, 3x3)) fill the products' rows with the next image's */
    int n_tiles = n_images * tiles_h * tiles_w;
    /* chunks of at most wino->chunk tiles, as many as a multiple of the threads (so
     * that they share the map evenly, small maps included) */
    n_threads = MAX(n_threads, 1);
    int n_chunks = (n_tiles + wino->chunk - 1) / wino->chunk;
    n_chunks = (n_chunks + n_threads - 1) / n_threads * n_threads;
    int chunk = MAX((n_tiles + n_chunks - 1) / n_chunks, 1);
    n_chunks = (n_tiles + chunk - 1) / chunk;
    size_t per_thread = vd_wino_workspace_size(wino, 1);
    dnnl_status_t status = dnnl_success;

#pragma omp parallel num_threads(n_threads)
    {
        float *v = (float *)((char *)workspace + per_thread * (size_t)omp_get_thread_num());
        float *m = v + (size_t)n_points * chunk * C;
#pragma omp for schedule(static, 1)
        for (int ci = 0; ci < n_chunks; ci++) {
            int first = ci * chunk, n = MIN(chunk, n_tiles - first);
            input_chunk(wino, src, h, w, tiles_h, tiles_w, first, n, v);
            for (int p = 0; p < n_points; p++)
                for (int k0 = 0; k0 < C; k0 += K_BLOCK) {
                    dnnl_status_t s = vd_layers_sgemm(
                        'N', 'N', n, K, MIN(K_BLOCK, C - k0), 1.0f, v + (size_t)p * n * C + k0, C,
                        wino->u + ((size_t)p * C + k0) * K, K, k0 > 0 ? 1.0f : 0.0f,
                        m + (size_t)p * n * K, K);
                    if (s != dnnl_success) {
#pragma omp atomic write
                        status = s;
                    }
                }
            output_chunk(wino, m, dst, h, w, tiles_h, tiles_w, first, n, sum, relu);
        }
    }
    if (status != dnnl_success) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "oneDNN failed in Winograd sgemm: %s",
                    vd_layers_status_name(status));
        return FALSE;
    }
    return TRUE;
}
