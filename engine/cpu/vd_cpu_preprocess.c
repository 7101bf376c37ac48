/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CPU pre-processing: colour conversion, normalisation, bilinear resize and
 * padding, bit-exact with torchvision's GeneralizedRCNNTransform on the CPU kernels
 * of torch 1.13 or 2.x (spec §1). Compiled with -ffp-contract=off; the resize blends
 * use explicit fmaf() (vd_math_resize_blend, vd_math_resize_blend_torch2_small).
 * The rule of each resize comes from vd_math.h's vd_math_resize_plan_for,
 * vd_math_resize_source_rule and vd_math_resize_blend_rule, the functions the CUDA
 * kernel (kernels/preprocess.cu) calls per pixel. */
#include "vd_cpu_ops.h"
#include "vd_context_private.h"

#include <string.h>

#include "vd_math.h"

/* the model file's rule is vd_math.h's rule by value */
G_STATIC_ASSERT((int)VD_RESIZE_ARITHMETIC_TORCH1 == VD_MATH_RESIZE_TORCH1);
G_STATIC_ASSERT((int)VD_RESIZE_ARITHMETIC_TORCH2 == VD_MATH_RESIZE_TORCH2);

/* Source pixels are 8-bit, so normalisation is a table: lut[c][v] =
 * (f32(v) / 255 - mean[c]) / std[c] (vd_math_normalise), exactly the float32
 * expression torchvision evaluates per pixel. */
typedef struct {
    float lut[3][256];
} normalise_table;

static void normalise_table_init(normalise_table *table, const float mean[3], const float std[3])
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            table->lut[c][v] = vd_math_normalise(v, mean[c], std[c]);
}

/* Bytes per pixel of a packed format and the byte offsets of R, G, B. */
static gboolean packed_layout(vd_pixel_format format, int *bpp, int offsets[3])
{
    switch (format) {
    case VD_FORMAT_RGB:
        *bpp = 3, offsets[0] = 0, offsets[1] = 1, offsets[2] = 2;
        return TRUE;
    case VD_FORMAT_BGR:
        *bpp = 3, offsets[0] = 2, offsets[1] = 1, offsets[2] = 0;
        return TRUE;
    case VD_FORMAT_RGBA:
    case VD_FORMAT_RGBX:
        *bpp = 4, offsets[0] = 0, offsets[1] = 1, offsets[2] = 2;
        return TRUE;
    case VD_FORMAT_BGRA:
    case VD_FORMAT_BGRX:
        *bpp = 4, offsets[0] = 2, offsets[1] = 1, offsets[2] = 0;
        return TRUE;
    default:
        return FALSE;
    }
}

/* One image row to normalised RGB floats at @dst (3 per pixel). */
VD_CPU_HOT static void normalise_row(const vd_image *image, const normalise_table *table, int y,
                                     float *dst)
{
    int width = image->width;
    const float *lut_r = table->lut[0], *lut_g = table->lut[1], *lut_b = table->lut[2];
    int bpp, offsets[3];
    if (packed_layout(image->format, &bpp, offsets)) {
        const uint8_t *src = image->planes[0] + (size_t)y * image->strides[0];
        const uint8_t *r = src + offsets[0], *g = src + offsets[1], *b = src + offsets[2];
        for (int x = 0; x < width; x++) {
            dst[3 * x + 0] = lut_r[r[(size_t)x * bpp]];
            dst[3 * x + 1] = lut_g[g[(size_t)x * bpp]];
            dst[3 * x + 2] = lut_b[b[(size_t)x * bpp]];
        }
        return;
    }
    /* 4:2:0: each chroma sample covers a 2x2 block of luma (nearest, no
     * chroma filtering); the CUDA kernel does the same */
    vd_math_yuv_coeffs coeffs = vd_math_yuv_coeffs_for((int)image->matrix, image->full_range);
    const uint8_t *luma = image->planes[0] + (size_t)y * image->strides[0];
    const uint8_t *u_row, *v_row;
    int chroma_step;
    if (image->format == VD_FORMAT_NV12) {
        u_row = image->planes[1] + (size_t)(y / 2) * image->strides[1];
        v_row = u_row + 1;
        chroma_step = 2;
    } else {
        u_row = image->planes[1] + (size_t)(y / 2) * image->strides[1];
        v_row = image->planes[2] + (size_t)(y / 2) * image->strides[2];
        chroma_step = 1;
    }
    for (int x = 0; x < width; x++) {
        int cx = (x / 2) * chroma_step;
        unsigned char rgb[3];
        vd_math_yuv_to_rgb(&coeffs, luma[x], u_row[cx], v_row[cx], rgb);
        dst[3 * x + 0] = lut_r[rgb[0]];
        dst[3 * x + 1] = lut_g[rgb[1]];
        dst[3 * x + 2] = lut_b[rgb[2]];
    }
}

/* Per output index of one axis: the two source indices (already multiplied by
 * the element stride of that axis) and the two lambdas. */
typedef struct {
    int *i0, *i1;
    float *l0, *l1;
} resize_axis;

static void resize_axis_init(resize_axis *axis, int *index_memory, float *lambda_memory,
                             int arithmetic, float ratio, int in_size, int out_size,
                             int index_scale)
{
    axis->i0 = index_memory;
    axis->i1 = index_memory + out_size;
    axis->l0 = lambda_memory;
    axis->l1 = lambda_memory + out_size;
    for (int d = 0; d < out_size; d++) {
        int i0, i1;
        vd_math_resize_source_rule(arithmetic, ratio, d, in_size, out_size, &i0, &i1, &axis->l0[d],
                                   &axis->l1[d]);
        axis->i0[d] = i0 * index_scale;
        axis->i1[d] = i1 * index_scale;
    }
}

/* One output row of the bilinear resize (height weight outermost) with @blend
 * (VD_MATH_RESIZE_BLEND_*, vd_math_resize_blend_of) followed by the zero padding
 * of the row. */
VD_CPU_HOT static void resize_row(const float *normalised, const resize_axis *rows,
                                  const resize_axis *cols, int out_y, int out_w, int padded_w,
                                  int blend, float *dst)
{
    const float *r0 = normalised + rows->i0[out_y];
    const float *r1 = normalised + rows->i1[out_y];
    float l0h = rows->l0[out_y], l1h = rows->l1[out_y];
    for (int x = 0; x < out_w; x++) {
        int x0 = cols->i0[x], x1 = cols->i1[x];
        float l0w = cols->l0[x], l1w = cols->l1[x];
        for (int c = 0; c < 3; c++)
            dst[3 * x + c] = vd_math_resize_blend_rule(blend, l0h, l1h, l0w, l1w, r0[x0 + c],
                                                       r0[x1 + c], r1[x0 + c], r1[x1 + c]);
    }
    memset(dst + 3 * (size_t)out_w, 0, 3 * (size_t)(padded_w - out_w) * sizeof(float));
}

gboolean vd_cpu_preprocess(const vd_image *image, const float mean[3], const float std[3],
                           vd_resize_arithmetic arithmetic, int resized_h, int resized_w,
                           int padded_h, int padded_w, float *dst, GError **error)
{
    if (!vd_image_validate(image, error))
        return FALSE;
    if (!mean || !std || !dst) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "pre-processing needs mean, std and an output buffer");
        return FALSE;
    }
    for (int c = 0; c < 3; c++) {
        if (!(std[c] != 0.0f) || !isfinite(std[c]) || !isfinite(mean[c])) {
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                        "normalisation of channel %d has mean %g and std %g (std must be "
                        "finite and non-zero)",
                        c, (double)mean[c], (double)std[c]);
            return FALSE;
        }
    }
    /* int element offsets inside the source and the output must not overflow */
    if ((int64_t)image->width * image->height * 3 > G_MAXINT ||
        (int64_t)padded_w * padded_h * 3 > G_MAXINT) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "image %dx%d or padded size %dx%d is too large", image->width, image->height,
                    padded_w, padded_h);
        return FALSE;
    }
    if (resized_h <= 0 || resized_w <= 0 || padded_h < resized_h || padded_w < resized_w) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "resized size %dx%d must be positive and fit in the padded size %dx%d",
                    resized_w, resized_h, padded_w, padded_h);
        return FALSE;
    }

    gboolean ok = FALSE;
    int width = image->width, height = image->height;
    size_t row_floats = 3 * (size_t)width;
    size_t out_row_floats = 3 * (size_t)padded_w;
    normalise_table *table = g_try_new(normalise_table, 1);
    float *normalised = NULL;
    int *indices = NULL;
    float *lambdas = NULL;
    if (!table)
        goto out_oom;
    normalise_table_init(table, mean, std);

    if (resized_h == height && resized_w == width) {
        /* both axes copied: normalise straight into the output */
#pragma omp parallel for schedule(static)
        for (int y = 0; y < height; y++) {
            float *row = dst + (size_t)y * out_row_floats;
            normalise_row(image, table, y, row);
            memset(row + row_floats, 0, (out_row_floats - row_floats) * sizeof(float));
        }
    } else {
        normalised = g_try_new(float, row_floats *(size_t)height);
        indices = g_try_new(int, 2 * ((size_t)resized_h + resized_w));
        lambdas = g_try_new(float, 2 * ((size_t)resized_h + resized_w));
        if (!normalised || !indices || !lambdas)
            goto out_oom;
        vd_math_resize_plan plan =
            vd_math_resize_plan_for((int)arithmetic, height, width, resized_h, resized_w);
        resize_axis rows, cols;
        resize_axis_init(&rows, indices, lambdas, plan.arithmetic, plan.ratio_h, height, resized_h,
                         (int)row_floats);
        resize_axis_init(&cols, indices + 2 * resized_h, lambdas + 2 * resized_h, plan.arithmetic,
                         plan.ratio_w, width, resized_w, 3);
#pragma omp parallel
        {
#pragma omp for schedule(static)
            for (int y = 0; y < height; y++)
                normalise_row(image, table, y, normalised + (size_t)y * row_floats);
#pragma omp for schedule(static)
            for (int y = 0; y < resized_h; y++)
                resize_row(normalised, &rows, &cols, y, resized_w, padded_w, plan.blend,
                           dst + (size_t)y * out_row_floats);
        }
    }
    memset(dst + (size_t)resized_h * out_row_floats, 0,
           (size_t)(padded_h - resized_h) * out_row_floats * sizeof(float));
    ok = TRUE;
    goto out_free;

out_oom:
    g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                "out of memory for pre-processing a %dx%d image", width, height);
out_free:
    g_free(lambdas);
    g_free(indices);
    g_free(normalised);
    g_free(table);
    return ok;
}
