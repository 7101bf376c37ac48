/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's FPN (torchvision's FeaturePyramidNetwork: lateral 1x1 and
 * output 3x3 convolutions, the top-down nearest upsampling, LastLevelMaxPool or
 * LastLevelP6P7) and its anchors, planned once per padded input size; shared by
 * the two-stage (vd_cpu_rcnn.c) and the one-stage (vd_cpu_onestage.c) detectors. */
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

/* nearest upsampling of @src into @dst, both blocked, of one type (torch's
 * 'nearest' with an explicit size, spec §2.3): src index = min(floor(dst *
 * f32(in/out)), in - 1). */
static void upsample_nearest(const cpu_tensor *src, cpu_tensor *dst)
{
    float sy = (float)src->h / (float)dst->h;
    float sx = (float)src->w / (float)dst->w;
    const int CB = dst->cb;
    int n_cb = (dst->c + CB - 1) / CB;
    size_t es = dt_size(dst->dt);
    const char *s = src->data;
    char *d = dst->data;
#pragma omp parallel for collapse(2)
    for (int cb = 0; cb < n_cb; cb++) {
        for (int y = 0; y < dst->h; y++) {
            int iy = MIN((int)floorf((float)y * sy), src->h - 1);
            const char *srow = s + ((size_t)cb * src->h + iy) * src->w * CB * es;
            char *drow = d + ((size_t)cb * dst->h + y) * dst->w * CB * es;
            for (int x = 0; x < dst->w; x++) {
                int ix = MIN((int)floorf((float)x * sx), src->w - 1);
                memcpy(drow + (size_t)x * CB * es, srow + (size_t)ix * CB * es, CB * es);
            }
        }
    }
}

static gboolean step_upsample(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    upsample_nearest(step->src, step->dst);
    return TRUE;
}

/* LastLevelMaxPool: max_pool2d(P_top, 1, 2, 0) == P_top[::2, ::2], from the top
 * level @src into the pool level @dst */
static gboolean step_pool_level(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    const cpu_tensor *top = step->src;
    cpu_tensor *pool = step->dst;
    const char *s = top->data;
    char *d = pool->data;
    const int CB = pool->cb;
    int n_cb = (pool->c + CB - 1) / CB;
    size_t es = dt_size(pool->dt);
    for (int cb = 0; cb < n_cb; cb++)
        for (int y = 0; y < pool->h; y++)
            for (int x = 0; x < pool->w; x++)
                memcpy(d + (((size_t)cb * pool->h + y) * pool->w + x) * CB * es,
                       s + (((size_t)cb * top->h + 2 * y) * top->w + 2 * x) * CB * es, CB * es);
    return TRUE;
}

/* LastLevelP6P7 (one-stage detectors): P6 = conv3x3/2 of P5 or C5, P7 =
 * conv3x3/2 of relu(P6), in tensors of their own; calibration records P6 and P7
 * (int8: vd_cpu_onestage.c). */
static gboolean plan_p6p7(cpu_state *st, cpu_plan *plan, GError **error)
{
    if (st->int8)
        return one_stage_plan_p6p7_int8(st, plan, error);
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    int n_ret = cfg->n_returned_layers, fc = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    cpu_tensor *src =
        cfg->fpn_p6_from_p5 ? plan->fpn_out[n_ret - 1] : plan->returned_out[n_ret - 1];
    int h6 = conv_out_size(src->h, 3, 2, 1), w6 = conv_out_size(src->w, 3, 2, 1);
    cpu_tensor *p6 = plan_tensor(st, plan, h6, w6, fc, dt, TRUE, NULL, error);
    plan->p6_relu = p6 ? plan_tensor(st, plan, h6, w6, fc, dt, TRUE, NULL, error) : NULL;
    cpu_tensor *p7 = plan->p6_relu
                         ? plan_tensor(st, plan, conv_out_size(h6, 3, 2, 1),
                                       conv_out_size(w6, 3, 2, 1), fc, dt, TRUE, NULL, error)
                         : NULL;
    if (p7 == NULL ||
        !conv_init_model(st, &plan->fpn_p6, &model->fpn_p6, src, p6, FALSE, VD_ACT_NONE, error) ||
        !conv_init_model(st, &plan->fpn_p7, &model->fpn_p7, plan->p6_relu, p7, FALSE, VD_ACT_NONE,
                         error))
        return FALSE;
    plan->fpn_out[n_ret] = p6;
    plan->fpn_out[n_ret + 1] = p7;
    step_record(st, plan, plan_step_conv(plan, &plan->fpn_p6), p6, "backbone.fpn.extra_blocks.p6");
    plan_step(plan, step_wait, "FPN P6");
    cpu_step *relu = plan_step(plan, step_relu, "FPN P6's ReLU");
    relu->src = p6;
    relu->dst = plan->p6_relu;
    step_record(st, plan, plan_step_conv(plan, &plan->fpn_p7), p7, "backbone.fpn.extra_blocks.p7");
    return TRUE;
}

/* The FPN in the activation type, every kind of detector's: the top-down sums in
 * the temps, the P levels, the pool level or P6 and P7. int8: the lateral
 * convolutions read the quantised C_i and write the top-down sums in s8 (the
 * upsampling copies them as they are), the 3x3 output convolutions read those and
 * write real P levels (RoIAlign's input). */
gboolean plan_fpn(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    int n_ret = cfg->n_returned_layers;
    int fc = cfg->fpn_channels;
    dnnl_data_type_t dt = act_dt(st);
    gboolean int8 = st->int8;
    float sum_scale[4] = {0};
    if (int8) {
        char name[64];
        for (int i = 0; i < n_ret; i++) {
            g_snprintf(name, sizeof(name), "backbone.fpn.inner_blocks.%d", i);
            if (!range_scale(st, name, FALSE, &sum_scale[i], error))
                return FALSE;
        }
    }

    plan->n_returned = n_ret;
    plan->n_levels = cfg->n_fpn_levels;
    size_t sums_at = 0;
    for (int i = 0; i < n_ret; i++) {
        cpu_tensor *c = plan->returned_out[i];
        size_t bytes = act_bytes(st, c->h, c->w, fc, dt);
        void *sum_data = NULL;
        if (sums_at + bytes <= plan->temps_bytes) {
            sum_data = (char *)plan->temps + sums_at;
            sums_at += (bytes + 63) / 64 * 64;
        }
        /* C_i is dead once the lateral convolution has read it, before the 3x3
         * convolution writes P_i (but C5 where P6 reads it) */
        gboolean c_read_later = i == n_ret - 1 && cfg->fpn_p6p7 && !cfg->fpn_p6_from_p5;
        void *out_data = bytes <= tensor_size(c) && !c_read_later ? c->data : NULL;
        plan->fpn_sum[i] =
            plan_tensor(st, plan, c->h, c->w, fc, int8 ? dnnl_s8 : dt, TRUE, sum_data, error);
        plan->fpn_out[i] = plan_tensor(st, plan, c->h, c->w, fc, dt, TRUE, out_data, error);
        if (plan->fpn_sum[i] == NULL || plan->fpn_out[i] == NULL)
            return FALSE;
        /* the top level's lateral has nothing to add; the others sum onto the
         * upsampled chain already written into fpn_sum */
        gboolean sum = i + 1 < n_ret;
        cpu_quant q_inner = {plan->returned_scale[i], sum_scale[i], sum ? sum_scale[i + 1] : 1.0f,
                             dnnl_s8};
        cpu_quant q_layer = {sum_scale[i], 1.0f, 1.0f, dnnl_data_type_undef};
        if (!conv_init_model_q(st, &plan->fpn_inner[i], &model->fpn_inner[i], c, plan->fpn_sum[i],
                               sum, VD_ACT_NONE, int8 ? &q_inner : NULL, error) ||
            !conv_init_model_q(st, &plan->fpn_layer[i], &model->fpn_layer[i], plan->fpn_sum[i],
                               plan->fpn_out[i], FALSE, VD_ACT_NONE, int8 ? &q_layer : NULL, error))
            return FALSE;
    }
    /* top-down: the upsampled sum below the top level, the lateral convolution
     * onto it, the 3x3 convolution */
    for (int i = n_ret - 1; i >= 0; i--) {
        if (i + 1 < n_ret) {
            cpu_step *up = plan_step(plan, step_upsample, "FPN upsampling");
            up->src = plan->fpn_sum[i + 1];
            up->dst = plan->fpn_sum[i];
        }
        step_record(st, plan, plan_step_conv(plan, &plan->fpn_inner[i]), plan->fpn_sum[i],
                    "backbone.fpn.inner_blocks.%d", i);
        step_record(st, plan, plan_step_conv(plan, &plan->fpn_layer[i]), plan->fpn_out[i],
                    "backbone.fpn.layer_blocks.%d", i);
    }
    plan_step(plan, step_wait, "FPN");
    if (cfg->fpn_pool_level) {
        cpu_tensor *top = plan->fpn_out[n_ret - 1];
        plan->fpn_out[n_ret] =
            plan_tensor(st, plan, (top->h + 1) / 2, (top->w + 1) / 2, fc, dt, TRUE, NULL, error);
        if (plan->fpn_out[n_ret] == NULL)
            return FALSE;
        cpu_step *pool = plan_step(plan, step_pool_level, "FPN pool level");
        pool->src = top;
        pool->dst = plan->fpn_out[n_ret];
    }
    if (cfg->fpn_p6p7 && !plan_p6p7(st, plan, error))
        return FALSE;
    plan->steps_fpn = plan->steps->len;
    return TRUE;
}

/* The anchors of every level, once per size (spec §3), every kind's: torchvision's
 * AnchorGenerator, A per location on each level. */
gboolean plan_anchors(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int A = cfg->anchors_per_location;
    int total = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        plan->level_anchor_offset[l] = total;
        total += plan->fpn_out[l]->h * plan->fpn_out[l]->w * A;
    }
    plan->level_anchor_offset[plan->n_levels] = total;
    plan->n_anchors = total;
    plan->anchors = try_alloc((size_t)total * 4, "anchors", error);
    if (plan->anchors == NULL)
        return FALSE;
    for (int l = 0; l < plan->n_levels; l++) {
        float cell[VD_MAX_ANCHORS_PER_LEVEL * VD_MAX_ANCHORS_PER_LEVEL * 4];
        vd_cell_anchors(cfg->anchor_sizes[l], cfg->n_anchor_sizes[l], cfg->aspect_ratios[l],
                        cfg->n_aspect_ratios[l], cell);
        vd_grid_anchors(cell, A, plan->padded_h, plan->padded_w, plan->fpn_out[l]->h,
                        plan->fpn_out[l]->w,
                        plan->anchors + (size_t)plan->level_anchor_offset[l] * 4);
    }
    return TRUE;
}
