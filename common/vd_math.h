/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-element maths of the small detection ops, shared by the CPU backend
 * (engine/cpu/) and the CUDA kernels (kernels/<op>.cu), so that the CPU unit tests
 * run the very arithmetic the GPU runs. Every function is `static inline` and
 * host/device (VD_HD); the header is plain C99 that C++/nvcc also accepts and
 * needs nothing beyond <math.h>.
 *
 * Rounding rules (the point of this header). torchvision evaluates each
 * operation of these formulas as its own tensor kernel, so every product and
 * every sum is rounded separately; reproducing its bits means no FMA
 * contraction:
 *   - host: translation units that include this header must be compiled with
 *     -ffp-contract=off (engine/meson.build sets it). GCC ignores
 *     `#pragma STDC FP_CONTRACT`, so the flag is the only reliable switch.
 *   - device: the vd_math_f* helpers below use the __f*_rn intrinsics, which
 *     nvcc never contracts, whatever --fmad says.
 * The one place where torch itself fuses (its CPU bilinear resize, compiled with
 * -mfma) uses fmaf() explicitly: vd_math_resize_blend() and torch 2.x's
 * vd_math_resize_source_torch2() and vd_math_resize_blend_torch2_small().
 *
 * exp is our own (vd_math_expf): the algorithm of SLEEF's expf_u10, which is
 * what torch's CPU kernels (exp, sigmoid, softmax) evaluate, ported with
 * explicit fmaf so that the CPU, the GPU and torch agree bit for bit (checked
 * against libsleef on every float in [-110, 110]). log2f is the platform's
 * (glibc and CUDA may differ in the last ulp; only a LevelMapper boundary
 * could notice); sqrtf is correctly rounded everywhere.
 *
 * Conventions: boxes are (x1, y1, x2, y2) float32 in continuous pixel
 * coordinates with no +1 anywhere; "spec §n" refers to
 * docs/torchvision-inference.md. */
#ifndef VD_MATH_H
#define VD_MATH_H

#include <math.h>

#if defined(__CUDACC__)
#define VD_HD __host__ __device__
#else
#define VD_HD
#endif

#define VD_MATH_FN static inline VD_HD

/* log(1000/16) as float32: the upper clamp of dw/dh in BoxCoder.decode (spec §4.3). */
#define VD_MATH_BBOX_XFORM_CLIP 4.135166556742356f

/* ------------------------------------------------------------------------ */
/* Separately rounded float32 arithmetic                                     */

VD_MATH_FN float vd_math_fmul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

VD_MATH_FN float vd_math_fadd(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

VD_MATH_FN float vd_math_fsub(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

VD_MATH_FN float vd_math_fdiv(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b); /* IEEE division even under --use_fast_math */
#else
    return a / b;
#endif
}

/* std::max / std::min exactly as C++ defines them ((a < b) ? b : a): torch's
 * kernels use these, and the NaN behaviour follows from the operand order. */
VD_MATH_FN float vd_math_std_max(float a, float b)
{
    return (a < b) ? b : a;
}

VD_MATH_FN float vd_math_std_min(float a, float b)
{
    return (b < a) ? b : a;
}

/* torch.clamp(x, lo, hi): NaN stays NaN. */
VD_MATH_FN float vd_math_clamp(float x, float lo, float hi)
{
    if (x < lo)
        return lo;
    if (x > hi)
        return hi;
    return x;
}

/* MobileNetV3's activations as torch writes them (hardswish: x * min(max(x + 3,
 * 0), 6) / 6; hardsigmoid: min(max(x + 3, 0), 6) / 6), each operation rounded
 * to float32; NaN propagates. */
VD_MATH_FN float vd_math_hardsigmoid(float x)
{
    return vd_math_fdiv(vd_math_std_min(vd_math_std_max(vd_math_fadd(x, 3.0f), 0.0f), 6.0f), 6.0f);
}

VD_MATH_FN float vd_math_hardswish(float x)
{
    float r6 = vd_math_std_min(vd_math_std_max(vd_math_fadd(x, 3.0f), 0.0f), 6.0f);
    return vd_math_fdiv(vd_math_fmul(x, r6), 6.0f);
}

/* 2^q as a float for -126 <= q <= 127, built from the exponent bits. */
VD_MATH_FN float vd_math_pow2i(int q)
{
#if defined(__CUDA_ARCH__)
    return __int_as_float((q + 0x7f) << 23);
#else
    union {
        unsigned int bits;
        float value;
    } pun;
    pun.bits = (unsigned int)(q + 0x7f) << 23;
    return pun.value;
#endif
}

/* exp(d) exactly as SLEEF 3.5's xexpf (u10, FMA flavour) computes it, the exp
 * of torch's AVX2/AVX512 CPU kernels: q = rint(d / ln 2), Cody-Waite reduction
 * s = d - q ln 2 in two FMAs, a degree-6 polynomial in Horner form with FMAs,
 * then u * 2^q as two exact scalings. Max error 1 ulp; +0 below -104, +inf
 * above 100, NaN for NaN. */
VD_MATH_FN float vd_math_expf(float d)
{
    if (d != d)
        return d;
    if (d < -104.0f)
        return 0.0f;
    if (d > 100.0f)
        return HUGE_VALF;
    int q = (int)rintf(vd_math_fmul(d, 1.442695040888963407359924681001892137426645954152985934f));
    float s = fmaf((float)q, -0.693145751953125f, d);
    s = fmaf((float)q, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, s, 0.00139304355252534151077271f);
    u = fmaf(u, s, 0.00833336077630519866943359f);
    u = fmaf(u, s, 0.0416664853692054748535156f);
    u = fmaf(u, s, 0.166666671633720397949219f);
    u = fmaf(u, s, 0.5f);
    u = vd_math_fadd(1.0f, fmaf(vd_math_fmul(s, s), u, s));
    int half = q >> 1; /* arithmetic shift, as SLEEF's vsra */
    return vd_math_fmul(vd_math_fmul(u, vd_math_pow2i(half)), vd_math_pow2i(q - half));
}

/* ------------------------------------------------------------------------ */
/* Boxes                                                                      */

VD_MATH_FN float vd_math_box_area(const float *box)
{
    return vd_math_fmul(vd_math_fsub(box[2], box[0]), vd_math_fsub(box[3], box[1]));
}

/* IoU of @a and @b given their areas (spec §7.1, torchvision's CPU nms kernel):
 * inter = max(0, min(x2) - max(x1)) * max(0, min(y2) - max(y1)),
 * iou = inter / ((area_a + area_b) - inter). Two empty boxes give 0/0 = NaN,
 * which never exceeds a threshold (torchvision keeps both as well). */
VD_MATH_FN float vd_math_box_iou_areas(const float *a, float area_a, const float *b, float area_b)
{
    float xx1 = vd_math_std_max(a[0], b[0]);
    float yy1 = vd_math_std_max(a[1], b[1]);
    float xx2 = vd_math_std_min(a[2], b[2]);
    float yy2 = vd_math_std_min(a[3], b[3]);
    float w = vd_math_std_max(0.0f, vd_math_fsub(xx2, xx1));
    float h = vd_math_std_max(0.0f, vd_math_fsub(yy2, yy1));
    float inter = vd_math_fmul(w, h);
    return vd_math_fdiv(inter, vd_math_fsub(vd_math_fadd(area_a, area_b), inter));
}

VD_MATH_FN float vd_math_box_iou(const float *a, const float *b)
{
    return vd_math_box_iou_areas(a, vd_math_box_area(a), b, vd_math_box_area(b));
}

/* BoxCoder.decode of one box (spec §4.3): @ref the reference box (anchor or
 * proposal), @d the four deltas (dx, dy, dw, dh), weights (wx, wy, ww, wh),
 * dw/dh clamped from above at @clip (VD_MATH_BBOX_XFORM_CLIP). Every operation
 * rounded on its own, in torchvision's order. @out may alias @ref or @d: every
 * input is read before the first output is written. */
VD_MATH_FN void vd_math_box_decode(const float *ref, const float *d, float wx, float wy, float ww,
                                   float wh, float clip, float *out)
{
    float w = vd_math_fsub(ref[2], ref[0]);
    float h = vd_math_fsub(ref[3], ref[1]);
    float cx = vd_math_fadd(ref[0], vd_math_fmul(0.5f, w));
    float cy = vd_math_fadd(ref[1], vd_math_fmul(0.5f, h));
    float dx = vd_math_fdiv(d[0], wx);
    float dy = vd_math_fdiv(d[1], wy);
    float dw = vd_math_fdiv(d[2], ww);
    float dh = vd_math_fdiv(d[3], wh);
    /* torch.clamp(max=clip): upper bound only, NaN propagates */
    if (dw > clip)
        dw = clip;
    if (dh > clip)
        dh = clip;
    float pcx = vd_math_fadd(vd_math_fmul(dx, w), cx);
    float pcy = vd_math_fadd(vd_math_fmul(dy, h), cy);
    float pw = vd_math_fmul(vd_math_expf(dw), w);
    float ph = vd_math_fmul(vd_math_expf(dh), h);
    float half_w = vd_math_fmul(0.5f, pw);
    float half_h = vd_math_fmul(0.5f, ph);
    out[0] = vd_math_fsub(pcx, half_w);
    out[1] = vd_math_fsub(pcy, half_h);
    out[2] = vd_math_fadd(pcx, half_w);
    out[3] = vd_math_fadd(pcy, half_h);
}

/* clip_boxes_to_image: x to [0, width], y to [0, height], in place. */
VD_MATH_FN void vd_math_box_clip(float *box, float height, float width)
{
    box[0] = vd_math_clamp(box[0], 0.0f, width);
    box[1] = vd_math_clamp(box[1], 0.0f, height);
    box[2] = vd_math_clamp(box[2], 0.0f, width);
    box[3] = vd_math_clamp(box[3], 0.0f, height);
}

/* sigmoid as torch's vectorised CPU kernel evaluates it: 1 / (1 + exp(-x)).
 * (torch evaluates the last n % 16 elements of a tensor with glibc's expf
 * instead, which agrees with SLEEF for most inputs.) */
VD_MATH_FN float vd_math_sigmoid(float x)
{
    return vd_math_fdiv(1.0f, vd_math_fadd(1.0f, vd_math_expf(-x)));
}

/* ------------------------------------------------------------------------ */
/* Anchors (spec §3.1)                                                        */

/* The cell anchor of one (size, ratio) pair, ratio = height / width:
 * hr = sqrt(ratio), wr = 1 / hr, w = wr * size, h = hr * size,
 * round-half-to-even([-w, -h, w, h] / 2). rintf rounds half to even in the
 * default rounding mode, like torch.round. */
VD_MATH_FN void vd_math_cell_anchor(float size, float ratio, float *out)
{
    float hr = sqrtf(ratio);
    float wr = vd_math_fdiv(1.0f, hr);
    float w = vd_math_fmul(wr, size);
    float h = vd_math_fmul(hr, size);
    out[0] = rintf(vd_math_fdiv(-w, 2.0f));
    out[1] = rintf(vd_math_fdiv(-h, 2.0f));
    out[2] = rintf(vd_math_fdiv(w, 2.0f));
    out[3] = rintf(vd_math_fdiv(h, 2.0f));
}

/* ------------------------------------------------------------------------ */
/* MultiScaleRoIAlign level mapper (spec §5.3)                                */

/* Level index (0-based from @k_min) of a box for canonical scale 224, canonical
 * level 4, eps 1e-6: floor((4 + log2(sqrt(area) / 224)) + 1e-6) clamped to
 * [k_min, k_max]. A zero-area box (log2(0) = -inf) maps to index 0; so does a
 * NaN (torchvision's int64 cast of NaN is undefined; index 0 keeps every caller
 * in bounds). */
VD_MATH_FN int vd_math_roi_level(const float *box, int k_min, int k_max)
{
    float s = sqrtf(vd_math_box_area(box));
    float lvl = floorf(vd_math_fadd(vd_math_fadd(4.0f, log2f(vd_math_fdiv(s, 224.0f))), 1e-6f));
    if (!(lvl >= (float)k_min))
        return 0; /* also NaN */
    if (lvl > (float)k_max)
        lvl = (float)k_max;
    return (int)lvl - k_min;
}

/* ------------------------------------------------------------------------ */
/* roi_align (spec §5.5; aligned=True as torchvision's op) and its gradient    */

/* Per-RoI geometry in feature-map coordinates. */
typedef struct {
    float start_x, start_y; /* x1 * scale - offset, y1 * scale - offset */
    float bin_w, bin_h;     /* extent / pooled (extent >= 1 unless aligned) */
    int grid_h, grid_w;     /* samples per bin along y / x */
    float count;            /* max(grid_h * grid_w, 1), the divisor */
} vd_math_roi_geometry;

/* Largest adaptive sampling grid; only reached by absurd RoIs (torchvision has
 * no limit, but an unbounded int product would overflow). */
#define VD_MATH_ROI_MAX_GRID 1024

/* ceil(extent / pooled) samples per bin side. An extent <= 0 (aligned=True lets
 * a RoI have no or a negative size) gives 0 samples, as torchvision's loops over
 * a grid of ceil(...) <= 0 run no iteration; NaN gives 0 too (torchvision would
 * convert NaN to int). With aligned=False the extent is >= 1, so the grid >= 1. */
VD_MATH_FN int vd_math_roi_adaptive_grid(float extent, int pooled)
{
    float g = ceilf(vd_math_fdiv(extent, (float)pooled));
    if (!(g >= 1.0f))
        return 0;
    if (g > (float)VD_MATH_ROI_MAX_GRID)
        return VD_MATH_ROI_MAX_GRID;
    return (int)g;
}

/* @box (x1, y1, x2, y2) in image pixels. sampling_ratio <= 0 selects the
 * adaptive grid ceil(extent / pooled). @aligned (torchvision's aligned=True)
 * shifts the box by -0.5 feature pixel after scaling and keeps its extent as it
 * is (zero or negative included); aligned=False subtracts 0 (an exact no-op) and
 * makes the extent at least 1. */
VD_MATH_FN vd_math_roi_geometry vd_math_roi_geometry_aligned(const float *box, float spatial_scale,
                                                             int pooled_h, int pooled_w,
                                                             int sampling_ratio, int aligned)
{
    vd_math_roi_geometry g;
    float offset = aligned ? 0.5f : 0.0f;
    float sx1 = vd_math_fsub(vd_math_fmul(box[0], spatial_scale), offset);
    float sy1 = vd_math_fsub(vd_math_fmul(box[1], spatial_scale), offset);
    float sx2 = vd_math_fsub(vd_math_fmul(box[2], spatial_scale), offset);
    float sy2 = vd_math_fsub(vd_math_fmul(box[3], spatial_scale), offset);
    float rw = vd_math_fsub(sx2, sx1);
    float rh = vd_math_fsub(sy2, sy1);
    if (!aligned) {
        /* a RoI is at least one feature pixel wide (std::max) */
        rw = vd_math_std_max(rw, 1.0f);
        rh = vd_math_std_max(rh, 1.0f);
    }
    g.start_x = sx1;
    g.start_y = sy1;
    g.bin_w = vd_math_fdiv(rw, (float)pooled_w);
    g.bin_h = vd_math_fdiv(rh, (float)pooled_h);
    g.grid_h = sampling_ratio > 0 ? sampling_ratio : vd_math_roi_adaptive_grid(rh, pooled_h);
    g.grid_w = sampling_ratio > 0 ? sampling_ratio : vd_math_roi_adaptive_grid(rw, pooled_w);
    int count = g.grid_h * g.grid_w;
    g.count = (float)(count > 1 ? count : 1);
    return g;
}

/* aligned=False, the detection models' setting (spec §5.5). */
VD_MATH_FN vd_math_roi_geometry vd_math_roi_geometry_of(const float *box, float spatial_scale,
                                                        int pooled_h, int pooled_w,
                                                        int sampling_ratio)
{
    return vd_math_roi_geometry_aligned(box, spatial_scale, pooled_h, pooled_w, sampling_ratio, 0);
}

/* Sample coordinate of sample @i (of @grid) in bin @bin along one axis:
 * (start + bin*bin_size) + ((i + 0.5) * bin_size) / grid. */
VD_MATH_FN float vd_math_roi_sample_coord(float start, int bin, float bin_size, int i, int grid)
{
    return vd_math_fadd(vd_math_fadd(start, vd_math_fmul((float)bin, bin_size)),
                        vd_math_fdiv(vd_math_fmul((float)i + 0.5f, bin_size), (float)grid));
}

/* One bilinear sample: pixel indices (y * width + x) of the four neighbours and
 * their weights w1 = hy*hx, w2 = hy*lx, w3 = ly*hx, w4 = ly*lx, to be combined
 * as ((w1*v1 + w2*v2) + w3*v3) + w4*v4. */
typedef struct {
    int pos[4];
    float w[4];
} vd_math_roi_sample;

/* Whether a sample at (y, x) reads the map: not strictly outside [-1, height] x
 * [-1, width] (y == height is still sampled, clamped to the last row). NaN
 * coordinates count as outside (torchvision would cast NaN to int and read out
 * of bounds). The backward adds nothing for a sample outside. */
VD_MATH_FN int vd_math_roi_sample_inside(float y, float x, int height, int width)
{
    return y >= -1.0f && y <= (float)height && x >= -1.0f && x <= (float)width;
}

/* Samples outside (vd_math_roi_sample_inside) get all-zero weights at pixel 0
 * (torchvision's CPU forward reads them as 0 * v[0]). */
VD_MATH_FN vd_math_roi_sample vd_math_roi_bilinear(float y, float x, int height, int width)
{
    vd_math_roi_sample s;
    int k;
    if (!vd_math_roi_sample_inside(y, x, height, width)) {
        for (k = 0; k < 4; k++) {
            s.pos[k] = 0;
            s.w[k] = 0.0f;
        }
        return s;
    }
    if (y <= 0.0f)
        y = 0.0f;
    if (x <= 0.0f)
        x = 0.0f;
    int y_low = (int)y;
    int x_low = (int)x;
    int y_high, x_high;
    if (y_low >= height - 1) {
        y_high = y_low = height - 1;
        y = (float)y_low;
    } else {
        y_high = y_low + 1;
    }
    if (x_low >= width - 1) {
        x_high = x_low = width - 1;
        x = (float)x_low;
    } else {
        x_high = x_low + 1;
    }
    float ly = vd_math_fsub(y, (float)y_low);
    float lx = vd_math_fsub(x, (float)x_low);
    float hy = vd_math_fsub(1.0f, ly);
    float hx = vd_math_fsub(1.0f, lx);
    s.pos[0] = y_low * width + x_low;
    s.pos[1] = y_low * width + x_high;
    s.pos[2] = y_high * width + x_low;
    s.pos[3] = y_high * width + x_high;
    s.w[0] = vd_math_fmul(hy, hx);
    s.w[1] = vd_math_fmul(hy, lx);
    s.w[2] = vd_math_fmul(ly, hx);
    s.w[3] = vd_math_fmul(ly, lx);
    return s;
}

/* ((w1*v1 + w2*v2) + w3*v3) + w4*v4 */
VD_MATH_FN float vd_math_roi_blend(const vd_math_roi_sample *s, float v1, float v2, float v3,
                                   float v4)
{
    return vd_math_fadd(
        vd_math_fadd(vd_math_fadd(vd_math_fmul(s->w[0], v1), vd_math_fmul(s->w[1], v2)),
                     vd_math_fmul(s->w[2], v3)),
        vd_math_fmul(s->w[3], v4));
}

/* The gradient one neighbour of a sample receives from its bin:
 * (grad_bin * w) / count, rounded twice in that order, as torchvision's
 * backward computes it (a division, not a product with 1/count). */
VD_MATH_FN float vd_math_roi_grad_share(float grad_bin, float w, float count)
{
    return vd_math_fdiv(vd_math_fmul(grad_bin, w), count);
}

/* ------------------------------------------------------------------------ */
/* GeneralizedRCNNTransform (spec §1.3, §1.4)                                 */

/* Resized and padded size of an @height x @width image (spec §1.3, §1.4):
 * resized = floor(double(size) * scale), padded = ceil(resized / divisible) *
 * divisible, scale = min(min_size / min(h, w), max_size / max(h, w)) computed as
 * the torchvision that exported the model computes it:
 *   - @float32_scale 0: in double (torchvision >= 0.16, eager);
 *   - @float32_scale 1: in float32 as torchvision 0.10-0.15 computes it, a Python
 *     float over a 0-d float32 tensor, which torch evaluates as reciprocal() *
 *     size: f32(f32(1 / side) * size), two roundings (a correctly rounded float32
 *     division differs for about a quarter of the sides: 427x640 at 800 would
 *     keep its 800 rows), then the float32 minimum, widened exactly by .item().
 * Only the resized size depends on the rule: the interpolation recomputes its
 * ratios from the sizes (vd_math_resize_ratio). */
VD_MATH_FN void vd_math_transform_size(int height, int width, int min_size, int max_size,
                                       int size_divisible, int float32_scale, int *resized_h,
                                       int *resized_w, int *padded_h, int *padded_w)
{
    int short_side = height < width ? height : width;
    int long_side = height < width ? width : height;
    double scale;
    if (float32_scale) {
        float scale_short = vd_math_fmul(vd_math_fdiv(1.0f, (float)short_side), (float)min_size);
        float scale_long = vd_math_fmul(vd_math_fdiv(1.0f, (float)long_side), (float)max_size);
        scale = (double)(scale_long < scale_short ? scale_long : scale_short);
    } else {
        double scale_short = (double)min_size / (double)short_side;
        double scale_long = (double)max_size / (double)long_side;
        scale = scale_short < scale_long ? scale_short : scale_long;
    }
    int rh = (int)floor((double)height * scale);
    int rw = (int)floor((double)width * scale);
    *resized_h = rh;
    *resized_w = rw;
    if (size_divisible > 1) {
        *padded_h = (int)ceil((double)rh / (double)size_divisible) * size_divisible;
        *padded_w = (int)ceil((double)rw / (double)size_divisible) * size_divisible;
    } else {
        *padded_h = rh;
        *padded_w = rw;
    }
}

/* The float32 ratio of one resize axis: f32(n) / f32(o) (not 1/scale). */
VD_MATH_FN float vd_math_resize_ratio(int in_size, int out_size)
{
    return vd_math_fdiv((float)in_size, (float)out_size);
}

/* Source indices and lambdas of output index @d along one axis (torch 1.13 CPU
 * upsample_bilinear2d, align_corners=False): src = max(r*(d+0.5) - 0.5, 0) and
 * l1 = clamp(src - i0, 0, 1) in double, l1 rounded to float32, l0 =
 * f32(1 - l1). An axis with out == in is a copy (i0 = i1 = d, l0 = 1, l1 = 0).
 * r*(d+0.5) is exact in double (24 + 13 significant bits), so the result does
 * not depend on FMA contraction, on the host or the device. */
VD_MATH_FN void vd_math_resize_source(float ratio, int d, int in_size, int out_size, int *i0,
                                      int *i1, float *l0, float *l1)
{
    if (in_size == out_size) {
        *i0 = d;
        *i1 = d;
        *l0 = 1.0f;
        *l1 = 0.0f;
        return;
    }
    double src = (double)ratio * ((double)d + 0.5) - 0.5;
    if (src < 0.0)
        src = 0.0;
    int lo = (int)src;
    *i0 = lo;
    *i1 = lo + (lo < in_size - 1 ? 1 : 0);
    double lambda = src - (double)lo;
    if (lambda < 0.0)
        lambda = 0.0;
    if (lambda > 1.0)
        lambda = 1.0;
    float l1f = (float)lambda;
    *l1 = l1f;
    *l0 = vd_math_fsub(1.0f, l1f);
}

/* Bilinear blend of the four neighbours a<row><col>, height weight outermost,
 * with the FMAs torch 1.13's AVX2 kernel ends up with:
 *   t0 = fma(l0w, a00, l1w*a01), t1 = fma(l0w, a10, l1w*a11),
 *   out = fma(l0h, t0, l1h*t1). */
VD_MATH_FN float vd_math_resize_blend(float l0h, float l1h, float l0w, float l1w, float a00,
                                      float a01, float a10, float a11)
{
    float t0 = fmaf(l0w, a00, vd_math_fmul(l1w, a01));
    float t1 = fmaf(l0w, a10, vd_math_fmul(l1w, a11));
    return fmaf(l0h, t0, vd_math_fmul(l1h, t1));
}

/* The torch 2.x rule ("transform.resize_arithmetic": "torch2"; torch 2.6's x86
 * build, whose AVX2 and AVX512 kernels fuse as below and agree bit for bit).
 * Source index in float32 with one rounding: src = fmaf(r, f32(d) + 0.5f, -0.5f)
 * (torch's opmath is float and GCC contracts scale * (d + 0.5) - 0.5), clamped
 * at 0; i0 = min(floor(src), n - 1), l1 = clamp(src - i0, 0, 1) (exact), l0 =
 * f32(1 - l1). An axis with out == in is a copy, as in torch 1.13. (torch's
 * DEFAULT-capability build, no FMA, rounds r * (d + 0.5f) first: not this rule.) */
VD_MATH_FN void vd_math_resize_source_torch2(float ratio, int d, int in_size, int out_size, int *i0,
                                             int *i1, float *l0, float *l1)
{
    if (in_size == out_size) {
        *i0 = d;
        *i1 = d;
        *l0 = 1.0f;
        *l1 = 0.0f;
        return;
    }
    float src = fmaf(ratio, vd_math_fadd((float)d, 0.5f), -0.5f);
    if (src < 0.0f)
        src = 0.0f;
    int lo = (int)floorf(src);
    if (lo > in_size - 1)
        lo = in_size - 1;
    *i0 = lo;
    *i1 = lo + (lo < in_size - 1 ? 1 : 0);
    float lambda = vd_math_fsub(src, (float)lo);
    if (lambda < 0.0f)
        lambda = 0.0f;
    if (lambda > 1.0f)
        lambda = 1.0f;
    *l1 = lambda;
    *l0 = vd_math_fsub(1.0f, lambda);
}

/* torch 2.x resizes a 3-channel image whose output height + width is at most 128
 * with its channels-last kernel (_use_vectorized_kernel_cond_2d; it does so at
 * every size when torch runs one intra-op thread, which this rule does not
 * follow), larger ones with the generic kernel, whose blend is
 * vd_math_resize_blend. */
#define VD_MATH_RESIZE_TORCH2_SMALL_SUM 128

VD_MATH_FN int vd_math_resize_torch2_small(int out_h, int out_w)
{
    return out_h + out_w <= VD_MATH_RESIZE_TORCH2_SMALL_SUM;
}

/* The channels-last kernel's blend: four float32 weights w<row><col> = l<row>h *
 * l<col>w, then a00*w00 + a01*w01 + a10*w10 + a11*w11 left to right as GCC fuses it:
 *   fmaf(a11, w11, fmaf(a10, w10, fmaf(a00, w00, a01*w01))). */
VD_MATH_FN float vd_math_resize_blend_torch2_small(float l0h, float l1h, float l0w, float l1w,
                                                   float a00, float a01, float a10, float a11)
{
    float w00 = vd_math_fmul(l0h, l0w), w01 = vd_math_fmul(l0h, l1w);
    float w10 = vd_math_fmul(l1h, l0w), w11 = vd_math_fmul(l1h, l1w);
    float r = fmaf(a00, w00, vd_math_fmul(a01, w01));
    r = fmaf(a10, w10, r);
    return fmaf(a11, w11, r);
}

/* The rules by name, as the values of vd_resize_arithmetic (engine/vd_model_private.h:
 * the model file's "transform.resize_arithmetic"). */
#define VD_MATH_RESIZE_TORCH1 0
#define VD_MATH_RESIZE_TORCH2 1

/* The blends: torch's generic kernel (vd_math_resize_blend, either rule) and torch
 * 2.x's channels-last kernel (vd_math_resize_blend_torch2_small). */
#define VD_MATH_RESIZE_BLEND_GENERIC 0
#define VD_MATH_RESIZE_BLEND_CHANNELS_LAST 1

/* Source indices and lambdas of output index @d along one axis under @arithmetic
 * (VD_MATH_RESIZE_TORCH1: vd_math_resize_source, TORCH2:
 * vd_math_resize_source_torch2). The one choice of the rule, for the CPU's axis
 * tables and the CUDA kernel's per-pixel taps alike. */
VD_MATH_FN void vd_math_resize_source_rule(int arithmetic, float ratio, int d, int in_size,
                                           int out_size, int *i0, int *i1, float *l0, float *l1)
{
    if (arithmetic == VD_MATH_RESIZE_TORCH2)
        vd_math_resize_source_torch2(ratio, d, in_size, out_size, i0, i1, l0, l1);
    else
        vd_math_resize_source(ratio, d, in_size, out_size, i0, i1, l0, l1);
}

/* The blend of an @out_h x @out_w resize under @arithmetic: the channels-last
 * kernel's for torch 2.x's small outputs (vd_math_resize_torch2_small), otherwise
 * the generic kernel's. */
VD_MATH_FN int vd_math_resize_blend_of(int arithmetic, int out_h, int out_w)
{
    return arithmetic == VD_MATH_RESIZE_TORCH2 && vd_math_resize_torch2_small(out_h, out_w)
               ? VD_MATH_RESIZE_BLEND_CHANNELS_LAST
               : VD_MATH_RESIZE_BLEND_GENERIC;
}

/* The value of one output element from its four neighbours a<row><col> with
 * @blend (VD_MATH_RESIZE_BLEND_*). */
VD_MATH_FN float vd_math_resize_blend_rule(int blend, float l0h, float l1h, float l0w, float l1w,
                                           float a00, float a01, float a10, float a11)
{
    if (blend == VD_MATH_RESIZE_BLEND_CHANNELS_LAST)
        return vd_math_resize_blend_torch2_small(l0h, l1h, l0w, l1w, a00, a01, a10, a11);
    return vd_math_resize_blend(l0h, l1h, l0w, l1w, a00, a01, a10, a11);
}

/* One resize, @in_h x @in_w to @out_h x @out_w under @arithmetic: what every output
 * pixel needs (vd_math_resize_taps_at, vd_math_resize_pixel). */
typedef struct {
    int arithmetic; /* VD_MATH_RESIZE_TORCH1 or TORCH2 */
    int blend;      /* VD_MATH_RESIZE_BLEND_*, vd_math_resize_blend_of */
    int in_h, in_w, out_h, out_w;
    float ratio_h, ratio_w; /* vd_math_resize_ratio of each axis */
} vd_math_resize_plan;

VD_MATH_FN vd_math_resize_plan vd_math_resize_plan_for(int arithmetic, int in_h, int in_w,
                                                       int out_h, int out_w)
{
    vd_math_resize_plan p;
    p.arithmetic = arithmetic;
    p.blend = vd_math_resize_blend_of(arithmetic, out_h, out_w);
    p.in_h = in_h;
    p.in_w = in_w;
    p.out_h = out_h;
    p.out_w = out_w;
    p.ratio_h = vd_math_resize_ratio(in_h, out_h);
    p.ratio_w = vd_math_resize_ratio(in_w, out_w);
    return p;
}

/* The four neighbours of one output pixel: source rows y0, y1 and columns x0, x1,
 * with the lambdas of each axis. */
typedef struct {
    int y0, y1, x0, x1;
    float l0h, l1h, l0w, l1w;
} vd_math_resize_taps;

/* The taps of output pixel (@y, @x) of @p, 0 <= y < out_h, 0 <= x < out_w: each
 * axis by vd_math_resize_source_rule, as the CPU's axis tables hold them. */
VD_MATH_FN vd_math_resize_taps vd_math_resize_taps_at(const vd_math_resize_plan *p, int y, int x)
{
    vd_math_resize_taps t;
    vd_math_resize_source_rule(p->arithmetic, p->ratio_h, y, p->in_h, p->out_h, &t.y0, &t.y1,
                               &t.l0h, &t.l1h);
    vd_math_resize_source_rule(p->arithmetic, p->ratio_w, x, p->in_w, p->out_w, &t.x0, &t.x1,
                               &t.l0w, &t.l1w);
    return t;
}

/* The normalised value of 8-bit sample @v of a channel: (f32(v) / 255 - mean) / std,
 * each operation rounded to float32 (torchvision's ToTensor then normalize). */
VD_MATH_FN float vd_math_normalise(int v, float mean, float std)
{
    return vd_math_fdiv(vd_math_fsub(vd_math_fdiv((float)v, 255.0f), mean), std);
}

/* One output pixel of the pre-processing (the CUDA kernel's per-pixel arithmetic):
 * the 8-bit R, G, B of the four neighbours at @t (a<row><col>), each normalised
 * through @lut (3 x 256: lut[256 * c + v] = vd_math_normalise(v, mean[c], std[c])),
 * blended with @p's blend into @out[0..2]. The CPU normalises rows first and blends
 * the same values with the same functions (vd_cpu_preprocess). */
VD_MATH_FN void vd_math_resize_pixel(const vd_math_resize_plan *p, const vd_math_resize_taps *t,
                                     const float *lut, const unsigned char *a00,
                                     const unsigned char *a01, const unsigned char *a10,
                                     const unsigned char *a11, float *out)
{
    for (int c = 0; c < 3; c++) {
        const float *l = lut + 256 * c;
        out[c] = vd_math_resize_blend_rule(p->blend, t->l0h, t->l1h, t->l0w, t->l1w, l[a00[c]],
                                           l[a01[c]], l[a10[c]], l[a11[c]]);
    }
}

/* ------------------------------------------------------------------------ */
/* Colour conversion (YUV 4:2:0 to RGB)                                       */

/* Matrix identifiers (the values of vd_color_matrix in visiondetect/vd.h). */
#define VD_MATH_MATRIX_BT601 0
#define VD_MATH_MATRIX_BT709 1
#define VD_MATH_MATRIX_BT2020 2

/* Y'CbCr -> R'G'B' coefficients in Q16 fixed point. Integer arithmetic makes
 * the CPU and the GPU agree bit for bit. Derived from Kr/Kb as GStreamer's
 * video-color does (BT.601 0.299/0.114, BT.709 0.2126/0.0722, BT.2020
 * 0.2627/0.0593): limited range scales luma by 255/219 after subtracting 16
 * and chroma by 255/224; full range uses luma as is and chroma / 255 * 255;
 * chroma is centred on 128 in both:
 *   R = Y' + 2(1-Kr) Cr,  B = Y' + 2(1-Kb) Cb,
 *   G = Y' - 2Kb(1-Kb)/Kg Cb - 2Kr(1-Kr)/Kg Cr,  Kg = 1 - Kr - Kb. */
typedef struct {
    int y_offset; /* 16 (limited range) or 0 (full range) */
    int y_gain;   /* Q16 */
    int r_v, g_u, g_v, b_u;
} vd_math_yuv_coeffs;

VD_MATH_FN vd_math_yuv_coeffs vd_math_yuv_coeffs_for(int matrix, int full_range)
{
    vd_math_yuv_coeffs c;
    c.y_offset = full_range ? 0 : 16;
    c.y_gain = full_range ? 65536 : 76309;
    switch (matrix) {
    case VD_MATH_MATRIX_BT709:
        c.r_v = full_range ? 103206 : 117489;
        c.g_u = full_range ? -12276 : -13975;
        c.g_v = full_range ? -30679 : -34925;
        c.b_u = full_range ? 121609 : 138438;
        break;
    case VD_MATH_MATRIX_BT2020:
        c.r_v = full_range ? 96639 : 110014;
        c.g_u = full_range ? -10784 : -12277;
        c.g_v = full_range ? -37444 : -42626;
        c.b_u = full_range ? 123299 : 140363;
        break;
    default: /* BT.601 */
        c.r_v = full_range ? 91881 : 104597;
        c.g_u = full_range ? -22553 : -25675;
        c.g_v = full_range ? -46802 : -53279;
        c.b_u = full_range ? 116130 : 132201;
        break;
    }
    return c;
}

/* Q16 to 0..255: round half up, clamp (negative sums never reach the shift;
 * written with selects so that loops over pixels vectorise). */
VD_MATH_FN unsigned char vd_math_q16_to_u8(int v)
{
    v += 1 << 15;
    v = v < 0 ? 0 : v;
    v >>= 16;
    return (unsigned char)(v > 255 ? 255 : v);
}

/* One pixel: @y, @u (Cb), @v (Cr) in 0..255 to 8-bit R, G, B in @rgb. */
VD_MATH_FN void vd_math_yuv_to_rgb(const vd_math_yuv_coeffs *c, int y, int u, int v,
                                   unsigned char *rgb)
{
    int luma = c->y_gain * (y - c->y_offset);
    int cb = u - 128;
    int cr = v - 128;
    rgb[0] = vd_math_q16_to_u8(luma + c->r_v * cr);
    rgb[1] = vd_math_q16_to_u8(luma + c->g_u * cb + c->g_v * cr);
    rgb[2] = vd_math_q16_to_u8(luma + c->b_u * cb);
}

/* ------------------------------------------------------------------------ */
/* Mask R-CNN's transposed convolution as a 1x1 convolution                  */

/* The 2x2 stride-2 ConvTranspose2d without padding writes output pixel
 * (2y + ky, 2x + kx) from input pixel (y, x) and tap (ky, kx) alone, so a 1x1
 * convolution to 4 x C' channels, channel (2 ky + kx) * C' + o holding tap
 * (ky, kx) of output channel o (vd_deconv2x2_as_conv1x1), computes it. Read
 * as NHWC [rows][pooled][4 pooled][C'] (column 4x + 2ky + kx), output pixel
 * (py, px) of RoI @row is this pixel (engine/MASKRCNN.md §4). */
VD_MATH_FN long long vd_math_mask_tap_pixel(int row, int py, int px, int pooled)
{
    int y = py >> 1, ky = py & 1, x = px >> 1, kx = px & 1;
    return ((long long)row * pooled + y) * (4 * pooled) + 4 * x + 2 * ky + kx;
}

/* ------------------------------------------------------------------------ */
/* Ranking keys                                                              */

/* An unsigned key whose order is vd_topk's order of the floats (engine/cpu:
 * descending score, NaN first, +0 and -0 equal, ties by index), for integer
 * sorts (the radix sort transform): a positive float gets its sign bit set, a
 * negative float all its bits flipped, so that unsigned order is numeric
 * order (-inf lowest, +inf highest); every NaN, whatever its sign and payload,
 * becomes 0xffffffff, above +inf (torch ranks NaN as the largest value), and
 * -0 becomes +0's key. A stable descending sort of the keys then gives
 * vd_topk's order exactly. Comparing the floats themselves would not: NaN
 * compares false both ways, which breaks a comparison sort (CUB's segmented
 * sort merges small segments by comparison). */
VD_MATH_FN unsigned int vd_math_rank_key(float v)
{
    union {
        float f;
        unsigned int u;
    } x;
    if (v != v)
        return 0xffffffffu;
    x.f = v == 0.0f ? 0.0f : v;
    return (x.u & 0x80000000u) ? ~x.u : (x.u | 0x80000000u);
}

/* The float a key stands for (NaN for a NaN's key, +0 for either zero). */
VD_MATH_FN float vd_math_rank_key_value(unsigned int key)
{
    union {
        float f;
        unsigned int u;
    } x;
    x.u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    return x.f;
}

#endif /* VD_MATH_H */
