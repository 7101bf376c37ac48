/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* RPN proposal filtering (spec §4.4) on the device: logits gathered per level
 * as unsigned ranking keys (vd_math_rank_key: vd_topk's order as integers),
 * per-level top-k by a stable descending sort (ties in ascending anchor order,
 * as vd_topk), then decode (weights 1), clip to the resized image, sigmoid and
 * the small-box / score filters in one kernel. The candidates then go through
 * vd_batched_nms_device grouped by level, and vd_gather_proposals. */
#include "vd_kernels_common.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

static __device__ __forceinline__ int level_of(const vd_rpn_levels &lv, const int *offsets,
                                               long long i)
{
    int l = 0;
    while (l + 1 < lv.n_levels && i >= offsets[l + 1])
        l++;
    return l;
}

template <typename T>
__global__ void __launch_bounds__(256)
    gather_logits_kernel(vd_rpn_levels lv, unsigned int *keys, int *values)
{
    long long total = lv.anchor_offset[lv.n_levels];
    VD_GRID_LOOP(g, total)
    {
        int l = level_of(lv, lv.anchor_offset, g);
        int i = (int)(g - lv.anchor_offset[l]);
        const T *head = (const T *)lv.head[l];
        int A = lv.anchors_per_location;
        float logit = vd_load(head + (size_t)(i / A) * lv.head_stride + i % A);
        /* every NaN ranked first whatever its sign, -0 as +0 (vd_topk's order) */
        keys[g] = vd_math_rank_key(logit);
        values[g] = i;
    }
}

extern "C" cudaError_t vd_rpn_gather_logits(const vd_rpn_levels *levels, vd_dtype dtype,
                                            unsigned int *keys, int *values, cudaStream_t stream)
{
    long long total = levels->anchor_offset[levels->n_levels];
    unsigned blocks = vd_blocks_for(total, 256, 8192);
    if (dtype == VD_DTYPE_F16)
        gather_logits_kernel<__half><<<blocks, 256, 0, stream>>>(*levels, keys, values);
    else
        gather_logits_kernel<float><<<blocks, 256, 0, stream>>>(*levels, keys, values);
    return vd_launch_status();
}

extern "C" size_t vd_rpn_topk_workspace_size(int max_level_anchors)
{
    size_t bytes = 0;
    if (max_level_anchors <= 0)
        return 0;
    cudaError_t err = cub::DeviceRadixSort::SortPairsDescending(
        (void *)NULL, bytes, (const unsigned int *)NULL, (unsigned int *)NULL, (const int *)NULL,
        (int *)NULL, max_level_anchors);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bytes;
}

extern "C" cudaError_t vd_rpn_topk(const vd_rpn_levels *levels, const unsigned int *keys,
                                   const int *values, unsigned int *keys_sorted, int *values_sorted,
                                   void *workspace, size_t workspace_size, cudaStream_t stream)
{
    for (int l = 0; l < levels->n_levels; l++) {
        int off = levels->anchor_offset[l];
        size_t bytes = workspace_size;
        if (levels->n_anchors[l] <= 0)
            continue;
        cudaError_t err = cub::DeviceRadixSort::SortPairsDescending(
            workspace, bytes, keys + off, keys_sorted + off, values + off, values_sorted + off,
            levels->n_anchors[l], 0, (int)(sizeof(unsigned int) * 8), stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

/* Segment s of a batched top-k is level s % n_levels of image s / n_levels. */
struct segment_offset {
    int n_levels;
    long long image_stride;
    int offset[VD_KERNEL_MAX_LEVELS + 1];
    int end; /* 0: the segment's begin, 1: its end */
    __host__ __device__ long long operator()(long long s) const
    {
        return (s / n_levels) * image_stride + offset[(int)(s % n_levels) + end];
    }
};

typedef thrust::transform_iterator<segment_offset, thrust::counting_iterator<long long>>
    segment_offset_iterator;

static segment_offset make_segment_offset(const vd_rpn_levels *levels, int end)
{
    segment_offset f;
    f.n_levels = levels->n_levels;
    f.image_stride = levels->anchor_offset[levels->n_levels];
    for (int l = 0; l <= levels->n_levels; l++)
        f.offset[l] = levels->anchor_offset[l];
    f.end = end;
    return f;
}

static int images_per_sort(const vd_rpn_levels *levels)
{
    int n = VD_RPN_SEGMENTS_PER_SORT / (levels->n_levels > 0 ? levels->n_levels : 1);
    return n > 0 ? n : 1;
}

static cudaError_t segmented_sort(const vd_rpn_levels *levels, int n_images,
                                  const unsigned int *keys, const int *values,
                                  unsigned int *keys_sorted, int *values_sorted, void *workspace,
                                  size_t &workspace_size, cudaStream_t stream)
{
    thrust::counting_iterator<long long> first(0);
    segment_offset_iterator begin(first, make_segment_offset(levels, 0));
    segment_offset_iterator end(first, make_segment_offset(levels, 1));
    long long n_items = (long long)n_images * levels->anchor_offset[levels->n_levels];
    return cub::DeviceSegmentedSort::StableSortPairsDescending(
        workspace, workspace_size, keys, keys_sorted, values, values_sorted, n_items,
        (long long)n_images * levels->n_levels, begin, end, stream);
}

extern "C" size_t vd_rpn_topk_batched_workspace_size(const vd_rpn_levels *levels, int n_images)
{
    size_t bytes = 0;
    if (n_images <= 0 || levels->n_levels <= 0)
        return 0;
    int chunk = images_per_sort(levels);
    if (chunk > n_images)
        chunk = n_images;
    if (segmented_sort(levels, chunk, NULL, NULL, NULL, NULL, NULL, bytes, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bytes;
}

extern "C" cudaError_t vd_rpn_topk_batched(const vd_rpn_levels *levels, int n_images,
                                           const unsigned int *keys, const int *values,
                                           unsigned int *keys_sorted, int *values_sorted,
                                           void *workspace, size_t workspace_size,
                                           cudaStream_t stream)
{
    size_t stride = (size_t)levels->anchor_offset[levels->n_levels];
    int chunk = images_per_sort(levels);
    if (workspace == NULL || workspace_size == 0 || levels->n_levels <= 0 || n_images <= 0)
        return cudaErrorInvalidValue;
    for (int first = 0; first < n_images; first += chunk) {
        int n = n_images - first < chunk ? n_images - first : chunk;
        size_t off = (size_t)first * stride, bytes = workspace_size;
        cudaError_t err = segmented_sort(levels, n, keys + off, values + off, keys_sorted + off,
                                         values_sorted + off, workspace, bytes, stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

template <typename T>
__global__ void __launch_bounds__(128)
    decode_kernel(vd_rpn_levels lv, const unsigned int *keys_sorted, const int *values_sorted,
                  const float *anchors, float resized_h, float resized_w, float min_size,
                  float score_threshold, float *boxes, float *scores, int *groups)
{
    long long total = lv.candidate_offset[lv.n_levels];
    VD_GRID_LOOP(slot, total)
    {
        int l = level_of(lv, lv.candidate_offset, slot);
        int j = (int)(slot - lv.candidate_offset[l]);
        int A = lv.anchors_per_location;
        int src = lv.anchor_offset[l] + j;
        int i = values_sorted[src];
        float logit = vd_math_rank_key_value(keys_sorted[src]);
        const T *d = (const T *)lv.head[l] + (size_t)(i / A) * lv.head_stride + A + (i % A) * 4;
        float deltas[4] = {vd_load(d), vd_load(d + 1), vd_load(d + 2), vd_load(d + 3)};
        const float *anchor = anchors + 4 * ((size_t)lv.anchor_offset[l] + i);
        float ref[4] = {anchor[0], anchor[1], anchor[2], anchor[3]};
        float box[4];
        vd_math_box_decode(ref, deltas, 1.0f, 1.0f, 1.0f, 1.0f, VD_MATH_BBOX_XFORM_CLIP, box);
        vd_math_box_clip(box, resized_h, resized_w);
        float score = vd_math_sigmoid(logit);
        bool keep = vd_math_fsub(box[2], box[0]) >= min_size &&
                    vd_math_fsub(box[3], box[1]) >= min_size && score >= score_threshold;
        for (int k = 0; k < 4; k++)
            boxes[4 * slot + k] = box[k];
        scores[slot] = keep ? score : -INFINITY;
        groups[slot] = l;
    }
}

extern "C" cudaError_t vd_rpn_decode(const vd_rpn_levels *levels, vd_dtype dtype,
                                     const unsigned int *keys_sorted, const int *values_sorted,
                                     const float *anchors, float resized_h, float resized_w,
                                     float min_size, float score_threshold, float *boxes,
                                     float *scores, int *groups, cudaStream_t stream)
{
    long long total = levels->candidate_offset[levels->n_levels];
    unsigned blocks = vd_blocks_for(total, 128, 4096);
    if (dtype == VD_DTYPE_F16)
        decode_kernel<__half><<<blocks, 128, 0, stream>>>(*levels, keys_sorted, values_sorted,
                                                          anchors, resized_h, resized_w, min_size,
                                                          score_threshold, boxes, scores, groups);
    else
        decode_kernel<float><<<blocks, 128, 0, stream>>>(*levels, keys_sorted, values_sorted,
                                                         anchors, resized_h, resized_w, min_size,
                                                         score_threshold, boxes, scores, groups);
    return vd_launch_status();
}

__global__ void __launch_bounds__(256)
    gather_proposals_kernel(const float *boxes, const float *scores, const int *keep,
                            const int *n_keep, int capacity, float *proposals,
                            float *proposal_scores)
{
    int n = *n_keep;
    VD_GRID_LOOP(j, capacity)
    {
        if (j < n) {
            int src = keep[j];
            for (int k = 0; k < 4; k++)
                proposals[4 * j + k] = boxes[4 * (size_t)src + k];
            proposal_scores[j] = scores[src];
        } else {
            for (int k = 0; k < 4; k++)
                proposals[4 * j + k] = 0.0f;
            proposal_scores[j] = 0.0f;
        }
    }
}

extern "C" cudaError_t vd_gather_proposals(const float *boxes, const float *scores, const int *keep,
                                           const int *n_keep, int capacity, float *proposals,
                                           float *proposal_scores, cudaStream_t stream)
{
    gather_proposals_kernel<<<vd_blocks_for(capacity, 256, 1024), 256, 0, stream>>>(
        boxes, scores, keep, n_keep, capacity, proposals, proposal_scores);
    return vd_launch_status();
}
