/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's two-stage detectors (torchvision's GeneralizedRCNN: Faster,
 * Mask and Keypoint R-CNN), the first kind of detector (vd_cpu_onestage.c and
 * vd_cpu_ssd.c are the others): after the shared backbone, FPN and anchors
 * (vd_cpu_fpn.c), the RPN (its 3x3 convolution in the plan, the head's
 * decoding, per-level top-k and NMS per frame), then the RoI heads on the
 * proposals (vd_cpu_roi.c): the box head (TwoMLPHead, or v2's convolutions and one
 * linear) with its predictor, the box decoding and postprocess_detections, the
 * mask head on the detections (Mask R-CNN) and the keypoint head
 * (vd_cpu_keypoint.c). */
#include "vd_config.h"
#include "vd_context_private.h"
#include "cpu/vd_cpu_private.h"
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The RPN's convolutions in the activation type (the head writes float32), the
 * hidden layer of every level (the levels run one after the other) in the temps.
 * int8: the P levels are quantised again for the RPN's first convolution; that one
 * writes real values, and the rest of the RPN (v2's further convolutions, the
 * head) runs in float. */
static gboolean plan_rpn(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    int n_ret = cfg->n_returned_layers;
    int fc = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    gboolean int8 = st->int8;
    float level_scale[VD_MAX_FPN_LEVELS] = {0};
    if (int8) {
        char name[64];
        for (int i = 0; i < n_ret; i++) {
            g_snprintf(name, sizeof(name), "backbone.fpn.layer_blocks.%d", i);
            if (!range_scale(st, name, FALSE, &level_scale[i], error))
                return FALSE;
        }
        /* the pool level: every other value of the top level */
        for (int l = n_ret; l < cfg->n_fpn_levels; l++)
            level_scale[l] = level_scale[n_ret - 1];
    }

    for (int l = 0; l < plan->n_levels; l++) {
        cpu_tensor *p = plan->fpn_out[l];
        void *hidden = act_bytes(st, p->h, p->w, fc, dt) <= plan->temps_bytes ? plan->temps : NULL;
        plan->rpn_hidden[l] = plan_tensor(st, plan, p->h, p->w, fc, dt, TRUE, hidden, error);
        plan->rpn_out[l] =
            plan_tensor(st, plan, p->h, p->w, st->rpn_head_out, dnnl_f32, TRUE, NULL, error);
        if (plan->rpn_hidden[l] == NULL || plan->rpn_out[l] == NULL)
            return FALSE;
        cpu_tensor *rpn_in = p;
        cpu_quant q = {level_scale[l], 1.0f, 1.0f, dnnl_data_type_undef};
        if (int8) {
            rpn_in = plan_tensor(st, plan, p->h, p->w, fc, dnnl_s8, TRUE, NULL, error);
            if (rpn_in == NULL ||
                !plan_quantize(st, plan, p, rpn_in, level_scale[l], &plan->fpn_quantize[l],
                               &plan->fpn_quantize_scales[l], &plan->fpn_quantize_xnn[l], error))
                return FALSE;
        }
        if (!conv_init_model_q(st, &plan->rpn_conv[l], &model->rpn_conv, rpn_in,
                               plan->rpn_hidden[l], FALSE, VD_ACT_RELU, int8 ? &q : NULL, error))
            return FALSE;
        plan_step_conv(plan, &plan->rpn_conv[l]);
        /* conv_depth > 1 (v2): the next 3x3 conv + ReLU layers alternate between two
         * buffers, the second right after the first in the temps when both fit */
        cpu_tensor *last = plan->rpn_hidden[l];
        if (cfg->rpn_conv_depth > 1) {
            size_t bytes = round64(act_bytes(st, p->h, p->w, fc, dt));
            void *hidden2 = hidden != NULL && 2 * bytes <= plan->temps_bytes
                                ? (char *)plan->temps + bytes
                                : NULL;
            plan->rpn_hidden2[l] = plan_tensor(st, plan, p->h, p->w, fc, dt, TRUE, hidden2, error);
            if (plan->rpn_hidden2[l] == NULL)
                return FALSE;
        }
        for (int j = 1; j < cfg->rpn_conv_depth; j++) {
            cpu_tensor *next = j % 2 ? plan->rpn_hidden2[l] : plan->rpn_hidden[l];
            if (!conv_init_model(st, &plan->rpn_conv_more[l][j - 1], &model->rpn_conv_more[j - 1],
                                 last, next, FALSE, VD_ACT_RELU, error))
                return FALSE;
            plan_step_conv(plan, &plan->rpn_conv_more[l][j - 1]);
            last = next;
        }
        if (!conv_init(st, &plan->rpn_head[l], st->rpn_head_weight, st->rpn_head_bias,
                       st->rpn_head_out, fc, 1, 1, 0, 1, 1, last, plan->rpn_out[l], FALSE,
                       VD_ACT_NONE, NULL, error))
            return FALSE;
        plan_step_conv(plan, &plan->rpn_head[l]);
    }
    plan_step(plan, step_wait, "RPN");
    return TRUE;
}

/* RPN (spec §4): per-level top-k on the logits, decode, sigmoid, clip, small-box
 * and score filters, per-level NMS, post-NMS top-n. Returns the number of
 * proposals written to @proposals ([n][4], descending score) and @scores, and
 * adds to *@n_nonfinite the non-finite values of the head outputs (the A
 * objectness logits and 4A deltas of every location, not the padding
 * channels). */
static int run_rpn(cpu_state *st, cpu_plan *plan, int resized_h, int resized_w,
                   float **proposals_out, float **scores_out, int *n_nonfinite, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int A = cfg->anchors_per_location;
    int n_cand = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        int n_l = plan->level_anchor_offset[l + 1] - plan->level_anchor_offset[l];
        n_cand += MIN(cfg->rpn_pre_nms_top_n, n_l);
    }
    float *boxes = try_alloc((size_t)n_cand * 4, "proposals", error);
    float *scores = try_alloc((size_t)n_cand, "proposals", error);
    int *levels = boxes && scores ? try_alloc((size_t)n_cand, "proposals", error) : NULL;
    int *keep = levels ? try_alloc((size_t)n_cand, "proposals", error) : NULL;
    float *logits = NULL, *deltas = NULL, *refs = NULL;
    int *top = NULL;
    int n_kept = -1;
    if (keep == NULL)
        goto out_free;

    int max_level = 0;
    for (int l = 0; l < plan->n_levels; l++)
        max_level = MAX(max_level, plan->level_anchor_offset[l + 1] - plan->level_anchor_offset[l]);
    logits = try_alloc((size_t)max_level, "logits", error);
    top = logits ? try_alloc((size_t)max_level, "logits", error) : NULL;
    deltas = top ? try_alloc((size_t)cfg->rpn_pre_nms_top_n * 4, "deltas", error) : NULL;
    refs = deltas ? try_alloc((size_t)cfg->rpn_pre_nms_top_n * 4, "deltas", error) : NULL;
    if (refs == NULL)
        goto out_free;

    int n = 0;
    const float weights[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (int l = 0; l < plan->n_levels; l++) {
        const cpu_tensor *out = plan->rpn_out[l];
        const float *data = out->data;
        size_t hw = (size_t)out->h * out->w;
        int n_l = out->h * out->w * A;
        const float *anchors = plan->anchors + (size_t)plan->level_anchor_offset[l] * 4;
        const int CB = out->cb;
        /* channel ch of pixel p of the blocked head output */
#define RPN_AT(p, ch) (data[((size_t)((ch) / CB) * hw + (p)) * CB + (ch) % CB])
        for (int b = 0; b * CB < 5 * A; b++) {
            const float *block = data + (size_t)b * hw * CB;
            int width = MIN(CB, 5 * A - b * CB);
            for (size_t p = 0; p < hw; p++)
                *n_nonfinite += count_nonfinite(block + p * CB, (size_t)width);
        }
        for (int i = 0; i < n_l; i++)
            logits[i] = RPN_AT(i / A, i % A);
        int k = vd_topk(logits, n_l, cfg->rpn_pre_nms_top_n, top);
        for (int j = 0; j < k; j++) {
            int i = top[j];
            for (int q = 0; q < 4; q++)
                deltas[4 * j + q] = RPN_AT(i / A, A + (i % A) * 4 + q);
            memcpy(refs + 4 * j, anchors + 4 * (size_t)i, 4 * sizeof(float));
            scores[n + j] = vd_math_sigmoid(logits[i]);
            levels[n + j] = l;
        }
#undef RPN_AT
        vd_decode_boxes(refs, deltas, k, weights, boxes + 4 * (size_t)n);
        n += k;
    }
    vd_clip_boxes(boxes, n, (float)resized_h, (float)resized_w);

    /* small boxes and the score threshold (both '>=') */
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float *b = boxes + 4 * (size_t)i;
        if (b[2] - b[0] >= cfg->rpn_min_size && b[3] - b[1] >= cfg->rpn_min_size &&
            scores[i] >= cfg->rpn_score_thresh) {
            memmove(boxes + 4 * (size_t)m, b, 4 * sizeof(float));
            scores[m] = scores[i];
            levels[m] = levels[i];
            m++;
        }
    }
    int kept = vd_batched_nms(boxes, scores, levels, m, cfg->rpn_nms_thresh, keep);
    kept = MIN(kept, cfg->rpn_post_nms_top_n);
    float *props = try_alloc((size_t)MAX(kept, 1) * 4, "proposals", error);
    float *pscores = props ? try_alloc((size_t)MAX(kept, 1), "proposals", error) : NULL;
    if (pscores == NULL) {
        g_free(props);
        goto out_free;
    }
    for (int j = 0; j < kept; j++) {
        memcpy(props + 4 * (size_t)j, boxes + 4 * (size_t)keep[j], 4 * sizeof(float));
        pscores[j] = scores[keep[j]];
    }
    *proposals_out = props;
    *scores_out = pscores;
    n_kept = kept;

out_free:
    g_free(boxes);
    g_free(scores);
    g_free(levels);
    g_free(keep);
    g_free(logits);
    g_free(top);
    g_free(deltas);
    g_free(refs);
    return n_kept;
}

/* The conv head's primitives for @rows RoIs: each 3x3 convolution (pad 1) with the
 * folded batch-norm as bias and ReLU, the next one's src the previous one's dst. */
static gboolean box_convs_init(cpu_state *st, cpu_box_head_plan *bp, int rows, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    cpu_roi_layer_spec specs[VD_MAX_BOX_CONVS];

    for (int j = 0; j < cfg->n_box_convs; j++)
        specs[j] = (cpu_roi_layer_spec){&m->box_convs[j], FALSE, TRUE};
    return roi_convs_init(st, &bp->convs, specs, cfg->n_box_convs, rows, cfg->roi_output_size,
                          act_dt(st), TRUE, FALSE, "box head convolutions", error);
}

void box_plans_clear(cpu_state *st)
{
    for (int i = 0; i < BOX_HEAD_CACHE; i++) {
        roi_convs_clear(&st->box_plans[i].convs);
        linear_clear(&st->box_plans[i].fc6);
        linear_clear(&st->box_plans[i].fc7);
        linear_clear(&st->box_plans[i].predictor);
        st->box_plans[i].rows = 0;
    }
}

/* Makes the box-head workspace hold @n RoIs, and returns the primitives for them
 * (created on first use, a few row counts cached). */
static cpu_box_head_plan *box_head_plan(cpu_state *st, int n, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int rows = n == cfg->rpn_post_nms_top_n
                   ? n
                   : MAX((n + BOX_ROWS_QUANTUM - 1) / BOX_ROWS_QUANTUM * BOX_ROWS_QUANTUM,
                         BOX_ROWS_QUANTUM);
    dnnl_data_type_t dt = act_dt(st);
    size_t es = dt_size(dt);
    int rep = st->fc6.out, n_out = st->predictor.out;

    if (rows > st->box_capacity) {
        box_plans_clear(st);
        free(st->pooled);
        free(st->h6);
        free(st->h7);
        free(st->head_out);
        st->h6 = st->h7 = st->head_out = NULL;
        st->box_capacity = 0;
        int cap = MAX(rows, (cfg->rpn_post_nms_top_n + BOX_ROWS_QUANTUM - 1) / BOX_ROWS_QUANTUM *
                                BOX_ROWS_QUANTUM);
        st->pooled = NULL; /* allocated when a plan's scratch cannot hold it */
        st->h6 = alloc_aligned((size_t)cap * rep * es, "box head", error);
        st->h7 = st->h6 ? alloc_aligned((size_t)cap * rep * es, "box head", error) : NULL;
        st->head_out =
            st->h7 ? alloc_aligned((size_t)cap * n_out * sizeof(float), "box head", error) : NULL;
        if (st->head_out == NULL)
            return NULL;
        st->box_capacity = cap;
    }
    for (int i = 0; i < BOX_HEAD_CACHE; i++)
        if (st->box_plans[i].rows == rows)
            return &st->box_plans[i];

    cpu_box_head_plan *bp = &st->box_plans[st->box_plan_next];
    st->box_plan_next = (st->box_plan_next + 1) % BOX_HEAD_CACHE;
    linear_clear(&bp->fc6);
    linear_clear(&bp->fc7);
    linear_clear(&bp->predictor);
    roi_convs_clear(&bp->convs);
    bp->rows = 0;
    gboolean has_fc7 = st->model->fc7.out_features > 0;
    if ((cfg->n_box_convs > 0 && !box_convs_init(st, bp, rows, error)) ||
        !linear_init(st, &bp->fc6, &st->fc6, rows, DNNL_MEMORY_NONE, dt, st->h6, dt, TRUE, error) ||
        (has_fc7 &&
         !linear_init(st, &bp->fc7, &st->fc7, rows, st->h6, dt, st->h7, dt, TRUE, error)) ||
        !linear_init(st, &bp->predictor, &st->predictor, rows, has_fc7 ? st->h7 : st->h6, dt,
                     st->head_out, dnnl_f32, FALSE, error) ||
        !ensure_scratchpad(st, error))
        return NULL;
    bp->rows = rows;
    return bp;
}

/* RoIAlign of the proposals into the box head's input, then fc6, fc7 and the
 * merged predictor. *head_out points into the context's workspace: [n][K + 4K]. */
static gboolean run_box_head(cpu_state *st, vd_context *ctx, cpu_plan *plan, const float *props,
                             int n_props, int resized_h, float **head_out, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int P = cfg->roi_output_size;
    /* RoI features per RoI: the pooler's C * P * P; fc6 takes the last conv's
     * output with the conv head (the same size in v2), which overwrites them */
    int in6 = MAX(st->fc6.in, cfg->fpn_channels * P * P);
    int roi_row = cfg->fpn_channels * P * P;
    gboolean ok = FALSE;

    cpu_box_head_plan *bp = box_head_plan(st, n_props, error);
    if (bp == NULL)
        return FALSE;
    /* the RoI features go into the plan's temps (the RPN's hidden layer is dead)
     * when they are large enough */
    size_t pooled_bytes = (size_t)bp->rows * in6 * dt_size(act_dt(st));
    void *pooled = plan->temps;
    if (pooled_bytes > plan->temps_bytes) {
        if (st->pooled == NULL)
            st->pooled = alloc_aligned((size_t)st->box_capacity * in6 * dt_size(act_dt(st)),
                                       "RoI features", error);
        if (st->pooled == NULL)
            return FALSE;
        pooled = st->pooled;
    }
    if (!vd_layers_memory_set_data(bp->fc6.src, pooled, "RoI features", error))
        return FALSE;
    int *level_of = try_alloc((size_t)n_props, "RoI levels", error);
    int *index = level_of ? try_alloc((size_t)n_props, "RoI levels", error) : NULL;
    float *rois = index ? try_alloc((size_t)n_props * 4, "RoI levels", error) : NULL;
    if (rois == NULL)
        goto out_free;

    pooler_scales(st, plan, resized_h);
    for (int i = 0; i < n_props; i++)
        level_of[i] = vd_roi_level(props + 4 * (size_t)i, plan->pooler.k_min, plan->pooler.k_max);
    for (int l = 0; l < cfg->n_roi_levels; l++) {
        int m = 0;
        for (int i = 0; i < n_props; i++) {
            if (level_of[i] != l)
                continue;
            memcpy(rois + 4 * (size_t)m, props + 4 * (size_t)i, 4 * sizeof(float));
            index[m++] = i;
        }
        if (m == 0)
            continue;
        roi_align_features(plan->fpn_out[l], rois, index, m, plan->pooler.scales[l], P,
                           cfg->roi_sampling_ratio, pooled, act_dt(st), roi_row);
    }
    vd_context_stage_mark(ctx, VD_STAGE_ROI_ALIGN);

    if (n_props > 0 && bp->convs.n_layers > 0 &&
        !roi_convs_run(st, &bp->convs, pooled, pooled, "box head convolutions", error))
        goto out_free;
    if (n_props > 0 && (!linear_run(st, &bp->fc6, &st->fc6, error) ||
                        (bp->fc7.src != NULL && !linear_run(st, &bp->fc7, &st->fc7, error)) ||
                        !linear_run(st, &bp->predictor, &st->predictor, error) ||
                        !vd_layers_wait(st->stream, error)))
        goto out_free;
    if (n_props > 0)
        vd_context_stage_add_macs(ctx, bp->convs.macs + bp->fc6.macs + bp->fc7.macs +
                                           bp->predictor.macs);
    *head_out = st->head_out;
    ok = TRUE;

out_free:
    g_free(level_of);
    g_free(index);
    g_free(rois);
    return ok;
}

/* The mask branch's layers: the 3x3 convolutions (ReLU), the transposed
 * convolution (ReLU), the 1x1 logits convolution. */
static int mask_specs(const vd_model *m, cpu_roi_layer_spec *specs)
{
    int n = 0;
    for (int j = 0; j < m->config.n_mask_convs; j++)
        specs[n++] = (cpu_roi_layer_spec){&m->mask_convs[j], FALSE, TRUE};
    specs[n++] = (cpu_roi_layer_spec){&m->mask_deconv, TRUE, TRUE};
    specs[n++] = (cpu_roi_layer_spec){&m->mask_logits, FALSE, FALSE};
    return n;
}

/* maskrcnn_inference and paste_masks_in_image (engine/MASKRCNN.md) for the @n
 * detections of @result, whose boxes in the resized image are @resized_boxes
 * [n][4]: RoIAlign, the mask head, the label's channel, sigmoid, the paste into
 * each detection's mask. */
static gboolean run_mask_head(cpu_state *st, vd_context *ctx, cpu_plan *plan,
                              const float *resized_boxes, int resized_h, gboolean observe,
                              vd_result *result, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int n = result->n_detections;
    int P = cfg->mask_output_size, M = 2 * P, C = cfg->fpn_channels, K = cfg->num_classes;
    gboolean ok = FALSE;
    float *probs = NULL;
    cpu_roi_layer_spec specs[CPU_MAX_ROI_LAYERS];

    if (n == 0)
        return TRUE;
    cpu_roi_head_plan *mp = roi_head_plan(st, &st->mask_plans, specs, mask_specs(st->model, specs),
                                          n, P, "mask head", error);
    if (mp == NULL)
        return FALSE;
    probs = try_alloc((size_t)n * M * M, "mask probabilities", error);
    if (probs == NULL ||
        !roi_head_pool(plan, &plan->mask_pooler, cfg->n_mask_roi_levels, resized_boxes, n,
                       resized_h, P, cfg->mask_sampling_ratio, mp, "mask RoI levels", error))
        goto out_free;
    if (observe) {
        int64_t shape[4] = {n, C, P, P};
        vd_context_observe(ctx, "mask_features", mp->pooled, shape, 4);
    }
    if (!roi_head_run(st, mp, "mask head", error))
        goto out_free;
    vd_context_stage_add_macs(ctx, mp->convs.macs);
    vd_context_stage_mark(ctx, VD_STAGE_MASK_HEAD);

    /* the label's channel, then the sigmoid (the same values as torch's sigmoid of
     * every channel followed by the selection) */
    for (int i = 0; i < n; i++) {
        float *p = probs + (size_t)i * M * M;
        memcpy(p, mp->out + ((size_t)i * K + result->detections[i].label) * M * M,
               (size_t)M * M * sizeof(float));
    }
    if (observe) {
        int64_t shape[3] = {n, M, M};
        vd_context_observe(ctx, "mask_logits", probs, shape, 3);
    }
    vd_sigmoid(probs, n * M * M);
    if (observe) {
        int64_t shape[3] = {n, M, M};
        vd_context_observe(ctx, "mask_probs", probs, shape, 3);
    }
    if (!vd_paste_masks(probs, M, result, error))
        goto out_free;
    vd_context_stage_mark(ctx, VD_STAGE_PASTE_MASKS);
    ok = TRUE;

out_free:
    g_free(probs);
    return ok;
}

static gboolean postprocess(cpu_state *st, vd_context *ctx, const float *props, int n_props,
                            float *head, int resized_h, int resized_w, const vd_image *image,
                            vd_result *result, float **resized_boxes, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int K = cfg->num_classes;
    int n_out = 5 * K;
    size_t n_flat = (size_t)n_props * (K - 1);
    gboolean ok = FALSE;
    float *boxes = try_alloc(MAX(n_flat, 1) * 4, "detections", error);
    float *scores = boxes ? try_alloc(MAX(n_flat, 1), "detections", error) : NULL;
    int *labels = scores ? try_alloc(MAX(n_flat, 1), "detections", error) : NULL;
    int *keep = labels ? try_alloc(MAX(n_flat, 1), "detections", error) : NULL;
    float *decoded = keep ? try_alloc((size_t)K * 4, "detections", error) : NULL;
    float *refs = decoded ? try_alloc((size_t)K * 4, "detections", error) : NULL;
    if (refs == NULL)
        goto out_free;

    int m = 0;
    for (int r = 0; r < n_props; r++) {
        float *row = head + (size_t)r * n_out;
        float *logits = row;               /* K class logits, softmaxed in place */
        const float *regression = row + K; /* 4K deltas */
        vd_softmax_rows(logits, 1, K);
        for (int c = 0; c < K; c++)
            memcpy(refs + 4 * c, props + 4 * (size_t)r, 4 * sizeof(float));
        vd_decode_boxes(refs, regression, K, cfg->bbox_reg_weights, decoded);
        vd_clip_boxes(decoded, K, (float)resized_h, (float)resized_w);
        for (int c = 1; c < K; c++) {
            const float *b = decoded + 4 * c;
            if (!(logits[c] > ctx->params.score_threshold))
                continue;
            if (!(b[2] - b[0] >= cfg->box_min_size && b[3] - b[1] >= cfg->box_min_size))
                continue;
            memcpy(boxes + 4 * (size_t)m, b, 4 * sizeof(float));
            scores[m] = logits[c];
            labels[m] = c;
            m++;
        }
    }
    int kept = write_nms_detections(ctx, image, resized_h, resized_w, boxes, scores, labels, m,
                                    keep, result);
    if (resized_boxes != NULL) {
        /* the mask branch's RoIs: the kept boxes before the rescale */
        *resized_boxes = try_alloc((size_t)MAX(kept, 1) * 4, "detections", error);
        if (*resized_boxes == NULL) {
            g_clear_pointer(&result->detections, g_free);
            result->n_detections = 0;
            goto out_free;
        }
        for (int j = 0; j < kept; j++)
            memcpy(*resized_boxes + 4 * (size_t)j, boxes + 4 * (size_t)keep[j], 4 * sizeof(float));
    }
    ok = TRUE;

out_free:
    g_free(boxes);
    g_free(scores);
    g_free(labels);
    g_free(keep);
    g_free(decoded);
    g_free(refs);
    return ok;
}

/* The two-stage detectors' run after the RPN's convolutions: proposals, the box
 * head, postprocess, the mask branch. */
static gboolean detect_two_stage(cpu_state *st, vd_context *ctx, cpu_plan *plan, int rh, int rw,
                                 const vd_image *image, vd_result *result, gboolean observe,
                                 GError **error)
{
    const vd_config *cfg = &st->model->config;
    float *props = NULL, *pscores = NULL, *head = NULL;
    gboolean ok = FALSE;
    int n_nonfinite = 0;
    int n_props = run_rpn(st, plan, rh, rw, &props, &pscores, &n_nonfinite, error);
    if (n_props < 0)
        return FALSE;
    if (observe) {
        int64_t shape[2] = {n_props, 4};
        vd_context_observe(ctx, "proposals", props, shape, 2);
        vd_context_observe(ctx, "proposal_scores", pscores, shape, 1);
    }
    vd_context_stage_mark(ctx, VD_STAGE_RPN);

    if (!run_box_head(st, ctx, plan, props, n_props, rh, &head, error))
        goto out_free;
    if (observe) {
        int K = cfg->num_classes;
        float *split = g_try_malloc((size_t)MAX(n_props, 1) * 5 * K * sizeof(float));
        if (split != NULL) {
            for (int i = 0; i < n_props; i++) {
                memcpy(split + (size_t)i * K, head + (size_t)i * 5 * K, K * sizeof(float));
                memcpy(split + (size_t)n_props * K + (size_t)i * 4 * K,
                       head + (size_t)i * 5 * K + K, 4 * K * sizeof(float));
            }
            int64_t s1[2] = {n_props, K}, s2[2] = {n_props, 4 * K};
            vd_context_observe(ctx, "box_logits", split, s1, 2);
            vd_context_observe(ctx, "box_regression", split + (size_t)n_props * K, s2, 2);
            g_free(split);
        }
    }
    vd_context_stage_mark(ctx, VD_STAGE_BOX_HEAD);

    /* the class logits and deltas, before postprocess softmaxes them in place */
    n_nonfinite += count_nonfinite(head, (size_t)n_props * 5 * cfg->num_classes);
    float *resized_boxes = NULL;
    ok = postprocess(st, ctx, props, n_props, head, rh, rw, image, result,
                     cfg->has_masks || cfg->has_keypoints ? &resized_boxes : NULL, error);
    result->n_nonfinite = n_nonfinite;
    vd_context_stage_mark(ctx, VD_STAGE_POSTPROCESS);
    if (ok && cfg->has_masks) {
        ok = run_mask_head(st, ctx, plan, resized_boxes, rh, observe, result, error);
        if (!ok)
            vd_result_clear(result);
    }
    if (ok && cfg->has_keypoints) {
        ok = run_keypoint_head(st, ctx, plan, resized_boxes, rh, rw, observe, result, error);
        if (!ok)
            vd_result_clear(result);
    }
    g_free(resized_boxes);

out_free:
    g_free(props);
    g_free(pscores);
    return ok;
}

/* Size-independent weight preparation: merged RPN head; the box head's linears for
 * the matmul primitives (float32 fc6 and fc7: the model's weights as they are;
 * otherwise packed), cls_score and bbox_pred merged into one predictor. */
static gboolean prepare_weights(cpu_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int A = cfg->anchors_per_location, C = cfg->fpn_channels;
    int K = cfg->num_classes, rep = cfg->representation_size;
    int rows = MAX(cfg->rpn_post_nms_top_n, 1);
    gboolean ok = FALSE;

    float *predictor_weight = NULL, *predictor_bias = NULL;
    st->rpn_head_out = (5 * A + st->cb - 1) / st->cb * st->cb;
    st->rpn_head_weight = try_alloc((size_t)st->rpn_head_out * C, "RPN head", error);
    st->rpn_head_bias =
        st->rpn_head_weight ? try_alloc((size_t)st->rpn_head_out, "RPN head", error) : NULL;
    predictor_weight =
        st->rpn_head_bias ? try_alloc((size_t)5 * K * rep, "predictor", error) : NULL;
    predictor_bias = predictor_weight ? try_alloc((size_t)5 * K, "predictor", error) : NULL;
    if (predictor_bias == NULL)
        goto out_free;

    memcpy(st->rpn_head_weight, m->rpn_cls.weight, sizeof(float) * A * C);
    memcpy(st->rpn_head_weight + (size_t)A * C, m->rpn_bbox.weight, sizeof(float) * 4 * A * C);
    memcpy(st->rpn_head_bias, m->rpn_cls.bias, sizeof(float) * A);
    memcpy(st->rpn_head_bias + A, m->rpn_bbox.bias, sizeof(float) * 4 * A);

    memcpy(predictor_weight, m->cls_score.weight, sizeof(float) * K * rep);
    memcpy(predictor_weight + (size_t)K * rep, m->bbox_pred.weight, sizeof(float) * 4 * K * rep);
    memcpy(predictor_bias, m->cls_score.bias, sizeof(float) * K);
    memcpy(predictor_bias + K, m->bbox_pred.bias, sizeof(float) * 4 * K);

    ok = linear_pack(st, &st->fc6, m->fc6.weight, m->fc6.bias, m->fc6.in_features,
                     m->fc6.out_features, rows, TRUE, TRUE, error) &&
         (m->fc7.out_features == 0 || linear_pack(st, &st->fc7, m->fc7.weight, m->fc7.bias, rep,
                                                  rep, rows, TRUE, TRUE, error)) &&
         linear_pack(st, &st->predictor, predictor_weight, predictor_bias, rep, 5 * K, rows, FALSE,
                     FALSE, error);
out_free:
    g_free(predictor_weight);
    g_free(predictor_bias);
    return ok;
}

/* The two-stage detectors' own checks: a box head whose fc6 takes the pooler's
 * output. */
static gboolean two_stage_supports(const vd_model *model, vd_precision precision,
                                   const vd_context_params *params, GError **error)
{
    (void)precision;
    (void)params;
    const vd_config *cfg = &model->config;
    /* the conv head (v2) feeds fc6 with its last convolution's channels */
    int head_channels = cfg->n_box_convs > 0 ? model->box_convs[cfg->n_box_convs - 1].out_channels
                                             : cfg->fpn_channels;
    if (head_channels * cfg->roi_output_size * cfg->roi_output_size != model->fc6.in_features) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "fc6 takes %d inputs, the pooler gives %d",
                    model->fc6.in_features,
                    head_channels * cfg->roi_output_size * cfg->roi_output_size);
        return FALSE;
    }
    return TRUE;
}

static void two_stage_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                              GStringChunk *strings);

/* The two-stage detectors (GeneralizedRCNN: Faster and Mask R-CNN) */
const cpu_detector vd_cpu_two_stage = {
    .kind = VD_DETECTOR_TWO_STAGE,
    .supports = two_stage_supports,
    .prepare = prepare_weights,
    .clear = NULL, /* cpu_destroy() frees the RPN head and the box head */
    .plan = plan_rpn,
    .plan_clear = NULL, /* plan_free() frees the RPN's convolutions */
    .detect = detect_two_stage,
    .kernels = two_stage_kernels,
};

/* The two-stage detectors' primitives: the RPN's convolutions, the box head's and
 * the mask branch's of the row counts run so far. */
static void two_stage_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                              GStringChunk *strings)
{
    char name[96];
    if (plan != NULL) {
        const vd_model *m = st->model;
        for (int l = 0; l < plan->n_levels; l++) {
            kernel_add_op(out, strings, plan->fpn_quantize[l], plan->fpn_quantize_xnn[l], "reorder",
                          "rpn.head.quantise[level %d]", l);
            g_snprintf(name, sizeof(name), "rpn.head.conv[level %d]", l);
            conv_kernels(out, strings, &plan->rpn_conv[l], name);
            for (int j = 1; j < m->config.rpn_conv_depth; j++) {
                g_snprintf(name, sizeof(name), "rpn.head.conv.%d[level %d]", j, l);
                conv_kernels(out, strings, &plan->rpn_conv_more[l][j - 1], name);
            }
            g_snprintf(name, sizeof(name), "rpn.head.cls_logits+bbox_pred[level %d]", l);
            conv_kernels(out, strings, &plan->rpn_head[l], name);
        }
    }
    for (int i = 0; i < BOX_HEAD_CACHE; i++) {
        const cpu_box_head_plan *bp = &st->box_plans[i];
        if (bp->rows == 0)
            continue;
        for (int j = 0; j < bp->convs.n_layers; j++)
            kernel_add_op(out, strings, bp->convs.layers[j].prim, bp->convs.layers[j].xnn,
                          "convolution", "roi_heads.box_head.%d[%d rows]", j, bp->rows);
        if (bp->convs.n_layers > 0) {
            kernel_add(out, strings, bp->convs.to_blocked, "reorder",
                       "roi_heads.box_head.in[%d rows]", bp->rows);
            kernel_add(out, strings, bp->convs.to_plain, "reorder",
                       "roi_heads.box_head.out[%d rows]", bp->rows);
        }
        kernel_add_op(out, strings, bp->fc6.prim, bp->fc6.xnn, "matmul",
                      "roi_heads.box_head.fc6[%d rows]", bp->rows);
        kernel_add_op(out, strings, bp->fc7.prim, bp->fc7.xnn, "matmul",
                      "roi_heads.box_head.fc7[%d rows]", bp->rows);
        kernel_add_op(out, strings, bp->predictor.prim, bp->predictor.xnn, "matmul",
                      "roi_heads.box_predictor[%d rows]", bp->rows);
    }
    if (st->model->config.has_masks) {
        const char *kinds[CPU_MAX_ROI_LAYERS], *names[CPU_MAX_ROI_LAYERS];
        char *owned[VD_MAX_MASK_CONVS];
        int nc = st->model->config.n_mask_convs;
        for (int j = 0; j < nc; j++) {
            kinds[j] = "convolution";
            names[j] = owned[j] = g_strdup_printf("roi_heads.mask_head.%d", j);
        }
        kinds[nc] = "deconvolution";
        names[nc] = "roi_heads.mask_predictor.conv5_mask";
        kinds[nc + 1] = "convolution";
        names[nc + 1] = "roi_heads.mask_predictor.mask_fcn_logits";
        roi_head_kernels(out, strings, &st->mask_plans, "roi_heads.mask_head", kinds, names);
        for (int j = 0; j < nc; j++)
            g_free(owned[j]);
    }
    if (st->model->config.has_keypoints)
        keypoint_kernels(st, out, strings);
}
