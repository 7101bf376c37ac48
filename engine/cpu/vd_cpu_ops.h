/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: the small operations of the CPU backend (plain C, OpenMP where it
 * pays). Their per-element arithmetic comes from common/vd_math.h, which the
 * CUDA kernels share, so that the CPU tests exercise the very arithmetic the
 * GPU runs. Conventions: boxes are float32 (x1, y1, x2, y2) quadruples,
 * feature maps are NHWC float32 (one image), every function is reentrant and
 * may be called from any thread; none keeps a pointer after it returns.
 *
 * Numerics: bit-exact with torch 1.13 / torchvision 0.14.1 on the CPU (checked
 * by tests/engine/ops_vs_torchvision.py and preprocess_vs_torch.py), except
 * vd_roi_level, whose log2f is glibc's rather than SLEEF's (a last-ulp
 * difference could only move a box lying exactly on a level boundary). The
 * sources are compiled with -ffp-contract=off (engine/meson.build).
 *
 * Memory: only vd_cpu_preprocess allocates sizeable buffers (and reports
 * failure); vd_nms/vd_batched_nms try a small area table and recompute the
 * areas when that allocation fails, so they cannot fail. */
#ifndef VD_CPU_OPS_H
#define VD_CPU_OPS_H

#include <stdint.h>
#include "vd_model_private.h" /* VD_MAX_FPN_LEVELS */

G_BEGIN_DECLS

/* Hot loops of the CPU ops are compiled twice, for x86-64-v3 (AVX2 + FMA) and
 * the baseline, and picked at load time (GCC function multiversioning). The
 * results are identical: -ffp-contract=off keeps FMA out of every expression,
 * explicit fmaf() is correctly rounded in both, and vectorised loops compute
 * each element with the same IEEE operations. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define VD_CPU_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VD_CPU_HOT
#endif

/* The resized and padded size of a @height x @width frame under @config's transform
 * (GeneralizedRCNNTransform, spec §1.3, §1.4): min/max size, size_divisible, and the
 * resize scale rounded as the file's torchvision rounds it
 * (vd_math_transform_size). Both backends size their frames with it. */
void vd_config_transform_sizes(const vd_config *config, int height, int width, int *resized_h,
                               int *resized_w, int *padded_h, int *padded_w);

/* Converts @image to RGB in [0,1] (true division by 255), normalises with
 * (x - mean[c]) / std[c] in float32, resizes bilinearly to resized_h x resized_w
 * exactly as the torch CPU upsample_bilinear2d that @arithmetic names (the model
 * file's "transform.resize_arithmetic"; align_corners=False, no antialias):
 * VD_RESIZE_ARITHMETIC_TORCH1, torch 1.13: source index and lambdas in double,
 * blend with the FMA order of spec §1.3 (vd_math_resize_blend);
 * VD_RESIZE_ARITHMETIC_TORCH2, torch 2.x's x86 AVX2/AVX512 kernel: source index
 * and lambdas in float32 (vd_math_resize_source_torch2), the same blend or, when
 * resized_h + resized_w <= 128, the channels-last kernel's
 * (vd_math_resize_blend_torch2_small; torch with one intra-op thread takes that
 * kernel at every size and then differs by an ulp); and writes the result into the top-left corner
 * of @dst, an NHWC [padded_h][padded_w][3] buffer whose remaining pixels are set to 0. YUV formats
 * are converted to 8-bit RGB (matrix/range from the image, Q16 fixed point from vd_math.h, each
 * chroma sample covering its 2x2 luma block; odd sizes have ceil(w/2) x ceil(h/2) chroma) before
 * normalising. The expected torch input is a contiguous CHW tensor: torch 1.13 resizes a
 * channels-last tensor (e.g. a permuted HWC view) with another kernel whose
 * last bits differ.
 * Returns FALSE with @error set: VD_ERROR_INVALID_ARGUMENT for an invalid
 * image description or size (the message names the problem),
 * VD_ERROR_OUT_OF_MEMORY when the normalised copy (4 * 3 * w * h bytes) cannot
 * be allocated. Uses OpenMP threads over rows. */
gboolean vd_cpu_preprocess(const vd_image *image, const float mean[3], const float std[3],
                           vd_resize_arithmetic arithmetic, int resized_h, int resized_w,
                           int padded_h, int padded_w, float *dst, GError **error);

/* Cell anchors of one level (spec §3.1): for each ratio (outer) and size (inner),
 * round-half-even([-w, -h, w, h] / 2), ratio-major order. Writes
 * 4 * n_sizes * n_ratios floats. */
void vd_cell_anchors(const float *sizes, int n_sizes, const float *ratios, int n_ratios,
                     float *out);

/* Grid anchors of one level (spec §3.2): stride_h = padded_h / grid_h (integer
 * division), idem for w; anchor[(y*grid_w + x)*A + a] = cell[a] + (x*sw, y*sh, x*sw,
 * y*sh). Writes grid_h * grid_w * A * 4 floats. */
void vd_grid_anchors(const float *cell, int n_cell, int padded_h, int padded_w, int grid_h,
                     int grid_w, float *out);

/* A logit under which no score can pass @thr (strictly): sigmoid increases, so a
 * logit under logit(thr) scores under thr; with @sqrt_score, the score is
 * sqrt(sigmoid(logit) * c) for some c in [0, 1] (FCOS's centerness), and the bound
 * is logit(thr^2). The margin covers the float sigmoid's and square root's
 * rounding (a few ulps of the score, under 1e-5 / (1 - thr) in the logit), so that
 * skipping the logits under it changes nothing; -inf for thr <= 0, +inf for
 * thr >= 1. */
float vd_score_logit_floor(float thr, gboolean sqrt_score);

/* Indices of the @k largest values of @values[0..n), sorted descending; ties in
 * ascending index order (torch.topk leaves tie order undefined), NaN ranks
 * above +inf as in torch. k is clamped to n. O(n log k), no allocation.
 * Returns the number written. */
int vd_topk(const float *values, int n, int k, int *indices);

/* BoxCoder.decode for @n boxes (spec §4.3): @deltas [n][4], @refs [n][4],
 * @weights (wx, wy, ww, wh), clip log(1000/16); separate roundings, no FMA,
 * torch's (SLEEF) exp. @out may be @refs or @deltas (in place). */
void vd_decode_boxes(const float *refs, const float *deltas, int n, const float weights[4],
                     float *out);

/* BoxLinearCoder.decode (FCOS) for @n points: @codes [n][4] (left, top, right,
 * bottom distances), @refs [n][4] the anchors; with @normalize_by_size the
 * distances are in units of the anchor's width and height. torch's float32
 * arithmetic: centre 0.5 * (x1 + x2), one product per distance, one sum or
 * difference. @out may be @codes (not @refs). */
void vd_decode_linear_boxes(const float *refs, const float *codes, int n,
                            gboolean normalize_by_size, float *out);

/* Clips boxes to [0, width] x [0, height] in place (torch.clamp: NaN stays). */
void vd_clip_boxes(float *boxes, int n, float height, float width);

/* Greedy NMS (spec §7.1): order by score descending, stable (ties by ascending
 * index); a kept box suppresses later boxes with IoU > @threshold (strict).
 * Writes the kept indices in descending-score order into @keep (capacity n, not
 * aliasing the inputs; also used as the work array) and returns their count.
 * The IoU is compared with the float @threshold, as the CUDA kernel does;
 * torchvision's CPU kernel compares with the double threshold, which gives the
 * same decisions whenever f32(thr) <= thr (0.5 and 0.7 included). */
int vd_nms(const float *boxes, const float *scores, int n, float threshold, int *keep);

/* NMS independently per group id (@groups[i]); the kept indices of all groups
 * merged in descending-score order (ties by ascending index). Exact per-group
 * arithmetic (torchvision's per-class loop, spec §7.2; unlike its unstable final
 * sort, the tie order here is defined). @keep as for vd_nms. Returns the count. */
int vd_batched_nms(const float *boxes, const float *scores, const int *groups, int n,
                   float threshold, int *keep);

/* torchvision LevelMapper (spec §5.3) for one box: returns the level index
 * (0-based from k_min) for canonical scale 224, level 4, eps 1e-6. Zero area
 * and NaN give 0. */
int vd_roi_level(const float *box, int k_min, int k_max);

/* MultiScaleRoIAlign's scale inference (spec §5.2): for each of @n_levels pooled
 * feature maps, scale = 2^round(log2(f32(feature_height / image_height))) with the
 * image height being the resized (not padded) one; k_min/k_max are -log2 of the
 * first and last scales, as the LevelMapper takes them. */
void vd_pooler_scales(const int *feature_heights, int n_levels, int image_height, float *scales,
                      int *k_min, int *k_max);

/* The pooler's scales and level range for one resized image height, kept by a
 * backend's plan: torchvision infers them at its first forward, the backends per
 * plan and resized height. */
typedef struct {
    int resized_h; /* the height they were computed for; -1: none yet */
    float scales[VD_MAX_FPN_LEVELS];
    int k_min, k_max;
} vd_pooler_levels;

/* Computes @p for @resized_h (vd_pooler_scales) unless it holds that height. */
void vd_pooler_levels_update(vd_pooler_levels *p, const int *feature_heights, int n_levels,
                             int resized_h);

/* roi_align, aligned=False (spec §5.5) for @n_rois boxes over one NHWC float32
 * feature map [height][width][channels]; @rois [n][4] in image pixels, scaled by
 * @spatial_scale. Writes [n][pooled][pooled][channels] at @out with row stride
 * @out_roi_stride floats between consecutive RoIs (>= pooled*pooled*channels), so a
 * caller can scatter RoIs of several levels into one buffer. @roi_index maps the
 * i-th RoI to its output row (NULL: identity). sampling_ratio <= 0 selects
 * torchvision's adaptive grid (capped at 1024 samples per bin side). Samples
 * outside [-1, H] x [-1, W] (and NaN coordinates) count as 0. OpenMP over
 * RoIs; the indices and weights of a sample are shared by all channels. */
void vd_roi_align_nhwc(const float *features, int height, int width, int channels,
                       const float *rois, const int *roi_index, int n_rois, float spatial_scale,
                       int pooled, int sampling_ratio, float *out, int64_t out_roi_stride);

/* torchvision.ops.roi_align as an op of its own, forward and backward, for any
 * batch of images: the parameters that both directions share. Feature maps and
 * their gradients are NHWC [n_images][height][width][channels] float32; pooled
 * tensors [n_rois][pooled_h][pooled_w][channels] (torchvision's [K, C, PH, PW],
 * channels last); @rois [n_rois][5] float32 (batch index, x1, y1, x2, y2) in
 * image pixels, scaled by spatial_scale, the batch index truncated to an integer
 * as torchvision does. */
typedef struct {
    int n_images, height, width, channels;
    int pooled_h, pooled_w;
    float spatial_scale;
    int sampling_ratio; /* <= 0: adaptive, ceil(extent / pooled) per bin side */
    gboolean aligned;   /* torchvision's aligned: -0.5 pixel shift, extent not forced >= 1 */
} vd_roi_align_params;

/* One image of C channels, 7x7, scale 1, adaptive sampling, aligned=False. */
vd_roi_align_params vd_roi_align_default_params(void);

/* Forward: out[k][ph][pw][c] = the mean of the bin's bilinear samples of image
 * rois[k][0], channel c, in torchvision's CPU kernel's float32 operations and
 * order (bit-exact, spec §5.5 with the aligned offset). OpenMP over RoIs
 * (from 16384 pooled elements; smaller calls run on the calling thread).
 * Returns FALSE with @error set (VD_ERROR_INVALID_ARGUMENT, nothing written)
 * when a size is out of range or a RoI's batch index is NaN or outside
 * [0, n_images); the message names the RoI. Reentrant; keeps no pointer. */
gboolean vd_roi_align_forward(const vd_roi_align_params *params, const float *features,
                              const float *rois, int n_rois, float *out, GError **error);

/* Backward: grad_input (overwritten, all of it) = the gradient of the forward
 * with respect to the features for @grad_output: each sample of a bin adds
 * (grad * w) / count to each of its four neighbours, a sample outside the map
 * (vd_math_roi_sample_inside) adds nothing; samples clamped to the last row or
 * column add there, as torchvision's backward does. Deterministic and bit-exact
 * with torchvision's CPU backward: every grad_input element receives its
 * contributions in torchvision's order (RoI, ph, pw, iy, ix, then the four
 * neighbours), the threads (OpenMP) each owning a block of channels, which
 * never collide (the same size threshold as the forward). Errors as
 * vd_roi_align_forward (nothing written). */
gboolean vd_roi_align_backward(const vd_roi_align_params *params, const float *grad_output,
                               const float *rois, int n_rois, float *grad_input, GError **error);

/* Softmax over @n_classes for each of @n rows, float32, in place, in the
 * evaluation order of torch 1.13's AVX2 kernel (SLEEF exp, 8-lane partial sums
 * reduced as a tree, multiplication by 1/sum), which makes it bit-exact. */
void vd_softmax_rows(float *logits, int n, int n_classes);

/* torch's sigmoid of @n floats in place: 1 / (1 + exp(-x)) with SLEEF's exp, as its
 * vectorised CPU kernel (bit-exact where torch takes that path). */
void vd_sigmoid(float *values, int n);

/* One detection of paste_masks_in_image (engine/MASKRCNN.md §3, padding 1): the
 * @m x @m probabilities @mask (row-major), its @box in frame pixels, a frame of
 * @frame_width x @frame_height. Writes to @rect the frame rectangle torchvision
 * fills (x, y, width, height: the expanded, truncated box clipped to the frame;
 * width or height 0 when nothing of it is inside) and, unless @out is NULL, the
 * rectangle's pixels row by row (width bytes per row): round(255 * p) of the
 * bilinearly resized, zero-padded mask (torch's upsample_bilinear2d arithmetic,
 * vd_math.h). Computes only the pixels inside the frame. */
void vd_paste_mask(const float *mask, int m, const float box[4], int frame_width, int frame_height,
                   int rect[4], uint8_t *out);

/* paste_masks_in_image for every detection of @result (both backends): from the
 * @m x @m probabilities of each (@probs, one after the other, in detection order),
 * each detection's mask rectangle and its pixels (vd_paste_mask; left empty where
 * nothing of the box is inside the frame). FALSE with @error set when a mask cannot
 * be allocated. */
gboolean vd_paste_masks(const float *probs, int m, vd_result *result, GError **error);

/* Keypoint R-CNN's heatmap upsampling (KeypointRCNNPredictor: F.interpolate
 * scale_factor @scale, bilinear, align_corners=False, recompute_scale_factor=False):
 * @planes planes of @size x @size floats @in to (@size * @scale)^2 @out, with
 * torch 1.13's upsample_bilinear2d arithmetic (vd_math_resize_source/_blend; the
 * ratio 1 / @scale is in / out exactly). */
void vd_upsample_bilinear(const float *in, int planes, int size, int scale, float *out);

/* heatmaps_to_keypoints for one detection (engine/KEYPOINTRCNN.md): its @k heatmaps
 * of @s x @s (@maps), its @box in the resized image. Each map resized by torch's
 * bicubic interpolation (A = -0.75, align_corners=False, border indices clamped) to
 * ceil(max(box height, 1)) x ceil(max(box width, 1)); its first maximum (row-major)
 * gives the point ((x + 0.5) * width / ceil(width) + x1, likewise y) and the score
 * (the resized map's value there). Writes @out [k][3] (x, y, score, resized-image
 * coordinates). FALSE with @error set when its work buffer cannot be allocated. */
gboolean vd_heatmaps_to_keypoints(const float *maps, int k, int s, const float box[4], float *out,
                                  GError **error);

/* Mask R-CNN's ConvTranspose2d (2x2, stride 2, no padding: torch's @weight
 * [in][out][2][2], no kernel flip, @bias [out]) as the 1x1 convolution of
 * vd_math_mask_tap_pixel: @w1 [4 * out_stride][in] (OIHW with 1x1), row
 * (2 ky + kx) * out_stride + o = weight[.][o][ky][kx], and @b1 [4 * out_stride]
 * = bias[o]; rows o >= @out (padding, out_stride >= out) are zero. The same
 * products and sums per output pixel as the transposed convolution. */
void vd_deconv2x2_as_conv1x1(const float *weight, const float *bias, int in, int out,
                             int out_stride, float *w1, float *b1);

/* The box head's first Linear (fc6, torch's @weight [out][channels * positions]
 * in the NCHW flatten order c * positions + p) for an NHWC input of
 * @padded_channels channels per position: @dst [out][positions][padded_channels],
 * dst[o][p][c] = weight[o][c * positions + p], zero for c >= @channels (the
 * padding channels of the conv head's last output). */
void vd_fc6_weight_to_nhwc(const float *weight, int out, int channels, int positions,
                           int padded_channels, float *dst);

G_END_DECLS

#endif /* VD_CPU_OPS_H */
