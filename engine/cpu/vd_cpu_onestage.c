/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's one-stage detectors (the second kind of detector beside the
 * two-stage one of vd_cpu_rcnn.c; engine/RETINANET.md): after the shared
 * backbone, FPN (with LastLevelP6P7) and anchors, a dense head on every level
 * with the same weights (GroupNorm between its convolutions where it has it),
 * then torchvision's postprocess_detections of RetinaNet or FCOS: per level, the
 * scores over the threshold (sigmoid; FCOS: the square root of its product with
 * the centerness's), the topk_candidates best, their boxes decoded (BoxCoder;
 * FCOS: BoxLinearCoder) and clipped; then batched NMS over every level's
 * candidates and the detections_per_img cap. */
#include "vd_config.h"
#include "cpu/vd_cpu_private.h"
#include "vd_math.h"

#include <math.h>
#include <string.h>

/* int8 and calibration run wherever the backbone's run (cpu_supports()): the head
 * adds nothing to refuse. */
static gboolean one_stage_supports(const vd_model *model, vd_precision precision,
                                   const vd_context_params *params, GError **error)
{
    (void)model;
    (void)precision;
    (void)params;
    (void)error;
    return TRUE;
}

void cpu_quantize_clear(cpu_quantize *q)
{
    vd_layers_primitive_free(q->prim);
    vd_xnn_op_free(q->xnn);
    vd_layers_scales_clear(&q->scales);
    *q = (cpu_quantize){0};
}

gboolean cpu_quantize_plan(cpu_state *st, cpu_plan *plan, const cpu_tensor *from, cpu_tensor *to,
                           float scale, cpu_quantize *q, GError **error)
{
    return plan_quantize(st, plan, from, to, scale, &q->prim, &q->scales, &q->xnn, error);
}

/* The name of the calibrated range of tower layer @j's output of @branch on level
 * @l (after its ReLU; with GroupNorm, after GroupNorm and ReLU) */
static void tower_range_name(char *name, size_t size, const char *branch, int j, int l)
{
    g_snprintf(name, size, "%s.conv.%d[level %d]", branch, j, l);
}

/* The calibrated range of P level @l's name (the FPN's outputs, P6, P7) */
static void level_range_name(char *name, size_t size, const cpu_plan *plan, int l)
{
    if (l < plan->n_returned)
        g_snprintf(name, size, "backbone.fpn.layer_blocks.%d", l);
    else
        g_snprintf(name, size, "backbone.fpn.extra_blocks.p%d", 6 + l - plan->n_returned);
}

gboolean one_stage_plan_p6p7_int8(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    cpu_one_stage_plan *os = &plan->one_stage;
    int n_ret = cfg->n_returned_layers, fc = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    char name[96];
    /* P6's input: the u8 C5 as the body wrote it, or P5 quantised to s8 */
    cpu_tensor *src = plan->returned_out[n_ret - 1];
    float src_scale = plan->returned_scale[n_ret - 1], p6_scale;
    if (cfg->fpn_p6_from_p5) {
        cpu_tensor *p5 = plan->fpn_out[n_ret - 1];
        level_range_name(name, sizeof(name), plan, n_ret - 1);
        if (!range_scale(st, name, FALSE, &src_scale, error))
            return FALSE;
        src = plan_tensor(st, plan, p5->h, p5->w, fc, dnnl_s8, TRUE, NULL, error);
        if (src == NULL || !cpu_quantize_plan(st, plan, p5, src, src_scale, &os->p6_q, error))
            return FALSE;
    }
    /* relu(P6) for P7: P6's range over 255, the quantisation's saturation at 0 its
     * ReLU */
    if (!range_scale(st, "backbone.fpn.extra_blocks.p6", TRUE, &p6_scale, error))
        return FALSE;
    int h6 = conv_out_size(src->h, 3, 2, 1), w6 = conv_out_size(src->w, 3, 2, 1);
    cpu_tensor *p6 = plan_tensor(st, plan, h6, w6, fc, dt, TRUE, NULL, error);
    plan->p6_relu = p6 ? plan_tensor(st, plan, h6, w6, fc, dnnl_u8, TRUE, NULL, error) : NULL;
    cpu_tensor *p7 = plan->p6_relu
                         ? plan_tensor(st, plan, conv_out_size(h6, 3, 2, 1),
                                       conv_out_size(w6, 3, 2, 1), fc, dt, TRUE, NULL, error)
                         : NULL;
    cpu_quant q6 = {src_scale, 1.0f, 1.0f, dnnl_data_type_undef};
    cpu_quant q7 = {p6_scale, 1.0f, 1.0f, dnnl_data_type_undef};
    if (p7 == NULL ||
        !conv_init_model_q(st, &plan->fpn_p6, &model->fpn_p6, src, p6, FALSE, VD_ACT_NONE, &q6,
                           error) ||
        !conv_init_model_q(st, &plan->fpn_p7, &model->fpn_p7, plan->p6_relu, p7, FALSE, VD_ACT_NONE,
                           &q7, error))
        return FALSE;
    plan->fpn_out[n_ret] = p6;
    plan->fpn_out[n_ret + 1] = p7;
    plan_step_conv(plan, &plan->fpn_p6);
    return cpu_quantize_plan(st, plan, p6, plan->p6_relu, p6_scale, &os->p7_q, error) &&
           plan_step_conv(plan, &plan->fpn_p7) != NULL;
}

/* @w's weights followed by @w2's (NULL: none; the same input and kernel), their
 * output channels padded with zeros to a multiple of @cb */
gboolean one_stage_pad_conv(const vd_conv *w, const vd_conv *w2, int cb, vd_conv *out,
                            GError **error)
{
    size_t per_out = (size_t)w->in_channels * w->kernel * w->kernel;
    int n = w->out_channels + (w2 != NULL ? w2->out_channels : 0);
    int padded_out = (n + cb - 1) / cb * cb;
    *out = *w;
    out->out_channels = padded_out;
    out->weight = try_alloc((size_t)padded_out * per_out, "the one-stage head", error);
    out->bias = out->weight ? try_alloc((size_t)padded_out, "the one-stage head", error) : NULL;
    if (out->bias == NULL)
        return FALSE;
    memcpy(out->weight, w->weight, sizeof(float) * w->out_channels * per_out);
    memcpy(out->bias, w->bias, sizeof(float) * w->out_channels);
    if (w2 != NULL) {
        memcpy(out->weight + (size_t)w->out_channels * per_out, w2->weight,
               sizeof(float) * w2->out_channels * per_out);
        memcpy(out->bias + w->out_channels, w2->bias, sizeof(float) * w2->out_channels);
    }
    return TRUE;
}

static void one_stage_clear(cpu_state *st)
{
    vd_conv *convs[2] = {&st->one_stage.cls_logits, &st->one_stage.bbox_reg};
    for (int i = 0; i < 2; i++) {
        g_free(convs[i]->weight);
        g_free(convs[i]->bias);
    }
}

static gboolean one_stage_prepare(cpu_state *st, GError **error)
{
    const vd_model *m = st->model;
    /* FCOS: bbox_reg and bbox_ctrness read the same features: one convolution */
    const vd_conv *ctrness = m->config.head.type == VD_HEAD_FCOS ? &m->head_bbox_ctrness : NULL;
    return one_stage_pad_conv(&m->head_cls_logits, NULL, st->cb, &st->one_stage.cls_logits,
                              error) &&
           one_stage_pad_conv(&m->head_bbox_reg, ctrness, st->cb, &st->one_stage.bbox_reg, error);
}

/* torch's GroupNorm, then ReLU, in place on @step->dst with the affine parameters
 * @step->data (a vd_norm): per group of C / G channels, the mean and the biased
 * variance over its channels and pixels (accumulated in double), rstd =
 * 1 / sqrt(var + eps), then per channel y = x * (rstd * gamma) + (beta - mean *
 * rstd * gamma), as torch's CPU kernel computes it. */
static gboolean step_group_norm_relu(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)error;
    const vd_norm *norm = step->data;
    cpu_tensor *t = step->dst;
    int G = st->model->config.head.norm_groups, per_group = t->c / G;
    float eps = st->model->config.head.norm_eps;
    size_t hw = (size_t)t->h * t->w;
    const int CB = t->cb;
#define GN_AT(c, p) (((size_t)((c) / CB) * hw + (p)) * CB + (c) % CB)
#pragma omp parallel for
    for (int g = 0; g < G; g++) {
        double sum = 0.0, squares = 0.0;
        for (int c = g * per_group; c < (g + 1) * per_group; c++)
            for (size_t p = 0; p < hw; p++) {
                double v = load_f32(t->data, t->dt, GN_AT(c, p));
                sum += v;
                squares += v * v;
            }
        double n = (double)per_group * (double)hw;
        double mean = sum / n, var = MAX(squares / n - mean * mean, 0.0);
        float rstd = 1.0f / sqrtf((float)var + eps);
        for (int c = g * per_group; c < (g + 1) * per_group; c++) {
            float scale = rstd * norm->weight[c];
            float shift = norm->bias[c] - (float)mean * scale;
            for (size_t p = 0; p < hw; p++) {
                size_t at = GN_AT(c, p);
                float y = load_f32(t->data, t->dt, at) * scale + shift;
                store_f32(t->data, t->dt, at, y > 0.0f ? y : 0.0f);
            }
        }
    }
#undef GN_AT
    return TRUE;
}

/* One branch on level @p: @n 3x3 conv + ReLU layers @convs (weights @w; with
 * @norms, GroupNorm between each convolution and its ReLU) alternating between
 * @hidden[0] and [1], then @last (weights @last_w) into @out. */
static gboolean plan_branch(cpu_state *st, cpu_plan *plan, int l, const char *branch, cpu_tensor *p,
                            cpu_tensor *hidden[2], const vd_conv *w, const vd_norm *norms, int n,
                            cpu_conv *convs, const vd_conv *last_w, cpu_conv *last, cpu_tensor *out,
                            GError **error)
{
    cpu_tensor *src = p;
    char name[96];
    for (int j = 0; j < n; j++) {
        cpu_tensor *dst = hidden[j % 2];
        if (!conv_init_model(st, &convs[j], &w[j], src, dst, FALSE,
                             norms != NULL ? VD_ACT_NONE : VD_ACT_RELU, error))
            return FALSE;
        cpu_step *step = plan_step_conv(plan, &convs[j]);
        if (norms != NULL) {
            plan_step(plan, step_wait, "the one-stage head");
            step = plan_step(plan, step_group_norm_relu, "GroupNorm");
            step->dst = dst;
            step->data = &norms[j];
        }
        /* calibration: what int8 quantises (every layer's output, the last's for the
         * final convolution) */
        tower_range_name(name, sizeof(name), branch, j, l);
        step_record(st, plan, step, dst, "%s", name);
        src = dst;
    }
    if (!conv_init_model(st, last, last_w, src, out, FALSE, VD_ACT_NONE, error))
        return FALSE;
    plan_step_conv(plan, last);
    return TRUE;
}

/* int8: one branch on level @l from @q_in, the level quantised to s8 (scale
 * @in_scale): its 3x3 convolutions in int8; without GroupNorm each writes u8 with
 * its bias and ReLU fused (into @qbuf[0] and [1] in turn); with GroupNorm each
 * writes real values into @fbuf, GroupNorm and ReLU run there in float, and the
 * result is quantised to u8 (into @qbuf[0] and [1] in turn). The last convolution
 * (weights @last_w) reads the last u8 output (with no tower layer, @q_in) in int8
 * and writes the real logits or deltas, with its bias, into @out. */
static gboolean plan_branch_int8(cpu_state *st, cpu_plan *plan, int l, const char *branch,
                                 cpu_tensor *q_in, float in_scale, cpu_tensor *qbuf[2],
                                 cpu_tensor *fbuf, const vd_conv *w, const vd_norm *norms, int n,
                                 cpu_conv *convs, cpu_quantize *quant, const vd_conv *last_w,
                                 cpu_conv *last, cpu_tensor *out, GError **error)
{
    cpu_tensor *src = q_in;
    float src_scale = in_scale;
    char name[96];
    for (int j = 0; j < n; j++) {
        float scale;
        tower_range_name(name, sizeof(name), branch, j, l);
        if (!range_scale(st, name, TRUE, &scale, error))
            return FALSE;
        cpu_tensor *dst = norms != NULL ? fbuf : qbuf[j % 2];
        cpu_quant q = {src_scale, norms != NULL ? 1.0f : scale, 1.0f, dnnl_data_type_undef};
        if (!conv_init_model_q(st, &convs[j], &w[j], src, dst, FALSE,
                               norms != NULL ? VD_ACT_NONE : VD_ACT_RELU, &q, error))
            return FALSE;
        plan_step_conv(plan, &convs[j]);
        if (norms != NULL) {
            plan_step(plan, step_wait, "the one-stage head");
            cpu_step *gn = plan_step(plan, step_group_norm_relu, "GroupNorm");
            gn->dst = fbuf;
            gn->data = &norms[j];
            dst = qbuf[j % 2];
            if (!cpu_quantize_plan(st, plan, fbuf, dst, scale, &quant[j], error))
                return FALSE;
        }
        src = dst;
        src_scale = scale;
    }
    cpu_quant q = {src_scale, 1.0f, 1.0f, dnnl_data_type_undef};
    if (!conv_init_model_q(st, last, last_w, src, out, FALSE, VD_ACT_NONE, &q, error))
        return FALSE;
    plan_step_conv(plan, last);
    return TRUE;
}

/* Level @l's float32 head outputs (the last convolutions' padded channels) of the
 * size of its feature map @p. */
static gboolean plan_head_outputs(cpu_state *st, cpu_plan *plan, int l, const cpu_tensor *p,
                                  GError **error)
{
    cpu_one_stage_plan *os = &plan->one_stage;
    os->cls_out[l] = plan_tensor(st, plan, p->h, p->w, st->one_stage.cls_logits.out_channels,
                                 dnnl_f32, TRUE, NULL, error);
    os->reg_out[l] = os->cls_out[l]
                         ? plan_tensor(st, plan, p->h, p->w, st->one_stage.bbox_reg.out_channels,
                                       dnnl_f32, TRUE, NULL, error)
                         : NULL;
    return os->reg_out[l] != NULL;
}

/* int8's head: per level, the P level quantised once for both branches, each
 * branch's tower and last convolution in int8 (plan_branch_int8()); the
 * quantised level, two u8 buffers and one real buffer (GroupNorm's) shared by the
 * levels and branches, which run one after the other. */
static gboolean one_stage_plan_int8(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    cpu_one_stage_plan *os = &plan->one_stage;
    int C = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    gboolean gn = cfg->head.norm_groups > 0;
    size_t real_bytes = 0, q_bytes = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        real_bytes =
            MAX(real_bytes, act_bytes(st, plan->fpn_out[l]->h, plan->fpn_out[l]->w, C, dt));
        q_bytes = MAX(q_bytes, act_bytes(st, plan->fpn_out[l]->h, plan->fpn_out[l]->w, C, dnnl_u8));
    }
    /* the real buffer only where GroupNorm runs */
    void *buffers[4] = {NULL, NULL, NULL, NULL};
    for (int k = gn ? 0 : 1; k < 4; k++) {
        if ((buffers[k] =
                 alloc_aligned(k == 0 ? real_bytes : q_bytes, "the one-stage head", error)) == NULL)
            return FALSE;
        g_ptr_array_add(plan->buffers, buffers[k]);
    }
    char name[96];
    for (int l = 0; l < plan->n_levels; l++) {
        cpu_tensor *p = plan->fpn_out[l];
        float level_scale;
        level_range_name(name, sizeof(name), plan, l);
        if (!range_scale(st, name, FALSE, &level_scale, error))
            return FALSE;
        cpu_tensor *fbuf = NULL;
        if (gn &&
            (fbuf = plan_tensor(st, plan, p->h, p->w, C, dt, TRUE, buffers[0], error)) == NULL)
            return FALSE;
        cpu_tensor *q_in = plan_tensor(st, plan, p->h, p->w, C, dnnl_s8, TRUE, buffers[1], error);
        cpu_tensor *qbuf[2] = {NULL, NULL};
        for (int k = 0; k < 2 && q_in != NULL; k++)
            if ((qbuf[k] = plan_tensor(st, plan, p->h, p->w, C, dnnl_u8, TRUE, buffers[2 + k],
                                       error)) == NULL)
                return FALSE;
        if (q_in == NULL)
            return FALSE;
        if (!plan_head_outputs(st, plan, l, p, error) ||
            !cpu_quantize_plan(st, plan, p, q_in, level_scale, &os->level_q[l], error) ||
            !plan_branch_int8(st, plan, l, "head.classification_head", q_in, level_scale, qbuf,
                              fbuf, m->head_cls_convs, gn ? m->head_cls_norms : NULL,
                              cfg->head.n_cls_convs, os->cls_convs[l], os->cls_q[l],
                              &st->one_stage.cls_logits, &os->cls_logits[l], os->cls_out[l],
                              error) ||
            !plan_branch_int8(st, plan, l, "head.regression_head", q_in, level_scale, qbuf, fbuf,
                              m->head_reg_convs, gn ? m->head_reg_norms : NULL,
                              cfg->head.n_reg_convs, os->reg_convs[l], os->reg_q[l],
                              &st->one_stage.bbox_reg, &os->bbox_reg[l], os->reg_out[l], error))
            return FALSE;
    }
    plan_step(plan, step_wait, "the one-stage head");
    return TRUE;
}

static gboolean one_stage_plan(cpu_state *st, cpu_plan *plan, GError **error)
{
    if (st->int8)
        return one_stage_plan_int8(st, plan, error);
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    cpu_one_stage_plan *os = &plan->one_stage;
    int C = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    gboolean gn = cfg->head.norm_groups > 0;
    size_t bytes = 0;
    for (int l = 0; l < plan->n_levels; l++)
        bytes = MAX(bytes, act_bytes(st, plan->fpn_out[l]->h, plan->fpn_out[l]->w, C, dt));
    void *buffers[2];
    for (int k = 0; k < 2; k++) {
        if ((buffers[k] = alloc_aligned(bytes, "the one-stage head", error)) == NULL)
            return FALSE;
        g_ptr_array_add(plan->buffers, buffers[k]);
    }
    for (int l = 0; l < plan->n_levels; l++) {
        cpu_tensor *p = plan->fpn_out[l];
        cpu_tensor *hidden[2];
        for (int k = 0; k < 2; k++)
            if ((hidden[k] = plan_tensor(st, plan, p->h, p->w, C, dt, TRUE, buffers[k], error)) ==
                NULL)
                return FALSE;
        if (!plan_head_outputs(st, plan, l, p, error) ||
            !plan_branch(st, plan, l, "head.classification_head", p, hidden, m->head_cls_convs,
                         gn ? m->head_cls_norms : NULL, cfg->head.n_cls_convs, os->cls_convs[l],
                         &st->one_stage.cls_logits, &os->cls_logits[l], os->cls_out[l], error) ||
            !plan_branch(st, plan, l, "head.regression_head", p, hidden, m->head_reg_convs,
                         gn ? m->head_reg_norms : NULL, cfg->head.n_reg_convs, os->reg_convs[l],
                         &st->one_stage.bbox_reg, &os->bbox_reg[l], os->reg_out[l], error))
            return FALSE;
    }
    plan_step(plan, step_wait, "the one-stage head");
    return TRUE;
}

static void one_stage_plan_clear(cpu_plan *plan)
{
    cpu_one_stage_plan *os = &plan->one_stage;
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        for (int j = 0; j < VD_MAX_HEAD_CONVS; j++) {
            conv_clear(&os->cls_convs[l][j]);
            conv_clear(&os->reg_convs[l][j]);
        }
        conv_clear(&os->cls_logits[l]);
        conv_clear(&os->bbox_reg[l]);
        cpu_quantize_clear(&os->level_q[l]);
        for (int j = 0; j < VD_MAX_HEAD_CONVS; j++) {
            cpu_quantize_clear(&os->cls_q[l][j]);
            cpu_quantize_clear(&os->reg_q[l][j]);
        }
    }
    cpu_quantize_clear(&os->p6_q);
    cpu_quantize_clear(&os->p7_q);
}

/* Channel @ch of pixel @p of float32 head output @t (blocked or NHWC) */
static inline float head_at(const cpu_tensor *t, size_t p, int ch)
{
    size_t hw = (size_t)t->h * t->w;
    return ((const float *)t->data)[((size_t)(ch / t->cb) * hw + p) * t->cb + ch % t->cb];
}

/* FCOS's regression: the distances after the head's ReLU (NaN stays) */
static inline float relu(float v)
{
    return v < 0.0f ? 0.0f : v;
}

/* The head's outputs as torchvision's head returns them, every level in turn:
 * "cls_logits" [anchors][K], "bbox_regression" [anchors][4] (FCOS: after its ReLU)
 * and FCOS's "bbox_ctrness" [anchors][1]; and the count of non-finite values among
 * them. */
static int observe_head(vd_context *ctx, const cpu_plan *plan, int A, int K, gboolean fcos,
                        gboolean observe)
{
    const cpu_one_stage_plan *os = &plan->one_stage;
    int n_nonfinite = 0;
    float *cls = NULL, *reg = NULL, *ctr = NULL;
    if (observe) {
        cls = g_try_malloc(MAX((size_t)plan->n_anchors * K, 1) * sizeof(float));
        reg = g_try_malloc(MAX((size_t)plan->n_anchors * 4, 1) * sizeof(float));
        ctr = g_try_malloc(MAX((size_t)plan->n_anchors, 1) * sizeof(float));
    }
    int n_reg = fcos ? 5 * A : 4 * A;
    for (int l = 0; l < plan->n_levels; l++) {
        size_t hw = (size_t)os->cls_out[l]->h * os->cls_out[l]->w;
        size_t at = (size_t)plan->level_anchor_offset[l];
        for (size_t p = 0; p < hw; p++) {
            for (int ch = 0; ch < A * K; ch++) {
                float v = head_at(os->cls_out[l], p, ch);
                n_nonfinite += !isfinite(v);
                if (cls != NULL)
                    cls[(at + p * A) * K + ch] = v;
            }
            for (int ch = 0; ch < n_reg; ch++) {
                float v = head_at(os->reg_out[l], p, ch);
                n_nonfinite += !isfinite(v);
                if (reg != NULL && ch < 4 * A)
                    reg[(at + p * A) * 4 + ch] = fcos ? relu(v) : v;
                else if (ctr != NULL && ch >= 4 * A)
                    ctr[at + p * A + ch - 4 * A] = v;
            }
        }
    }
    if (cls != NULL && reg != NULL && ctr != NULL) {
        int64_t s1[2] = {plan->n_anchors, K}, s2[2] = {plan->n_anchors, 4},
                s3[2] = {plan->n_anchors, 1};
        vd_context_observe(ctx, "cls_logits", cls, s1, 2);
        vd_context_observe(ctx, "bbox_regression", reg, s2, 2);
        if (fcos)
            vd_context_observe(ctx, "bbox_ctrness", ctr, s3, 2);
    }
    g_free(cls);
    g_free(reg);
    g_free(ctr);
    return n_nonfinite;
}

/* The non-finite values among the regression outputs' first @n_reg channels on
 * every level (the class logits' are counted by the detection's scan). */
static int reg_nonfinite(const cpu_plan *plan, int n_reg)
{
    int n = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        const cpu_tensor *reg = plan->one_stage.reg_out[l];
        size_t hw = (size_t)reg->h * reg->w;
        for (int b = 0; b * reg->cb < n_reg; b++) {
            int c_end = MIN(reg->cb, n_reg - b * reg->cb);
            const float *v = (const float *)reg->data + (size_t)b * hw * reg->cb;
            for (size_t p = 0; p < hw; p++, v += reg->cb)
                for (int c = 0; c < c_end; c++)
                    n += !isfinite(v[c]);
        }
    }
    return n;
}

/* The score of class channel @ch (a * K + k) at pixel @p of level outputs @cls
 * and @reg: RetinaNet's sigmoid(logit), FCOS's sqrt(sigmoid(logit) *
 * sigmoid(centerness of anchor a)), float32 as torch computes them. */
static inline float score_at(const cpu_tensor *cls, const cpu_tensor *reg, size_t p, int ch, int A,
                             int K, gboolean fcos)
{
    float s = vd_math_sigmoid(head_at(cls, p, ch));
    if (!fcos)
        return s;
    return sqrtf(s * vd_math_sigmoid(head_at(reg, p, 4 * A + ch / K)));
}

static gboolean one_stage_detect(cpu_state *st, vd_context *ctx, cpu_plan *plan, int rh, int rw,
                                 const vd_image *image, vd_result *result, gboolean observe,
                                 GError **error)
{
    const vd_config *cfg = &st->model->config;
    const cpu_one_stage_plan *os = &plan->one_stage;
    int K = cfg->num_classes, A = cfg->anchors_per_location;
    int topk = cfg->head.topk_candidates;
    gboolean fcos = cfg->head.type == VD_HEAD_FCOS;
    float thr = ctx->params.score_threshold;
    gboolean ok = FALSE;

    vd_context_stage_mark(ctx, VD_STAGE_BOX_HEAD);
    /* observed, the outputs are copied and counted whole; otherwise the scan below
     * counts the class logits' non-finite values and reg_nonfinite() the rest */
    int n_nonfinite = observe ? observe_head(ctx, plan, A, K, fcos, TRUE)
                              : reg_nonfinite(plan, fcos ? 5 * A : 4 * A);
    float floor_logit = vd_score_logit_floor(thr, fcos);

    size_t max_level = 0, n_cand = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        size_t n_l = (size_t)(plan->level_anchor_offset[l + 1] - plan->level_anchor_offset[l]) * K;
        max_level = MAX(max_level, n_l);
        n_cand += MIN((size_t)topk, n_l);
    }
    float *level_scores = try_alloc(max_level, "detections", error);
    int *level_index = level_scores ? try_alloc(max_level, "detections", error) : NULL;
    int *top = level_index ? try_alloc((size_t)topk, "detections", error) : NULL;
    float *refs = top ? try_alloc((size_t)topk * 4, "detections", error) : NULL;
    float *deltas = refs ? try_alloc((size_t)topk * 4, "detections", error) : NULL;
    float *boxes = deltas ? try_alloc(n_cand * 4, "detections", error) : NULL;
    float *scores = boxes ? try_alloc(n_cand, "detections", error) : NULL;
    int *labels = scores ? try_alloc(n_cand, "detections", error) : NULL;
    int *keep = labels ? try_alloc(n_cand, "detections", error) : NULL;
    if (keep == NULL)
        goto out_free;

    int m = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        const cpu_tensor *cls = os->cls_out[l], *reg = os->reg_out[l];
        size_t hw = (size_t)cls->h * cls->w;
        const float *anchors = plan->anchors + (size_t)plan->level_anchor_offset[l] * 4;
        /* scores over the threshold (strict), in torchvision's order: anchor
         * (pixel, then anchor of the pixel), then class; the exact score only for
         * the logits over vd_score_logit_floor() (and the non-finite ones, counted) */
        int n = 0, cb = cls->cb, AK = A * K;
        const float *data = cls->data;
        for (size_t p = 0; p < hw; p++)
            for (int b = 0; b * cb < AK; b++) {
                const float *v = data + ((size_t)b * hw + p) * cb;
                int c_end = MIN(cb, AK - b * cb);
                /* the common case, vectorised: no logit of the block over the floor
                 * (nor NaN nor infinite) */
                int hit = 0;
                for (int c = 0; c < c_end; c++)
                    hit |= !(v[c] <= floor_logit) | (v[c] == -INFINITY);
                if (!hit)
                    continue;
                for (int c = 0; c < c_end; c++) {
                    if (!(v[c] > floor_logit) && fabsf(v[c]) < INFINITY)
                        continue;
                    if (!isfinite(v[c]) && !observe)
                        n_nonfinite++;
                    int ch = b * cb + c;
                    float s = score_at(cls, reg, p, ch, A, K, fcos);
                    if (s > thr) {
                        level_scores[n] = s;
                        level_index[n] = (int)(p * AK) + ch;
                        n++;
                    }
                }
            }
        int k = vd_topk(level_scores, n, topk, top);
        for (int j = 0; j < k; j++) {
            int flat = level_index[top[j]];
            int anchor = flat / K;
            for (int q = 0; q < 4; q++) {
                float v = head_at(reg, (size_t)(anchor / A), (anchor % A) * 4 + q);
                deltas[4 * j + q] = fcos ? relu(v) : v;
            }
            memcpy(refs + 4 * j, anchors + 4 * (size_t)anchor, 4 * sizeof(float));
            scores[m + j] = level_scores[top[j]];
            labels[m + j] = flat % K;
        }
        if (fcos)
            vd_decode_linear_boxes(refs, deltas, k, cfg->head.normalize_by_size,
                                   boxes + 4 * (size_t)m);
        else
            vd_decode_boxes(refs, deltas, k, cfg->bbox_reg_weights, boxes + 4 * (size_t)m);
        m += k;
    }
    vd_clip_boxes(boxes, m, (float)rh, (float)rw);
    /* a box with a non-finite coordinate (non-finite head outputs, which
     * n_nonfinite counts) is dropped: torchvision would return it as it is */
    int finite = 0;
    for (int i = 0; i < m; i++) {
        const float *b = boxes + 4 * (size_t)i;
        if (!(isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3])))
            continue;
        memmove(boxes + 4 * (size_t)finite, b, 4 * sizeof(float));
        scores[finite] = scores[i];
        labels[finite] = labels[i];
        finite++;
    }
    m = finite;
    write_nms_detections(ctx, image, rh, rw, boxes, scores, labels, m, keep, result);
    result->n_nonfinite = n_nonfinite;
    vd_context_stage_mark(ctx, VD_STAGE_POSTPROCESS);
    ok = TRUE;

out_free:
    g_free(level_scores);
    g_free(level_index);
    g_free(top);
    g_free(refs);
    g_free(deltas);
    g_free(boxes);
    g_free(scores);
    g_free(labels);
    g_free(keep);
    return ok;
}

static void one_stage_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                              GStringChunk *strings)
{
    const vd_config *cfg = &st->model->config;
    char name[96];
    if (plan == NULL)
        return;
    const cpu_one_stage_plan *os = &plan->one_stage;
    /* int8's quantisations (none in float) */
    kernel_add_op(out, strings, os->p6_q.prim, os->p6_q.xnn, "reorder",
                  "backbone.fpn.extra_blocks.p6.quantise");
    kernel_add_op(out, strings, os->p7_q.prim, os->p7_q.xnn, "reorder",
                  "backbone.fpn.extra_blocks.p7.quantise");
    for (int l = 0; l < plan->n_levels; l++) {
        kernel_add_op(out, strings, os->level_q[l].prim, os->level_q[l].xnn, "reorder",
                      "head.quantise[level %d]", l);
        for (int j = 0; j < cfg->head.n_cls_convs; j++) {
            g_snprintf(name, sizeof(name), "head.classification_head.conv.%d[level %d]", j, l);
            conv_kernels(out, strings, &os->cls_convs[l][j], name);
            kernel_add_op(out, strings, os->cls_q[l][j].prim, os->cls_q[l][j].xnn, "reorder",
                          "head.classification_head.conv.%d.quantise[level %d]", j, l);
        }
        g_snprintf(name, sizeof(name), "head.classification_head.cls_logits[level %d]", l);
        conv_kernels(out, strings, &os->cls_logits[l], name);
        for (int j = 0; j < cfg->head.n_reg_convs; j++) {
            g_snprintf(name, sizeof(name), "head.regression_head.conv.%d[level %d]", j, l);
            conv_kernels(out, strings, &os->reg_convs[l][j], name);
            kernel_add_op(out, strings, os->reg_q[l][j].prim, os->reg_q[l][j].xnn, "reorder",
                          "head.regression_head.conv.%d.quantise[level %d]", j, l);
        }
        g_snprintf(name, sizeof(name), "head.regression_head.bbox_reg%s[level %d]",
                   cfg->head.type == VD_HEAD_FCOS ? "+bbox_ctrness" : "", l);
        conv_kernels(out, strings, &os->bbox_reg[l], name);
    }
}

const cpu_detector vd_cpu_one_stage = {
    .kind = VD_DETECTOR_ONE_STAGE,
    .supports = one_stage_supports,
    .prepare = one_stage_prepare,
    .clear = one_stage_clear,
    .plan = one_stage_plan,
    .plan_clear = one_stage_plan_clear,
    .detect = one_stage_detect,
    .kernels = one_stage_kernels,
};
