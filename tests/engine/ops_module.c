/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test helper for ops_vs_torchvision.py: re-exports the CPU small ops (hidden
 * in the engine library) under vdt_* names for ctypes. Nothing else. */
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#include <string.h>

#define VDT_EXPORT __attribute__((visibility("default")))

VDT_EXPORT void vdt_roi_align_nhwc(const float *features, int height, int width, int channels,
                                   const float *rois, int n_rois, float spatial_scale, int pooled,
                                   int sampling_ratio, float *out)
{
    vd_roi_align_nhwc(features, height, width, channels, rois, NULL, n_rois, spatial_scale, pooled,
                      sampling_ratio, out, (int64_t)pooled * pooled * channels);
}

/* torchvision.ops.roi_align and its gradient (NHWC maps, [K][5] RoIs): 1 on
 * success, 0 with the error message copied into @message. */
static void roi_align_params_set(vd_roi_align_params *p, int n_images, int height, int width,
                                 int channels, float spatial_scale, int pooled_h, int pooled_w,
                                 int sampling_ratio, int aligned)
{
    *p = vd_roi_align_default_params();
    p->n_images = n_images;
    p->height = height;
    p->width = width;
    p->channels = channels;
    p->spatial_scale = spatial_scale;
    p->pooled_h = pooled_h;
    p->pooled_w = pooled_w;
    p->sampling_ratio = sampling_ratio;
    p->aligned = aligned != 0;
}

static int report(gboolean ok, GError *error, char *message, int message_size)
{
    if (!ok) {
        g_strlcpy(message, error->message, (gsize)message_size);
        g_error_free(error);
    }
    return ok ? 1 : 0;
}

VDT_EXPORT int vdt_roi_align_forward(const float *features, int n_images, int height, int width,
                                     int channels, const float *rois, int n_rois,
                                     float spatial_scale, int pooled_h, int pooled_w,
                                     int sampling_ratio, int aligned, float *out, char *message,
                                     int message_size)
{
    vd_roi_align_params p;
    roi_align_params_set(&p, n_images, height, width, channels, spatial_scale, pooled_h, pooled_w,
                         sampling_ratio, aligned);
    GError *error = NULL;
    gboolean ok = vd_roi_align_forward(&p, features, rois, n_rois, out, &error);
    return report(ok, error, message, message_size);
}

VDT_EXPORT int vdt_roi_align_backward(const float *grad_output, int n_images, int height, int width,
                                      int channels, const float *rois, int n_rois,
                                      float spatial_scale, int pooled_h, int pooled_w,
                                      int sampling_ratio, int aligned, float *grad_input,
                                      char *message, int message_size)
{
    vd_roi_align_params p;
    roi_align_params_set(&p, n_images, height, width, channels, spatial_scale, pooled_h, pooled_w,
                         sampling_ratio, aligned);
    GError *error = NULL;
    gboolean ok = vd_roi_align_backward(&p, grad_output, rois, n_rois, grad_input, &error);
    return report(ok, error, message, message_size);
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

/* paste_masks_in_image of @n masks (@m x @m each) with @boxes into a zero
 * @frame_h x @frame_w uint8 frame per mask (@out: n frames), through vd_paste_mask's
 * rectangle; @rects gets each rectangle. */
VDT_EXPORT void vdt_paste_masks(const float *masks, int n, int m, const float *boxes, int frame_w,
                                int frame_h, uint8_t *out, int *rects)
{
    for (int i = 0; i < n; i++) {
        int *rect = rects + 4 * i;
        uint8_t *frame = out + (size_t)i * frame_w * frame_h;
        vd_paste_mask(masks + (size_t)i * m * m, m, boxes + 4 * i, frame_w, frame_h, rect, NULL);
        uint8_t *bytes = g_malloc((size_t)MAX(rect[2] * rect[3], 1));
        vd_paste_mask(masks + (size_t)i * m * m, m, boxes + 4 * i, frame_w, frame_h, rect, bytes);
        for (int y = 0; y < rect[3]; y++)
            memcpy(frame + (size_t)(rect[1] + y) * frame_w + rect[0], bytes + (size_t)y * rect[2],
                   (size_t)rect[2]);
        g_free(bytes);
    }
}

/* The resized and padded size (@out: h, w, padded h, padded w) of a @height x @width
 * frame under a transform of @min_size / @max_size / @size_divisible whose file says
 * "resize_scale": "float32" (@float32_scale 1) or "double" (0), as the backends size it. */
VDT_EXPORT void vdt_transform_sizes(int height, int width, int min_size, int max_size,
                                    int size_divisible, int float32_scale, int *out)
{
    vd_config config = { 0 };
    config.min_size = min_size;
    config.max_size = max_size;
    config.size_divisible = size_divisible;
    config.resize_scale = float32_scale ? VD_RESIZE_SCALE_FLOAT32 : VD_RESIZE_SCALE_DOUBLE;
    vd_config_transform_sizes(&config, height, width, &out[0], &out[1], &out[2], &out[3]);
}

VDT_EXPORT int vdt_topk(const float *values, int n, int k, int *indices)
{
    return vd_topk(values, n, k, indices);
}
