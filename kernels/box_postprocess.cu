/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* RoIHeads.postprocess_detections (spec §6.2) on the device: softmax, per-class
 * decode (weights 10, 10, 5, 5), clip, the score and small-box filters as
 * candidates for vd_batched_nms_device grouped by label, then the first
 * max_detections kept, rescaled to the original frame (spec §1.5) into the one
 * buffer the host reads back per frame. */
#include "vd_kernels_common.cuh"

#define WARP 32
#define BOX_CANDIDATES_THREADS 256 /* 8 rows (one warp each) per block */

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The softmax denominator of one row in the order of vd_softmax_rows (torch's
 * 8-lane AVX2 softmax): lane l < 8 accumulates e[l], e[l+8], ... in order, then
 * ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)); rows shorter than 8 are summed left
 * to right. e[c] = vd_math_expf(logit[c] - max) is recomputed where needed:
 * the same function of the same inputs, so the same bits. Every lane returns
 * the sum. */
static __device__ __forceinline__ float row_exp_sum(const float *logits, int K, float m, int lane)
{
    float part = 0.0f;
    if (K < 8) {
        if (lane == 0) {
            part = vd_math_expf(vd_math_fsub(logits[0], m));
            for (int c = 1; c < K; c++)
                part = vd_math_fadd(part, vd_math_expf(vd_math_fsub(logits[c], m)));
        }
        return __shfl_sync(0xffffffffu, part, 0);
    }
    if (lane < 8) {
        part = vd_math_expf(vd_math_fsub(logits[lane], m));
        for (int c = lane + 8; c < K; c += 8)
            part = vd_math_fadd(part, vd_math_expf(vd_math_fsub(logits[c], m)));
    }
    float l[8];
    for (int i = 0; i < 8; i++)
        l[i] = __shfl_sync(0xffffffffu, part, i);
    return vd_math_fadd(vd_math_fadd(vd_math_fadd(l[0], l[4]), vd_math_fadd(l[2], l[6])),
                        vd_math_fadd(vd_math_fadd(l[1], l[5]), vd_math_fadd(l[3], l[7])));
}

/* One warp per proposal row. */
__global__ void __launch_bounds__(BOX_CANDIDATES_THREADS)
    box_candidates_kernel(vd_box_shape s, const float *head, const float *proposals,
                          const int *n_props, float *boxes, float *scores, int *labels)
{
    int lane = threadIdx.x % WARP;
    int warps = blockDim.x / WARP;
    int n = *n_props;
    int K = s.num_classes;
    for (int r = blockIdx.x * warps + threadIdx.x / WARP; r < s.capacity; r += gridDim.x * warps) {
        size_t flat0 = (size_t)r * (K - 1);
        if (r >= n) {
            for (int c = 1 + lane; c < K; c += WARP) {
                size_t f = flat0 + c - 1;
                for (int k = 0; k < 4; k++)
                    boxes[4 * f + k] = 0.0f;
                scores[f] = -INFINITY;
                labels[f] = c;
            }
            continue;
        }
        const float *logits = head + (size_t)r * s.head_stride;
        const float *deltas = logits + K;
        /* the max (order-free), NaN anywhere -> a NaN row, as vd_softmax_rows */
        float m = -INFINITY;
        bool nan = false;
        for (int c = lane; c < K; c += WARP) {
            m = fmaxf(m, logits[c]);
            nan = nan || logits[c] != logits[c];
        }
        m = warp_max(m);
        if (__any_sync(0xffffffffu, nan))
            m = NAN;
        float inverse = vd_math_fdiv(1.0f, row_exp_sum(logits, K, m, lane));

        const float *ref = proposals + 4 * (size_t)r;
        for (int c = 1 + lane; c < K; c += WARP) {
            float p = vd_math_fmul(vd_math_expf(vd_math_fsub(logits[c], m)), inverse);
            float d[4] = {deltas[4 * c], deltas[4 * c + 1], deltas[4 * c + 2], deltas[4 * c + 3]};
            float rb[4] = {ref[0], ref[1], ref[2], ref[3]};
            float box[4];
            vd_math_box_decode(rb, d, s.weights[0], s.weights[1], s.weights[2], s.weights[3],
                               VD_MATH_BBOX_XFORM_CLIP, box);
            vd_math_box_clip(box, s.resized_h, s.resized_w);
            bool keep = p > s.score_threshold && vd_math_fsub(box[2], box[0]) >= s.min_size &&
                        vd_math_fsub(box[3], box[1]) >= s.min_size;
            size_t f = flat0 + c - 1;
            for (int k = 0; k < 4; k++)
                boxes[4 * f + k] = box[k];
            scores[f] = keep ? p : -INFINITY;
            labels[f] = c;
        }
    }
}

extern "C" cudaError_t vd_box_candidates(const vd_box_shape *shape, const float *head,
                                         const float *proposals, const int *n_props, float *boxes,
                                         float *scores, int *labels, cudaStream_t stream)
{
    if (shape->num_classes < 2 || shape->head_stride < 5 * shape->num_classes)
        return cudaErrorInvalidValue;
    if (shape->capacity <= 0)
        return cudaSuccess;
    int rows_per_block = BOX_CANDIDATES_THREADS / WARP;
    unsigned blocks = vd_blocks_for(shape->capacity, rows_per_block, 4096);
    box_candidates_kernel<<<blocks, BOX_CANDIDATES_THREADS, 0, stream>>>(
        *shape, head, proposals, n_props, boxes, scores, labels);
    return vd_launch_status();
}

__global__ void __launch_bounds__(128)
    finalize_kernel(const float *boxes, const float *scores, const int *labels, const int *keep,
                    const int *n_keep, const int *n_props, const int *n_nonfinite,
                    int max_detections, float rx, float ry, vd_kernel_result *result)
{
    int count = min(*n_keep, max_detections);
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
        int i = keep[j];
        vd_kernel_detection *d = &result->detections[j];
        d->x1 = vd_math_fmul(boxes[4 * i + 0], rx);
        d->y1 = vd_math_fmul(boxes[4 * i + 1], ry);
        d->x2 = vd_math_fmul(boxes[4 * i + 2], rx);
        d->y2 = vd_math_fmul(boxes[4 * i + 3], ry);
        d->score = scores[i];
        d->label = labels[i];
    }
    if (threadIdx.x == 0) {
        result->count = count;
        result->n_proposals = n_props != NULL ? *n_props : 0;
        result->n_nonfinite = n_nonfinite != NULL ? *n_nonfinite : 0;
        result->reserved = 0;
    }
}

extern "C" cudaError_t vd_finalize_detections(const float *boxes, const float *scores,
                                              const int *labels, const int *keep, const int *n_keep,
                                              const int *n_props, const int *n_nonfinite,
                                              int max_detections, float rx, float ry,
                                              vd_kernel_result *result, cudaStream_t stream)
{
    finalize_kernel<<<1, 128, 0, stream>>>(boxes, scores, labels, keep, n_keep, n_props,
                                           n_nonfinite, max_detections, rx, ry, result);
    return vd_launch_status();
}
