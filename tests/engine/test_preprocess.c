/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of vd_cpu_preprocess (engine/cpu/vd_cpu_preprocess.c): resize
 * values worked out by hand, every pixel format against RGB, YUV conversion
 * against a double-precision reference, the CUDA kernel's per-pixel arithmetic
 * (vd_math.h, compiled here for the host) against it, and the validation errors.
 * The bit-exact comparison with torch is tests/engine/preprocess_vs_torch.py.
 * Compiled with -ffp-contract=off, as the engine is: the vd_math.h functions
 * inlined here must round as they do in the library. */
#include <math.h>
#include <string.h>

#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

static const float zero_mean[3] = {0, 0, 0};
static const float unit_std[3] = {1, 1, 1};
static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

static float *run_preprocess(const vd_image *image, const float mean[3], const float std[3], int rh,
                             int rw, int ph, int pw)
{
    float *out = g_new(float, (size_t)ph *pw * 3);
    for (size_t i = 0; i < (size_t)ph * pw * 3; i++)
        out[i] = NAN; /* every float must be written */
    GError *error = NULL;
    gboolean ok = vd_cpu_preprocess(image, mean, std, VD_RESIZE_ARITHMETIC_TORCH1, rh, rw, ph, pw, out, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    return out;
}

static void assert_padding_zero(const float *out, int rh, int rw, int ph, int pw)
{
    for (int y = 0; y < ph; y++)
        for (int x = 0; x < pw; x++)
            if (y >= rh || x >= rw)
                for (int c = 0; c < 3; c++)
                    g_assert_cmpfloat(out[((size_t)y * pw + x) * 3 + c], ==, 0.0f);
}

static uint8_t *random_rgb(GRand *rand, int w, int h)
{
    uint8_t *rgb = g_new(uint8_t, (size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        rgb[i] = (uint8_t)g_rand_int_range(rand, 0, 256);
    return rgb;
}

/* ------------------------------------------------------------------------ */

static void test_identity_size(void)
{
    /* output size == input size: both axes copied, so the output is exactly
     * the normalised input (f32(v)/255 - mean) / std, then zero padding */
    GRand *rand = g_rand_new_with_seed(5);
    int w = 7, h = 5;
    uint8_t *rgb = random_rgb(rand, w, h);
    vd_image image = vd_image_rgb(rgb, w, h);
    float *out = run_preprocess(&image, imagenet_mean, imagenet_std, h, w, 32, 32);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                float v =
                    ((float)rgb[(y * w + x) * 3 + c] / 255.0f - imagenet_mean[c]) / imagenet_std[c];
                g_assert_cmpfloat(out[(y * 32 + x) * 3 + c], ==, v);
            }
    assert_padding_zero(out, h, w, 32, 32);
    g_free(out);
    g_free(rgb);
    g_rand_free(rand);
}

static void test_upsample_2x(void)
{
    /* 2x2 -> 4x4. Per axis (r = 0.5): output d samples src = 0.5(d+0.5) - 0.5
     * = -0.25 (-> 0), 0.25, 0.75, 1.25 (i0 = 1 = n-1, so both taps are 1);
     * the weight f of pixel 1 is therefore 0, 0.25, 0.75, 1. With the input
     * [[0, 1], [1, 0]] (bytes 0 and 255, mean 0, std 1) the output is
     * (1-fy) fx + fy (1-fx), all dyadic hence exact. Channel 1 uses mean 0.5,
     * std 0.5, i.e. values -1 and 1: 2 * table - 1. */
    const uint8_t rgb[12] = {0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0};
    static const float table[4][4] = {
        {0.0f, 0.25f, 0.75f, 1.0f},
        {0.25f, 0.375f, 0.625f, 0.75f},
        {0.75f, 0.625f, 0.375f, 0.25f},
        {1.0f, 0.75f, 0.25f, 0.0f},
    };
    const float mean[3] = {0, 0.5f, 0};
    const float std[3] = {1, 0.5f, 1};
    vd_image image = vd_image_rgb(rgb, 2, 2);
    float *out = run_preprocess(&image, mean, std, 4, 4, 4, 4);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) {
            g_assert_cmpfloat(out[(y * 4 + x) * 3 + 0], ==, table[y][x]);
            g_assert_cmpfloat(out[(y * 4 + x) * 3 + 1], ==, 2.0f * table[y][x] - 1.0f);
            g_assert_cmpfloat(out[(y * 4 + x) * 3 + 2], ==, table[y][x]);
        }
    g_free(out);
}

static void test_downsample(void)
{
    /* width 5 -> 2 (r = 2.5): d = 0 samples src 0.75 (taps 0, 1, weight of 1:
     * 0.75), d = 1 samples 3.25 (taps 3, 4, weight of 4: 0.25). Height 3 -> 3
     * is copied. Rows of 0/1 values:
     *   [0,1,0,1,0] -> [0.75, 0.75]
     *   [1,1,1,0,0] -> [1, 0]
     *   [0,0,0,0,1] -> [0, 0.25] */
    static const int rows[3][5] = {{0, 1, 0, 1, 0}, {1, 1, 1, 0, 0}, {0, 0, 0, 0, 1}};
    static const float expected[3][2] = {{0.75f, 0.75f}, {1.0f, 0.0f}, {0.0f, 0.25f}};
    uint8_t rgb[3 * 5 * 3];
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            for (int c = 0; c < 3; c++)
                rgb[(y * 5 + x) * 3 + c] = rows[y][x] ? 255 : 0;
    vd_image image = vd_image_rgb(rgb, 5, 3);
    float *out = run_preprocess(&image, zero_mean, unit_std, 3, 2, 32, 32);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 2; x++)
            for (int c = 0; c < 3; c++)
                g_assert_cmpfloat(out[(y * 32 + x) * 3 + c], ==, expected[y][x]);
    assert_padding_zero(out, 3, 2, 32, 32);
    g_free(out);

    /* both axes 5 -> 2 on the same columns pattern repeated in rows 0/1 (5
     * rows: 0 1 0 1 0 with the row weights 0.75 of row 1 and 0.25 of row 4):
     * value(y, x) = a[y] * b[x] with a = b = [0,1,0,1,0]: out[0][0] = 0.75 *
     * 0.75 = 0.5625; out[1][1] = (0.75 * 1 + 0.25 * 0) ^ 2 = 0.5625 too;
     * out[0][1] = 0.75 * 0.75 */
    uint8_t grid[5 * 5 * 3];
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 5; x++)
            for (int c = 0; c < 3; c++)
                grid[(y * 5 + x) * 3 + c] = (rows[0][y] && rows[0][x]) ? 255 : 0;
    image = vd_image_rgb(grid, 5, 5);
    out = run_preprocess(&image, zero_mean, unit_std, 2, 2, 2, 2);
    for (int i = 0; i < 12; i++)
        g_assert_cmpfloat(out[i], ==, 0.5625f);
    g_free(out);
}

static void test_blend_fma_order(void)
{
    /* a non-dyadic upsample cross-checked against the spec's formula written
     * out here: t_r = fma(l0w, a[r][i0w], l1w * a[r][i1w]), out = fma(l0h,
     * t_i0h, l1h * t_i1h), with src and l1 in double */
    GRand *rand = g_rand_new_with_seed(11);
    int w = 6, h = 4, ow = 13, oh = 9;
    uint8_t *rgb = random_rgb(rand, w, h);
    vd_image image = vd_image_rgb(rgb, w, h);
    float *out = run_preprocess(&image, imagenet_mean, imagenet_std, oh, ow, oh, ow);
    float rx = (float)w / (float)ow, ry = (float)h / (float)oh;
    for (int y = 0; y < oh; y++) {
        double sy = fmax((double)ry * (y + 0.5) - 0.5, 0.0);
        int y0 = (int)sy, y1 = y0 + (y0 < h - 1);
        float l1h = (float)(sy - y0), l0h = 1.0f - l1h;
        for (int x = 0; x < ow; x++) {
            double sx = fmax((double)rx * (x + 0.5) - 0.5, 0.0);
            int x0 = (int)sx, x1 = x0 + (x0 < w - 1);
            float l1w = (float)(sx - x0), l0w = 1.0f - l1w;
            for (int c = 0; c < 3; c++) {
#define A(yy, xx)                                                                                  \
    (((float)rgb[((yy)*w + (xx)) * 3 + c] / 255.0f - imagenet_mean[c]) / imagenet_std[c])
                float t0 = fmaf(l0w, A(y0, x0), l1w * A(y0, x1));
                float t1 = fmaf(l0w, A(y1, x0), l1w * A(y1, x1));
                float v = fmaf(l0h, t0, l1h * t1);
#undef A
                g_assert_cmpfloat(out[(y * ow + x) * 3 + c], ==, v);
            }
        }
    }
    g_free(out);
    g_free(rgb);
    g_rand_free(rand);
}

/* ------------------------------------------------------------------------ */

/* "transform.resize_arithmetic": "torch2" against torch 2.6.0's CPU resize (Debian 13,
 * x86 AVX512 and AVX2 builds, 2 threads): torchvision's pre-processing of a fixed
 * pattern, normalised then F.interpolate(bilinear, align_corners=False) to an explicit
 * size, hashed (FNV-1a over the float bits of the resized area, NHWC) and two values.
 * Generic kernel (h + w > 128) up and down, channels-last kernel (<= 128) down and up.
 * torch 1.13's rule differs from torch 2.6 on each of them. */
static const struct {
    int h, w, rh, rw;
    uint32_t hash;   /* torch 2.6.0 */
    float values[2]; /* torch 2.6.0: [rh / 2][rw / 3][1], [rh - 1][rw - 1][2] */
} torch2_cases[] = {
    {23, 31, 67, 97, 0xb1dd10f7u, {-1.6487546f, 0.5310677f}},
    {150, 130, 71, 91, 0x50a4d294u, {-0.034287304f, 0.26895967f}},
    {40, 52, 30, 37, 0xa0bc699fu, {1.6887417f, 0.86728483f}},
    {21, 17, 45, 60, 0xfae1c05au, {-0.26765272f, 0.043050185f}},
};

/* The fixed pattern of those cases, w x h RGB. */
static uint8_t *torch2_pattern(int w, int h)
{
    uint8_t *rgb = g_new(uint8_t, (size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                rgb[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)((x * 37 + y * 101 + c * 59 + x * y * 7) & 255);
    return rgb;
}

static uint32_t fnv1a_floats(const float *v, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        h = (h ^ bits) * 16777619u;
    }
    return h;
}

static void test_resize_arithmetic_torch2(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(torch2_cases); i++) {
        int h = torch2_cases[i].h, w = torch2_cases[i].w;
        int rh = torch2_cases[i].rh, rw = torch2_cases[i].rw;
        uint8_t *rgb = torch2_pattern(w, h);
        vd_image image = vd_image_rgb(rgb, w, h);
        size_t n = (size_t)rh * rw * 3;
        float *out[2];
        for (int rule = 0; rule < 2; rule++) {
            out[rule] = g_new(float, n);
            GError *error = NULL;
            g_assert_true(vd_cpu_preprocess(
                &image, imagenet_mean, imagenet_std,
                rule ? VD_RESIZE_ARITHMETIC_TORCH2 : VD_RESIZE_ARITHMETIC_TORCH1, rh, rw, rh, rw,
                out[rule], &error));
            g_assert_no_error(error);
        }
        g_assert_cmphex(fnv1a_floats(out[1], n), ==, torch2_cases[i].hash);
        g_assert_cmpfloat(out[1][((size_t)(rh / 2) * rw + rw / 3) * 3 + 1], ==,
                          torch2_cases[i].values[0]);
        g_assert_cmpfloat(out[1][((size_t)(rh - 1) * rw + rw - 1) * 3 + 2], ==,
                          torch2_cases[i].values[1]);
        /* the torch1 rule (vd_cpu_preprocess) differs here, by an ulp or a few */
        float *plain = run_preprocess(&image, imagenet_mean, imagenet_std, rh, rw, rh, rw);
        g_assert_cmpmem(plain, n * sizeof(float), out[0], n * sizeof(float));
        size_t differ = 0;
        for (size_t k = 0; k < n; k++) {
            differ += out[0][k] != out[1][k];
            g_assert_cmpfloat(fabsf(out[0][k] - out[1][k]), <=, 1e-3f);
        }
        g_assert_cmpuint(differ, >, 0);
        g_free(plain);
        g_free(out[0]);
        g_free(out[1]);
        g_free(rgb);
    }
}

/* The CUDA pre-processing kernel's per-pixel arithmetic (kernels/preprocess.cu: the
 * normalisation table of vd_math_normalise, vd_math_resize_plan_for once, then per
 * output pixel vd_math_resize_taps_at, the four neighbours' bytes and
 * vd_math_resize_pixel), compiled for the host, against vd_cpu_preprocess under
 * both rules: identical, value for value, on the sizes of
 * /preprocess/resize-arithmetic-torch2 (torch's generic kernel up and down, the
 * channels-last kernel down and up) and two where the CPU takes other paths (both
 * axes copied: the CPU normalises straight into the output; one axis copied).
 * The kernel's only other part, reading the frame's pixel format, is
 * test-gpu-kernels' on a device. */
static void test_kernel_pixel(void)
{
    static const struct {
        int h, w, rh, rw;
    } extra[] = {{23, 31, 23, 31}, {40, 52, 40, 37}};
    const int n_sizes = (int)(G_N_ELEMENTS(torch2_cases) + G_N_ELEMENTS(extra));
    float lut[3 * 256];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            lut[256 * c + v] = vd_math_normalise(v, imagenet_mean[c], imagenet_std[c]);
    size_t pixels = 0, values = 0, channels_last_pixels = 0, rule_differs = 0;
    for (int i = 0; i < n_sizes; i++) {
        int n_torch2 = (int)G_N_ELEMENTS(torch2_cases);
        int h = i < n_torch2 ? torch2_cases[i].h : extra[i - n_torch2].h;
        int w = i < n_torch2 ? torch2_cases[i].w : extra[i - n_torch2].w;
        int rh = i < n_torch2 ? torch2_cases[i].rh : extra[i - n_torch2].rh;
        int rw = i < n_torch2 ? torch2_cases[i].rw : extra[i - n_torch2].rw;
        uint8_t *rgb = torch2_pattern(w, h);
        vd_image image = vd_image_rgb(rgb, w, h);
        size_t n = (size_t)rh * rw * 3;
        float *kernel[2];
        for (int rule = 0; rule < 2; rule++) {
            vd_resize_arithmetic arithmetic =
                rule ? VD_RESIZE_ARITHMETIC_TORCH2 : VD_RESIZE_ARITHMETIC_TORCH1;
            float *cpu = g_new(float, n);
            GError *error = NULL;
            g_assert_true(vd_cpu_preprocess(&image, imagenet_mean, imagenet_std, arithmetic, rh,
                                            rw, rh, rw, cpu, &error));
            g_assert_no_error(error);

            /* the kernel's loop body, for every pixel of the resized area */
            vd_math_resize_plan plan = vd_math_resize_plan_for((int)arithmetic, h, w, rh, rw);
            kernel[rule] = g_new(float, n);
            for (int y = 0; y < rh; y++)
                for (int x = 0; x < rw; x++) {
                    vd_math_resize_taps t = vd_math_resize_taps_at(&plan, y, x);
                    const uint8_t *a00 = rgb + ((size_t)t.y0 * w + t.x0) * 3;
                    const uint8_t *a01 = rgb + ((size_t)t.y0 * w + t.x1) * 3;
                    const uint8_t *a10 = rgb + ((size_t)t.y1 * w + t.x0) * 3;
                    const uint8_t *a11 = rgb + ((size_t)t.y1 * w + t.x1) * 3;
                    vd_math_resize_pixel(&plan, &t, lut, a00, a01, a10, a11,
                                         kernel[rule] + ((size_t)y * rw + x) * 3);
                }
            size_t differ = 0;
            for (size_t k = 0; k < n; k++)
                differ += memcmp(&kernel[rule][k], &cpu[k], sizeof(float)) != 0;
            if (differ > 0)
                g_test_message("%s %dx%d -> %dx%d: %zu of %zu values differ",
                               rule ? "torch2" : "torch1", w, h, rw, rh, differ, n);
            g_assert_cmpuint(differ, ==, 0);
            pixels += (size_t)rh * rw;
            values += n;
            if (plan.blend == VD_MATH_RESIZE_BLEND_CHANNELS_LAST)
                channels_last_pixels += (size_t)rh * rw;
            g_free(cpu);
        }
        /* the rule reaches the kernel's arithmetic: the resized sizes tell the rules apart */
        if (rh != h || rw != w) {
            size_t differ = 0;
            for (size_t k = 0; k < n; k++)
                differ += kernel[0][k] != kernel[1][k];
            g_assert_cmpuint(differ, >, 0);
            rule_differs++;
        }
        g_free(kernel[0]);
        g_free(kernel[1]);
        g_free(rgb);
    }
    /* both of torch 2.x's kernels are covered */
    g_assert_cmpuint(channels_last_pixels, >, 0);
    g_assert_cmpuint(channels_last_pixels, <, pixels / 2);
    g_test_message("kernel pixel arithmetic = CPU: %d sizes x 2 rules, %zu pixels, %zu values "
                   "identical (%zu pixels with the channels-last blend); torch1 and torch2 differ "
                   "on %zu of %d sizes",
                   n_sizes, pixels, values, channels_last_pixels, rule_differs, n_sizes);
}

static void test_packed_formats(void)
{
    /* every packed format, with row padding, gives exactly the RGB result */
    GRand *rand = g_rand_new_with_seed(7);
    int w = 11, h = 7, rh = 17, rw = 9, ph = 32, pw = 32;
    uint8_t *rgb = random_rgb(rand, w, h);
    vd_image image = vd_image_rgb(rgb, w, h);
    float *reference = run_preprocess(&image, imagenet_mean, imagenet_std, rh, rw, ph, pw);
    static const struct {
        vd_pixel_format format;
        int bpp, r, g, b;
    } formats[] = {
        {VD_FORMAT_RGB, 3, 0, 1, 2},  {VD_FORMAT_BGR, 3, 2, 1, 0},  {VD_FORMAT_RGBA, 4, 0, 1, 2},
        {VD_FORMAT_BGRA, 4, 2, 1, 0}, {VD_FORMAT_RGBX, 4, 0, 1, 2}, {VD_FORMAT_BGRX, 4, 2, 1, 0},
    };
    for (size_t f = 0; f < G_N_ELEMENTS(formats); f++) {
        int stride = w * formats[f].bpp + 5;
        uint8_t *packed = g_new(uint8_t, (size_t)stride * h);
        memset(packed, 0xa5, (size_t)stride * h); /* alpha and row padding */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                uint8_t *p = packed + y * stride + x * formats[f].bpp;
                p[formats[f].r] = rgb[(y * w + x) * 3 + 0];
                p[formats[f].g] = rgb[(y * w + x) * 3 + 1];
                p[formats[f].b] = rgb[(y * w + x) * 3 + 2];
            }
        vd_image view = {0};
        view.format = formats[f].format;
        view.width = w;
        view.height = h;
        view.planes[0] = packed;
        view.strides[0] = stride;
        float *out = run_preprocess(&view, imagenet_mean, imagenet_std, rh, rw, ph, pw);
        g_assert_cmpmem(out, (size_t)ph * pw * 3 * sizeof(float), reference,
                        (size_t)ph * pw * 3 * sizeof(float));
        g_free(out);
        g_free(packed);
    }
    g_free(reference);
    g_free(rgb);
    g_rand_free(rand);
}

/* ------------------------------------------------------------------------ */
/* YUV                                                                        */

/* Reference conversion in double from Kr/Kb (BT.601/709/2020) and the range. */
static void reference_yuv_to_rgb(vd_color_matrix matrix, gboolean full, int y, int u, int v,
                                 uint8_t *rgb)
{
    static const double kr_kb[3][2] = {{0.299, 0.114}, {0.2126, 0.0722}, {0.2627, 0.0593}};
    double kr = kr_kb[matrix][0], kb = kr_kb[matrix][1], kg = 1 - kr - kb;
    double yn = full ? y / 255.0 : (y - 16) / 219.0;
    double pb = full ? (u - 128) / 255.0 : (u - 128) / 224.0;
    double pr = full ? (v - 128) / 255.0 : (v - 128) / 224.0;
    double r = yn + 2 * (1 - kr) * pr;
    double b = yn + 2 * (1 - kb) * pb;
    double g = yn - 2 * kb * (1 - kb) / kg * pb - 2 * kr * (1 - kr) / kg * pr;
    double values[3] = {r, g, b};
    for (int c = 0; c < 3; c++) {
        double s = floor(values[c] * 255.0 + 0.5);
        rgb[c] = (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
    }
}

typedef struct {
    int w, h;
    uint8_t *y_plane, *u_plane, *v_plane, *uv_plane;
    int y_stride, u_stride, v_stride, uv_stride;
} yuv_frame;

/* Random 4:2:0 frame with odd-size-safe chroma (ceil(w/2) x ceil(h/2)) and
 * padded strides; fills @rgb (w*h*3) with the reference conversion. */
static yuv_frame make_yuv(GRand *rand, int w, int h, vd_color_matrix matrix, gboolean full,
                          uint8_t *rgb)
{
    yuv_frame f;
    int cw = (w + 1) / 2, ch = (h + 1) / 2;
    f.w = w;
    f.h = h;
    f.y_stride = w + 3;
    f.u_stride = cw + 1;
    f.v_stride = cw + 2;
    f.uv_stride = 2 * cw + 4;
    f.y_plane = g_new0(uint8_t, (size_t)f.y_stride * h);
    f.u_plane = g_new0(uint8_t, (size_t)f.u_stride * ch);
    f.v_plane = g_new0(uint8_t, (size_t)f.v_stride * ch);
    f.uv_plane = g_new0(uint8_t, (size_t)f.uv_stride * ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            f.y_plane[y * f.y_stride + x] = (uint8_t)g_rand_int_range(rand, 0, 256);
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            uint8_t u = (uint8_t)g_rand_int_range(rand, 0, 256);
            uint8_t v = (uint8_t)g_rand_int_range(rand, 0, 256);
            f.u_plane[y * f.u_stride + x] = u;
            f.v_plane[y * f.v_stride + x] = v;
            f.uv_plane[y * f.uv_stride + 2 * x] = u;
            f.uv_plane[y * f.uv_stride + 2 * x + 1] = v;
        }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            reference_yuv_to_rgb(matrix, full, f.y_plane[y * f.y_stride + x],
                                 f.u_plane[(y / 2) * f.u_stride + x / 2],
                                 f.v_plane[(y / 2) * f.v_stride + x / 2], rgb + (y * w + x) * 3);
    return f;
}

static void free_yuv(yuv_frame *f)
{
    g_free(f->y_plane);
    g_free(f->u_plane);
    g_free(f->v_plane);
    g_free(f->uv_plane);
}

static void test_yuv_formats(void)
{
    /* NV12 and I420 against the RGB frame converted in double: the 8-bit
     * results may differ by one level where the Q16 coefficients and the double
     * reference round a value near .5 differently, so the tolerance is one
     * level in normalised units (1/255/std) plus float rounding. Identity size
     * so that each output value is one pixel. */
    GRand *rand = g_rand_new_with_seed(3);
    int w = 9, h = 7;
    for (int m = VD_COLOR_MATRIX_BT601; m <= VD_COLOR_MATRIX_BT2020; m++)
        for (int full = 0; full <= 1; full++) {
            uint8_t *rgb = g_new(uint8_t, w * h * 3);
            yuv_frame f = make_yuv(rand, w, h, (vd_color_matrix)m, full, rgb);
            vd_image rgb_view = vd_image_rgb(rgb, w, h);
            float *reference = run_preprocess(&rgb_view, zero_mean, unit_std, h, w, 32, 32);
            vd_image nv12 = {0}, i420 = {0};
            nv12.format = VD_FORMAT_NV12;
            i420.format = VD_FORMAT_I420;
            nv12.width = i420.width = w;
            nv12.height = i420.height = h;
            nv12.matrix = i420.matrix = (vd_color_matrix)m;
            nv12.full_range = i420.full_range = full;
            nv12.planes[0] = i420.planes[0] = f.y_plane;
            nv12.strides[0] = i420.strides[0] = f.y_stride;
            nv12.planes[1] = f.uv_plane;
            nv12.strides[1] = f.uv_stride;
            i420.planes[1] = f.u_plane;
            i420.strides[1] = f.u_stride;
            i420.planes[2] = f.v_plane;
            i420.strides[2] = f.v_stride;
            float *out_nv12 = run_preprocess(&nv12, zero_mean, unit_std, h, w, 32, 32);
            float *out_i420 = run_preprocess(&i420, zero_mean, unit_std, h, w, 32, 32);
            int off_by_one = 0;
            for (int i = 0; i < 32 * 32 * 3; i++) {
                g_assert_cmpfloat_with_epsilon(out_nv12[i], reference[i], 1.0 / 255 + 1e-6);
                /* the two layouts carry the same samples: identical output */
                g_assert_cmpfloat(out_i420[i], ==, out_nv12[i]);
                off_by_one += out_nv12[i] != reference[i];
            }
            /* rounding ties are rare: most values must match exactly */
            g_assert_cmpint(off_by_one, <, w * h * 3 / 10);
            g_free(out_nv12);
            g_free(out_i420);
            g_free(reference);
            free_yuv(&f);
            g_free(rgb);
        }
    g_rand_free(rand);
}

static void test_yuv_round_trip(void)
{
    /* A known RGB frame, constant over each 2x2 block (so 4:2:0 loses nothing),
     * converted to Y'CbCr here in double and rounded to 8 bits, then read back
     * as NV12: each of Y, Cb, Cr carries up to half a level of rounding, which
     * the inverse matrix amplifies to at most about 2.2 levels (BT.709 blue:
     * 0.5 * (255/219 + 2.11)), plus half a level for the final rounding. The
     * tolerance is 3 levels in normalised units. Odd size: the last column and
     * row have their own chroma samples. */
    static const double kr_kb[3][2] = {{0.299, 0.114}, {0.2126, 0.0722}, {0.2627, 0.0593}};
    GRand *rand = g_rand_new_with_seed(17);
    int w = 11, h = 5, cw = 6, ch = 3;
    uint8_t rgb[11 * 5 * 3], y_plane[11 * 5], uv_plane[12 * 3];
    for (int m = VD_COLOR_MATRIX_BT601; m <= VD_COLOR_MATRIX_BT2020; m++)
        for (int full = 0; full <= 1; full++) {
            double kr = kr_kb[m][0], kb = kr_kb[m][1], kg = 1 - kr - kb;
            for (int by = 0; by < ch; by++)
                for (int bx = 0; bx < cw; bx++) {
                    double c[3];
                    uint8_t block[3];
                    for (int k = 0; k < 3; k++) {
                        block[k] = (uint8_t)g_rand_int_range(rand, 0, 256);
                        c[k] = block[k] / 255.0;
                    }
                    double yv = kr * c[0] + kg * c[1] + kb * c[2];
                    double pb = (c[2] - yv) / (2 * (1 - kb)), pr = (c[0] - yv) / (2 * (1 - kr));
                    double y8 = full ? yv * 255 : 16 + 219 * yv;
                    double u8 = 128 + (full ? 255 : 224) * pb, v8 = 128 + (full ? 255 : 224) * pr;
                    uv_plane[by * 2 * cw + 2 * bx] = (uint8_t)CLAMP(floor(u8 + 0.5), 0, 255);
                    uv_plane[by * 2 * cw + 2 * bx + 1] = (uint8_t)CLAMP(floor(v8 + 0.5), 0, 255);
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++) {
                            int x = 2 * bx + dx, y = 2 * by + dy;
                            if (x >= w || y >= h)
                                continue;
                            y_plane[y * w + x] = (uint8_t)CLAMP(floor(y8 + 0.5), 0, 255);
                            memcpy(rgb + (y * w + x) * 3, block, 3);
                        }
                }
            vd_image rgb_view = vd_image_rgb(rgb, w, h);
            vd_image nv12 = {0};
            nv12.format = VD_FORMAT_NV12;
            nv12.width = w;
            nv12.height = h;
            nv12.planes[0] = y_plane;
            nv12.strides[0] = w;
            nv12.planes[1] = uv_plane;
            nv12.strides[1] = 2 * cw;
            nv12.matrix = (vd_color_matrix)m;
            nv12.full_range = full;
            float *expected = run_preprocess(&rgb_view, imagenet_mean, imagenet_std, h, w, h, w);
            float *out = run_preprocess(&nv12, imagenet_mean, imagenet_std, h, w, h, w);
            for (int i = 0; i < w * h * 3; i++)
                g_assert_cmpfloat_with_epsilon(out[i], expected[i],
                                               3.0 / 255.0 / imagenet_std[i % 3] + 1e-5);
            g_free(expected);
            g_free(out);
        }
    g_rand_free(rand);
}

/* A 1x1 I420 image of the planes @y, @u and @v. */
static vd_image i420_pixel(uint8_t *y, uint8_t *u, uint8_t *v)
{
    vd_image image = {0};
    image.format = VD_FORMAT_I420;
    image.width = image.height = 1;
    image.planes[0] = y;
    image.planes[1] = u;
    image.planes[2] = v;
    image.strides[0] = image.strides[1] = image.strides[2] = 1;
    return image;
}

static void test_yuv_known_values(void)
{
    /* limited-range black/white/grey map to 0/255/128 on every matrix, and
     * BT.601 limited red (81, 90, 240) is (255, 0, 0) within one level */
    for (int m = VD_COLOR_MATRIX_BT601; m <= VD_COLOR_MATRIX_BT2020; m++) {
        static const int cases[][4] = {{16, 0, 0, 0}, {235, 255, 255, 255}, {126, 128, 128, 128}};
        for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
            uint8_t y = (uint8_t)cases[i][0], u = 128, v = 128;
            vd_image image = i420_pixel(&y, &u, &v);
            image.matrix = (vd_color_matrix)m;
            float *out = run_preprocess(&image, zero_mean, unit_std, 1, 1, 1, 1);
            for (int c = 0; c < 3; c++)
                g_assert_cmpfloat(out[c], ==, (float)cases[i][1 + c] / 255.0f);
            g_free(out);
        }
    }
    uint8_t y = 81, u = 90, v = 240;
    vd_image image = i420_pixel(&y, &u, &v);
    float *out = run_preprocess(&image, zero_mean, unit_std, 1, 1, 1, 1);
    g_assert_cmpfloat(out[0], >=, 254.0f / 255.0f);
    g_assert_cmpfloat(out[1], <=, 1.0f / 255.0f);
    g_assert_cmpfloat(out[2], <=, 1.0f / 255.0f);
    g_free(out);
    /* full range: Y 255 is white, Y 0 black */
    image.full_range = TRUE;
    y = 255, u = v = 128;
    out = run_preprocess(&image, zero_mean, unit_std, 1, 1, 1, 1);
    for (int c = 0; c < 3; c++)
        g_assert_cmpfloat(out[c], ==, 1.0f);
    g_free(out);
}

/* ------------------------------------------------------------------------ */
/* Validation                                                                 */

static void expect_invalid(const vd_image *image, const float *mean, const float *std, int rh,
                           int rw, int ph, int pw, float *dst, const char *fragment)
{
    GError *error = NULL;
    g_assert_false(vd_cpu_preprocess(image, mean, std, VD_RESIZE_ARITHMETIC_TORCH1, rh, rw, ph, pw, dst, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    if (!strstr(error->message, fragment))
        g_error("message \"%s\" does not mention \"%s\"", error->message, fragment);
    g_error_free(error);
}

static void test_invalid(void)
{
    uint8_t pixels[64] = {0};
    float dst[32 * 32 * 3];
    vd_image good = vd_image_rgb(pixels, 4, 4);
    /* sanity: the base description is accepted */
    GError *error = NULL;
    g_assert_true(vd_cpu_preprocess(&good, zero_mean, unit_std, VD_RESIZE_ARITHMETIC_TORCH1, 4, 4, 32, 32, dst, &error));
    g_assert_no_error(error);

    expect_invalid(NULL, zero_mean, unit_std, 4, 4, 32, 32, dst, "NULL");
    vd_image bad = good;
    bad.width = 0;
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "0x4");
    bad = good;
    bad.height = -3;
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "not positive");
    bad = good;
    bad.strides[0] = 11; /* 4 RGB pixels need 12 */
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "stride 11");
    bad = good;
    bad.format = VD_FORMAT_BGRX; /* 4 bytes per pixel: 16 > 12 */
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "16 bytes");
    bad = good;
    bad.planes[0] = NULL;
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "plane 0");
    bad = good;
    bad.format = (vd_pixel_format)42;
    expect_invalid(&bad, zero_mean, unit_std, 4, 4, 32, 32, dst, "format 42");

    /* 5x3 NV12: chroma rows need 2 * ceil(5/2) = 6 bytes */
    vd_image nv12 = {0};
    nv12.format = VD_FORMAT_NV12;
    nv12.width = 5;
    nv12.height = 3;
    nv12.planes[0] = pixels;
    nv12.strides[0] = 5;
    nv12.planes[1] = pixels;
    nv12.strides[1] = 6;
    g_assert_true(vd_cpu_preprocess(&nv12, zero_mean, unit_std, VD_RESIZE_ARITHMETIC_TORCH1, 3, 5, 32, 32, dst, &error));
    nv12.strides[1] = 5;
    expect_invalid(&nv12, zero_mean, unit_std, 3, 5, 32, 32, dst, "UV");
    nv12.strides[1] = 6;
    nv12.planes[1] = NULL;
    expect_invalid(&nv12, zero_mean, unit_std, 3, 5, 32, 32, dst, "plane 1");
    nv12.planes[1] = pixels;
    nv12.matrix = (vd_color_matrix)9;
    expect_invalid(&nv12, zero_mean, unit_std, 3, 5, 32, 32, dst, "matrix 9");

    /* I420: U and V rows of ceil(5/2) = 3 bytes */
    vd_image i420 = nv12;
    i420.format = VD_FORMAT_I420;
    i420.matrix = VD_COLOR_MATRIX_BT709;
    i420.strides[1] = 3;
    i420.planes[2] = pixels;
    i420.strides[2] = 3;
    g_assert_true(vd_cpu_preprocess(&i420, zero_mean, unit_std, VD_RESIZE_ARITHMETIC_TORCH1, 3, 5, 32, 32, dst, &error));
    g_assert_no_error(error);
    i420.strides[2] = 2;
    expect_invalid(&i420, zero_mean, unit_std, 3, 5, 32, 32, dst, "(V)");
    i420.strides[2] = 3;
    i420.planes[2] = NULL;
    expect_invalid(&i420, zero_mean, unit_std, 3, 5, 32, 32, dst, "plane 2");

    /* sizes, normalisation, output */
    expect_invalid(&good, zero_mean, unit_std, 0, 4, 32, 32, dst, "resized");
    expect_invalid(&good, zero_mean, unit_std, 40, 4, 32, 32, dst, "padded");
    const float zero_std[3] = {1, 0, 1};
    expect_invalid(&good, zero_mean, zero_std, 4, 4, 32, 32, dst, "channel 1");
    expect_invalid(&good, NULL, unit_std, 4, 4, 32, 32, dst, "mean");
    expect_invalid(&good, zero_mean, unit_std, 4, 4, 32, 32, NULL, "output");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/preprocess/identity-size", test_identity_size);
    g_test_add_func("/preprocess/upsample-2x", test_upsample_2x);
    g_test_add_func("/preprocess/downsample", test_downsample);
    g_test_add_func("/preprocess/blend-fma-order", test_blend_fma_order);
    g_test_add_func("/preprocess/resize-arithmetic-torch2", test_resize_arithmetic_torch2);
    g_test_add_func("/preprocess/kernel-pixel", test_kernel_pixel);
    g_test_add_func("/preprocess/packed-formats", test_packed_formats);
    g_test_add_func("/preprocess/yuv-formats", test_yuv_formats);
    g_test_add_func("/preprocess/yuv-round-trip", test_yuv_round_trip);
    g_test_add_func("/preprocess/yuv-known-values", test_yuv_known_values);
    g_test_add_func("/preprocess/invalid", test_invalid);
    return g_test_run();
}
