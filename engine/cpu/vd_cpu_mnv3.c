/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's MobileNetV3 backbone (engine/MOBILENETV3.md: the stem, the
 * inverted residual blocks with squeeze-and-excitation in plain C, the last 1x1
 * convolution), in fp32, bf16 or fp16: its plan (tensors, convolutions and the steps
 * that run them) and its kernels. */
#include "vd_config.h"
#include "cpu/vd_cpu_private.h"
#include "vd_math.h"

/* The channel sums of one block of @n (at most 16) channels over @hw pixels @pstride
 * elements apart, in double, pixel after pixel (each lane's order that of a plain
 * loop), added to @acc; the element type's loop chosen once, not per element. */
VD_CPU_HOT static void se_block_sums(const void *data, dnnl_data_type_t dt, size_t at, size_t hw,
                                     size_t pstride, int n, double *restrict acc)
{
    if (dt == dnnl_f32) {
        const float *v = (const float *)data + at;
        for (size_t p = 0; p < hw; p++) {
            const float *px = v + p * pstride;
#pragma omp simd
            for (int i = 0; i < n; i++)
                acc[i] += px[i];
        }
    } else if (dt == dnnl_bf16) {
        const uint16_t *v = (const uint16_t *)data + at;
        for (size_t p = 0; p < hw; p++) {
            const uint16_t *px = v + p * pstride;
#pragma omp simd
            for (int i = 0; i < n; i++)
                acc[i] += bf16_to_f32(px[i]);
        }
    } else {
        for (size_t p = 0; p < hw; p++)
            for (int i = 0; i < n; i++)
                acc[i] += load_f32(data, dt, at + p * pstride + i);
    }
}

/* Every pixel of one block of @n channels times its channel's @scale, in place
 * (bf16: rounded to nearest even, as store_f32). */
VD_CPU_HOT static void se_block_scale(void *data, dnnl_data_type_t dt, size_t at, size_t hw,
                                      size_t pstride, int n, const float *restrict scale)
{
    if (dt == dnnl_f32) {
        float *v = (float *)data + at;
        for (size_t p = 0; p < hw; p++) {
            float *px = v + p * pstride;
#pragma omp simd
            for (int i = 0; i < n; i++)
                px[i] *= scale[i];
        }
    } else if (dt == dnnl_bf16) {
        uint16_t *v = (uint16_t *)data + at;
        for (size_t p = 0; p < hw; p++) {
            uint16_t *px = v + p * pstride;
#pragma omp simd
            for (int i = 0; i < n; i++)
                px[i] = f32_to_bf16(bf16_to_f32(px[i]) * scale[i]);
        }
    } else {
        for (size_t p = 0; p < hw; p++)
            for (int i = 0; i < n; i++)
                store_f32(data, dt, at + p * pstride + i,
                          load_f32(data, dt, at + p * pstride + i) * scale[i]);
    }
}

/* @fc1 and @fc2 transposed into the plan (freed with it). */
cpu_se *plan_squeeze_excite(cpu_plan *plan, const vd_linear *fc1, const vd_linear *fc2,
                            GError **error)
{
    int C = fc1->in_features, S = fc1->out_features;
    size_t head = (sizeof(cpu_se) + 63) / 64 * 64;
    char *block =
        alloc_aligned(head + 2 * (size_t)C * S * sizeof(float), "squeeze-and-excitation", error);
    if (block == NULL)
        return NULL;
    g_ptr_array_add(plan->buffers, block);
    cpu_se *se = (cpu_se *)block;
    se->fc1 = fc1;
    se->fc2 = fc2;
    se->w1t = (float *)(block + head);
    se->w2t = se->w1t + (size_t)C * S;
    for (int s = 0; s < S; s++)
        for (int c = 0; c < C; c++) {
            se->w1t[(size_t)c * S + s] = fc1->weight[(size_t)s * C + c];
            se->w2t[(size_t)s * C + c] = fc2->weight[(size_t)c * S + s];
        }
    return se;
}

/* out[o] = act(bias[o] + sum over i, in order, of in[i] * wt[i][o]) for @n_out
 * outputs of @n_in inputs (@wt [n_in][n_out]): the outputs side by side in
 * vectors. act: ReLU (@relu) or hardsigmoid (min(max(x + 3, 0), 6) / 6, as torch). */
VD_CPU_HOT static void se_layer(const float *restrict in, int n_in, const float *restrict wt,
                                const float *restrict bias, int n_out, gboolean relu,
                                float *restrict out)
{
    memset(out, 0, sizeof(float) * (size_t)n_out);
    for (int i = 0; i < n_in; i++) {
        const float *restrict row = wt + (size_t)i * n_out;
        float v = in[i];
#pragma omp simd
        for (int o = 0; o < n_out; o++)
            out[o] += row[o] * v;
    }
    for (int o = 0; o < n_out; o++) {
        float v = out[o] + bias[o];
        out[o] = relu ? (v > 0.0f ? v : 0.0f) : vd_math_hardsigmoid(v);
    }
}

/* torchvision's SqueezeExcitation on the blocked tensor @t in place: the channel
 * means (AdaptiveAvgPool2d(1): the sum, in double here, over the pixels divided
 * by their count), fc1 + ReLU, fc2 + hardsigmoid, then every pixel times its
 * channel's scale. @work: 3 x channels. */
void cpu_squeeze_excite(cpu_tensor *t, const cpu_se *se, float *work)
{
    int CB;
    size_t bstride, pstride;
    tensor_strides(t, &CB, &bstride, &pstride);
    int C = t->c, n_cb = (C + CB - 1) / CB, S = se->fc1->out_features;
    size_t hw = (size_t)t->h * t->w;
    dnnl_data_type_t dt = t->dt;
    float *mean = work, *hidden = work + C, *scale = work + 2 * C;

#pragma omp parallel for
    for (int cb = 0; cb < n_cb; cb++) {
        double acc[16] = {0};
        int n = MIN(CB, C - cb * CB);
        se_block_sums(t->data, dt, (size_t)cb * bstride, hw, pstride, n, acc);
        for (int i = 0; i < n; i++)
            mean[cb * CB + i] = (float)(acc[i] / (double)hw);
    }
    se_layer(mean, C, se->w1t, se->fc1->bias, S, TRUE, hidden);
    se_layer(hidden, S, se->w2t, se->fc2->bias, C, FALSE, scale);
    /* rows of pixels per task: the blocks times rows share the threads evenly,
     * small maps included; the padding channels of a last partial block stay 0 */
#pragma omp parallel for collapse(2)
    for (int cb = 0; cb < n_cb; cb++)
        for (int y = 0; y < t->h; y++)
            se_block_scale(t->data, dt, (size_t)cb * bstride + (size_t)y * t->w * pstride,
                           (size_t)t->w, pstride, MIN(CB, C - cb * CB), scale + cb * CB);
}

static gboolean step_squeeze_excite(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    cpu_squeeze_excite(step->dst, step->data, step->work);
    return TRUE;
}

/* A residual block's input that must survive (a returned feature), copied into
 * its output, onto which the projection adds itself. */
static gboolean step_copy(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    memcpy(step->dst->data, step->src->data, tensor_size(step->src));
    return TRUE;
}

/* The MobileNetV3 backbone (engine/MOBILENETV3.md): features ping-pong between two
 * buffers, the returned ones get their own; the input, its NCHW copy and the
 * blocks' expanded tensor share the temps (sized here for the FPN and RPN as
 * well, see cpu_plan), the depthwise outputs the scratch. */
static gboolean plan_mnv3(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    dnnl_data_type_t dt = act_dt(st);
    int n_features = model->mnv3.n_computed; /* features[0 .. n_features - 1] */
    int n_blocks = MIN(n_features - 1, cfg->mnv3.n_blocks);
    gboolean returned[VD_MAX_BLOCKS + 2] = {FALSE};
    for (int i = 0; i < cfg->n_returned_layers; i++)
        returned[cfg->returned_layers[i]] = TRUE;

    /* sizes: feature outputs, expanded and depthwise tensors */
    int h = conv_out_size(plan->padded_h, 3, 2, 1), w = conv_out_size(plan->padded_w, 3, 2, 1);
    size_t feature_max = act_bytes(st, h, w, cfg->stem_channels, dt), t1_max = 0, t2_max = 0;
    int max_expanded = 1;
    for (int b = 0; b < n_blocks; b++) {
        const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[b];
        int oh = conv_out_size(h, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
        int ow = conv_out_size(w, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
        t1_max = MAX(t1_max, act_bytes(st, h, w, bc->expanded_channels, dt));
        t2_max = MAX(t2_max, act_bytes(st, oh, ow, bc->expanded_channels, dt));
        feature_max = MAX(feature_max, act_bytes(st, oh, ow, bc->out_channels, dt));
        max_expanded = MAX(max_expanded, bc->expanded_channels);
        h = oh;
        w = ow;
    }
    if (n_features == cfg->mnv3.n_blocks + 2)
        feature_max = MAX(feature_max, act_bytes(st, h, w, cfg->mnv3.last_channels, dt));
    /* the FPN's top-down sums and the RPN's hidden layer (plan_fpn, plan_rpn), at the
     * returned features' sizes */
    size_t sums = 0, hidden = 0;
    {
        int fh = conv_out_size(plan->padded_h, 3, 2, 1),
            fw = conv_out_size(plan->padded_w, 3, 2, 1);
        for (int f = 0, r = 0; f < n_features && r < cfg->n_returned_layers; f++) {
            if (f >= 1 && f <= n_blocks) {
                const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[f - 1];
                fh = conv_out_size(fh, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
                fw = conv_out_size(fw, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
            }
            if (returned[f]) {
                size_t b = round64(act_bytes(st, fh, fw, cfg->fpn_channels, dt));
                sums += b;
                hidden = MAX(hidden, b);
                r++;
            }
        }
    }
    size_t in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dnnl_f32, 0));
    size_t stem_in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dt, 0));
    feature_max = round64(feature_max);
    plan->temps_bytes = MAX(MAX(in_bytes + stem_in_bytes, t1_max), MAX(sums, hidden));
    plan->scratch_bytes = MAX(t2_max, 64);
    plan->temps = alloc_aligned(plan->temps_bytes, "activations", error);
    if (plan->temps == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, plan->temps);
    plan->scratch = alloc_aligned(plan->scratch_bytes, "activations", error);
    if (plan->scratch == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, plan->scratch);
    void *ping[2];
    for (int i = 0; i < 2; i++) {
        ping[i] = alloc_aligned(feature_max, "activations", error);
        if (ping[i] == NULL)
            return FALSE;
        g_ptr_array_add(plan->buffers, ping[i]);
    }
    plan->mnv3.se_work = try_alloc((size_t)3 * max_expanded, "squeeze-and-excitation", error);
    if (plan->mnv3.se_work == NULL)
        return FALSE;

    char *temps = plan->temps;
    if (!plan_input(st, plan, temps, in_bytes, dt, error))
        return FALSE;
    h = conv_out_size(plan->padded_h, 3, 2, 1);
    w = conv_out_size(plan->padded_w, 3, 2, 1);
    cpu_tensor *x = plan_tensor(st, plan, h, w, cfg->stem_channels, dt, TRUE,
                                returned[0] ? NULL : ping[0], error);
    if (x == NULL || !conv_init_model(st, &plan->stem, &model->stem, plan->stem_in, x, FALSE,
                                      VD_ACT_HARDSWISH, error))
        return FALSE;
    plan_step_conv(plan, &plan->stem);
    int r = 0;
    if (returned[0])
        plan->returned_out[r++] = x;

    for (int b = 0; b < n_blocks; b++) {
        const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[b];
        const vd_mnv3_block *mb = &model->mnv3.blocks[b];
        cpu_mnv3_block *pb = &plan->mnv3.blocks[b];
        int exp = bc->expanded_channels;
        int oh = conv_out_size(x->h, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
        int ow = conv_out_size(x->w, bc->kernel, bc->stride, (bc->kernel - 1) / 2);
        gboolean keep_input = returned[b]; /* x is features[b] */
        void *other = x->data == ping[0] ? ping[1] : ping[0];
        cpu_tensor *t1 = x, *t2, *out;

        pb->weights = mb;
        pb->has_expand = mb->expand.out_channels > 0;
        if (pb->has_expand) {
            t1 = plan_tensor(st, plan, x->h, x->w, exp, dt, TRUE, temps, error);
            if (t1 == NULL ||
                !conv_init_model(st, &pb->expand, &mb->expand, x, t1, FALSE, bc->activation, error))
                return FALSE;
            plan_step_conv(plan, &pb->expand);
        }
        t2 = plan_tensor(st, plan, oh, ow, exp, dt, TRUE, plan->scratch, error);
        if (t2 == NULL || !conv_init_model(st, &pb->depthwise, &mb->depthwise, t1, t2, FALSE,
                                           bc->activation, error))
            return FALSE;
        plan_step_conv(plan, &pb->depthwise);
        gboolean copy = FALSE;
        if (mb->residual && !keep_input && !returned[b + 1]) {
            out = x; /* the residual sum in place */
        } else {
            out = plan_tensor(st, plan, oh, ow, bc->out_channels, dt, TRUE,
                              returned[b + 1] ? NULL : other, error);
            if (out == NULL)
                return FALSE;
            copy = mb->residual;
        }
        if (!conv_init_model(st, &pb->project, &mb->project, t2, out, mb->residual, VD_ACT_NONE,
                             error))
            return FALSE;
        /* the plain-C operations read what the convolutions wrote */
        if (bc->se_channels > 0 || copy)
            plan_step(plan, step_wait, "squeeze-and-excitation");
        if (bc->se_channels > 0) {
            cpu_se *se = plan_squeeze_excite(plan, &mb->se_fc1, &mb->se_fc2, error);
            if (se == NULL)
                return FALSE;
            cpu_step *step = plan_step(plan, step_squeeze_excite, "squeeze-and-excitation");
            step->dst = t2;
            step->data = se;
            step->work = plan->mnv3.se_work;
            /* its two 1x1 layers on the pooled vector: exp -> squeeze -> exp */
            step->macs = 2.0 * exp * bc->se_channels;
        }
        if (copy) {
            cpu_step *step = plan_step(plan, step_copy, "residual copy");
            step->src = x;
            step->dst = out;
        }
        plan_step_conv(plan, &pb->project);
        x = out;
        if (returned[b + 1])
            plan->returned_out[r++] = x;
    }
    plan->mnv3.n_blocks = n_blocks;
    if (n_features == cfg->mnv3.n_blocks + 2) {
        int f = cfg->mnv3.n_blocks + 1;
        void *other = x->data == ping[0] ? ping[1] : ping[0];
        cpu_tensor *out = plan_tensor(st, plan, x->h, x->w, cfg->mnv3.last_channels, dt, TRUE,
                                      returned[f] ? NULL : other, error);
        if (out == NULL || !conv_init_model(st, &plan->mnv3.last, &model->mnv3.last, x, out, FALSE,
                                            VD_ACT_HARDSWISH, error))
            return FALSE;
        plan_step_conv(plan, &plan->mnv3.last);
        plan->mnv3.has_last = TRUE;
        if (returned[f])
            plan->returned_out[r++] = out;
    }
    if (r != cfg->n_returned_layers) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%d of %d returned features planned", r,
                    cfg->n_returned_layers);
        return FALSE;
    }
    return TRUE;
}

/* Every block, not n_blocks: a plan that failed half way has blocks set up
 * before its count is (the others are zero, which conv_clear() takes). */
static void mnv3_clear(cpu_plan *plan)
{
    for (guint i = 0; i < G_N_ELEMENTS(plan->mnv3.blocks); i++) {
        conv_clear(&plan->mnv3.blocks[i].expand);
        conv_clear(&plan->mnv3.blocks[i].depthwise);
        conv_clear(&plan->mnv3.blocks[i].project);
    }
    conv_clear(&plan->mnv3.last);
    g_free(plan->mnv3.se_work);
}

static void mnv3_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                         GStringChunk *strings)
{
    char name[96];
    (void)st;
    conv_kernels(out, strings, &plan->stem, "backbone.body.0");
    for (int b = 0; b < plan->mnv3.n_blocks; b++) {
        const cpu_mnv3_block *pb = &plan->mnv3.blocks[b];
        int j = 0;
        if (pb->has_expand) {
            g_snprintf(name, sizeof(name), "backbone.body.%d.block.%d", b + 1, j++);
            conv_kernels(out, strings, &pb->expand, name);
        }
        g_snprintf(name, sizeof(name), "backbone.body.%d.block.%d", b + 1, j++);
        conv_kernels(out, strings, &pb->depthwise, name);
        j += pb->weights->se_fc1.out_features > 0;
        g_snprintf(name, sizeof(name), "backbone.body.%d.block.%d", b + 1, j);
        conv_kernels(out, strings, &pb->project, name);
    }
    if (plan->mnv3.has_last) {
        g_snprintf(name, sizeof(name), "backbone.body.%d", plan->mnv3.n_blocks + 1);
        conv_kernels(out, strings, &plan->mnv3.last, name);
    }
}

const cpu_backbone vd_cpu_mnv3 = {
    .type = VD_BACKBONE_MOBILENET_V3,
    .plan = plan_mnv3,
    .clear = mnv3_clear,
    .kernels = mnv3_kernels,
    .int8 = FALSE,
};
