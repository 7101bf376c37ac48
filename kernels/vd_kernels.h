/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect CUDA kernels: C launchers, each taking a stream.
 *
 * Conventions (shared by every launcher):
 *  - Every pointer is a device pointer unless its comment says "host".
 *  - Nothing here synchronises: every launcher only enqueues work on @stream and
 *    returns the launch status (cudaGetLastError after the launch). Device-side
 *    counts (n_* pointers to int) are produced and consumed on the device; the
 *    host never reads them inside a frame.
 *  - Feature maps are NHWC of one image, fp16 (__half) or fp32 as @dtype says.
 *  - Boxes are float32 (x1, y1, x2, y2) quadruples in resized-image pixels.
 *  - Variable-length results live in fixed-capacity buffers with a device count.
 *  - The per-element arithmetic comes from vd_math.h, shared with the CPU ops of
 *    engine/cpu/vd_cpu_ops.h, and each launcher names the CPU op it mirrors.
 *
 * Thread-safety: launchers are reentrant; concurrent use of one workspace is not. */
#ifndef VD_KERNELS_H
#define VD_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VD_KERNEL_MAX_LEVELS 5
#define VD_KERNEL_MAX_CELL_ANCHORS 16

typedef enum {
    VD_DTYPE_F32 = 0,
    VD_DTYPE_F16 = 1,
} vd_dtype;

static inline size_t vd_dtype_size(vd_dtype dtype)
{
    return dtype == VD_DTYPE_F16 ? 2 : 4;
}

/* ------------------------------------------------------------------------ */
/* Pre-processing (mirrors vd_cpu_preprocess)                               */

/* A raw frame already in device memory. format, matrix and full_range take the
 * values of vd.h's vd_pixel_format, vd_color_matrix and gboolean. */
typedef struct {
    int format;
    int width, height;
    const uint8_t *planes[3];
    int strides[3];
    int matrix;
    int full_range;
} vd_device_frame;

/* One kernel: colour conversion to RGB, /255, (x - mean) / std, bilinear resize
 * to resized_h x resized_w under @arithmetic (the model file's rule, a value of
 * vd_resize_arithmetic: VD_MATH_RESIZE_TORCH1 or VD_MATH_RESIZE_TORCH2; the same
 * vd_math.h functions as the CPU), zero padding to padded_h x padded_w, written
 * NHWC with @channels channels (>= 3; channels 3.. are zero, for tensor-core
 * friendly convolutions). @mean and @std are host arrays passed by value. Any
 * other @arithmetic: cudaErrorInvalidValue. */
cudaError_t vd_preprocess(const vd_device_frame *frame, const float mean[3], const float std[3],
                          int arithmetic, int resized_h, int resized_w, int padded_h, int padded_w,
                          int channels, vd_dtype dtype, void *out, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* Anchors (mirrors vd_grid_anchors)                                         */

/* Grid anchors of one level from @n_cell host cell anchors (passed by value,
 * n_cell <= VD_KERNEL_MAX_CELL_ANCHORS): out[(y*grid_w + x)*A + a]. Run once per
 * input size; the result is cached by the caller. */
cudaError_t vd_grid_anchors_device(const float *cell, int n_cell, int padded_h, int padded_w,
                                   int grid_h, int grid_w, float *out, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* Small element-wise and layout kernels                                     */

/* 3x3 stride-2 padding-1 max pooling with -inf padding (torchvision's stem). */
cudaError_t vd_max_pool_3x3s2(const void *in, int h, int w, int c, void *out, int out_h, int out_w,
                              vd_dtype dtype, cudaStream_t stream);

/* dst[y][x] += src[y * src_h / dst_h][...] : the FPN top-down nearest upsampling
 * and lateral sum (spec §2.3; the general nearest rule, not only 2x). */
cudaError_t vd_upsample_nearest_add(const void *src, int src_h, int src_w, void *dst, int dst_h,
                                    int dst_w, int c, vd_dtype dtype, cudaStream_t stream);

/* LastLevelMaxPool: out = in[::2, ::2]. */
cudaError_t vd_subsample2(const void *in, int h, int w, int c, void *out, vd_dtype dtype,
                          cudaStream_t stream);

/* out[i] = in[i] converted to @dtype (weights at setup). */
cudaError_t vd_convert_from_f32(const float *in, size_t n, vd_dtype dtype, void *out,
                                cudaStream_t stream);

/* NHWC (any dtype) -> NCHW float32, for the debugging observer. */
cudaError_t vd_nhwc_to_nchw_f32(const void *in, int h, int w, int c, int c_stride, vd_dtype dtype,
                                float *out, cudaStream_t stream);

/* Adds to *@count (device) the infinite and NaN values among the first @cols
 * entries of the rows [0, min(*n_rows, capacity)) of @data (@stride entries
 * per row, in @dtype); @n_rows NULL means @capacity rows. Counts per frame
 * for vd_result.n_nonfinite (the CPU backend counts the same entries): the
 * caller zeroes *@count at the start of the frame. One atomic add per block. */
cudaError_t vd_count_nonfinite(const void *data, vd_dtype dtype, int capacity, int cols, int stride,
                               const int *n_rows, int *count, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* Top-k and NMS                                                             */

/* Workspace for vd_sort_descending of up to @capacity (key, value) pairs. */
size_t vd_sort_workspace_size(int capacity);

/* Stable sort by key, descending (ties keep ascending input order, like
 * vd_topk): CUB radix sort. keys_in/values_in are not modified. */
cudaError_t vd_sort_descending(const float *keys_in, const int *values_in, float *keys_out,
                               int *values_out, int n, void *workspace, size_t workspace_size,
                               cudaStream_t stream);

/* Greedy NMS per group (mirrors vd_batched_nms, and vd_nms when @groups is NULL):
 * candidates are sorted by score descending (stable), a kept candidate suppresses
 * later candidates of its group with IoU > @iou_threshold (fp32 IoU). Candidates
 * whose score is -INFINITY (or NaN) are not candidates. At most @max_candidates
 * candidates (the best scored) enter the suppression, and the first @max_keep
 * kept indices (into the input, descending score) are written to @keep with their
 * count in *n_keep (device). */
typedef struct {
    int capacity;       /* input entries */
    int max_candidates; /* <= capacity */
    int max_keep;
} vd_nms_shape;

size_t vd_nms_workspace_size(const vd_nms_shape *shape);

cudaError_t vd_batched_nms_device(const void *boxes, const void *scores, vd_dtype dtype,
                                  const int *groups, const vd_nms_shape *shape, float iou_threshold,
                                  int *keep, int *n_keep, void *workspace, size_t workspace_size,
                                  cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* RPN (mirrors run_rpn of the CPU backend)                                  */

/* The RPN head output of every level: NHWC [h*w][head_stride] with channel a the
 * objectness logit of anchor a and A + 4a + k its delta k (cls and bbox 1x1 convs
 * merged, as the CPU backend does). */
typedef struct {
    int n_levels;
    int anchors_per_location; /* A */
    int head_stride;          /* >= 5A */
    const void *head[VD_KERNEL_MAX_LEVELS];
    int n_anchors[VD_KERNEL_MAX_LEVELS];         /* h * w * A */
    int anchor_offset[VD_KERNEL_MAX_LEVELS + 1]; /* into the concatenated anchors */
    int top_n[VD_KERNEL_MAX_LEVELS];             /* min(pre_nms_top_n, n_anchors) */
    int candidate_offset[VD_KERNEL_MAX_LEVELS + 1];
} vd_rpn_levels;

/* keys[anchor_offset[l] + i] = vd_math_rank_key(logit i of level l), values =
 * i: unsigned keys whose descending order is vd_topk's (NaN of any sign first,
 * then +inf down to -inf, +0 and -0 equal, ties in anchor order), sorted as
 * integers by vd_rpn_topk and vd_rpn_topk_batched; vd_rpn_decode maps them
 * back (vd_math_rank_key_value) and drops the NaN (a NaN score fails the score
 * threshold), as the CPU does. */
cudaError_t vd_rpn_gather_logits(const vd_rpn_levels *levels, vd_dtype dtype, unsigned int *keys,
                                 int *values, cudaStream_t stream);

/* Workspace of vd_rpn_topk for levels of up to @max_level_anchors anchors. */
size_t vd_rpn_topk_workspace_size(int max_level_anchors);

/* Per-level top-k: sorts each level's keys descending (stable: a radix sort). */
cudaError_t vd_rpn_topk(const vd_rpn_levels *levels, const unsigned int *keys, const int *values,
                        unsigned int *keys_sorted, int *values_sorted, void *workspace,
                        size_t workspace_size, cudaStream_t stream);

/* The per-level top-k of @n_images images at once: keys and values
 * [n_images][anchor_offset[n_levels]] (image i's gathered logits at
 * i * anchor_offset[n_levels]), each image's level sorted descending (stable)
 * into the same slots of keys_sorted / values_sorted: the order vd_rpn_topk
 * gives each image (integer keys: every sort CUB picks by segment size, merge
 * or radix, sees a total order). One CUB segmented sort per at most
 * VD_RPN_SEGMENTS_PER_SORT segments (image, level), below CUB's threshold for
 * partitioning the segments (which reads back to the host): no host
 * synchronisation, graph-capturable. */
#define VD_RPN_SEGMENTS_PER_SORT 256
size_t vd_rpn_topk_batched_workspace_size(const vd_rpn_levels *levels, int n_images);
cudaError_t vd_rpn_topk_batched(const vd_rpn_levels *levels, int n_images, const unsigned int *keys,
                                const int *values, unsigned int *keys_sorted, int *values_sorted,
                                void *workspace, size_t workspace_size, cudaStream_t stream);

/* For the top_n[l] best anchors of every level: decode (weights 1, clip
 * log(1000/16)), clip to the resized image, sigmoid, and mark as non-candidates
 * (score -INFINITY) the boxes smaller than @min_size or scored under
 * @score_threshold. Writes candidate_offset[l] + j slots of boxes [.][4], scores
 * and groups (= level). */
cudaError_t vd_rpn_decode(const vd_rpn_levels *levels, vd_dtype dtype,
                          const unsigned int *keys_sorted, const int *values_sorted,
                          const float *anchors, float resized_h, float resized_w, float min_size,
                          float score_threshold, float *boxes, float *scores, int *groups,
                          cudaStream_t stream);

/* proposals[j] = boxes[keep[j]], proposal_scores[j] = scores[keep[j]] for
 * j < *n_keep; rows up to @capacity beyond the count are zeroed. */
cudaError_t vd_gather_proposals(const float *boxes, const float *scores, const int *keep,
                                const int *n_keep, int capacity, float *proposals,
                                float *proposal_scores, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* MultiScaleRoIAlign (mirrors vd_roi_level + vd_roi_align_nhwc)            */

typedef struct {
    int n_levels; /* feature maps used by the pooler */
    const void *features[VD_KERNEL_MAX_LEVELS];
    int height[VD_KERNEL_MAX_LEVELS];
    int width[VD_KERNEL_MAX_LEVELS];
    float scale[VD_KERNEL_MAX_LEVELS];
    int k_min, k_max;
    int channels;
} vd_roi_levels;

/* For RoI r < *n_rois (rois [capacity][4]), its level by the LevelMapper, then
 * roi_align (aligned=False) on that level: out [capacity][pooled][pooled][channels]
 * in @out_dtype. Features are read in @feature_dtype and interpolated and
 * accumulated in fp32. Rows >= *n_rois are zeroed. n_rois NULL means @capacity. */
cudaError_t vd_multiscale_roi_align(const vd_roi_levels *levels, vd_dtype feature_dtype,
                                    const float *rois, const int *n_rois, int capacity, int pooled,
                                    int sampling_ratio, void *out, vd_dtype out_dtype,
                                    cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* roi_align forward and backward (mirror vd_roi_align_forward/_backward)    */

/* torchvision.ops.roi_align's parameters, as vd_roi_align_params: maps and their
 * gradients NHWC [n_images][height][width][channels], pooled tensors
 * [n_rois][pooled_h][pooled_w][channels], RoIs [n_rois][5] float32 (batch
 * index, x1, y1, x2, y2) in image pixels. */
typedef struct {
    int n_images, height, width, channels;
    int pooled_h, pooled_w;
    float spatial_scale;
    int sampling_ratio; /* <= 0: adaptive */
    int aligned;        /* torchvision's aligned (0 or 1) */
} vd_roi_align_shape;

/* out [n_rois][pooled_h][pooled_w][channels] = roi_align of @features, both in
 * @dtype, @rois fp32 on the device: features read in their dtype, sample
 * coordinates, weights, blend and sum in fp32 (vd_math.h, the CPU's order),
 * rounded to @dtype once at the store; fp32 equals vd_roi_align_forward bit for
 * bit. A RoI whose batch index is not in [0, n_images) after truncation (or
 * NaN) gets zeros (the CPU op reports it). Returns cudaErrorInvalidValue for
 * sizes out of range or a NULL pointer. */
cudaError_t vd_roi_align_forward_device(const vd_roi_align_shape *shape, vd_dtype dtype,
                                        const void *features, const float *rois, int n_rois,
                                        void *out, cudaStream_t stream);

/* Device workspace vd_roi_align_backward_device needs: 0 for fp32 gradients, the fp32
 * accumulator (4 bytes per grad_input element) for fp16. */
size_t vd_roi_align_backward_workspace_size(const vd_roi_align_shape *shape, vd_dtype dtype);

/* grad_input (all of it overwritten) = the gradient of roi_align for
 * @grad_output, both in @dtype, @rois fp32 on the device. Each (RoI, bin,
 * channel) thread adds (grad * w) / count of each sample to its four
 * neighbours with fp32 atomicAdd, in vd_math.h's arithmetic (the CPU's):
 * fp32 gradients straight into grad_input, fp16 ones into the fp32 workspace
 * (fp16 grad_output read exactly as fp32), rounded to fp16 once at the end
 * (vd_convert_from_f32). The terms are the CPU's, bit for bit; only their
 * order of addition varies (atomics), so results may differ from the CPU's,
 * and from run to run, by float32 rounding of the sums. A RoI whose batch
 * index is not in [0, n_images) after truncation (or NaN) adds nothing: the
 * device values cannot be checked without a synchronisation (the CPU op
 * reports them). Stream-ordered only (cudaMemsetAsync and launches). Returns
 * cudaErrorInvalidValue for sizes out of range, a NULL pointer, or a
 * workspace smaller than vd_roi_align_backward_workspace_size or not 4-byte
 * aligned. */
cudaError_t vd_roi_align_backward_device(const vd_roi_align_shape *shape, vd_dtype dtype,
                                         const void *grad_output, const float *rois, int n_rois,
                                         void *grad_input, void *workspace, size_t workspace_size,
                                         cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* Box head post-processing (mirrors postprocess of the CPU backend)        */

/* vd.h's vd_detection without the mask (copied field by field). */
typedef struct {
    float x1, y1, x2, y2;
    float score;
    int label;
} vd_kernel_detection;

/* What the host reads back once per frame. */
typedef struct {
    int count;
    int n_proposals;
    int n_nonfinite; /* vd_count_nonfinite's count for the frame */
    int reserved;
    vd_kernel_detection detections[];
} vd_kernel_result;

typedef struct {
    int capacity;     /* proposal rows */
    int num_classes;  /* K, including background */
    int head_stride;  /* >= 5K: [K logits][4K deltas] per row, float32 */
    float weights[4]; /* 10, 10, 5, 5 */
    float resized_h, resized_w;
    float score_threshold; /* strict '>' */
    float min_size;        /* '>=' */
} vd_box_shape;

/* For each proposal row r < *n_props and class c >= 1: softmax over the K logits,
 * decode with the proposal, clip; candidate (r*(K-1) + c-1) gets its box, label c
 * and its probability as score, or -INFINITY when it fails a threshold. */
cudaError_t vd_box_candidates(const vd_box_shape *shape, const float *head, const float *proposals,
                              const int *n_props, float *boxes, float *scores, int *labels,
                              cudaStream_t stream);

/* result->count = min(*n_keep, max_detections); detection j = candidate keep[j]
 * with its box scaled by (rx, ry) (spec §1.5); result->n_proposals = *n_props;
 * result->n_nonfinite = *n_nonfinite (0 when NULL). */
cudaError_t vd_finalize_detections(const float *boxes, const float *scores, const int *labels,
                                   const int *keep, const int *n_keep, const int *n_props,
                                   const int *n_nonfinite, int max_detections, float rx, float ry,
                                   vd_kernel_result *result, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* Mask R-CNN (mirrors run_mask_head of the CPU backend)                     */

/* probs[j][py][px] (float32, [rows][2 pooled][2 pooled]) = sigmoid (vd_math.h,
 * torch's CPU formula) of the logit of detection j's label (result->detections
 * [j].label, j < result->count) at output pixel (py, px). @logits, in @dtype,
 * are NHWC [rows][pooled][4 pooled][stride]: the 1x1 logits convolution of the
 * 2x2 stride-2 transposed convolution computed as a 1x1 convolution to 4 x
 * channels, so output pixel (2y + ky, 2x + kx) is at row y, column
 * 4x + 2ky + kx. Rows without a detection (or with a label outside
 * [0, num_classes)) get zeros. */
cudaError_t vd_mask_probabilities(const void *logits, vd_dtype dtype, int rows, int pooled,
                                  int stride, int num_classes, const vd_kernel_result *result,
                                  float *probs, cudaStream_t stream);

/* ------------------------------------------------------------------------ */
/* MobileNetV3 (engine/MOBILENETV3.md)                                        */

/* data[i] = hardswish(data[i]) in place over @n elements (vd_math_hardswish in
 * float32, stored in @dtype). */
cudaError_t vd_hardswish(void *data, size_t n, vd_dtype dtype, cudaStream_t stream);

/* torchvision's SqueezeExcitation in place on @data, @n_images NHWC images of
 * @hw pixels and @c channels (in @dtype): per image and channel the mean over
 * the pixels (summed in double, divided by their count), fc1 (@s x @c) + bias +
 * ReLU, fc2 (@c x @s) + bias + hardsigmoid, each product summed in float32 in
 * index order as the CPU backend does, then every pixel times its channel's
 * scale. Weights and biases float32 on the device, torch's [out][in] layout;
 * @means and @scales: device scratch of @n_images * @c floats each. */
cudaError_t vd_squeeze_excite(void *data, int n_images, int hw, int c, int s, const float *fc1_w,
                              const float *fc1_b, const float *fc2_w, const float *fc2_b,
                              float *means, float *scales, vd_dtype dtype, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* VD_KERNELS_H */
