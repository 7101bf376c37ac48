/* PLACEHOLDER: small ops being written (issue 2). */
#include "vd_cpu_ops.h"
void vd_transform_sizes(int height, int width, int min_size, int max_size, int size_divisible,
                        int *resized_h, int *resized_w, int *padded_h, int *padded_w) {}
void vd_cell_anchors(const float *sizes, int n_sizes, const float *ratios, int n_ratios, float *out) {}
void vd_grid_anchors(const float *cell, int n_cell, int padded_h, int padded_w, int grid_h,
                     int grid_w, float *out) {}
int vd_topk(const float *values, int n, int k, int *indices) { return 0; }
void vd_decode_boxes(const float *refs, const float *deltas, int n, const float weights[4],
                     float *out) {}
void vd_clip_boxes(float *boxes, int n, float height, float width) {}
int vd_nms(const float *boxes, const float *scores, int n, float threshold, int *keep) { return 0; }
int vd_batched_nms(const float *boxes, const float *scores, const int *groups, int n,
                   float threshold, int *keep) { return 0; }
int vd_roi_level(const float *box, int k_min, int k_max) { return 0; }
void vd_roi_align_nhwc(const float *features, int height, int width, int channels,
                       const float *rois, const int *roi_index, int n_rois, float spatial_scale,
                       int pooled, int sampling_ratio, float *out, int64_t out_roi_stride) {}
void vd_softmax_rows(float *logits, int n, int n_classes) {}
