/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keypoint R-CNN's keypoint branch on the CPU (engine/KEYPOINTRCNN.md): a RoI head
 * (vd_cpu_roi.c's roi_head_*: the mask branch's machinery) of the 3x3
 * convolutions with ReLU (our Winograd F(2x2, 3x3) over all detections at once on
 * x86) and the transposed convolution, float32 whatever the context's precision,
 * then the bilinear upsampling and heatmaps_to_keypoints in C
 * (vd_cpu_ops.c), the points rescaled to the frame as resize_keypoints does. */
#include "cpu/vd_cpu_private.h"

/* KeypointRCNNHeads' convolutions (ReLU) and KeypointRCNNPredictor's transposed
 * convolution (no activation). */
static int keypoint_specs(const vd_model *m, cpu_roi_layer_spec *specs)
{
    int n = 0;
    for (int j = 0; j < m->config.n_kp_convs; j++)
        specs[n++] = (cpu_roi_layer_spec){&m->kp_convs[j], FALSE, TRUE};
    specs[n++] = (cpu_roi_layer_spec){&m->kp_deconv, TRUE, FALSE};
    return n;
}

gboolean run_keypoint_head(cpu_state *st, vd_context *ctx, cpu_plan *plan,
                           const float *resized_boxes, int resized_h, int resized_w,
                           gboolean observe, vd_result *result, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int n = result->n_detections, K = cfg->num_keypoints;
    int P = cfg->kp_output_size, C = cfg->fpn_channels, S = vd_config_heatmap_size(cfg);
    cpu_roi_layer_spec specs[CPU_MAX_ROI_LAYERS];
    float *heatmaps = NULL, *points = NULL;
    gboolean ok = FALSE;

    if (n == 0)
        return TRUE;
    cpu_roi_head_plan *hp =
        roi_head_plan(st, &st->keypoint_plans, specs, keypoint_specs(st->model, specs), n, P,
                      "keypoint head", error);
    if (hp == NULL)
        return FALSE;
    heatmaps = try_alloc((size_t)n * K * S * S, "keypoint heatmaps", error);
    points = heatmaps ? try_alloc((size_t)n * K * 3, "keypoints", error) : NULL;
    if (points == NULL ||
        !roi_head_pool(plan, &plan->keypoint_pooler, cfg->n_kp_roi_levels, resized_boxes, n,
                       resized_h, P, cfg->kp_sampling_ratio, hp, "keypoint RoI levels", error))
        goto out_free;
    if (observe) {
        int64_t shape[4] = {n, C, P, P}, box_shape[2] = {n, 4};
        vd_context_observe(ctx, "keypoint_rois", resized_boxes, box_shape, 2);
        vd_context_observe(ctx, "keypoint_features", hp->pooled, shape, 4);
    }
    if (!roi_head_run(st, hp, "keypoint head", error))
        goto out_free;
    vd_context_stage_add_macs(ctx, hp->convs.macs);
    vd_upsample_bilinear(hp->out, n * K, hp->out_size, cfg->kp_up_scale, heatmaps);
    if (observe) {
        int64_t shape[4] = {n, K, S, S};
        vd_context_observe(ctx, "keypoint_heatmaps", heatmaps, shape, 4);
    }
    vd_context_stage_mark(ctx, VD_STAGE_KEYPOINT_HEAD);

    gboolean failed = FALSE;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        GError *local = NULL;
        if (!vd_heatmaps_to_keypoints(heatmaps + (size_t)i * K * S * S, K, S,
                                      resized_boxes + 4 * (size_t)i, points + (size_t)i * K * 3,
                                      &local)) {
#pragma omp critical
            {
                if (!failed)
                    g_propagate_error(error, local);
                else
                    g_error_free(local);
                failed = TRUE;
            }
        }
    }
    if (failed)
        goto out_free;
    if (observe) {
        int64_t shape[3] = {n, K, 3};
        vd_context_observe(ctx, "keypoints", points, shape, 3);
    }
    /* resize_keypoints: x * f32(width / resized width), y likewise (the boxes'
     * ratios) */
    float rx = (float)result->width / (float)resized_w;
    float ry = (float)result->height / (float)resized_h;
    for (int i = 0; i < n; i++) {
        vd_detection *d = &result->detections[i];
        d->keypoints = g_try_new(vd_keypoint, K);
        if (d->keypoints == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory for keypoints");
            goto out_free;
        }
        d->n_keypoints = K;
        for (int j = 0; j < K; j++) {
            const float *p = points + ((size_t)i * K + j) * 3;
            d->keypoints[j].x = p[0] * rx;
            d->keypoints[j].y = p[1] * ry;
            d->keypoints[j].score = p[2];
        }
    }
    vd_context_stage_mark(ctx, VD_STAGE_KEYPOINTS);
    ok = TRUE;

out_free:
    g_free(heatmaps);
    g_free(points);
    return ok;
}

void keypoint_kernels(const cpu_state *st, GArray *out, GStringChunk *strings)
{
    const char *kinds[CPU_MAX_ROI_LAYERS], *names[CPU_MAX_ROI_LAYERS];
    char *owned[VD_MAX_KEYPOINT_CONVS];
    int nc = st->model->config.n_kp_convs;
    for (int j = 0; j < nc; j++) {
        kinds[j] = "convolution";
        names[j] = owned[j] = g_strdup_printf("roi_heads.keypoint_head.%d", 2 * j);
    }
    kinds[nc] = "deconvolution";
    names[nc] = "roi_heads.keypoint_predictor.kps_score_lowres";
    roi_head_kernels(out, strings, &st->keypoint_plans, "roi_heads.keypoint_head", kinds, names);
    for (int j = 0; j < nc; j++)
        g_free(owned[j]);
}
