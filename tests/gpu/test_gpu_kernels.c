/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every CUDA kernel of kernels/ against the CPU implementation it mirrors
 * (engine/cpu/vd_cpu_ops.h, the CPU backend's inline steps), on random and
 * edge-case inputs. The kernels take their per-element arithmetic from
 * vd_math.h, the CPU's own (exp included: vd_math_expf), with separately
 * rounded device intrinsics, so fp32 results are expected bit for bit; only
 * log2f (the LevelMapper) is the platform's, and random RoIs do not sit on a
 * level boundary. fp16 results are compared against the CPU result on fp16-rounded
 * inputs, rounded to fp16: exact, since the kernels compute in fp32 and round
 * once at the store. The one exception is roi_align's backward, whose atomic
 * additions change the order of its sums: it is held to the summation bound
 * of check_roi_align_backward.
 *
 * --json FILE: the pre-processing comparisons (both resize rules) as JSON, for
 * tests/gpu/device-check.sh's engine.json.
 *
 * Skips (exit 77) without a device: everything here runs a kernel. */
#include "vd_config.h"

#include <json-glib/json-glib.h>

#include "cpu/vd_cpu_ops.h"
#include "gpu_test_util.h"
#include "vd_kernels.h"
#include "vd_math.h"

static cudaStream_t stream;

/* --json: one object per pre-processing comparison, under "preprocess" */
static JsonBuilder *report;
static gboolean report_ok = TRUE;

static int64_t max_ulp(const float *a, const float *b, size_t n, size_t *where)
{
    int64_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = ulp_distance(a[i], b[i]);
        if (d > worst) {
            worst = d;
            if (where)
                *where = i;
        }
    }
    return worst;
}

static void assert_close_ulp(const char *what, const float *got, const float *want, size_t n,
                             int64_t tol)
{
    size_t at = 0;
    int64_t d = max_ulp(got, want, n, &at);
    if (d > tol) {
        g_printerr("%s: %lld ulp at %zu: got %.9g, want %.9g\n", what, (long long)d, at,
                   (double)got[at], (double)want[at]);
        g_assert_cmpint(d, <=, tol);
    }
}

/* ------------------------------------------------------------------------ */
/* Pre-processing                                                            */

static void make_frame(test_rng *r, vd_pixel_format format, int w, int h, int pad,
                       uint8_t **bytes, vd_image *img)
{
    int cw = (w + 1) / 2, ch = (h + 1) / 2;
    int rows[3] = {h, 0, 0}, row_bytes[3] = {0, 0, 0};
    switch (format) {
    case VD_FORMAT_RGB:
    case VD_FORMAT_BGR:
        row_bytes[0] = 3 * w;
        break;
    case VD_FORMAT_NV12:
        row_bytes[0] = w;
        row_bytes[1] = 2 * cw;
        rows[1] = ch;
        break;
    case VD_FORMAT_I420:
        row_bytes[0] = w;
        row_bytes[1] = row_bytes[2] = cw;
        rows[1] = rows[2] = ch;
        break;
    default:
        row_bytes[0] = 4 * w;
        break;
    }
    memset(img, 0, sizeof(*img));
    img->format = format;
    img->width = w;
    img->height = h;
    img->matrix = (vd_color_matrix)rng_int(r, 3);
    img->full_range = rng_int(r, 2);
    for (int p = 0; p < 3; p++) {
        if (row_bytes[p] == 0)
            continue;
        int stride = row_bytes[p] + pad;
        bytes[p] = g_malloc((size_t)stride * rows[p]);
        for (size_t i = 0; i < (size_t)stride * rows[p]; i++)
            bytes[p][i] = (uint8_t)rng_int(r, 256);
        img->planes[p] = bytes[p];
        img->strides[p] = stride;
    }
}

static const char *const format_names[] = {"RGB",  "BGR",  "RGBA", "BGRA",
                                            "RGBX", "BGRX", "NV12", "I420"};

/* Files one comparison in the --json report. */
static void report_preprocess(vd_resize_arithmetic arithmetic, vd_pixel_format format, int w,
                              int h, int rh, int rw, int ph, int pw, vd_dtype dtype,
                              size_t values, size_t differing, int64_t worst_ulp)
{
    if (differing > 0)
        report_ok = FALSE;
    if (report == NULL)
        return;
    json_builder_begin_object(report);
    json_builder_set_member_name(report, "resize_arithmetic");
    json_builder_add_string_value(report,
                                  arithmetic == VD_RESIZE_ARITHMETIC_TORCH2 ? "torch2" : "torch1");
    json_builder_set_member_name(report, "blend");
    json_builder_add_string_value(report, vd_math_resize_blend_of((int)arithmetic, rh, rw) ==
                                                  VD_MATH_RESIZE_BLEND_CHANNELS_LAST
                                              ? "channels-last"
                                              : "generic");
    json_builder_set_member_name(report, "format");
    json_builder_add_string_value(report, format_names[format]);
    json_builder_set_member_name(report, "dtype");
    json_builder_add_string_value(report, dtype == VD_DTYPE_F16 ? "f16" : "f32");
    json_builder_set_member_name(report, "size");
    gchar *size = g_strdup_printf("%dx%d -> %dx%d, padded %dx%d", w, h, rw, rh, pw, ph);
    json_builder_add_string_value(report, size);
    g_free(size);
    json_builder_set_member_name(report, "values");
    json_builder_add_int_value(report, (gint64)values);
    json_builder_set_member_name(report, "differing");
    json_builder_add_int_value(report, (gint64)differing);
    json_builder_set_member_name(report, "max_ulp");
    json_builder_add_int_value(report, worst_ulp);
    json_builder_end_object(report);
}

/* The CUDA kernel against vd_cpu_preprocess under @arithmetic, bit for bit (fp16:
 * the CPU's value rounded once to fp16). */
static void check_preprocess_rule(vd_resize_arithmetic arithmetic, vd_pixel_format format, int w,
                                  int h, int rh, int rw, int ph, int pw, int pad, vd_dtype dtype,
                                  uint64_t seed)
{
    test_rng r = {seed};
    uint8_t *bytes[3] = {NULL, NULL, NULL};
    vd_image img;
    make_frame(&r, format, w, h, pad, bytes, &img);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};

    float *want = g_new(float, (size_t)ph * pw * 3);
    GError *error = NULL;
    g_assert_true(vd_cpu_preprocess(&img, mean, std, arithmetic, rh, rw, ph, pw, want, &error));
    g_assert_no_error(error);

    vd_device_frame frame;
    memset(&frame, 0, sizeof(frame));
    frame.format = (int)format;
    frame.width = w;
    frame.height = h;
    frame.matrix = (int)img.matrix;
    frame.full_range = img.full_range;
    void *dev_planes[3] = {NULL, NULL, NULL};
    for (int p = 0; p < 3; p++) {
        if (bytes[p] == NULL)
            continue;
        int rows = p == 0 ? h : (h + 1) / 2;
        dev_planes[p] = dev_upload(bytes[p], (size_t)img.strides[p] * rows);
        frame.planes[p] = dev_planes[p];
        frame.strides[p] = img.strides[p];
    }
    int channels = dtype == VD_DTYPE_F16 ? 8 : 3;
    size_t n_out = (size_t)ph * pw * channels;
    void *out = dev_alloc(n_out * vd_dtype_size(dtype));
    CU(vd_preprocess(&frame, mean, std, (int)arithmetic, rh, rw, ph, pw, channels, dtype, out,
                     stream));
    float *got = g_new(float, (size_t)ph * pw * 3);
    if (dtype == VD_DTYPE_F32) {
        dev_download(got, out, n_out * sizeof(float));
    } else {
        uint16_t *h16 = g_new(uint16_t, n_out);
        dev_download(h16, out, n_out * 2);
        size_t nonzero_padding = 0;
        for (size_t p = 0; p < (size_t)ph * pw; p++) {
            for (int c = 0; c < 3; c++)
                got[3 * p + c] = half_to_float(h16[p * channels + c]);
            for (int c = 3; c < channels; c++)
                nonzero_padding += h16[p * channels + c] != 0;
        }
        g_assert_cmpuint(nonzero_padding, ==, 0);
        for (size_t i = 0; i < (size_t)ph * pw * 3; i++)
            want[i] = round_half(want[i]);
        g_free(h16);
    }
    /* same vd_math.h arithmetic on both sides: bit for bit */
    size_t n_values = (size_t)ph * pw * 3, differing = 0;
    for (size_t i = 0; i < n_values; i++)
        differing += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    report_preprocess(arithmetic, format, w, h, rh, rw, ph, pw, dtype, n_values, differing,
                      max_ulp(got, want, n_values, NULL));
    assert_close_ulp("preprocess", got, want, n_values, 0);
    g_assert_cmpuint(differing, ==, 0);
    g_free(got);
    g_free(want);
    CU(cudaFree(out));
    for (int p = 0; p < 3; p++) {
        if (dev_planes[p])
            CU(cudaFree(dev_planes[p]));
        g_free(bytes[p]);
    }
}

/* torch 1.13's rule, the models' default */
static void check_preprocess(vd_pixel_format format, int w, int h, int rh, int rw, int ph, int pw,
                             int pad, vd_dtype dtype, uint64_t seed)
{
    check_preprocess_rule(VD_RESIZE_ARITHMETIC_TORCH1, format, w, h, rh, rw, ph, pw, pad, dtype,
                          seed);
}

static void test_preprocess_formats(void)
{
    for (int f = VD_FORMAT_RGB; f <= VD_FORMAT_I420; f++) {
        /* downscale with odd sizes (chroma of the last column/row) and row padding */
        check_preprocess((vd_pixel_format)f, 97, 61, 40, 64, 64, 64, 13, VD_DTYPE_F32, 10 + f);
        /* upscale, fp16 */
        check_preprocess((vd_pixel_format)f, 33, 24, 50, 69, 64, 96, 0, VD_DTYPE_F16, 20 + f);
    }
}

static void test_preprocess_sizes(void)
{
    /* identity size (copy path on the CPU), one axis equal, the 1280x720 case */
    check_preprocess(VD_FORMAT_RGB, 64, 48, 48, 64, 64, 64, 0, VD_DTYPE_F32, 1);
    check_preprocess(VD_FORMAT_BGRX, 64, 48, 48, 80, 64, 96, 4, VD_DTYPE_F32, 2);
    int rh, rw, ph, pw;
    vd_math_transform_size(720, 1280, 800, 1333, 32, 0, &rh, &rw, &ph, &pw);
    check_preprocess(VD_FORMAT_RGB, 1280, 720, rh, rw, ph, pw, 0, VD_DTYPE_F32, 3);
    check_preprocess(VD_FORMAT_NV12, 1280, 720, rh, rw, ph, pw, 0, VD_DTYPE_F16, 4);
}

/* Both resize rules ("transform.resize_arithmetic" torch1 and torch2), the kernel
 * against the CPU, expected identical: the sizes of tests/engine/test_preprocess.c's
 * /preprocess/resize-arithmetic-torch2 (torch's generic kernel up and down, its
 * channels-last kernel for outputs of at most 128 rows plus columns down and up),
 * padded, in RGB fp32; the small upscale also from NV12 in fp16 and the small
 * downscale from I420 with row padding; 1280x720 at 800/1333 in RGB fp32 and NV12
 * fp16. Each comparison goes to the --json report. */
static void test_preprocess_resize_arithmetic(void)
{
    static const struct {
        int h, w, rh, rw;
    } sizes[] = {{23, 31, 67, 97}, {150, 130, 71, 91}, {40, 52, 30, 37}, {21, 17, 45, 60}};
    static const vd_resize_arithmetic rules[] = {VD_RESIZE_ARITHMETIC_TORCH1,
                                                 VD_RESIZE_ARITHMETIC_TORCH2};
    int rh, rw, ph, pw;
    vd_math_transform_size(720, 1280, 800, 1333, 32, 0, &rh, &rw, &ph, &pw);
    for (size_t r = 0; r < G_N_ELEMENTS(rules); r++) {
        uint64_t seed = 100 * (r + 1);
        for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
            int h = sizes[i].h, w = sizes[i].w, sh = sizes[i].rh, sw = sizes[i].rw;
            int sph = (sh + 31) / 32 * 32, spw = (sw + 31) / 32 * 32;
            check_preprocess_rule(rules[r], VD_FORMAT_RGB, w, h, sh, sw, sph, spw, 0,
                                  VD_DTYPE_F32, seed + i);
        }
        check_preprocess_rule(rules[r], VD_FORMAT_NV12, 17, 21, 45, 60, 64, 64, 0, VD_DTYPE_F16,
                              seed + 10);
        check_preprocess_rule(rules[r], VD_FORMAT_I420, 52, 40, 30, 37, 32, 64, 5, VD_DTYPE_F32,
                              seed + 11);
        check_preprocess_rule(rules[r], VD_FORMAT_RGB, 1280, 720, rh, rw, ph, pw, 0, VD_DTYPE_F32,
                              seed + 12);
        check_preprocess_rule(rules[r], VD_FORMAT_NV12, 1280, 720, rh, rw, ph, pw, 0,
                              VD_DTYPE_F16, seed + 13);
    }
}

/* ------------------------------------------------------------------------ */
/* Anchors and layout kernels                                                */

static void test_grid_anchors(void)
{
    const float sizes[5] = {32, 64, 128, 256, 512};
    const float ratios[3] = {0.5f, 1.0f, 2.0f};
    /* 768x1344: levels 192x336 ... and the pool level 12x21 (strides 64, 64) */
    int grids[5][2] = {{192, 336}, {96, 168}, {48, 84}, {24, 42}, {12, 21}};
    for (int l = 0; l < 5; l++) {
        float cell[12];
        vd_cell_anchors(&sizes[l], 1, ratios, 3, cell);
        size_t n = (size_t)grids[l][0] * grids[l][1] * 3 * 4;
        float *want = g_new(float, n), *got = g_new(float, n);
        vd_grid_anchors(cell, 3, 768, 1344, grids[l][0], grids[l][1], want);
        float *dev = dev_alloc(n * sizeof(float));
        CU(vd_grid_anchors_device(cell, 3, 768, 1344, grids[l][0], grids[l][1], dev, stream));
        dev_download(got, dev, n * sizeof(float));
        assert_close_ulp("grid anchors", got, want, n, 0);
        CU(cudaFree(dev));
        g_free(want);
        g_free(got);
    }
    /* 13x19 pool level of 800x1216: stride 61 along y (spec 3.2) */
    float cell[12];
    vd_cell_anchors(&sizes[4], 1, ratios, 3, cell);
    size_t n = 13 * 19 * 12;
    float *want = g_new(float, n), *got = g_new(float, n);
    vd_grid_anchors(cell, 3, 800, 1216, 13, 19, want);
    float *dev = dev_alloc(n * sizeof(float));
    CU(vd_grid_anchors_device(cell, 3, 800, 1216, 13, 19, dev, stream));
    dev_download(got, dev, n * sizeof(float));
    assert_close_ulp("pool anchors", got, want, n, 0);
    CU(cudaFree(dev));
    g_free(want);
    g_free(got);
}

static void upload_as(const float *host, size_t n, vd_dtype dtype, void **dev)
{
    if (dtype == VD_DTYPE_F32) {
        *dev = dev_upload(host, n * sizeof(float));
        return;
    }
    uint16_t *h = g_new(uint16_t, n);
    for (size_t i = 0; i < n; i++)
        h[i] = float_to_half(host[i]);
    *dev = dev_upload(h, n * 2);
    g_free(h);
}

static void download_as(float *host, const void *dev, size_t n, vd_dtype dtype)
{
    if (dtype == VD_DTYPE_F32) {
        dev_download(host, dev, n * sizeof(float));
        return;
    }
    uint16_t *h = g_new(uint16_t, n);
    dev_download(h, dev, n * 2);
    for (size_t i = 0; i < n; i++)
        host[i] = half_to_float(h[i]);
    g_free(h);
}

static void test_layout_kernels(void)
{
    test_rng r = {77};
    for (int d = 0; d < 2; d++) {
        vd_dtype dt = d ? VD_DTYPE_F16 : VD_DTYPE_F32;
        int h = 37, w = 50, c = 16; /* odd sizes: the padding column/row of the pool */
        size_t n = (size_t)h * w * c;
        float *x = g_new(float, n);
        for (size_t i = 0; i < n; i++)
            x[i] = d ? round_half(rng_normal(&r)) : rng_normal(&r);
        void *dx;
        upload_as(x, n, dt, &dx);

        /* max pool 3x3 s2 p1 with -inf padding */
        int oh = (h - 1) / 2 + 1, ow = (w - 1) / 2 + 1;
        float *want = g_new(float, (size_t)oh * ow * c), *got = g_new(float, (size_t)oh * ow * c);
        for (int y = 0; y < oh; y++)
            for (int xo = 0; xo < ow; xo++)
                for (int ch = 0; ch < c; ch++) {
                    float m = -INFINITY;
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int yy = 2 * y - 1 + ky, xx = 2 * xo - 1 + kx;
                            if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                                m = fmaxf(m, x[((size_t)yy * w + xx) * c + ch]);
                        }
                    want[((size_t)y * ow + xo) * c + ch] = m;
                }
        void *dy = dev_alloc((size_t)oh * ow * c * vd_dtype_size(dt));
        CU(vd_max_pool_3x3s2(dx, h, w, c, dy, oh, ow, dt, stream));
        download_as(got, dy, (size_t)oh * ow * c, dt);
        assert_close_ulp("max pool", got, want, (size_t)oh * ow * c, 0);

        /* LastLevelMaxPool subsampling */
        CU(vd_subsample2(dx, h, w, c, dy, dt, stream));
        download_as(got, dy, (size_t)oh * ow * c, dt);
        for (int y = 0; y < oh; y++)
            for (int xo = 0; xo < ow; xo++)
                for (int ch = 0; ch < c; ch++)
                    want[((size_t)y * ow + xo) * c + ch] = x[((size_t)(2 * y) * w + 2 * xo) * c + ch];
        assert_close_ulp("subsample", got, want, (size_t)oh * ow * c, 0);

        /* FPN top-down: dst (h x w) += nearest(src (oh x ow)), one rounding */
        float *src = g_new(float, (size_t)oh * ow * c);
        for (size_t i = 0; i < (size_t)oh * ow * c; i++)
            src[i] = d ? round_half(rng_normal(&r)) : rng_normal(&r);
        void *dsrc;
        upload_as(src, (size_t)oh * ow * c, dt, &dsrc);
        CU(vd_upsample_nearest_add(dsrc, oh, ow, dx, h, w, c, dt, stream));
        float *sum = g_new(float, n), *sum_got = g_new(float, n);
        float sy = (float)oh / (float)h, sx = (float)ow / (float)w;
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++) {
                int iy = MIN((int)floorf((float)y * sy), oh - 1);
                int ix = MIN((int)floorf((float)xx * sx), ow - 1);
                for (int ch = 0; ch < c; ch++) {
                    float v = x[((size_t)y * w + xx) * c + ch] + src[((size_t)iy * ow + ix) * c + ch];
                    sum[((size_t)y * w + xx) * c + ch] = d ? round_half(v) : v;
                }
            }
        download_as(sum_got, dx, n, dt);
        assert_close_ulp("upsample add", sum_got, sum, n, 0);

        /* observer layout: NHWC with a channel stride -> NCHW float32 */
        float *nchw = dev_alloc((size_t)h * w * 3 * sizeof(float));
        CU(vd_nhwc_to_nchw_f32(dx, h, w, 3, c, dt, nchw, stream));
        float *nchw_got = g_new(float, (size_t)h * w * 3);
        dev_download(nchw_got, nchw, (size_t)h * w * 3 * sizeof(float));
        size_t layout_diff = 0;
        for (int ch = 0; ch < 3; ch++)
            for (size_t p = 0; p < (size_t)h * w; p++)
                layout_diff += nchw_got[(size_t)ch * h * w + p] != sum[p * c + ch];
        g_assert_cmpuint(layout_diff, ==, 0);

        CU(cudaFree(nchw));
        CU(cudaFree(dsrc));
        CU(cudaFree(dx));
        CU(cudaFree(dy));
        g_free(x);
        g_free(want);
        g_free(got);
        g_free(src);
        g_free(sum);
        g_free(sum_got);
        g_free(nchw_got);
    }
}

/* ------------------------------------------------------------------------ */
/* Sort / top-k                                                              */

static void test_sort_topk(void)
{
    test_rng r = {5};
    int sizes[] = {1, 7, 1000, 4096, 193536};
    for (size_t t = 0; t < G_N_ELEMENTS(sizes); t++) {
        int n = sizes[t];
        float *keys = g_new(float, n);
        int *values = g_new(int, n);
        for (int i = 0; i < n; i++) {
            /* many exact ties (coarse values) and a few infinities */
            keys[i] = roundf(rng_normal(&r) * 8.0f) / 8.0f;
            if (rng_int(&r, 500) == 0)
                keys[i] = rng_int(&r, 2) ? INFINITY : -INFINITY;
            values[i] = i;
        }
        int k = MIN(n, 1000);
        int *want = g_new(int, n);
        int got_k = vd_topk(keys, n, k, want);
        g_assert_cmpint(got_k, ==, k);

        size_t ws = vd_sort_workspace_size(n);
        g_assert_cmpuint(ws, >, 0);
        void *dws = dev_alloc(ws);
        float *dk = dev_upload(keys, n * sizeof(float)), *dks = dev_alloc(n * sizeof(float));
        int *dv = dev_upload(values, n * sizeof(int)), *dvs = dev_alloc(n * sizeof(int));
        CU(vd_sort_descending(dk, dv, dks, dvs, n, dws, ws, stream));
        int *got = g_new(int, n);
        dev_download(got, dvs, n * sizeof(int));
        /* same indices in the same order: ties by ascending index on both sides */
        int first_diff = -1;
        for (int i = 0; i < k && first_diff < 0; i++)
            if (got[i] != want[i])
                first_diff = i;
        if (first_diff >= 0)
            g_printerr("sort n=%d: first difference at %d: %d vs %d\n", n, first_diff,
                       got[first_diff], want[first_diff]);
        g_assert_cmpint(first_diff, ==, -1);
        CU(cudaFree(dws));
        CU(cudaFree(dk));
        CU(cudaFree(dks));
        CU(cudaFree(dv));
        CU(cudaFree(dvs));
        g_free(keys);
        g_free(values);
        g_free(want);
        g_free(got);
    }
}

/* ------------------------------------------------------------------------ */
/* NMS                                                                       */

/* Clustered random boxes (so that suppression happens), scores with ties,
 * groups, some empty boxes and some non-candidates (-inf). */
static void random_candidates(test_rng *r, int n, int n_groups, float *boxes, float *scores,
                              int *groups)
{
    int n_clusters = MAX(1, n / 8);
    float *centres = g_new(float, 4 * (size_t)n_clusters);
    for (int c = 0; c < n_clusters; c++) {
        centres[4 * c] = rng_uniform(r, 0, 1200);
        centres[4 * c + 1] = rng_uniform(r, 0, 700);
        centres[4 * c + 2] = rng_uniform(r, 8, 300);
        centres[4 * c + 3] = rng_uniform(r, 8, 300);
    }
    for (int i = 0; i < n; i++) {
        float *c = centres + 4 * rng_int(r, n_clusters);
        float x = c[0] + rng_normal(r) * c[2] * 0.15f, y = c[1] + rng_normal(r) * c[3] * 0.15f;
        float w = c[2] * rng_uniform(r, 0.7f, 1.3f), h = c[3] * rng_uniform(r, 0.7f, 1.3f);
        boxes[4 * i] = x;
        boxes[4 * i + 1] = y;
        boxes[4 * i + 2] = x + w;
        boxes[4 * i + 3] = y + h;
        if (rng_int(r, 100) == 0) /* zero area: IoU 0/0 = NaN never suppresses */
            boxes[4 * i + 2] = x;
        scores[i] = roundf(rng_uniform(r, 0, 1) * 256.0f) / 256.0f; /* ties */
        if (rng_int(r, 50) == 0)
            scores[i] = -INFINITY;
        groups[i] = n_groups > 1 ? rng_int(r, n_groups) : 0;
    }
    g_free(centres);
}

static void check_nms(int n, int n_groups, int max_candidates, int max_keep, float threshold,
                      vd_dtype dtype, uint64_t seed)
{
    test_rng r = {seed};
    float *boxes = g_new(float, 4 * (size_t)MAX(n, 1));
    float *scores = g_new(float, MAX(n, 1));
    int *groups = g_new(int, MAX(n, 1));
    random_candidates(&r, n, n_groups, boxes, scores, groups);
    if (dtype == VD_DTYPE_F16) {
        for (int i = 0; i < 4 * n; i++)
            boxes[i] = round_half(boxes[i]);
        for (int i = 0; i < n; i++)
            scores[i] = round_half(scores[i]);
    }

    /* the CPU reference on the candidates (finite scores), in input order; the
     * best max_candidates of them */
    int *cand = g_new(int, MAX(n, 1)), m = 0;
    for (int i = 0; i < n; i++)
        if (scores[i] > -INFINITY)
            cand[m++] = i;
    int *order = g_new(int, MAX(m, 1));
    float *cs = g_new(float, MAX(m, 1));
    for (int j = 0; j < m; j++)
        cs[j] = scores[cand[j]];
    int mc = vd_topk(cs, m, MIN(m, max_candidates), order);
    float *sb = g_new(float, 4 * (size_t)MAX(mc, 1));
    float *ss = g_new(float, MAX(mc, 1));
    int *sg = g_new(int, MAX(mc, 1)), *keep = g_new(int, MAX(mc, 1));
    /* keep the chosen candidates in input order: the CPU sort decides the rest */
    int *chosen = g_new0(int, MAX(m, 1));
    for (int j = 0; j < mc; j++)
        chosen[order[j]] = 1;
    int q = 0;
    int *back = g_new(int, MAX(mc, 1));
    for (int j = 0; j < m; j++) {
        if (!chosen[j])
            continue;
        memcpy(sb + 4 * q, boxes + 4 * cand[j], 4 * sizeof(float));
        ss[q] = scores[cand[j]];
        sg[q] = groups[cand[j]];
        back[q] = cand[j];
        q++;
    }
    int n_want = n_groups > 1 ? vd_batched_nms(sb, ss, sg, q, threshold, keep)
                              : vd_nms(sb, ss, q, threshold, keep);
    n_want = MIN(n_want, max_keep);

    vd_nms_shape shape = {.capacity = n, .max_candidates = max_candidates, .max_keep = max_keep};
    size_t ws = vd_nms_workspace_size(&shape);
    void *dws = dev_alloc(MAX(ws, 1));
    void *db, *dsc;
    upload_as(boxes, 4 * (size_t)n, dtype, &db);
    upload_as(scores, n, dtype, &dsc);
    int *dg = dev_upload(groups, MAX(n, 1) * sizeof(int));
    int *dkeep = dev_alloc(MAX(max_keep, 1) * sizeof(int)), *dn = dev_alloc(sizeof(int));
    CU(vd_batched_nms_device(db, dsc, dtype, n_groups > 1 ? dg : NULL, &shape, threshold, dkeep,
                             dn, dws, ws, stream));
    int n_got = -1;
    dev_download(&n_got, dn, sizeof(int));
    int *got = g_new(int, MAX(max_keep, 1));
    dev_download(got, dkeep, MAX(max_keep, 1) * sizeof(int));
    if (n_got != n_want)
        g_printerr("nms n=%d groups=%d: kept %d, CPU %d\n", n, n_groups, n_got, n_want);
    g_assert_cmpint(n_got, ==, n_want);
    int first_diff = -1;
    for (int j = 0; j < MIN(n_got, n_want) && first_diff < 0; j++)
        if (got[j] != back[keep[j]])
            first_diff = j;
    if (first_diff >= 0)
        g_printerr("nms n=%d groups=%d: first difference at %d: %d vs %d\n", n, n_groups,
                   first_diff, got[first_diff], back[keep[first_diff]]);
    g_assert_cmpint(first_diff, ==, -1);

    CU(cudaFree(dws));
    CU(cudaFree(db));
    CU(cudaFree(dsc));
    CU(cudaFree(dg));
    CU(cudaFree(dkeep));
    CU(cudaFree(dn));
    g_free(boxes);
    g_free(scores);
    g_free(groups);
    g_free(cand);
    g_free(order);
    g_free(cs);
    g_free(sb);
    g_free(ss);
    g_free(sg);
    g_free(keep);
    g_free(chosen);
    g_free(back);
    g_free(got);
}

static void test_nms_random(void)
{
    check_nms(1, 1, 1, 1, 0.5f, VD_DTYPE_F32, 1);
    check_nms(63, 1, 63, 63, 0.5f, VD_DTYPE_F32, 2);
    check_nms(64, 1, 64, 64, 0.5f, VD_DTYPE_F32, 3);
    check_nms(65, 3, 65, 65, 0.5f, VD_DTYPE_F32, 4);
    check_nms(1000, 1, 1000, 1000, 0.7f, VD_DTYPE_F32, 5);
    /* the RPN's shape: 5 levels, 0.7, post-NMS top 1000 */
    check_nms(4741, 5, 4741, 1000, 0.7f, VD_DTYPE_F32, 6);
    check_nms(5000, 5, 5000, 5000, 0.7f, VD_DTYPE_F32, 7);
    /* the box head's: 90 classes, 0.5, top 100, candidates capped */
    check_nms(9000, 90, 4096, 100, 0.5f, VD_DTYPE_F32, 8);
    /* fp16 inputs, fp32 IoU */
    check_nms(3000, 4, 3000, 3000, 0.6f, VD_DTYPE_F16, 9);
}

static void test_nms_edges(void)
{
    /* nothing at all */
    check_nms(0, 1, 0, 10, 0.5f, VD_DTYPE_F32, 11);
    /* identical boxes, equal scores: the lowest index survives (spec 7.1) */
    float boxes[4 * 70], scores[70];
    int groups[70];
    for (int i = 0; i < 70; i++) {
        boxes[4 * i] = 10;
        boxes[4 * i + 1] = 10;
        boxes[4 * i + 2] = 20;
        boxes[4 * i + 3] = 20;
        scores[i] = 0.5f;
        groups[i] = i % 2;
    }
    vd_nms_shape shape = {.capacity = 70, .max_candidates = 70, .max_keep = 70};
    size_t ws = vd_nms_workspace_size(&shape);
    void *dws = dev_alloc(ws);
    float *db = dev_upload(boxes, sizeof(boxes)), *ds = dev_upload(scores, sizeof(scores));
    int *dg = dev_upload(groups, sizeof(groups));
    int *dk = dev_alloc(70 * sizeof(int)), *dn = dev_alloc(sizeof(int));
    CU(vd_batched_nms_device(db, ds, VD_DTYPE_F32, dg, &shape, 0.5f, dk, dn, dws, ws, stream));
    int n = 0, keep[70];
    dev_download(&n, dn, sizeof(int));
    dev_download(keep, dk, sizeof(keep));
    g_assert_cmpint(n, ==, 2); /* one per group */
    g_assert_cmpint(keep[0], ==, 0);
    g_assert_cmpint(keep[1], ==, 1);
    /* IoU exactly at the threshold is kept (strict '>') */
    float two[8] = {0, 0, 4, 1, 0, 0, 2, 1};
    float two_scores[2] = {0.9f, 0.8f};
    CU(cudaMemcpy(db, two, sizeof(two), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(ds, two_scores, sizeof(two_scores), cudaMemcpyHostToDevice));
    shape.capacity = shape.max_candidates = 2;
    CU(vd_batched_nms_device(db, ds, VD_DTYPE_F32, NULL, &shape, 0.5f, dk, dn, dws, ws, stream));
    dev_download(&n, dn, sizeof(int));
    g_assert_cmpint(n, ==, 2);
    CU(cudaFree(dws));
    CU(cudaFree(db));
    CU(cudaFree(ds));
    CU(cudaFree(dg));
    CU(cudaFree(dk));
    CU(cudaFree(dn));
}

/* ------------------------------------------------------------------------ */
/* RoIAlign                                                                  */

static void check_roi_align(vd_dtype dtype, vd_dtype out_dtype, uint64_t seed)
{
    test_rng r = {seed};
    /* FPN levels of a 256x384 padded input (P2..P5), 32 channels */
    int n_levels = 4, C = 32, P = 7, n_rois = 300;
    int hs[4] = {64, 32, 16, 8}, ws_[4] = {96, 48, 24, 12};
    float scales[4] = {0.25f, 0.125f, 0.0625f, 0.03125f};
    float *feats[4];
    void *dfeats[4];
    for (int l = 0; l < n_levels; l++) {
        size_t n = (size_t)hs[l] * ws_[l] * C;
        feats[l] = g_new(float, n);
        for (size_t i = 0; i < n; i++)
            feats[l][i] = dtype == VD_DTYPE_F16 ? round_half(rng_normal(&r)) : rng_normal(&r);
        upload_as(feats[l], n, dtype, &dfeats[l]);
    }
    float *rois = g_new(float, 4 * n_rois);
    for (int i = 0; i < n_rois; i++) {
        float x = rng_uniform(&r, -20, 380), y = rng_uniform(&r, -20, 250);
        float w = expf(rng_uniform(&r, -1, 6)), h = expf(rng_uniform(&r, -1, 6));
        rois[4 * i] = x;
        rois[4 * i + 1] = y;
        rois[4 * i + 2] = x + w;
        rois[4 * i + 3] = y + h;
        if (i % 50 == 0) /* degenerate: zero area goes to the first level */
            rois[4 * i + 2] = x;
    }
    int n_valid = n_rois - 17; /* rows beyond the device count are zeroed */

    size_t row = (size_t)P * P * C;
    float *want = g_new0(float, (size_t)n_rois * row);
    int *level = g_new(int, n_rois), *index = g_new(int, n_rois);
    float *sel = g_new(float, 4 * n_rois);
    for (int i = 0; i < n_valid; i++)
        level[i] = vd_roi_level(rois + 4 * i, 2, 5);
    for (int l = 0; l < n_levels; l++) {
        int m = 0;
        for (int i = 0; i < n_valid; i++)
            if (level[i] == l) {
                memcpy(sel + 4 * m, rois + 4 * i, 4 * sizeof(float));
                index[m++] = i;
            }
        if (m)
            vd_roi_align_nhwc(feats[l], hs[l], ws_[l], C, sel, index, m, scales[l], P, 2, want,
                              (int64_t)row);
    }
    if (out_dtype == VD_DTYPE_F16)
        for (size_t i = 0; i < (size_t)n_rois * row; i++)
            want[i] = round_half(want[i]);

    vd_roi_levels lv;
    memset(&lv, 0, sizeof(lv));
    lv.n_levels = n_levels;
    for (int l = 0; l < n_levels; l++) {
        lv.features[l] = dfeats[l];
        lv.height[l] = hs[l];
        lv.width[l] = ws_[l];
        lv.scale[l] = scales[l];
    }
    lv.k_min = 2;
    lv.k_max = 5;
    lv.channels = C;
    float *drois = dev_upload(rois, 4 * n_rois * sizeof(float));
    int *dn = dev_upload(&n_valid, sizeof(int));
    void *dout = dev_alloc((size_t)n_rois * row * vd_dtype_size(out_dtype));
    CU(vd_multiscale_roi_align(&lv, dtype, drois, dn, n_rois, P, 2, dout, out_dtype, stream));
    float *got = g_new(float, (size_t)n_rois * row);
    download_as(got, dout, (size_t)n_rois * row, out_dtype);
    /* fp32 accumulation of the same products in the same order: exact */
    assert_close_ulp("roi_align", got, want, (size_t)n_rois * row, 0);

    for (int l = 0; l < n_levels; l++) {
        CU(cudaFree(dfeats[l]));
        g_free(feats[l]);
    }
    CU(cudaFree(drois));
    CU(cudaFree(dn));
    CU(cudaFree(dout));
    g_free(rois);
    g_free(want);
    g_free(level);
    g_free(index);
    g_free(sel);
    g_free(got);
}

static void test_roi_align(void)
{
    check_roi_align(VD_DTYPE_F32, VD_DTYPE_F32, 31);
    check_roi_align(VD_DTYPE_F16, VD_DTYPE_F32, 32);
    check_roi_align(VD_DTYPE_F16, VD_DTYPE_F16, 33);
}

/* ------------------------------------------------------------------------ */
/* roi_align backward                                                        */

/* Random RoIs over an @h x @w map at @scale ([n][5], n = n_random + 16) and the
 * edge cases: the whole map, beyond every edge, the corner, partly and fully
 * outside, a point, zero width, zero height, negative sizes, three times the
 * map, smaller than a pixel; batch indices random, some fractional (truncated). */
#define ROI_GRAD_SPECIAL 16
static float *roi_grad_rois(test_rng *r, int n_random, int n_images, int h, int w, float scale)
{
    float iw = (float)w / scale, ih = (float)h / scale, px = 1.0f / scale;
    const float special[ROI_GRAD_SPECIAL][4] = {
        {0, 0, iw, ih},
        {-px, -px, iw + px, ih + px},
        {iw - 0.5f * px, ih - 0.5f * px, iw, ih},
        {-0.3f * iw, -0.2f * ih, 0.4f * iw, 0.5f * ih},
        {0.7f * iw, 0.6f * ih, 1.4f * iw, 1.3f * ih},
        {1.2f * iw, 0.1f * ih, 1.5f * iw, 0.5f * ih},
        {-0.9f * iw, -0.8f * ih, -0.3f * iw, -0.2f * ih},
        {0.2f * iw, ih + 2 * px, 0.6f * iw, ih + 5 * px},
        {-3 * px, -2.5f * px, -1.2f * px, -1.1f * px},
        {0.3f * iw, 0.4f * ih, 0.3f * iw, 0.4f * ih},
        {0.5f * iw, 0.1f * ih, 0.5f * iw, 0.8f * ih},
        {0.1f * iw, 0.5f * ih, 0.9f * iw, 0.5f * ih},
        {0.8f * iw, 0.7f * ih, 0.2f * iw, 0.3f * ih},
        {0.6f * iw, 0.2f * ih, 0.5f * iw, 0.9f * ih},
        {-iw, -ih, 2 * iw, 2 * ih},
        {0.25f * px, 0.5f * px, 0.75f * px, 0.9f * px},
    };
    int n = n_random + ROI_GRAD_SPECIAL;
    float *rois = g_new(float, 5 * (size_t)n);
    for (int i = 0; i < n; i++) {
        float *roi = rois + 5 * (size_t)i;
        roi[0] = (float)rng_int(r, n_images) + (i % 7 == 0 ? 0.5f : 0.0f);
        if (i < n_random) {
            float x = rng_uniform(r, -0.2f * iw, 1.1f * iw),
                  y = rng_uniform(r, -0.2f * ih, 1.1f * ih);
            roi[1] = x;
            roi[2] = y;
            roi[3] = x + rng_uniform(r, 0, 0.7f * iw);
            roi[4] = y + rng_uniform(r, 0, 0.7f * ih);
        } else {
            memcpy(roi + 1, special[i - n_random], 4 * sizeof(float));
        }
    }
    return rois;
}

/* The sampling ratios every roi_align case runs with (0 and -1: adaptive). */
static const int roi_align_samplings[4] = {0, 1, 2, -1};

/* The maps and bins of the device forward and backward checks, each run in
 * fp32 and fp16 (roi_device_run). */
typedef struct {
    int n_images, channels, h, w, pooled_h, pooled_w;
    float scale;
    int n_random; /* random RoIs beside the ROI_GRAD_SPECIAL ones */
} roi_device_case;

static const roi_device_case roi_device_cases[2] = {
    /* two images, channels not a multiple of 8, non-square bins */
    {2, 24, 19, 27, 7, 5, 0.5f, 40},
    /* a stride-16 detection level, three images */
    {3, 64, 50, 76, 7, 7, 1.0f / 16, 120},
};

/* @check on every case in fp32, then in fp16, the case k of dtype d (0: fp32,
 * 1: fp16) seeded @seed + 2 k + d. */
static void roi_device_run(void (*check)(vd_dtype dtype, const roi_device_case *c, uint64_t seed),
                           uint64_t seed)
{
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++)
            check(d ? VD_DTYPE_F16 : VD_DTYPE_F32, &roi_device_cases[k], seed + 2 * k + d);
}

/* The RoIs of a device check (roi_grad_rois, @n_rois of them), the one at row
 * @bad = @n_rois / 2 given the batch index n_images, which the CPU op refuses
 * and the kernels must ignore. */
static float *roi_device_rois(test_rng *r, const roi_device_case *c, int *n_rois, int *bad)
{
    float *rois = roi_grad_rois(r, c->n_random, c->n_images, c->h, c->w, c->scale);
    *n_rois = c->n_random + ROI_GRAD_SPECIAL;
    *bad = *n_rois / 2;
    rois[5 * *bad] = (float)c->n_images;
    return rois;
}

/* A random value of a device check's input: standard normal, rounded to fp16
 * for an fp16 run (so that both sides start from the same values). */
static float roi_device_value(test_rng *r, vd_dtype dtype)
{
    return dtype == VD_DTYPE_F16 ? round_half(rng_normal(r)) : rng_normal(r);
}

/* Case @k of the ROI_ALIGN_CASES of the forward and backward checks (aligned
 * k / 4, sampling ratio roi_align_samplings[k % 4]): the CPU op's parameters
 * and the device op's shape for the same maps, bins, scale, sampling and
 * alignment. */
#define ROI_ALIGN_CASES 8
static void roi_align_case(const roi_device_case *c, int k, vd_roi_align_params *p,
                           vd_roi_align_shape *shape)
{
    *p = vd_roi_align_default_params();
    p->n_images = c->n_images;
    p->height = c->h;
    p->width = c->w;
    p->channels = c->channels;
    p->pooled_h = c->pooled_h;
    p->pooled_w = c->pooled_w;
    p->spatial_scale = c->scale;
    p->sampling_ratio = roi_align_samplings[k % 4];
    p->aligned = k / 4;
    *shape = (vd_roi_align_shape){p->n_images,      p->height,         p->width,
                                  p->channels,      p->pooled_h,       p->pooled_w,
                                  p->spatial_scale, p->sampling_ratio, p->aligned};
}

/* How many (sample, neighbour) shares the backward adds to each pixel of each
 * image ([n_images][h][w], the same for every channel): the m of the
 * summation bound. The loops of vd_roi_align_backward, with vd_math.h. */
static int *roi_grad_counts(const vd_roi_align_params *p, const float *rois, int n_rois)
{
    int *count = g_new0(int, (size_t)p->n_images * p->height * p->width);
    for (int k = 0; k < n_rois; k++) {
        const float *roi = rois + 5 * (size_t)k;
        int *img = count + (size_t)(int)roi[0] * p->height * p->width;
        vd_math_roi_geometry g = vd_math_roi_geometry_aligned(
            roi + 1, p->spatial_scale, p->pooled_h, p->pooled_w, p->sampling_ratio, p->aligned);
        for (int ph = 0; ph < p->pooled_h; ph++)
            for (int pw = 0; pw < p->pooled_w; pw++)
                for (int iy = 0; iy < g.grid_h; iy++) {
                    float y = vd_math_roi_sample_coord(g.start_y, ph, g.bin_h, iy, g.grid_h);
                    for (int ix = 0; ix < g.grid_w; ix++) {
                        float x = vd_math_roi_sample_coord(g.start_x, pw, g.bin_w, ix, g.grid_w);
                        if (!vd_math_roi_sample_inside(y, x, p->height, p->width))
                            continue;
                        vd_math_roi_sample smp = vd_math_roi_bilinear(y, x, p->height, p->width);
                        for (int q = 0; q < 4; q++)
                            img[smp.pos[q]]++;
                    }
                }
    }
    return count;
}

/* The number of elements of @got outside the bound described below (a message
 * names the first). @count from roi_grad_counts, @abs_sum the CPU backward of
 * |grad_output|. */
static size_t roi_grad_compare(const char *what, vd_dtype dtype, const float *got,
                               const float *want, const float *abs_sum, const int *count, size_t n,
                               int channels)
{
    size_t bad_at = 0, n_bad = 0, n_multi = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        int m = count[i / channels];
        double gamma = m > 1 ? (m - 1) * 0x1p-24 / (1.0 - (m - 1) * 0x1p-24) : 0.0;
        double tol = 2.0 * gamma / (1.0 - gamma) * abs_sum[i];
        gboolean ok;
        if (dtype == VD_DTYPE_F32) {
            ok = fabs((double)got[i] - want[i]) <= tol;
        } else {
            float lo = round_half(nextafterf((float)(want[i] - tol), -INFINITY));
            float hi = round_half(nextafterf((float)(want[i] + tol), INFINITY));
            if (m <= 1)
                lo = hi = round_half(want[i]);
            ok = got[i] >= lo && got[i] <= hi;
        }
        if (m > 1)
            n_multi++;
        double d = fabs((double)got[i] - want[i]);
        if (d > worst)
            worst = d;
        if (!ok && n_bad++ == 0)
            bad_at = i;
    }
    if (n_bad > 0)
        g_printerr("%s: %zu of %zu outside the bound, first at %zu: got %.9g, want %.9g (%d "
                   "shares, sum|shares| %.9g)\n",
                   what, n_bad, n, bad_at, (double)got[bad_at], (double)want[bad_at],
                   count[bad_at / channels], (double)abs_sum[bad_at]);
    else if (g_test_verbose())
        g_print("%s: %zu elements, %zu with several shares, max |diff| %.3g\n", what, n, n_multi,
                worst);
    return n_bad;
}

/* The CUDA backward (fp32 and fp16) against vd_roi_align_backward on the same
 * inputs. Both add the same float32 shares (vd_math.h, separately rounded on
 * the device), the CPU in torchvision's order, the GPU in atomicAdd's; two
 * recursive sums of the same m terms each lie within gamma(m-1) * sum|terms|
 * of the exact sum (gamma(k) = k u / (1 - k u), u = 2^-24), so they differ by
 * at most 2 gamma(m-1) sum|terms|, where sum|terms| is the CPU backward of
 * |grad_output| (the shares of |g| are the |shares| of g: w, count >= 0),
 * itself computed to within gamma(m-1): tol = 2 gamma / (1 - gamma) * that. A
 * pixel of one share (m = 1) must match exactly, an untouched one be 0.
 * fp16: grad_output rounded to fp16 for both; the GPU rounds its fp32 sum s
 * once, so with s in [want - tol, want + tol] and rounding monotonic, the
 * result lies in [fp16(want - tol), fp16(want + tol)]: the fp16 rounding of
 * the output is the whole allowance. The RoI at row @n_rois / 2 gets the batch
 * index n_images, which the CPU op refuses and the kernel must ignore: the
 * CPU reference runs without it. */
static void check_roi_align_backward(vd_dtype dtype, const roi_device_case *c, uint64_t seed)
{
    test_rng r = {seed};
    int n_rois, bad;
    float *rois = roi_device_rois(&r, c, &n_rois, &bad);
    int channels = c->channels;
    size_t bin_row = (size_t)c->pooled_h * c->pooled_w * channels;
    size_t n_go = (size_t)n_rois * bin_row, n_gi = (size_t)c->n_images * c->h * c->w * channels;
    float *go = g_new(float, n_go), *abs_go = g_new(float, n_go);
    for (size_t i = 0; i < n_go; i++) {
        go[i] = roi_device_value(&r, dtype);
        abs_go[i] = fabsf(go[i]);
    }
    /* the CPU reference without the bad RoI */
    float *ref_rois = g_new(float, 5 * (size_t)n_rois);
    float *ref_go = g_new(float, n_go), *ref_abs = g_new(float, n_go);
    memcpy(ref_rois, rois, 5 * sizeof(float) * bad);
    memcpy(ref_rois + 5 * bad, rois + 5 * (bad + 1), 5 * sizeof(float) * (n_rois - bad - 1));
    memcpy(ref_go, go, sizeof(float) * bin_row * bad);
    memcpy(ref_go + bin_row * bad, go + bin_row * (bad + 1),
           sizeof(float) * bin_row * (n_rois - bad - 1));
    memcpy(ref_abs, abs_go, sizeof(float) * bin_row * bad);
    memcpy(ref_abs + bin_row * bad, abs_go + bin_row * (bad + 1),
           sizeof(float) * bin_row * (n_rois - bad - 1));

    void *dgo;
    upload_as(go, n_go, dtype, &dgo);
    float *drois = dev_upload(rois, 5 * sizeof(float) * n_rois);
    void *dgi = dev_alloc(n_gi * vd_dtype_size(dtype)); /* poisoned: all must be written */
    float *got = g_new(float, n_gi), *want = g_new(float, n_gi), *abs_sum = g_new(float, n_gi);

    for (int k = 0; k < ROI_ALIGN_CASES; k++) {
        vd_roi_align_params p;
        vd_roi_align_shape shape;
        roi_align_case(c, k, &p, &shape);
        GError *error = NULL;
        g_assert_true(vd_roi_align_backward(&p, ref_go, ref_rois, n_rois - 1, want, &error));
        g_assert_true(vd_roi_align_backward(&p, ref_abs, ref_rois, n_rois - 1, abs_sum, &error));
        g_assert_no_error(error);
        int *count = roi_grad_counts(&p, ref_rois, n_rois - 1);

        size_t ws_size = vd_roi_align_backward_workspace_size(&shape, dtype);
        g_assert_cmpuint(ws_size, ==, dtype == VD_DTYPE_F16 ? n_gi * sizeof(float) : 0);
        void *ws = ws_size ? dev_alloc(ws_size) : NULL;
        CU(vd_roi_align_backward_device(&shape, dtype, dgo, drois, n_rois, dgi, ws, ws_size,
                                        stream));
        download_as(got, dgi, n_gi, dtype);

        char *what =
            g_strdup_printf("roi_align backward %s aligned=%d sampling_ratio=%d",
                            dtype == VD_DTYPE_F16 ? "fp16" : "fp32", p.aligned, p.sampling_ratio);
        size_t n_bad = roi_grad_compare(what, dtype, got, want, abs_sum, count, n_gi, channels);
        g_free(what);
        g_assert_cmpuint(n_bad, ==, 0);
        g_free(count);
        if (ws)
            CU(cudaFree(ws));
    }
    CU(cudaFree(dgo));
    CU(cudaFree(drois));
    CU(cudaFree(dgi));
    g_free(rois);
    g_free(go);
    g_free(abs_go);
    g_free(ref_rois);
    g_free(ref_go);
    g_free(ref_abs);
    g_free(got);
    g_free(want);
    g_free(abs_sum);
}

static void test_roi_align_backward(void)
{
    roi_device_run(check_roi_align_backward, 41);
}

/* The CUDA forward against vd_roi_align_forward on the same RoIs (those of the
 * backward test, the one with batch index n_images included: its rows must be
 * zeros). Same fp32 operations in the same order: fp32 exact; fp16 features
 * rounded to fp16 for both, the GPU's fp32 result rounded once at the store:
 * exactly the CPU's result rounded to fp16. */
static void check_roi_align_forward_device(vd_dtype dtype, const roi_device_case *c, uint64_t seed)
{
    test_rng r = {seed};
    int n_rois, bad;
    float *rois = roi_device_rois(&r, c, &n_rois, &bad);
    size_t bin_row = (size_t)c->pooled_h * c->pooled_w * c->channels;
    size_t n_out = (size_t)n_rois * bin_row,
           n_map = (size_t)c->n_images * c->h * c->w * c->channels;
    float *map = g_new(float, n_map);
    for (size_t i = 0; i < n_map; i++)
        map[i] = roi_device_value(&r, dtype);
    float *ref_rois = g_new(float, 5 * (size_t)n_rois);
    memcpy(ref_rois, rois, 5 * sizeof(float) * n_rois);
    ref_rois[5 * bad] = 0; /* computed, then replaced by the expected zeros */
    void *dmap;
    upload_as(map, n_map, dtype, &dmap);
    float *drois = dev_upload(rois, 5 * sizeof(float) * n_rois);
    void *dout = dev_alloc(n_out * vd_dtype_size(dtype));
    float *want = g_new(float, n_out), *got = g_new(float, n_out);
    for (int k = 0; k < ROI_ALIGN_CASES; k++) {
        vd_roi_align_params p;
        vd_roi_align_shape shape;
        roi_align_case(c, k, &p, &shape);
        GError *error = NULL;
        g_assert_true(vd_roi_align_forward(&p, map, ref_rois, n_rois, want, &error));
        g_assert_no_error(error);
        memset(want + bin_row * bad, 0, bin_row * sizeof(float));
        if (dtype == VD_DTYPE_F16)
            for (size_t i = 0; i < n_out; i++)
                want[i] = round_half(want[i]);
        CU(vd_roi_align_forward_device(&shape, dtype, dmap, drois, n_rois, dout, stream));
        download_as(got, dout, n_out, dtype);
        assert_close_ulp(dtype == VD_DTYPE_F16 ? "roi_align forward fp16"
                                               : "roi_align forward fp32",
                         got, want, n_out, 0);
    }
    CU(cudaFree(dmap));
    CU(cudaFree(drois));
    CU(cudaFree(dout));
    g_free(rois);
    g_free(ref_rois);
    g_free(map);
    g_free(want);
    g_free(got);
}

static void test_roi_align_forward_device(void)
{
    roi_device_run(check_roi_align_forward_device, 51);
}

/* No RoI: the gradient is all zeros (the poisoned buffer overwritten); bad
 * arguments are refused before anything is enqueued, forward and backward. */
static void test_roi_align_backward_edges(void)
{
    vd_roi_align_shape shape = {2, 5, 6, 8, 2, 2, 1.0f, 0, 0};
    size_t n = 2 * 5 * 6 * 8;
    float *got = g_new(float, n);
    for (int d = 0; d < 2; d++) {
        vd_dtype dt = d ? VD_DTYPE_F16 : VD_DTYPE_F32;
        void *dgi = dev_alloc(n * vd_dtype_size(dt));
        size_t ws_size = vd_roi_align_backward_workspace_size(&shape, dt);
        void *ws = ws_size ? dev_alloc(ws_size) : NULL;
        CU(vd_roi_align_backward_device(&shape, dt, NULL, NULL, 0, dgi, ws, ws_size, stream));
        download_as(got, dgi, n, dt);
        for (size_t i = 0; i < n; i++)
            g_assert_cmpfloat(got[i], ==, 0.0f);
        if (dt == VD_DTYPE_F16)
            g_assert_cmpint(vd_roi_align_backward_device(&shape, dt, NULL, NULL, 0, dgi, ws,
                                                         ws_size - 4, stream),
                            ==, cudaErrorInvalidValue);
        vd_roi_align_shape no_channels = shape;
        no_channels.channels = 0;
        g_assert_cmpint(
            vd_roi_align_backward_device(&no_channels, dt, NULL, NULL, 0, dgi, ws, ws_size, stream),
            ==, cudaErrorInvalidValue);
        g_assert_cmpint(vd_roi_align_forward_device(&no_channels, dt, dgi, NULL, 0, NULL, stream),
                        ==, cudaErrorInvalidValue);
        CU(cudaFree(dgi));
        if (ws)
            CU(cudaFree(ws));
    }
    g_free(got);
}

/* ------------------------------------------------------------------------ */
/* RPN and box head post-processing                                          */

/* A NaN with the sign bit set: what x86 makes of 0 * inf, and what a sort
 * by bits ranks last unless the kernel makes every NaN the same. */
static float negative_nan(void)
{
    uint32_t bits = 0xffc00000u;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The RPN head as run_rpn reads it, twice per dtype: plain, and poisoned with
 * NaN of both signs and infinities in logits and deltas, where the order of
 * the top-k (NaN first, in anchor order, then dropped by the score filter) and
 * the non-finite count must still be the CPU's. */
static void test_rpn(void)
{
    for (int d = 0; d < 4; d++) {
        vd_dtype dt = d % 2 ? VD_DTYPE_F16 : VD_DTYPE_F32;
        gboolean poison = d >= 2;
        test_rng r = {40 + d};
        int A = 3, hs = 16, n_levels = 3;
        int grid[3][2] = {{40, 56}, {20, 28}, {10, 14}};
        float rh = 150.0f, rw = 220.0f;
        vd_rpn_levels lv;
        memset(&lv, 0, sizeof(lv));
        lv.n_levels = n_levels;
        lv.anchors_per_location = A;
        lv.head_stride = hs;
        float *heads[3];
        int total = 0, cands = 0;
        for (int l = 0; l < n_levels; l++) {
            int n_loc = grid[l][0] * grid[l][1];
            heads[l] = g_new(float, (size_t)n_loc * hs);
            for (int i = 0; i < n_loc * hs; i++) {
                float v = rng_normal(&r) * ((i % hs) < A ? 2.0f : 0.3f);
                heads[l][i] = dt == VD_DTYPE_F16 ? round_half(v) : v;
            }
            if (poison) {
                /* logits (channels < A) and deltas (A..5A), and a padding
                 * channel (>= 5A), which no count may see */
                const float bad[4] = {NAN, negative_nan(), INFINITY, -INFINITY};
                for (int i = 0; i < n_loc * hs; i += 37)
                    heads[l][i] = bad[(i / 37) % 4];
                for (int p = 0; p < n_loc; p += 11)
                    heads[l][(size_t)p * hs + hs - 1] = NAN;
            }
            void *dh;
            upload_as(heads[l], (size_t)n_loc * hs, dt, &dh);
            lv.head[l] = dh;
            lv.n_anchors[l] = n_loc * A;
            lv.anchor_offset[l] = total;
            lv.top_n[l] = MIN(1000, n_loc * A);
            lv.candidate_offset[l] = cands;
            total += n_loc * A;
            cands += lv.top_n[l];
        }
        lv.anchor_offset[n_levels] = total;
        lv.candidate_offset[n_levels] = cands;
        float *anchors = g_new(float, 4 * (size_t)total);
        const float sizes[3] = {32, 64, 128}, ratios[3] = {0.5f, 1.0f, 2.0f};
        for (int l = 0; l < n_levels; l++) {
            float cell[12];
            vd_cell_anchors(&sizes[l], 1, ratios, 3, cell);
            vd_grid_anchors(cell, 3, 160, 224, grid[l][0], grid[l][1],
                            anchors + 4 * (size_t)lv.anchor_offset[l]);
        }
        float *danchors = dev_upload(anchors, 4 * (size_t)total * sizeof(float));

        /* CPU: run_rpn's steps up to the NMS candidates */
        float *want_boxes = g_new(float, 4 * (size_t)cands), *want_scores = g_new(float, cands);
        int *top = g_new(int, total);
        float *logits = g_new(float, total);
        for (int l = 0; l < n_levels; l++) {
            int n_l = lv.n_anchors[l];
            for (int i = 0; i < n_l; i++)
                logits[i] = heads[l][(size_t)(i / A) * hs + i % A];
            int k = vd_topk(logits, n_l, 1000, top);
            for (int j = 0; j < k; j++) {
                int i = top[j], slot = lv.candidate_offset[l] + j;
                const float w4[4] = {1, 1, 1, 1};
                vd_decode_boxes(anchors + 4 * ((size_t)lv.anchor_offset[l] + i),
                                heads[l] + (size_t)(i / A) * hs + A + (i % A) * 4, 1, w4,
                                want_boxes + 4 * slot);
                vd_clip_boxes(want_boxes + 4 * slot, 1, rh, rw);
                float *b = want_boxes + 4 * slot;
                float s = vd_math_sigmoid(logits[i]);
                /* run_rpn's filters: small boxes and the score threshold (0 here,
                 * which a NaN score fails) */
                want_scores[slot] =
                    (b[2] - b[0] >= 1e-3f && b[3] - b[1] >= 1e-3f && s >= 0.0f) ? s : -INFINITY;
            }
        }

        unsigned int *keys = dev_alloc(total * sizeof(unsigned int));
        unsigned int *keys_s = dev_alloc(total * sizeof(unsigned int));
        int *vals = dev_alloc(total * sizeof(int)), *vals_s = dev_alloc(total * sizeof(int));
        size_t ws = vd_rpn_topk_workspace_size(lv.n_anchors[0]);
        void *dws = dev_alloc(ws);
        float *cb = dev_alloc(4 * (size_t)cands * sizeof(float)), *cs = dev_alloc(cands * sizeof(float));
        int *cg = dev_alloc(cands * sizeof(int));
        CU(vd_rpn_gather_logits(&lv, dt, keys, vals, stream));
        CU(vd_rpn_topk(&lv, keys, vals, keys_s, vals_s, dws, ws, stream));
        CU(vd_rpn_decode(&lv, dt, keys_s, vals_s, danchors, rh, rw, 1e-3f, 0.0f, cb, cs, cg,
                         stream));
        float *got_boxes = g_new(float, 4 * (size_t)cands), *got_scores = g_new(float, cands);
        int *got_groups = g_new(int, cands);
        dev_download(got_boxes, cb, 4 * (size_t)cands * sizeof(float));
        dev_download(got_scores, cs, cands * sizeof(float));
        dev_download(got_groups, cg, cands * sizeof(int));
        /* decode and sigmoid use the shared vd_math_expf: bit for bit; the
         * boxes of dropped candidates may be NaN of other bits, and unused */
        int dropped = 0;
        for (int j = 0; j < cands; j++)
            if (poison && want_scores[j] == -INFINITY && got_scores[j] == -INFINITY) {
                memset(want_boxes + 4 * (size_t)j, 0, 4 * sizeof(float));
                memset(got_boxes + 4 * (size_t)j, 0, 4 * sizeof(float));
                dropped++;
            }
        assert_close_ulp(poison ? "rpn boxes (poisoned)" : "rpn boxes", got_boxes, want_boxes,
                         4 * (size_t)cands, 0);
        assert_close_ulp(poison ? "rpn scores (poisoned)" : "rpn scores", got_scores, want_scores,
                         cands, 0);
        if (poison) {
            /* every level's top-k starts with its NaN logits (all dropped) */
            g_assert_cmpint(dropped, >, 3 * 10);
            /* the count: the 5A channels of every location, all rows or the
             * first 100 of level 0 (a device row count, as the box head's) */
            int *dcount = dev_alloc(2 * sizeof(int)), *drows = NULL, rows = 100;
            int want_count = 0, want_rows = 0, got_count[2];
            CU(cudaMemset(dcount, 0, 2 * sizeof(int)));
            drows = dev_upload(&rows, sizeof(int));
            for (int l = 0; l < n_levels; l++) {
                int n_loc = grid[l][0] * grid[l][1];
                for (int p = 0; p < n_loc; p++)
                    for (int c = 0; c < 5 * A; c++) {
                        gboolean bad = !isfinite(heads[l][(size_t)p * hs + c]);
                        want_count += bad;
                        want_rows += l == 0 && p < rows && bad;
                    }
                CU(vd_count_nonfinite(lv.head[l], dt, n_loc, 5 * A, hs, NULL, dcount, stream));
            }
            CU(vd_count_nonfinite(lv.head[0], dt, grid[0][0] * grid[0][1], 5 * A, hs, drows,
                                  dcount + 1, stream));
            dev_download(got_count, dcount, 2 * sizeof(int));
            printf("  rpn %s poisoned: %d non-finite head values (CPU %d), %d in 100 rows (CPU "
                   "%d), %d candidates dropped\n",
                   dt == VD_DTYPE_F16 ? "fp16" : "fp32", got_count[0], want_count, got_count[1],
                   want_rows, dropped);
            g_assert_cmpint(want_count, >, 0);
            g_assert_cmpint(got_count[0], ==, want_count);
            g_assert_cmpint(got_count[1], ==, want_rows);
            CU(cudaFree(dcount));
            CU(cudaFree(drows));
        }
        int wrong_groups = 0;
        for (int l = 0; l < n_levels; l++)
            for (int j = lv.candidate_offset[l]; j < lv.candidate_offset[l + 1]; j++)
                wrong_groups += got_groups[j] != l;
        g_assert_cmpint(wrong_groups, ==, 0);

        for (int l = 0; l < n_levels; l++) {
            CU(cudaFree((void *)lv.head[l]));
            g_free(heads[l]);
        }
        CU(cudaFree(danchors));
        CU(cudaFree(keys));
        CU(cudaFree(keys_s));
        CU(cudaFree(vals));
        CU(cudaFree(vals_s));
        CU(cudaFree(dws));
        CU(cudaFree(cb));
        CU(cudaFree(cs));
        CU(cudaFree(cg));
        g_free(anchors);
        g_free(want_boxes);
        g_free(want_scores);
        g_free(top);
        g_free(logits);
        g_free(got_boxes);
        g_free(got_scores);
        g_free(got_groups);
    }
}

/* The batched top-k (one CUB segmented sort over every (image, level)
 * segment) against the per-level top-k (a radix sort per level) and vd_topk on
 * the host, on logits poisoned with NaN of both signs and other payloads,
 * infinities, both zeros and runs of equal values, with levels of 192 and 48
 * anchors: segments that small go through CUB's warp merge sort, which
 * compares keys, where float NaN keys used to lose or duplicate indices. Every
 * segment's order must be vd_topk's, index for index. */
static void test_rpn_topk_batched(void)
{
    for (int d = 0; d < 2; d++) {
        vd_dtype dt = d ? VD_DTYPE_F16 : VD_DTYPE_F32;
        test_rng r = {70 + d};
        enum { N_IMAGES = 3, N_LEVELS = 5, A = 3, HS = 16 };
        const int grid[N_LEVELS][2] = {{40, 56}, {20, 28}, {10, 14}, {8, 8}, {4, 4}};
        const float bad[6] = {NAN, negative_nan(), INFINITY, -INFINITY, -0.0f, 0.0f};
        uint32_t payload_nan_bits = 0x7f800123u, payload_neg_nan_bits = 0xff812345u;
        float payload_nan, payload_neg_nan;
        memcpy(&payload_nan, &payload_nan_bits, 4);
        memcpy(&payload_neg_nan, &payload_neg_nan_bits, 4);
        vd_rpn_levels lv[N_IMAGES];
        float *heads[N_IMAGES][N_LEVELS];
        int total = 0;
        for (int img = 0; img < N_IMAGES; img++) {
            memset(&lv[img], 0, sizeof(lv[img]));
            lv[img].n_levels = N_LEVELS;
            lv[img].anchors_per_location = A;
            lv[img].head_stride = HS;
            total = 0;
            for (int l = 0; l < N_LEVELS; l++) {
                int n_loc = grid[l][0] * grid[l][1];
                heads[img][l] = g_new(float, (size_t)n_loc *HS);
                for (int i = 0; i < n_loc * HS; i++) {
                    /* quantised: many ties, which must stay in anchor order */
                    float v = floorf(rng_normal(&r) * 4.0f) / 4.0f;
                    heads[img][l][i] = dt == VD_DTYPE_F16 ? round_half(v) : v;
                }
                /* poison image by image at different densities, the small
                 * levels included */
                int step = 5 + 4 * img;
                for (int p = img; p < n_loc * A; p += step) {
                    float v = p % 7 == 0    ? payload_nan
                              : p % 11 == 0 ? payload_neg_nan
                                            : bad[(p / step) % 6];
                    heads[img][l][(size_t)(p / A) * HS + p % A] = v;
                }
                void *dh;
                upload_as(heads[img][l], (size_t)n_loc * HS, dt, &dh);
                lv[img].head[l] = dh;
                lv[img].n_anchors[l] = n_loc * A;
                lv[img].anchor_offset[l] = total;
                lv[img].top_n[l] = MIN(1000, n_loc * A);
                lv[img].candidate_offset[l] = 0;
                total += n_loc * A;
            }
            lv[img].anchor_offset[N_LEVELS] = total;
        }
        g_assert_cmpint(lv[0].n_anchors[3], <, 200);

        size_t n_all = (size_t)N_IMAGES * total;
        unsigned int *keys = dev_alloc(n_all * sizeof(unsigned int));
        unsigned int *keys_s = dev_alloc(n_all * sizeof(unsigned int));
        unsigned int *keys_level = dev_alloc(n_all * sizeof(unsigned int));
        int *vals = dev_alloc(n_all * sizeof(int)), *vals_s = dev_alloc(n_all * sizeof(int));
        int *vals_level = dev_alloc(n_all * sizeof(int));
        for (int img = 0; img < N_IMAGES; img++)
            CU(vd_rpn_gather_logits(&lv[img], dt, keys + (size_t)img * total,
                                    vals + (size_t)img * total, stream));
        size_t ws_batched = vd_rpn_topk_batched_workspace_size(&lv[0], N_IMAGES);
        size_t ws_level = vd_rpn_topk_workspace_size(lv[0].n_anchors[0]);
        g_assert_cmpuint(ws_batched, >, 0);
        g_assert_cmpuint(ws_level, >, 0);
        void *dws = dev_alloc(MAX(ws_batched, ws_level));
        CU(vd_rpn_topk_batched(&lv[0], N_IMAGES, keys, vals, keys_s, vals_s, dws, ws_batched,
                               stream));
        for (int img = 0; img < N_IMAGES; img++)
            CU(vd_rpn_topk(&lv[img], keys + (size_t)img * total, vals + (size_t)img * total,
                           keys_level + (size_t)img * total, vals_level + (size_t)img * total, dws,
                           ws_level, stream));
        int *got = g_new(int, n_all), *got_level = g_new(int, n_all);
        unsigned int *got_keys = g_new(unsigned int, n_all);
        dev_download(got, vals_s, n_all * sizeof(int));
        dev_download(got_level, vals_level, n_all * sizeof(int));
        dev_download(got_keys, keys_s, n_all * sizeof(unsigned int));

        int *want = g_new(int, total);
        float *logits = g_new(float, total);
        int wrong = 0, wrong_level = 0, wrong_keys = 0, nan_first = 0;
        for (int img = 0; img < N_IMAGES; img++)
            for (int l = 0; l < N_LEVELS; l++) {
                int n_l = lv[img].n_anchors[l];
                size_t base = (size_t)img * total + lv[img].anchor_offset[l];
                for (int i = 0; i < n_l; i++)
                    logits[i] = heads[img][l][(size_t)(i / A) * HS + i % A];
                g_assert_cmpint(vd_topk(logits, n_l, n_l, want), ==, n_l);
                for (int j = 0; j < n_l; j++) {
                    if (got[base + j] != want[j] && wrong++ < 5)
                        g_printerr("batched top-k, %s, image %d level %d (%d anchors), rank %d: "
                                   "anchor %d (logit %g), want %d (logit %g)\n",
                                   dt == VD_DTYPE_F16 ? "fp16" : "fp32", img, l, n_l, j,
                                   got[base + j],
                                   got[base + j] >= 0 && got[base + j] < n_l
                                       ? (double)logits[got[base + j]]
                                       : NAN,
                                   want[j], (double)logits[want[j]]);
                    wrong_level += got_level[base + j] != want[j];
                    wrong_keys += got_keys[base + j] != vd_math_rank_key(logits[want[j]]);
                }
                nan_first += isnan(logits[want[0]]);
            }
        printf("  rpn batched top-k %s: %d images x %d levels, %d misplaced (per-level sort "
               "%d, keys %d), %d segments led by NaN\n",
               dt == VD_DTYPE_F16 ? "fp16" : "fp32", N_IMAGES, N_LEVELS, wrong, wrong_level,
               wrong_keys, nan_first);
        g_assert_cmpint(nan_first, ==, N_IMAGES * N_LEVELS);
        g_assert_cmpint(wrong, ==, 0);
        g_assert_cmpint(wrong_level, ==, 0);
        g_assert_cmpint(wrong_keys, ==, 0);

        for (int img = 0; img < N_IMAGES; img++)
            for (int l = 0; l < N_LEVELS; l++) {
                CU(cudaFree((void *)lv[img].head[l]));
                g_free(heads[img][l]);
            }
        CU(cudaFree(keys));
        CU(cudaFree(keys_s));
        CU(cudaFree(keys_level));
        CU(cudaFree(vals));
        CU(cudaFree(vals_s));
        CU(cudaFree(vals_level));
        CU(cudaFree(dws));
        g_free(got);
        g_free(got_level);
        g_free(got_keys);
        g_free(want);
        g_free(logits);
    }
}

static void test_box_postprocess(void)
{
    test_rng r = {55};
    int R = 1000, n_props = 937, K = 91, stride = 456, max_det = 100;
    float rh = 750.0f, rw = 1333.0f;
    float score_thr = 0.05f, nms_thr = 0.5f, min_size = 1e-2f;
    float *head = g_new0(float, (size_t)R * stride), *props = g_new(float, 4 * R);
    for (int i = 0; i < R; i++) {
        float x = rng_uniform(&r, 0, 1200), y = rng_uniform(&r, 0, 650);
        props[4 * i] = x;
        props[4 * i + 1] = y;
        props[4 * i + 2] = x + rng_uniform(&r, 2, 300);
        props[4 * i + 3] = y + rng_uniform(&r, 2, 300);
        for (int c = 0; c < K; c++)
            head[(size_t)i * stride + c] = rng_normal(&r) * 3.0f;
        for (int c = 0; c < 4 * K; c++)
            head[(size_t)i * stride + K + c] = rng_normal(&r) * 0.5f;
    }
    /* CPU: the CPU backend's postprocess */
    float *softmax = g_new(float, (size_t)n_props * K);
    for (int i = 0; i < n_props; i++)
        memcpy(softmax + (size_t)i * K, head + (size_t)i * stride, K * sizeof(float));
    vd_softmax_rows(softmax, n_props, K);
    size_t n_flat = (size_t)n_props * (K - 1);
    float *cb = g_new(float, 4 * n_flat), *cs = g_new(float, n_flat);
    int *cl = g_new(int, n_flat), *keep = g_new(int, n_flat);
    int m = 0;
    const float weights[4] = {10, 10, 5, 5};
    for (int i = 0; i < n_props; i++) {
        float refs[4 * 91], dec[4 * 91];
        for (int c = 0; c < K; c++)
            memcpy(refs + 4 * c, props + 4 * i, 4 * sizeof(float));
        vd_decode_boxes(refs, head + (size_t)i * stride + K, K, weights, dec);
        vd_clip_boxes(dec, K, rh, rw);
        for (int c = 1; c < K; c++) {
            float p = softmax[(size_t)i * K + c];
            float *b = dec + 4 * c;
            if (!(p > score_thr) || !(b[2] - b[0] >= min_size && b[3] - b[1] >= min_size))
                continue;
            memcpy(cb + 4 * m, b, 4 * sizeof(float));
            cs[m] = p;
            cl[m] = c;
            m++;
        }
    }
    int kept = MIN(vd_batched_nms(cb, cs, cl, m, nms_thr, keep), max_det);
    g_assert_cmpint(m, >, 200); /* the test means something */

    float *dhead = dev_upload(head, (size_t)R * stride * sizeof(float));
    float *dprops = dev_upload(props, 4 * R * sizeof(float));
    int *dn = dev_upload(&n_props, sizeof(int));
    size_t nf = (size_t)R * (K - 1);
    float *db = dev_alloc(4 * nf * sizeof(float)), *ds = dev_alloc(nf * sizeof(float));
    int *dl = dev_alloc(nf * sizeof(int));
    vd_box_shape shape = {.capacity = R, .num_classes = K, .head_stride = stride,
                          .weights = {10, 10, 5, 5}, .resized_h = rh, .resized_w = rw,
                          .score_threshold = score_thr, .min_size = min_size};
    CU(vd_box_candidates(&shape, dhead, dprops, dn, db, ds, dl, stream));
    vd_nms_shape ns = {.capacity = (int)nf, .max_candidates = 32768, .max_keep = max_det};
    size_t ws = vd_nms_workspace_size(&ns);
    void *dws = dev_alloc(ws);
    int *dkeep = dev_alloc(max_det * sizeof(int)), *dnk = dev_alloc(sizeof(int));
    CU(vd_batched_nms_device(db, ds, VD_DTYPE_F32, dl, &ns, nms_thr, dkeep, dnk, dws, ws, stream));
    size_t rbytes = sizeof(vd_kernel_result) + max_det * sizeof(vd_kernel_detection);
    vd_kernel_result *dres = dev_alloc(rbytes);
    float rx = 1280.0f / rw, ry = 720.0f / rh;
    int nonfinite = 12345, *dnonfinite = dev_upload(&nonfinite, sizeof(int));
    CU(vd_finalize_detections(db, ds, dl, dkeep, dnk, dn, dnonfinite, max_det, rx, ry, dres,
                              stream));
    vd_kernel_result *res = g_malloc(rbytes);
    dev_download(res, dres, rbytes);

    /* softmax in vd_softmax_rows' order with the shared vd_math_expf: the same
     * probabilities and candidates, in the same order */
    g_assert_cmpint(res->count, ==, kept);
    g_assert_cmpint(res->n_proposals, ==, n_props);
    g_assert_cmpint(res->n_nonfinite, ==, nonfinite); /* passed through */
    for (int j = 0; j < MIN(kept, res->count); j++) {
        const float *b = cb + 4 * keep[j];
        const vd_kernel_detection *d = &res->detections[j];
        g_assert_cmpint(d->label, ==, cl[keep[j]]);
        g_assert_cmpint(ulp_distance(d->score, cs[keep[j]]), ==, 0);
        float want[4] = {b[0] * rx, b[1] * ry, b[2] * rx, b[3] * ry};
        float got[4] = {d->x1, d->y1, d->x2, d->y2};
        assert_close_ulp("detection box", got, want, 4, 0);
    }
    CU(cudaFree(dhead));
    CU(cudaFree(dprops));
    CU(cudaFree(dn));
    CU(cudaFree(db));
    CU(cudaFree(ds));
    CU(cudaFree(dl));
    CU(cudaFree(dws));
    CU(cudaFree(dkeep));
    CU(cudaFree(dnk));
    CU(cudaFree(dres));
    CU(cudaFree(dnonfinite));
    g_free(head);
    g_free(props);
    g_free(softmax);
    g_free(cb);
    g_free(cs);
    g_free(cl);
    g_free(keep);
    g_free(res);
}

/* ------------------------------------------------------------------------ */
/* MobileNetV3: hardswish and squeeze-excitation                             */

/* hardswish in place: vd_math_hardswish bit for bit in fp32 (the breakpoints
 * -3 and 3 and both sides of them included), and on fp16-rounded inputs
 * rounded once in fp16; NaN stays NaN. Squeeze-excitation on two images
 * against the CPU backend's steps written out here (channel means summed in
 * double, the products in index order, ReLU, vd_math_hardsigmoid, the scale):
 * fp32 within 4 ulp (the means' double sums run in another order), fp16 within
 * one fp16 ulp of the reference on the fp16-rounded input. */
static void test_mobilenet_kernels(void)
{
    test_rng r = {91};
    for (int d = 0; d < 2; d++) {
        vd_dtype dt = d ? VD_DTYPE_F16 : VD_DTYPE_F32;
        size_t n = 4099;
        float *x = g_new(float, n), *want = g_new(float, n), *got = g_new(float, n);
        for (size_t i = 0; i < n; i++) {
            float v = i < 7 ? (float[]){-3.0f, 3.0f, -3.001f, 2.999f, 0.0f, -6.0f, 6.0f}[i]
                            : 4.0f * rng_normal(&r);
            x[i] = d ? round_half(v) : v;
            want[i] = d ? round_half(vd_math_hardswish(x[i])) : vd_math_hardswish(x[i]);
        }
        void *dx;
        upload_as(x, n, dt, &dx);
        CU(vd_hardswish(dx, n, dt, stream));
        download_as(got, dx, n, dt);
        assert_close_ulp(d ? "hardswish fp16" : "hardswish fp32", got, want, n, 0);
        CU(cudaFree(dx));
        float nan_in = NAN, nan_out = 0.0f;
        upload_as(&nan_in, 1, dt, &dx);
        CU(vd_hardswish(dx, 1, dt, stream));
        download_as(&nan_out, dx, 1, dt);
        g_assert_true(isnan(nan_out));
        CU(cudaFree(dx));
        g_free(x);
        g_free(want);
        g_free(got);
    }

    static const int shapes[2][4] = {{13, 17, 72, 24}, {5, 7, 960, 240}}; /* h, w, c, s */
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++) {
            vd_dtype dt = d ? VD_DTYPE_F16 : VD_DTYPE_F32;
            int hw = shapes[k][0] * shapes[k][1], c = shapes[k][2], S = shapes[k][3], N = 2;
            size_t n = (size_t)N * hw * c;
            float *x = g_new(float, n), *want = g_new(float, n), *got = g_new(float, n);
            float *w1 = g_new(float, (size_t)S * c), *b1 = g_new(float, S);
            float *w2 = g_new(float, (size_t)c * S), *b2 = g_new(float, c);
            for (size_t i = 0; i < n; i++)
                x[i] = d ? round_half(1.0f + rng_normal(&r)) : 1.0f + rng_normal(&r);
            for (size_t i = 0; i < (size_t)S * c; i++) {
                w1[i] = rng_normal(&r) / sqrtf((float)c);
                w2[i] = 2.0f * rng_normal(&r) / sqrtf((float)S);
            }
            for (int i = 0; i < S; i++)
                b1[i] = 0.1f * rng_normal(&r);
            for (int i = 0; i < c; i++)
                b2[i] = rng_normal(&r);
            float *mean = g_new(float, c), *hidden = g_new(float, S), *scale = g_new(float, c);
            for (int img = 0; img < N; img++) {
                const float *xi = x + (size_t)img * hw * c;
                for (int ch = 0; ch < c; ch++) {
                    double acc = 0.0;
                    for (int p = 0; p < hw; p++)
                        acc += xi[(size_t)p * c + ch];
                    mean[ch] = (float)(acc / (double)hw);
                }
                for (int j = 0; j < S; j++) {
                    float v = 0.0f;
                    for (int ch = 0; ch < c; ch++)
                        v = vd_math_fadd(v, vd_math_fmul(w1[(size_t)j * c + ch], mean[ch]));
                    v = vd_math_fadd(v, b1[j]);
                    hidden[j] = v > 0.0f ? v : 0.0f;
                }
                for (int ch = 0; ch < c; ch++) {
                    float v = 0.0f;
                    for (int j = 0; j < S; j++)
                        v = vd_math_fadd(v, vd_math_fmul(w2[(size_t)ch * S + j], hidden[j]));
                    scale[ch] = vd_math_hardsigmoid(vd_math_fadd(v, b2[ch]));
                }
                for (size_t i = 0; i < (size_t)hw * c; i++) {
                    float v = vd_math_fmul(xi[i], scale[i % c]);
                    want[(size_t)img * hw * c + i] = d ? round_half(v) : v;
                }
            }
            void *dx;
            upload_as(x, n, dt, &dx);
            float *dw1 = dev_upload(w1, (size_t)S * c * sizeof(float));
            float *db1 = dev_upload(b1, (size_t)S * sizeof(float));
            float *dw2 = dev_upload(w2, (size_t)c * S * sizeof(float));
            float *db2 = dev_upload(b2, (size_t)c * sizeof(float));
            float *dmeans = dev_alloc((size_t)N * c * sizeof(float));
            float *dscales = dev_alloc((size_t)N * c * sizeof(float));
            CU(vd_squeeze_excite(dx, N, hw, c, S, dw1, db1, dw2, db2, dmeans, dscales, dt, stream));
            download_as(got, dx, n, dt);
            char what[64];
            g_snprintf(what, sizeof what, "squeeze-excitation %s c %d s %d", d ? "fp16" : "fp32", c,
                       S);
            assert_close_ulp(what, got, want, n, d ? 8192 : 4);
            CU(cudaFree(dx));
            CU(cudaFree(dw1));
            CU(cudaFree(db1));
            CU(cudaFree(dw2));
            CU(cudaFree(db2));
            CU(cudaFree(dmeans));
            CU(cudaFree(dscales));
            g_free(x);
            g_free(want);
            g_free(got);
            g_free(w1);
            g_free(b1);
            g_free(w2);
            g_free(b2);
            g_free(mean);
            g_free(hidden);
            g_free(scale);
        }
}

/* Writes the --json report: {"preprocess": {"ok": no comparison differs,
 * "comparisons": [...]}, "ok": that and every test passed (@status 0)}. */
static void write_report(const char *json_path, int status)
{
    json_builder_end_array(report);
    json_builder_set_member_name(report, "ok");
    json_builder_add_boolean_value(report, report_ok);
    json_builder_end_object(report);
    json_builder_set_member_name(report, "ok");
    json_builder_add_boolean_value(report, report_ok && status == 0);
    json_builder_end_object(report);
    JsonGenerator *gen = json_generator_new();
    JsonNode *root = json_builder_get_root(report);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    GError *error = NULL;
    if (!json_generator_to_file(gen, json_path, &error)) {
        g_printerr("%s: %s\n", json_path, error->message);
        g_clear_error(&error);
    }
    json_node_unref(root);
    g_object_unref(gen);
    g_object_unref(report);
    report = NULL;
}

int main(int argc, char **argv)
{
    /* --json FILE, taken out before GLib's own options */
    const char *json_path = NULL;
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else
            argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = NULL;
    g_test_init(&argc, &argv, NULL);
    /* one device run must report every failing kernel, not only the first */
    g_test_set_nonfatal_assertions();
    gpu_require_device("test-gpu-kernels");
    CU(cudaStreamCreate(&stream));
    if (json_path != NULL) {
        report = json_builder_new();
        json_builder_begin_object(report);
        json_builder_set_member_name(report, "preprocess");
        json_builder_begin_object(report);
        json_builder_set_member_name(report, "comparisons");
        json_builder_begin_array(report);
    }
    g_test_add_func("/gpu/preprocess/formats", test_preprocess_formats);
    g_test_add_func("/gpu/preprocess/sizes", test_preprocess_sizes);
    g_test_add_func("/gpu/preprocess/resize-arithmetic", test_preprocess_resize_arithmetic);
    g_test_add_func("/gpu/anchors", test_grid_anchors);
    g_test_add_func("/gpu/layout", test_layout_kernels);
    g_test_add_func("/gpu/sort-topk", test_sort_topk);
    g_test_add_func("/gpu/nms/random", test_nms_random);
    g_test_add_func("/gpu/nms/edges", test_nms_edges);
    g_test_add_func("/gpu/roi-align", test_roi_align);
    g_test_add_func("/gpu/roi-align/forward", test_roi_align_forward_device);
    g_test_add_func("/gpu/roi-align/backward", test_roi_align_backward);
    g_test_add_func("/gpu/roi-align/backward-edges", test_roi_align_backward_edges);
    g_test_add_func("/gpu/rpn", test_rpn);
    g_test_add_func("/gpu/rpn/topk-batched", test_rpn_topk_batched);
    g_test_add_func("/gpu/box-postprocess", test_box_postprocess);
    g_test_add_func("/gpu/mobilenet", test_mobilenet_kernels);
    int status = g_test_run();
    if (report != NULL)
        write_report(json_path, status);
    cudaStreamDestroy(stream);
    return status;
}
