/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's Winograd F(4x4, 3x3) convolution (engine/cpu/vd_cpu_winograd.c)
 * against a direct convolution computed in double precision: both channel blocks,
 * map sizes that are and are not multiples of the 4x4 tile (edges, maps smaller
 * than a tile), several channel counts, bias, the sum with the destination and
 * ReLU, one and two threads, channel counts up to 512 (the largest of the
 * networks). Bound: 1.5e-5 of max |y|. F(4x4, 3x3) in float32 loses a few times
 * the accuracy of a direct sum (the transforms' coefficients up to 8 and 1/24):
 * measured here up to 8.2e-6 of max |y| at 256 and 512 channels with inputs
 * uniform in [-1, 1], where a sequential float32 direct sum gives 1.9e-6 to 2.6e-6
 * (both printed); the parity suite bounds the FPN features it feeds at 1e-4 of
 * max |y|. */
#include "cpu/vd_cpu_winograd.h"
#include "vd_config.h"
#include "visiondetect/vd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int c, k, h, w, cb;
    gboolean sum, relu;
    int threads;
} wino_case;

/* Offset of (ch, y, x) in a blocked [C / cb][h][w][cb] map. */
static size_t at(int ch, int y, int x, int h, int w, int cb)
{
    return (((size_t)(ch / cb) * h + y) * w + x) * cb + ch % cb;
}

static double run_case(const wino_case *t)
{
    GRand *rand = g_rand_new_with_seed((guint32)(t->c * 131 + t->k * 7 + t->h * 3 + t->w + t->cb));
    size_t n_src = (size_t)t->c * t->h * t->w, n_dst = (size_t)t->k * t->h * t->w;
    float *src = g_new(float, n_src), *dst = g_new(float, n_dst), *prior = g_new(float, n_dst);
    float *weight = g_new(float, (size_t)t->k * t->c * 9), *bias = g_new(float, t->k);
    double *ref = g_new(double, n_dst);
    float *direct_f = g_new(float, n_dst);
    for (size_t i = 0; i < n_src; i++)
        src[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
    for (size_t i = 0; i < (size_t)t->k * t->c * 9; i++)
        weight[i] = (float)(g_rand_double_range(rand, -1.0, 1.0) / sqrt(9.0 * t->c));
    for (int i = 0; i < t->k; i++)
        bias[i] = (float)g_rand_double_range(rand, -0.5, 0.5);
    for (size_t i = 0; i < n_dst; i++)
        prior[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
    memcpy(dst, prior, n_dst * sizeof(float));

    /* the reference: direct, padding 1, in double */
    double max_ref = 0.0;
    for (int o = 0; o < t->k; o++)
        for (int y = 0; y < t->h; y++)
            for (int x = 0; x < t->w; x++) {
                double acc = bias[o];
                float acc_f = bias[o];
                for (int i = 0; i < t->c; i++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int sy = y + ky - 1, sx = x + kx - 1;
                            if (sy < 0 || sy >= t->h || sx < 0 || sx >= t->w)
                                continue;
                            acc += (double)weight[(((size_t)o * t->c + i) * 3 + ky) * 3 + kx] *
                                   src[at(i, sy, sx, t->h, t->w, t->cb)];
                            acc_f += weight[(((size_t)o * t->c + i) * 3 + ky) * 3 + kx] *
                                     src[at(i, sy, sx, t->h, t->w, t->cb)];
                        }
                size_t d = at(o, y, x, t->h, t->w, t->cb);
                if (t->sum) {
                    acc += prior[d];
                    acc_f += prior[d];
                }
                if (t->relu && acc_f < 0.0f)
                    acc_f = 0.0f;
                direct_f[d] = acc_f;
                if (t->relu && acc < 0.0)
                    acc = 0.0;
                ref[d] = acc;
                max_ref = MAX(max_ref, fabs(acc));
            }

    GError *error = NULL;
    vd_wino *wino = vd_wino_new(weight, bias, t->k, t->c, t->cb, &error);
    g_assert_no_error(error);
    void *ws = NULL;
    g_assert_cmpint(posix_memalign(&ws, 64, vd_wino_workspace_size(wino, t->threads)), ==, 0);
    g_assert_true(vd_wino_run(wino, src, dst, t->h, t->w, t->sum, t->relu, ws, t->threads, &error));
    g_assert_no_error(error);

    double max_err = 0.0, max_err_direct = 0.0;
    for (size_t i = 0; i < n_dst; i++) {
        max_err = MAX(max_err, fabs((double)dst[i] - ref[i]));
        max_err_direct = MAX(max_err_direct, fabs((double)direct_f[i] - ref[i]));
    }
    g_test_message("direct float32: %.3g of max |y|", max_err_direct / MAX(max_ref, 1e-30));
    double rel = max_err / MAX(max_ref, 1e-30);
    g_test_message("C %d K %d %dx%d cb %d sum %d relu %d threads %d: max |err| %.3g = %.3g of "
                   "max |y| %.3g",
                   t->c, t->k, t->h, t->w, t->cb, t->sum, t->relu, t->threads, max_err, rel,
                   max_ref);
    free(ws);
    vd_wino_unref(wino);
    g_free(src);
    g_free(dst);
    g_free(prior);
    g_free(weight);
    g_free(bias);
    g_free(ref);
    g_free(direct_f);
    g_rand_free(rand);
    return rel;
}

static void test_against_direct(void)
{
    const wino_case cases[] = {
        {8, 8, 4, 4, 8, FALSE, FALSE, 1}, /* one tile */
        {8, 16, 1, 1, 8, FALSE, TRUE, 1}, /* smaller than a tile */
        {16, 8, 3, 7, 8, TRUE, FALSE, 2},
        {16, 16, 13, 17, 16, TRUE, TRUE, 2}, /* edges on both sides */
        {64, 64, 25, 34, 8, FALSE, TRUE, 2},
        {64, 32, 25, 34, 16, TRUE, TRUE, 1},
        {256, 256, 12, 18, 8, FALSE, FALSE, 2},
        {256, 256, 12, 18, 16, FALSE, FALSE, 2},
        {512, 512, 9, 11, 8, FALSE, TRUE, 2},
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
        g_assert_cmpfloat(run_case(&cases[i]), <=, 1.5e-5);
}

/* Channel counts that are not whole blocks are refused (the backend then runs
 * oneDNN's direct convolution). */
static void test_refuses_partial_blocks(void)
{
    float weight[24 * 8 * 9] = {0}, bias[24] = {0};
    GError *error = NULL;
    g_assert_null(vd_wino_new(weight, bias, 12, 8, 8, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
    g_assert_null(vd_wino_new(weight, bias, 16, 8, 16, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
    g_assert_null(vd_wino_new(weight, bias, 8, 8, 4, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/winograd/against-direct", test_against_direct);
    g_test_add_func("/winograd/partial-blocks", test_refuses_partial_blocks);
    return g_test_run();
}
