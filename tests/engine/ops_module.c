/* Test helper for ops_vs_torchvision.py: re-exports the CPU small ops (hidden
 * in the engine library) under vdt_* names for ctypes. Nothing else. */
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#define VDT_EXPORT __attribute__((visibility("default")))

VDT_EXPORT void vdt_roi_align_nhwc(const float *features, int height, int width, int channels,
                                   const float *rois, int n_rois, float spatial_scale, int pooled,
                                   int sampling_ratio, float *out)
{
    vd_roi_align_nhwc(features, height, width, channels, rois, NULL, n_rois, spatial_scale, pooled,
                      sampling_ratio, out, (int64_t)pooled * pooled * channels);
}

VDT_EXPORT int vdt_nms(const float *boxes, const float *scores, int n, float threshold, int *keep)
{
    return vd_nms(boxes, scores, n, threshold, keep);
}

VDT_EXPORT int vdt_batched_nms(const float *boxes, const float *scores, const int *groups, int n,
                               float threshold, int *keep)
{
    return vd_batched_nms(boxes, scores, groups, n, threshold, keep);
}

VDT_EXPORT void vdt_decode_boxes(const float *refs, const float *deltas, int n,
                                 const float *weights, float *out)
{
    vd_decode_boxes(refs, deltas, n, weights, out);
}

VDT_EXPORT void vdt_cell_anchors(const float *sizes, int n_sizes, const float *ratios, int n_ratios,
                                 float *out)
{
    vd_cell_anchors(sizes, n_sizes, ratios, n_ratios, out);
}

VDT_EXPORT void vdt_grid_anchors(const float *cell, int n_cell, int padded_h, int padded_w,
                                 int grid_h, int grid_w, float *out)
{
    vd_grid_anchors(cell, n_cell, padded_h, padded_w, grid_h, grid_w, out);
}

VDT_EXPORT void vdt_roi_levels(const float *boxes, int n, int k_min, int k_max, int *levels)
{
    for (int i = 0; i < n; i++)
        levels[i] = vd_roi_level(boxes + 4 * (size_t)i, k_min, k_max);
}

VDT_EXPORT void vdt_softmax_rows(float *logits, int n, int n_classes)
{
    vd_softmax_rows(logits, n, n_classes);
}

VDT_EXPORT void vdt_sigmoid(const float *x, int n, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = vd_math_sigmoid(x[i]);
}

VDT_EXPORT int vdt_topk(const float *values, int n, int k, int *indices)
{
    return vd_topk(values, n, k, indices);
}
