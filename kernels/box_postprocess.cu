/* RoIHeads.postprocess_detections (spec §6.2) on the device: softmax, per-class
 * decode (weights 10, 10, 5, 5), clip, the score and small-box filters as
 * candidates for vd_batched_nms_device grouped by label, then the first
 * max_detections kept, rescaled to the original frame (spec §1.5) into the one
 * buffer the host reads back per frame. */
#include "vd_kernels_common.cuh"

#define WARP 32

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = vd_math_fadd(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* One warp per proposal row. */
__global__ void box_candidates_kernel(vd_box_shape s, const float *head, const float *proposals,
                                      const int *n_props, float *boxes, float *scores,
                                      int *labels)
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
        float m = -INFINITY;
        for (int c = lane; c < K; c += WARP)
            m = fmaxf(m, logits[c]);
        m = warp_max(m);
        float sum = 0.0f;
        for (int c = lane; c < K; c += WARP)
            sum = vd_math_fadd(sum, expf(vd_math_fsub(logits[c], m)));
        sum = warp_sum(sum);

        const float *ref = proposals + 4 * (size_t)r;
        for (int c = 1 + lane; c < K; c += WARP) {
            float p = vd_math_fdiv(expf(vd_math_fsub(logits[c], m)), sum);
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
                                         const float *proposals, const int *n_props,
                                         float *boxes, float *scores, int *labels,
                                         cudaStream_t stream)
{
    if (shape->num_classes < 2 || shape->head_stride < 5 * shape->num_classes)
        return cudaErrorInvalidValue;
    if (shape->capacity <= 0)
        return cudaSuccess;
    int threads = 256, rows_per_block = threads / WARP;
    unsigned blocks = vd_blocks_for(shape->capacity, rows_per_block, 4096);
    box_candidates_kernel<<<blocks, threads, 0, stream>>>(*shape, head, proposals, n_props, boxes,
                                                          scores, labels);
    return vd_launch_status();
}

__global__ void finalize_kernel(const float *boxes, const float *scores, const int *labels,
                                const int *keep, const int *n_keep, const int *n_props,
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
        result->reserved[0] = 0;
        result->reserved[1] = 0;
    }
}

extern "C" cudaError_t vd_finalize_detections(const float *boxes, const float *scores,
                                              const int *labels, const int *keep,
                                              const int *n_keep, const int *n_props,
                                              int max_detections, float rx, float ry,
                                              vd_kernel_result *result, cudaStream_t stream)
{
    finalize_kernel<<<1, 128, 0, stream>>>(boxes, scores, labels, keep, n_keep, n_props,
                                           max_detections, rx, ry, result);
    return vd_launch_status();
}
