/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's SSD and SSDlite (engine/SSD.md): the feature extractor as the
 * model's layer lists (a cpu_backbone: convolutions with their batch norm folded
 * and activation fused, max-pools, squeeze-and-excitation, inverted residuals;
 * VGG16's L2 norm on its first feature map), then, as a cpu_detector, the default
 * boxes once per size, the heads on every feature map and torchvision's
 * SSD.postprocess_detections: softmax over the classes, every box decoded and
 * clipped, per class (background aside) the scores over the threshold and the
 * topk_candidates best, then batched NMS and the detections_per_img cap. On
 * XNNPACK's layers (cpu_state.xnn) the same plan in NHWC: its convolutions (the
 * dilation, ReLU6 as its clamp) and its max pooling (ceil_mode as the bottom and
 * right padding). */
#include "vd_config.h"
#include "cpu/vd_cpu_private.h"
#include "vd_math.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Layer lists                                                               */

/* Layers of the body's lists and the extras: in the plan's order, the index of the
 * heads' first layer */
static int backbone_ops(const vd_ssd_config *s)
{
    int n = 0;
    for (int i = 0; i < s->n_body; i++)
        n += s->body[i].n_ops;
    for (int i = 0; i < s->n_extra; i++)
        n += s->extra[i].n_ops;
    return n;
}

/* Layers of every list of the model, in the plan's order: the body's lists, the
 * extras, then per level the classification and the regression head */
static int count_ops(const vd_ssd_config *s)
{
    int n = backbone_ops(s);
    for (int l = 0; l < s->n_levels; l++)
        n += s->cls[l].n_ops + s->reg[l].n_ops;
    return n;
}

/* An inverted residual's input, copied into its last convolution's output, onto
 * which that convolution adds itself */
static gboolean step_copy_residual(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    memcpy(step->dst->data, step->src->data, tensor_size(step->src));
    return TRUE;
}

static gboolean step_squeeze_excite(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    cpu_squeeze_excite(step->dst, step->data, step->work);
    return TRUE;
}

/* torch's MaxPool2d output size, ceil_mode included (a last window must start
 * inside the input or its left padding) */
static int pool_out_size(int n, int kernel, int stride, int padding, gboolean ceil_mode)
{
    int span = n + 2 * padding - kernel;
    int out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= n + padding)
        out--;
    return out;
}

static int dilated_out_size(int n, const vd_conv *w)
{
    int d = MAX(w->dilation, 1);
    return (n + 2 * w->padding - d * (w->kernel - 1) - 1) / w->stride + 1;
}

/* The max-pool @op (layer @idx of the plan's lists) of @x into a new tensor *@out
 * of @x's type: XNNPACK's where the layers run XNNPACK, else oneDNN's, with
 * ceil_mode as bottom and right padding; its step. */
static gboolean plan_max_pool(cpu_state *st, cpu_plan *plan, int idx, const vd_ssd_op *op,
                              cpu_tensor *x, cpu_tensor **out, GError **error)
{
    cpu_ssd_plan *sp = &plan->ssd;
    int oh = pool_out_size(x->h, op->kernel, op->stride, op->padding, op->ceil_mode);
    int ow = pool_out_size(x->w, op->kernel, op->stride, op->padding, op->ceil_mode);
    if (oh < 1 || ow < 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "a %dx%d input is too small for this SSD model's max-pool", x->h, x->w);
        return FALSE;
    }
    /* ceil_mode: the bottom and right padding that makes oneDNN's (XNNPACK's) size
     * torch's */
    int pad_b = MAX((oh - 1) * op->stride + op->kernel - x->h - op->padding, 0);
    int pad_r = MAX((ow - 1) * op->stride + op->kernel - x->w - op->padding, 0);
    cpu_tensor *y = plan_tensor(st, plan, oh, ow, x->c, x->dt, TRUE, NULL, error);
    if (y == NULL)
        return FALSE;
    *out = y;
    if (st->xnn != NULL) {
        vd_xnn_pool_desc pool = {.c = x->c,
                                 .in_h = x->h,
                                 .in_w = x->w,
                                 .out_h = oh,
                                 .out_w = ow,
                                 .kernel = op->kernel,
                                 .stride = op->stride,
                                 .pad_top = op->padding,
                                 .pad_left = op->padding,
                                 .pad_bottom = pad_b,
                                 .pad_right = pad_r};
        sp->pools_xnn[idx] = vd_xnn_max_pool_pad_new(st->xnn, &pool, x->dt, op->name, error);
        if (sp->pools_xnn[idx] == NULL)
            return FALSE;
        plan_step_xnn(plan, sp->pools_xnn[idx], x, y, "max-pool");
        return TRUE;
    }
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = vd_layers_max_pool_pad_pd(st->engine, vd_layers_memory_md(x->mem),
                                            vd_layers_memory_md(y->mem), op->kernel, op->stride,
                                            op->padding, pad_b, pad_r, &pd, "max-pool", error) &&
                  vd_layers_primitive_new(pd, &sp->pools[idx], "max-pool", error);
    vd_layers_pd_free(pd);
    if (!ok)
        return FALSE;
    plan_step_primitive(plan, sp->pools[idx], DNNL_ARG_SRC, x, DNNL_ARG_DST, y, NULL, "max-pool");
    return TRUE;
}

/* The steps of layer list @layers from @src, its ops' convolutions and pools at
 * @base in plan->ssd; *@out its output. @last_w (non-NULL for a head) replaces the
 * last convolution's weights, which write float32 (output channels padded). */
static gboolean plan_layers(cpu_state *st, cpu_plan *plan, const vd_ssd_layers *layers,
                            cpu_tensor *src, int base, const vd_conv *last_w, cpu_tensor **out,
                            GError **error)
{
    cpu_ssd_plan *sp = &plan->ssd;
    dnnl_data_type_t dt = act_dt(st);
    cpu_tensor *x = src, *saved = NULL;
    for (int i = 0; i < layers->n_ops; i++) {
        const vd_ssd_op *op = &layers->ops[i];
        gboolean last = i == layers->n_ops - 1 && last_w != NULL;
        cpu_tensor *y;
        switch (op->kind) {
        case VD_SSD_SAVE:
            saved = x;
            break;
        case VD_SSD_CONV: {
            const vd_conv *w = last ? last_w : &op->conv;
            int oh = dilated_out_size(x->h, w), ow = dilated_out_size(x->w, w);
            if (oh < 1 || ow < 1) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "layer %s: a %dx%d input is too small for this SSD model", op->name,
                            x->h, x->w);
                return FALSE;
            }
            y = plan_tensor(st, plan, oh, ow, w->out_channels, last ? dnnl_f32 : dt, TRUE, NULL,
                            error);
            if (y == NULL)
                return FALSE;
            /* dilated (VGG16's fc6) below AVX-512: in NHWC between two reorders, where
             * oneDNN 2.6's nChw8c kernels are reference loops */
            if (MAX(w->dilation, 1) > 1 && x->tag != dnnl_nhwc && st->cb != 16 && !op->add_saved) {
                cpu_tensor *xn =
                    plan_tensor_tag(st, plan, x->h, x->w, x->c, x->dt, dnnl_nhwc, NULL, error);
                cpu_tensor *yn =
                    xn ? plan_tensor_tag(st, plan, oh, ow, y->c, y->dt, dnnl_nhwc, NULL, error)
                       : NULL;
                if (yn == NULL ||
                    !vd_layers_reorder_new(st->engine, vd_layers_memory_md(x->mem),
                                           vd_layers_memory_md(xn->mem), &sp->to_nhwc[base + i],
                                           "dilated convolution", error) ||
                    !vd_layers_reorder_new(st->engine, vd_layers_memory_md(yn->mem),
                                           vd_layers_memory_md(y->mem), &sp->from_nhwc[base + i],
                                           "dilated convolution", error) ||
                    !conv_init_model(st, &sp->convs[base + i], w, xn, yn, FALSE, op->act, error))
                    return FALSE;
                plan_step_primitive(plan, sp->to_nhwc[base + i], DNNL_ARG_FROM, x, DNNL_ARG_TO, xn,
                                    NULL, "dilated convolution");
                plan_step_conv(plan, &sp->convs[base + i]);
                cpu_step *back =
                    plan_step_primitive(plan, sp->from_nhwc[base + i], DNNL_ARG_FROM, yn,
                                        DNNL_ARG_TO, y, NULL, "dilated convolution");
                if (last_w == NULL)
                    step_record(st, plan, back, y, "%s", op->name);
                x = y;
                break;
            }
            if (op->add_saved) {
                /* the loader checked the channels; a stride or a padding inside the
                 * block can still change its size */
                if (saved == NULL || saved->h != oh || saved->w != ow || saved->c != y->c ||
                    saved->dt != y->dt || saved->tag != y->tag) {
                    g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                                "layer %s: a residual block's output (%dx%d) is not the size of "
                                "its input (%dx%d)",
                                op->name, oh, ow, saved ? saved->h : 0, saved ? saved->w : 0);
                    return FALSE;
                }
                plan_step(plan, step_wait, "inverted residual");
                cpu_step *copy = plan_step(plan, step_copy_residual, "inverted residual");
                copy->src = saved;
                copy->dst = y;
            }
            if (!conv_init_model(st, &sp->convs[base + i], w, x, y, op->add_saved, op->act, error))
                return FALSE;
            cpu_step *step = plan_step_conv(plan, &sp->convs[base + i]);
            /* calibration: the feature extractor's outputs (int8 quantises them) */
            if (last_w == NULL)
                step_record(st, plan, step, y, "%s", op->name);
            x = y;
            break;
        }
        case VD_SSD_MAXPOOL: {
            if (!plan_max_pool(st, plan, base + i, op, x, &y, error))
                return FALSE;
            x = y;
            break;
        }
        case VD_SSD_SQUEEZE_EXCITE: {
            plan_step(plan, step_wait, "squeeze-and-excitation");
            cpu_se *se = plan_squeeze_excite(plan, &op->fc1, &op->fc2, error);
            if (se == NULL)
                return FALSE;
            cpu_step *step = plan_step(plan, step_squeeze_excite, "squeeze-and-excitation");
            step->dst = x;
            step->data = se;
            step->work = sp->se_work;
            break;
        }
        }
    }
    *out = x;
    return TRUE;
}

/* int8 (SSD300's VGG16, ReLU after every convolution): the steps of layer list
 * @layers from @x (real, of the activation type, for the first list; else u8 of
 * scale @x_scale), its ops' convolutions, pools and quantisations at @base in
 * plan->ssd. A convolution reading real values (VGG16's first, three input
 * channels) runs in float and its output is quantised to u8; every other
 * convolution runs in int8 with bias and ReLU fused, writing u8 of its calibrated
 * scale, but the list's last, which writes the real feature map (*@out: the L2
 * norm and the float heads read it); with @next (not the last list) that map is
 * quantised into *@next (u8, scale *@next_scale) for the next list. Max-pools run
 * on u8 (or real) values as they are. */
static gboolean plan_layers_int8(cpu_state *st, cpu_plan *plan, const vd_ssd_layers *layers,
                                 cpu_tensor *x, float x_scale, int base, cpu_tensor **out,
                                 cpu_tensor **next, float *next_scale, GError **error)
{
    cpu_ssd_plan *sp = &plan->ssd;
    dnnl_data_type_t dt = act_dt(st);
    for (int i = 0; i < layers->n_ops; i++) {
        const vd_ssd_op *op = &layers->ops[i];
        gboolean last = i == layers->n_ops - 1;
        cpu_tensor *y;
        if (op->kind == VD_SSD_MAXPOOL) {
            if (last) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "layer %s: int8 needs a convolution last in a feature map's list",
                            op->name);
                return FALSE;
            }
            if (!plan_max_pool(st, plan, base + i, op, x, &y, error))
                return FALSE;
            x = y;
            continue;
        }
        if (op->kind != VD_SSD_CONV || op->act != VD_ACT_RELU || op->add_saved ||
            MAX(op->conv.groups, 1) != 1) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "layer %s: int8 covers SSD300's plain convolutions with a ReLU and "
                        "max-pools",
                        op->name);
            return FALSE;
        }
        const vd_conv *w = &op->conv;
        int oh = dilated_out_size(x->h, w), ow = dilated_out_size(x->w, w);
        if (oh < 1 || ow < 1) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "layer %s: a %dx%d input is too small for this SSD model", op->name, x->h,
                        x->w);
            return FALSE;
        }
        gboolean real_in = !vd_layers_is_int8(x->dt);
        float scale = 1.0f;
        if (!last && !range_scale(st, op->name, TRUE, &scale, error))
            return FALSE;
        y = plan_tensor(st, plan, oh, ow, w->out_channels, last || real_in ? dt : dnnl_u8, TRUE,
                        NULL, error);
        cpu_quant q = {x_scale, last || real_in ? 1.0f : scale, 1.0f, dnnl_data_type_undef};
        if (y == NULL || !conv_init_model_q(st, &sp->convs[base + i], w, x, y, FALSE, VD_ACT_RELU,
                                            real_in ? NULL : &q, error))
            return FALSE;
        plan_step_conv(plan, &sp->convs[base + i]);
        if (real_in && !last) {
            /* the first convolution's output, quantised for the next */
            cpu_tensor *yq = plan_tensor(st, plan, oh, ow, y->c, dnnl_u8, TRUE, NULL, error);
            if (yq == NULL ||
                !cpu_quantize_plan(st, plan, y, yq, scale, &sp->quant[base + i], error))
                return FALSE;
            y = yq;
        }
        x = y;
        x_scale = scale;
    }
    *out = x;
    if (next != NULL) {
        const vd_ssd_op *op = &layers->ops[layers->n_ops - 1];
        *next = plan_tensor(st, plan, x->h, x->w, x->c, dnnl_u8, TRUE, NULL, error);
        if (*next == NULL || !range_scale(st, op->name, TRUE, next_scale, error) ||
            !cpu_quantize_plan(st, plan, x, *next, *next_scale,
                               &sp->quant[base + layers->n_ops - 1], error))
            return FALSE;
    }
    return TRUE;
}

/* F.normalize(x, p=2, dim=1, eps) times the per-channel scale (SSDFeatureExtractorVGG):
 * per pixel, the L2 norm over the channels (accumulated in double), clamped to eps,
 * then scale[c] * (x / norm), from @step->src into @step->dst (same shape and layout). */
static gboolean step_l2_norm(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)error;
    const vd_ssd_config *s = &st->model->config.ssd;
    const cpu_tensor *t = step->src;
    cpu_tensor *d = step->dst;
    size_t hw = (size_t)t->h * t->w;
    const int CB = t->cb, C = t->c;
#define L2_AT(c, p) (((size_t)((c) / CB) * hw + (p)) * CB + (c) % CB)
#pragma omp parallel for
    for (size_t p = 0; p < hw; p++) {
        double squares = 0.0;
        for (int c = 0; c < C; c++) {
            double v = load_f32(t->data, t->dt, L2_AT(c, p));
            squares += v * v;
        }
        float norm = (float)sqrt(squares);
        norm = norm < s->l2_eps ? s->l2_eps : norm;
        for (int c = 0; c < C; c++) {
            float v = load_f32(t->data, t->dt, L2_AT(c, p)) / norm;
            store_f32(d->data, d->dt, L2_AT(c, p), s->l2_scale[c] * v);
        }
    }
#undef L2_AT
    return TRUE;
}

static int widest_se(const vd_ssd_layers *layers, int n)
{
    int w = 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < layers[i].n_ops; k++)
            if (layers[i].ops[k].kind == VD_SSD_SQUEEZE_EXCITE)
                w = MAX(w, layers[i].ops[k].fc1.in_features);
    return w;
}

/* The backbone: the input, the body's lists (VGG16: its L2 norm for level 0), the
 * extras; every feature map into plan->fpn_out[] */
static gboolean plan_ssd_backbone(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    cpu_ssd_plan *sp = &plan->ssd;
    dnnl_data_type_t dt = act_dt(st);
    size_t in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dnnl_f32, 0));
    size_t stem_in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dt, 0));

    sp->n_ops = count_ops(s);
    sp->convs = g_try_new0(cpu_conv, sp->n_ops);
    sp->pools = g_try_new0(dnnl_primitive_t, sp->n_ops);
    sp->pools_xnn = g_try_new0(vd_xnn_op *, sp->n_ops);
    sp->to_nhwc = g_try_new0(dnnl_primitive_t, sp->n_ops);
    sp->from_nhwc = g_try_new0(dnnl_primitive_t, sp->n_ops);
    sp->quant = g_try_new0(cpu_quantize, sp->n_ops);
    sp->se_work =
        try_alloc((size_t)3 * MAX(widest_se(s->body, s->n_body), widest_se(s->extra, s->n_extra)),
                  "squeeze-and-excitation", error);
    if (sp->convs == NULL || sp->pools == NULL || sp->pools_xnn == NULL || sp->to_nhwc == NULL ||
        sp->from_nhwc == NULL || sp->quant == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory planning SSD's layers");
        return FALSE;
    }
    if (sp->se_work == NULL)
        return FALSE;
    plan->temps_bytes = in_bytes + stem_in_bytes;
    plan->temps = alloc_aligned(plan->temps_bytes, "activations", error);
    if (plan->temps == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, plan->temps);
    if (!plan_input(st, plan, plan->temps, in_bytes, dt, error))
        return FALSE;

    int base = 0;
    cpu_tensor *x = plan->stem_in;
    /* int8: the u8 input of the next list (and its scale) */
    cpu_tensor *next = NULL;
    float next_scale = 1.0f;
    int n_lists = s->n_body + s->n_extra;
    for (int i = 0; i < s->n_body; i++) {
        if (st->int8 ? !plan_layers_int8(st, plan, &s->body[i], i == 0 ? x : next, next_scale, base,
                                         &x, i + 1 < n_lists ? &next : NULL, &next_scale, error)
                     : !plan_layers(st, plan, &s->body[i], x, base, NULL, &x, error))
            return FALSE;
        base += s->body[i].n_ops;
        plan->fpn_out[i] = x;
    }
    if (s->l2_channels > 0) {
        cpu_tensor *normed = plan_tensor(st, plan, x->h, x->w, x->c, x->dt, TRUE, NULL, error);
        if (normed == NULL)
            return FALSE;
        plan_step(plan, step_wait, "L2 norm");
        cpu_step *step = plan_step(plan, step_l2_norm, "L2 norm");
        step->src = x;
        step->dst = normed;
        plan->fpn_out[0] = normed;
    }
    for (int i = 0; i < s->n_extra; i++) {
        if (st->int8
                ? !plan_layers_int8(st, plan, &s->extra[i], next, next_scale, base, &x,
                                    s->n_body + i + 1 < n_lists ? &next : NULL, &next_scale, error)
                : !plan_layers(st, plan, &s->extra[i], x, base, NULL, &x, error))
            return FALSE;
        base += s->extra[i].n_ops;
        plan->fpn_out[s->n_body + i] = x;
    }
    plan->n_levels = s->n_levels;
    plan->n_returned = s->n_levels;
    return TRUE;
}

static void ssd_plan_clear(cpu_plan *plan)
{
    cpu_ssd_plan *sp = &plan->ssd;
    for (int i = 0; i < sp->n_ops; i++) {
        if (sp->convs != NULL)
            conv_clear(&sp->convs[i]);
        if (sp->pools != NULL)
            vd_layers_primitive_free(sp->pools[i]);
        if (sp->pools_xnn != NULL)
            vd_xnn_op_free(sp->pools_xnn[i]);
        if (sp->to_nhwc != NULL)
            vd_layers_primitive_free(sp->to_nhwc[i]);
        if (sp->from_nhwc != NULL)
            vd_layers_primitive_free(sp->from_nhwc[i]);
        if (sp->quant != NULL)
            cpu_quantize_clear(&sp->quant[i]);
    }
    g_free(sp->quant);
    g_free(sp->convs);
    g_free(sp->pools);
    g_free(sp->pools_xnn);
    g_free(sp->to_nhwc);
    g_free(sp->from_nhwc);
    g_free(sp->se_work);
    *sp = (cpu_ssd_plan){0};
}

static void layers_kernels(GArray *out, GStringChunk *strings, const cpu_ssd_plan *sp,
                           const vd_ssd_layers *layers, int base)
{
    for (int i = 0; i < layers->n_ops; i++) {
        const vd_ssd_op *op = &layers->ops[i];
        if (op->kind == VD_SSD_CONV) {
            conv_kernels(out, strings, &sp->convs[base + i], op->name);
            if (sp->quant != NULL)
                kernel_add_op(out, strings, sp->quant[base + i].prim, sp->quant[base + i].xnn,
                              "reorder", "%s.quantise", op->name);
            if (sp->to_nhwc[base + i] != NULL) {
                kernel_add(out, strings, sp->to_nhwc[base + i], "reorder", "%s.in", op->name);
                kernel_add(out, strings, sp->from_nhwc[base + i], "reorder", "%s.out", op->name);
            }
        } else if (op->kind == VD_SSD_MAXPOOL)
            kernel_add_op(out, strings, sp->pools[base + i], sp->pools_xnn[base + i], "pooling",
                          "%s", op->name);
    }
}

static void ssd_backbone_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                                 GStringChunk *strings)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    const cpu_ssd_plan *sp = &plan->ssd;
    int base = 0;
    if (sp->convs == NULL)
        return;
    for (int i = 0; i < s->n_body; i++) {
        layers_kernels(out, strings, sp, &s->body[i], base);
        base += s->body[i].n_ops;
    }
    for (int i = 0; i < s->n_extra; i++) {
        layers_kernels(out, strings, sp, &s->extra[i], base);
        base += s->extra[i].n_ops;
    }
}

/* The backbone's part of the plan is freed with the detector's (ssd_plan_clear) */
static void ssd_backbone_clear(cpu_plan *plan)
{
    (void)plan;
}

const cpu_backbone vd_cpu_ssd_backbone = {
    .type = VD_BACKBONE_SSD,
    .plan = plan_ssd_backbone,
    .clear = ssd_backbone_clear,
    .kernels = ssd_backbone_kernels,
    .int8 = TRUE, /* SSD300's VGG16; ssd_supports() refuses SSDlite's MobileNetV3 */
};

/* ------------------------------------------------------------------------ */
/* The detector                                                              */

/* The first layer of @layers that XNNPACK's layers do not run (a max-pool of a
 * 1x1 window, or of a stride longer than its window), with *@why; NULL if none */
static const vd_ssd_op *xnn_refused_op(const vd_ssd_layers *layers, int n, const char **why)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < layers[i].n_ops; k++) {
            const vd_ssd_op *op = &layers[i].ops[k];
            if (op->kind == VD_SSD_MAXPOOL && !vd_xnn_max_pool_runs(op->kernel, op->stride, why))
                return op;
        }
    return NULL;
}

/* int8 and calibration: SSD300 (VGG16, ReLU only: plan_layers_int8()) on oneDNN's
 * int8 kernels; SSDlite's MobileNetV3 has no int8 plan, as in the R-CNN family.
 * XNNPACK's layers run every float layer of both; their int8 is not planned. */
static gboolean ssd_supports(const vd_model *model, vd_precision precision,
                             const vd_context_params *params, GError **error)
{
    const vd_ssd_config *s = &model->config.ssd;
    gboolean int8 = precision == VD_PRECISION_INT8 || params->calibrate;
    if (int8 && s->lite) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s covers the ResNet backbones and SSD300's VGG16, not %s (%s): use fp32 or "
                    "bf16",
                    params->calibrate ? "int8 calibration" : "precision int8",
                    vd_model_description(model),
                    "SSDlite's MobileNetV3 has no int8 plan, as in the R-CNN family: its "
                    "depthwise convolutions, hardswish and squeeze-and-excitation");
        return FALSE;
    }
    /* XNNPACK's layers run every convolution (dilated, ReLU6 or hardswish fused,
     * residual sums) and max-pool (ceil_mode as padding) of SSD and SSDlite; a layer
     * they cannot run is refused here, naming it, not at the first frame */
    gboolean xnn = FALSE;
    const char *layers_why = NULL, *why = NULL;
    if (!vd_xnn_choose_for(int8, &xnn, &layers_why, error))
        return FALSE;
    if (!xnn)
        return TRUE;
    if (int8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s for %s runs oneDNN's int8 kernels (x86 with VNNI); the CPU backend's "
                    "layers run XNNPACK here (%s), where SSD300's int8 is not planned: use "
                    "fp32%s",
                    params->calibrate ? "int8 calibration" : "precision int8",
                    vd_model_description(model), layers_why,
                    params->calibrate ? " (calibrate on an x86 CPU)" : " or fp16");
        return FALSE;
    }
    const vd_ssd_op *op = xnn_refused_op(s->body, s->n_body, &why);
    if (op == NULL)
        op = xnn_refused_op(s->extra, s->n_extra, &why);
    if (op != NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: layer %s (a %dx%d max-pool, stride %d) does not run on the CPU "
                    "backend's layers, which run XNNPACK here (%s): %s",
                    vd_model_description(model), op->name, op->kernel, op->kernel, op->stride,
                    layers_why, why);
        return FALSE;
    }
    return TRUE;
}

static void ssd_clear(cpu_state *st)
{
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        vd_conv *convs[2] = {&st->ssd.cls[l], &st->ssd.reg[l]};
        for (int i = 0; i < 2; i++) {
            g_free(convs[i]->weight);
            g_free(convs[i]->bias);
            *convs[i] = (vd_conv){0};
        }
    }
}

static gboolean ssd_prepare(cpu_state *st, GError **error)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    for (int l = 0; l < s->n_levels; l++) {
        const vd_ssd_layers *c = &s->cls[l], *r = &s->reg[l];
        if (!one_stage_pad_conv(&c->ops[c->n_ops - 1].conv, NULL, st->cb, &st->ssd.cls[l], error) ||
            !one_stage_pad_conv(&r->ops[r->n_ops - 1].conv, NULL, st->cb, &st->ssd.reg[l], error))
            return FALSE;
    }
    return TRUE;
}

/* DefaultBoxGenerator for the padded size, in torchvision's float32 arithmetic:
 * the (w, h) pairs from the scales and aspect ratios (Python doubles, then
 * float32; clamped to [0, 1] with clip), the centres ((i + 0.5) / f_k in
 * float32, f_k the image size over the step or the feature map's size), then
 * (centre -+ 0.5 * wh) * image size; per level, location by location, pair by
 * pair. */
static gboolean plan_default_boxes(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    int total = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        plan->level_anchor_offset[l] = total;
        total += plan->fpn_out[l]->h * plan->fpn_out[l]->w * s->anchors[l];
    }
    plan->level_anchor_offset[plan->n_levels] = total;
    plan->n_anchors = total;
    plan->anchors = try_alloc((size_t)MAX(total, 1) * 4, "default boxes", error);
    if (plan->anchors == NULL)
        return FALSE;
    float H = (float)plan->padded_h, W = (float)plan->padded_w;
    for (int l = 0; l < plan->n_levels; l++) {
        float wh[2 + 2 * VD_MAX_SSD_ASPECT_RATIOS][2];
        int A = s->anchors[l];
        double sk = s->scales[l], sp = sqrt(s->scales[l] * s->scales[l + 1]);
        wh[0][0] = wh[0][1] = (float)sk;
        wh[1][0] = wh[1][1] = (float)sp;
        for (int k = 0; k < s->n_aspect_ratios[l]; k++) {
            double sq = sqrt(s->aspect_ratios[l][k]);
            float w = (float)(sk * sq), h = (float)(sk / sq);
            wh[2 + 2 * k][0] = w;
            wh[2 + 2 * k][1] = h;
            wh[3 + 2 * k][0] = h;
            wh[3 + 2 * k][1] = w;
        }
        if (s->clip)
            for (int a = 0; a < A; a++)
                for (int q = 0; q < 2; q++)
                    wh[a][q] = wh[a][q] < 0.0f ? 0.0f : wh[a][q] > 1.0f ? 1.0f : wh[a][q];
        int fh = plan->fpn_out[l]->h, fw = plan->fpn_out[l]->w;
        float fx = s->steps[l] > 0 ? (float)((double)plan->padded_w / s->steps[l]) : (float)fw;
        float fy = s->steps[l] > 0 ? (float)((double)plan->padded_h / s->steps[l]) : (float)fh;
        float *out = plan->anchors + (size_t)plan->level_anchor_offset[l] * 4;
        for (int y = 0; y < fh; y++) {
            volatile float cy = ((float)y + 0.5f) / fy;
            for (int x = 0; x < fw; x++) {
                volatile float cx = ((float)x + 0.5f) / fx;
                for (int a = 0; a < A; a++) {
                    volatile float hw_ = 0.5f * wh[a][0], hh = 0.5f * wh[a][1];
                    volatile float x1 = cx - hw_, y1 = cy - hh, x2 = cx + hw_, y2 = cy + hh;
                    *out++ = x1 * W;
                    *out++ = y1 * H;
                    *out++ = x2 * W;
                    *out++ = y2 * H;
                }
            }
        }
    }
    return TRUE;
}

static gboolean ssd_plan(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    cpu_ssd_plan *sp = &plan->ssd;
    if (!plan_default_boxes(st, plan, error))
        return FALSE;
    int base = backbone_ops(s);
    for (int l = 0; l < s->n_levels; l++) {
        if (!plan_layers(st, plan, &s->cls[l], plan->fpn_out[l], base, &st->ssd.cls[l],
                         &sp->cls_out[l], error))
            return FALSE;
        base += s->cls[l].n_ops;
        if (!plan_layers(st, plan, &s->reg[l], plan->fpn_out[l], base, &st->ssd.reg[l],
                         &sp->reg_out[l], error))
            return FALSE;
        base += s->reg[l].n_ops;
    }
    plan_step(plan, step_wait, "the SSD head");
    return TRUE;
}

/* The first @n channels of float32 head output @t (blocked or NHWC) as rows of
 * @n values per pixel, block by block (no division per value) */
static void gather_channels(const cpu_tensor *t, int n, float *out)
{
    size_t hw = (size_t)t->h * t->w;
    const float *data = t->data;
    for (int b = 0; b * t->cb < n; b++) {
        int c_end = MIN(t->cb, n - b * t->cb);
        const float *v = data + (size_t)b * hw * t->cb;
        float *o = out + (size_t)b * t->cb;
        for (size_t p = 0; p < hw; p++, v += t->cb, o += n)
            memcpy(o, v, (size_t)c_end * sizeof(float));
    }
}

/* The heads' outputs in torchvision's order, [anchors][K] and [anchors][4] */
static void gather_head(const cpu_plan *plan, const vd_ssd_config *s, int K, float *cls, float *reg)
{
    for (int l = 0; l < plan->n_levels; l++) {
        size_t at = (size_t)plan->level_anchor_offset[l];
        int A = s->anchors[l];
        gather_channels(plan->ssd.cls_out[l], A * K, cls + at * K);
        gather_channels(plan->ssd.reg_out[l], 4 * A, reg + at * 4);
    }
}

static gboolean ssd_detect(cpu_state *st, vd_context *ctx, cpu_plan *plan, int rh, int rw,
                           const vd_image *image, vd_result *result, gboolean observe,
                           GError **error)
{
    const vd_config *cfg = &st->model->config;
    const vd_ssd_config *s = &cfg->ssd;
    int K = cfg->num_classes, N = plan->n_anchors, topk = cfg->head.topk_candidates;
    float thr = ctx->params.score_threshold;
    gboolean ok = FALSE;
    size_t n_cand = (size_t)MIN(topk, N) * (size_t)MAX(K - 1, 1);

    vd_context_stage_mark(ctx, VD_STAGE_BOX_HEAD);
    float *cls = try_alloc((size_t)MAX(N, 1) * K, "detections", error);
    float *reg = cls ? try_alloc((size_t)MAX(N, 1) * 4, "detections", error) : NULL;
    float *decoded = reg ? try_alloc((size_t)MAX(N, 1) * 4, "detections", error) : NULL;
    /* the scores over the threshold, by class (offsets @first: a class's in
     * ascending box order, as torchvision's per-class mask keeps them) */
    int *first = decoded ? try_alloc((size_t)K + 1, "detections", error) : NULL;
    float *level_scores = first ? try_alloc((size_t)MAX(N, 1) * K, "detections", error) : NULL;
    int *level_index = level_scores ? try_alloc((size_t)MAX(N, 1) * K, "detections", error) : NULL;
    int *top = level_index ? try_alloc((size_t)MAX(MIN(topk, N), 1), "detections", error) : NULL;
    float *boxes = top ? try_alloc(MAX(n_cand, 1) * 4, "detections", error) : NULL;
    float *scores = boxes ? try_alloc(MAX(n_cand, 1), "detections", error) : NULL;
    int *labels = scores ? try_alloc(MAX(n_cand, 1), "detections", error) : NULL;
    int *keep = labels ? try_alloc(MAX(n_cand, 1), "detections", error) : NULL;
    if (keep == NULL)
        goto out_free;

    gather_head(plan, s, K, cls, reg);
    int n_nonfinite = count_nonfinite(cls, (size_t)N * K) + count_nonfinite(reg, (size_t)N * 4);
    if (observe) {
        int64_t s1[2] = {N, K}, s2[2] = {N, 4};
        vd_context_observe(ctx, "cls_logits", cls, s1, 2);
        vd_context_observe(ctx, "bbox_regression", reg, s2, 2);
    }
    /* softmax over the classes (torch's arithmetic), every box decoded and clipped */
    vd_softmax_rows(cls, N, K);
    vd_decode_boxes(plan->anchors, reg, N, cfg->bbox_reg_weights, decoded);
    vd_clip_boxes(decoded, N, (float)rh, (float)rw);

    /* two passes over the rows (contiguous): the counts by class, then the
     * scores and box indices into each class's run */
    memset(first, 0, sizeof(int) * ((size_t)K + 1));
    for (int i = 0; i < N; i++) {
        const float *row = cls + (size_t)i * K;
        for (int label = 1; label < K; label++)
            first[label + 1] += row[label] > thr;
    }
    for (int label = 1; label < K; label++)
        first[label + 1] += first[label];
    for (int i = 0; i < N; i++) {
        const float *row = cls + (size_t)i * K;
        for (int label = 1; label < K; label++)
            if (row[label] > thr) {
                int at = first[label]++;
                level_scores[at] = row[label];
                level_index[at] = i;
            }
    }
    /* each class's run now ends where the next one's starts */
    for (int label = K - 1; label >= 1; label--)
        first[label] = first[label - 1];
    first[0] = first[1] = 0;

    int m = 0;
    for (int label = 1; label < K; label++) {
        int n = first[label + 1] - first[label];
        const float *class_scores = level_scores + first[label];
        const int *class_index = level_index + first[label];
        int k = vd_topk(class_scores, n, topk, top);
        for (int j = 0; j < k; j++) {
            const float *b = decoded + 4 * (size_t)class_index[top[j]];
            /* a box with a non-finite coordinate (non-finite head outputs, which
             * n_nonfinite counts) is dropped: torchvision would return it */
            if (!(isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3])))
                continue;
            memcpy(boxes + 4 * (size_t)m, b, 4 * sizeof(float));
            scores[m] = class_scores[top[j]];
            labels[m] = label;
            m++;
        }
    }
    write_nms_detections(ctx, image, rh, rw, boxes, scores, labels, m, keep, result);
    result->n_nonfinite = n_nonfinite;
    vd_context_stage_mark(ctx, VD_STAGE_POSTPROCESS);
    ok = TRUE;

out_free:
    g_free(cls);
    g_free(reg);
    g_free(decoded);
    g_free(first);
    g_free(level_scores);
    g_free(level_index);
    g_free(top);
    g_free(boxes);
    g_free(scores);
    g_free(labels);
    g_free(keep);
    return ok;
}

static void ssd_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                        GStringChunk *strings)
{
    const vd_ssd_config *s = &st->model->config.ssd;
    if (plan == NULL || plan->ssd.convs == NULL)
        return;
    int base = backbone_ops(s);
    for (int l = 0; l < s->n_levels; l++) {
        layers_kernels(out, strings, &plan->ssd, &s->cls[l], base);
        base += s->cls[l].n_ops;
        layers_kernels(out, strings, &plan->ssd, &s->reg[l], base);
        base += s->reg[l].n_ops;
    }
}

const cpu_detector vd_cpu_ssd = {
    .kind = VD_DETECTOR_SSD,
    .supports = ssd_supports,
    .prepare = ssd_prepare,
    .clear = ssd_clear,
    .plan = ssd_plan,
    .plan_clear = ssd_plan_clear,
    .detect = ssd_detect,
    .kernels = ssd_kernels,
};
