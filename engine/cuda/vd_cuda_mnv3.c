/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend's MobileNetV3 backbone (engine/MOBILENETV3.md: the stem, the
 * inverted residual blocks with hardswish and squeeze-and-excitation kernels, the
 * last 1x1 convolution): what it supports, its weights, its plan, its enqueueing
 * and its convolutions' list. */
#include "vd_config.h"
#include "cuda/vd_cuda_backbone.h"

/* MobileNetV3's features as the CUDA backend runs them (the loader checks each
 * tensor; this, that they chain): the 3x3 stride-2 stem, blocks of expand
 * (1x1), depthwise (groups == channels, k x k, padding (k - 1) / 2), SE on the
 * expanded width with a squeeze of at least one channel, project (1x1), the
 * residual on an unchanged shape, the last 1x1 conv; FPN inputs at most 4. */
static gboolean mnv3_chains(const vd_model *m, GError **error)
{
    const vd_config *cfg = &m->config;
    int n_blocks = MIN(m->mnv3.n_computed - 1, cfg->mnv3.n_blocks);
    int in = m->stem.out_channels, bad = -1;
    gboolean ok = m->mnv3.n_computed >= 1 && m->stem.kernel == 3 && m->stem.stride == 2 &&
                  m->stem.padding == 1 && m->stem.groups <= 1 && cfg->n_returned_layers >= 1 &&
                  cfg->n_returned_layers <= 4;
    for (int b = 0; ok && b < n_blocks; b++) {
        const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[b];
        const vd_mnv3_block *mb = &m->mnv3.blocks[b];
        const vd_conv *d = &mb->depthwise, *e = &mb->expand, *p = &mb->project;
        int exp = bc->expanded_channels;
        ok = (e->out_channels == 0 ? exp == in
                                   : e->in_channels == in && e->out_channels == exp &&
                                         e->kernel == 1 && e->stride == 1 && e->groups <= 1) &&
             d->in_channels == exp && d->out_channels == exp && d->groups == exp &&
             d->kernel == bc->kernel && d->stride == bc->stride &&
             d->padding == (bc->kernel - 1) / 2 && p->in_channels == exp &&
             p->out_channels == bc->out_channels && p->kernel == 1 && p->stride == 1 &&
             p->groups <= 1 &&
             (bc->activation == VD_ACT_RELU || bc->activation == VD_ACT_HARDSWISH) &&
             (mb->se_fc1.out_features == 0 ||
              (mb->se_fc1.in_features == exp && mb->se_fc2.out_features == exp &&
               mb->se_fc2.in_features == mb->se_fc1.out_features)) &&
             (!mb->residual || (bc->stride == 1 && in == bc->out_channels));
        if (!ok)
            bad = b + 1;
        in = bc->out_channels;
    }
    ok = ok && (m->mnv3.last.out_channels == 0 ||
                (m->mnv3.last.in_channels == in && m->mnv3.last.kernel == 1 &&
                 m->mnv3.last.stride == 1 && m->mnv3.last.groups <= 1));
    if (!ok)
        g_set_error(
            error, VD_ERROR, VD_ERROR_FORMAT,
            "the MobileNetV3 features' shapes do not chain as the CUDA backend runs them "
            "(%s%d)",
            bad >= 0 ? "feature " : "features computed: ", bad >= 0 ? bad : m->mnv3.n_computed);
    return ok;
}

/* MobileNetV3-Large only, with features that chain as this backend runs them */
static gboolean mnv3_supports(const vd_model *model, GError **error)
{
    const vd_config *cfg = &model->config;
    if (g_strcmp0(cfg->mnv3.arch, "mobilenet_v3_large") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not support the %s backbone of this model (%s): use "
                    "the CPU backend",
                    cfg->mnv3.arch, vd_model_description(model));
        return FALSE;
    }
    return mnv3_chains(model, error);
}

/* MobileNetV3's weights (batch-norm folded at load): expand, depthwise (one
 * input channel per group: torch's [exp][1][k][k] is already cuDNN's NHWC
 * [exp][k][k][1]), project, the last conv; SE's two products as float32
 * [out][in] with their biases. */
static gboolean upload_mnv3_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int n_blocks = MIN(m->mnv3.n_computed - 1, cfg->mnv3.n_blocks);
    for (int b = 0; b < n_blocks; b++) {
        const vd_mnv3_block *mb = &m->mnv3.blocks[b];
        vd_cuda_conv_weights *bw = st->mnv3.blocks[b];
        const vd_conv *d = &mb->depthwise;
        if ((mb->expand.out_channels > 0 &&
             !cuda_upload_conv(st, &bw[0], &mb->expand, mb->expand.in_channels,
                               mb->expand.out_channels, error)) ||
            !vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, &bw[1], d->weight, d->bias,
                                         d->out_channels, 1, d->kernel, d->stride, d->padding,
                                         d->out_channels, 1, error) ||
            !cuda_upload_conv(st, &bw[2], &mb->project, mb->project.in_channels,
                              mb->project.out_channels, error))
            return FALSE;
        bw[1].groups = d->groups;
        if (mb->se_fc1.out_features > 0) {
            const vd_linear *fc[2] = {&mb->se_fc1, &mb->se_fc2};
            for (int j = 0; j < 4; j++) {
                const vd_linear *l = fc[j / 2];
                size_t count =
                    j % 2 ? (size_t)l->out_features : (size_t)l->out_features * l->in_features;
                st->mnv3.se[b][j] =
                    vd_cuda_pool_alloc(&st->weights_pool, count * sizeof(float), st->layers.stream,
                                       "squeeze-excitation weights", error);
                if (st->mnv3.se[b][j] == NULL ||
                    !vd_cuda_upload_floats(&st->layers, st->mnv3.se[b][j],
                                           j % 2 ? l->bias : l->weight, count, VD_DTYPE_F32, error))
                    return FALSE;
            }
        }
    }
    return m->mnv3.last.out_channels == 0 ||
           cuda_upload_conv(st, &st->mnv3.last, &m->mnv3.last, m->mnv3.last.in_channels,
                            m->mnv3.last.out_channels, error);
}

/* Its convolutions' weights after torchvision's features[i] */
static void mnv3_name(cuda_state *st)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
#define NAME(w, ...) g_snprintf((w).name, sizeof((w).name), __VA_ARGS__)
    NAME(st->stem, "backbone.body.0");
    for (int b = 0; b < VD_MAX_BLOCKS; b++) {
        NAME(st->mnv3.blocks[b][0], "backbone.body.%d.expand", b + 1);
        NAME(st->mnv3.blocks[b][1], "backbone.body.%d.depthwise", b + 1);
        NAME(st->mnv3.blocks[b][2], "backbone.body.%d.project", b + 1);
    }
    NAME(st->mnv3.last, "backbone.body.%d", MIN(m->mnv3.n_computed - 1, cfg->mnv3.n_blocks) + 1);
#undef NAME
}

/* MobileNetV3's features (engine/MOBILENETV3.md §2, §3) up to the last
 * returned one: the stem, the blocks (expanded and depthwise tensors in two
 * buffers shared by the blocks, every block output its own tensor so that a
 * returned feature survives the next block's residual sum), the last conv. */
static gboolean plan_mnv3(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    vd_cuda_layers *L = &st->layers;
    int n_features = model->mnv3.n_computed; /* features[0 .. n_features - 1] */
    int n_blocks = MIN(n_features - 1, cfg->mnv3.n_blocks);
    gboolean returned[VD_MAX_BLOCKS + 2] = {FALSE};
    for (int i = 0; i < cfg->n_returned_layers; i++)
        if (cfg->returned_layers[i] >= 0 && cfg->returned_layers[i] < VD_MAX_BLOCKS + 2)
            returned[cfg->returned_layers[i]] = TRUE;

    int h = conv_out_size(plan->padded_h, 3, 2, 1), w = conv_out_size(plan->padded_w, 3, 2, 1);
    size_t max_expanded = 1, max_dw = 1;
    int max_channels = 1;
    {
        int th = h, tw = w;
        for (int b = 0; b < n_blocks; b++) {
            const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[b];
            int pad = (bc->kernel - 1) / 2;
            int oh = conv_out_size(th, bc->kernel, bc->stride, pad);
            int ow = conv_out_size(tw, bc->kernel, bc->stride, pad);
            max_expanded = MAX(max_expanded, (size_t)th * tw * bc->expanded_channels);
            max_dw = MAX(max_dw, (size_t)oh * ow * bc->expanded_channels);
            max_channels = MAX(max_channels, bc->expanded_channels);
            th = oh;
            tw = ow;
        }
    }
    size_t esize = vd_dtype_size(st->dtype), n_img = (size_t)plan->n_images;
    void *temp1 = vd_cuda_pool_alloc(&plan->pool, n_img * max_expanded * esize, L->stream,
                                     "block intermediates", error);
    void *temp2 = temp1 == NULL ? NULL
                                : vd_cuda_pool_alloc(&plan->pool, n_img * max_dw * esize, L->stream,
                                                     "block intermediates", error);
    plan->mnv3.se_means =
        temp2 == NULL ? NULL
                      : vd_cuda_pool_alloc(&plan->pool, n_img * max_channels * sizeof(float),
                                           L->stream, "squeeze-excitation", error);
    plan->mnv3.se_scales =
        plan->mnv3.se_means == NULL
            ? NULL
            : vd_cuda_pool_alloc(&plan->pool, n_img * max_channels * sizeof(float), L->stream,
                                 "squeeze-excitation", error);
    if (plan->mnv3.se_scales == NULL)
        return FALSE;

    plan->stem_out = cuda_plan_tensor(st, plan, h, w, st->stem.out_c, NULL, error);
    if (plan->stem_out == NULL || !vd_cuda_conv_init(L, &plan->stem, &st->stem, plan->input,
                                                     plan->stem_out, NULL, FALSE, ws, error))
        return FALSE;
    vd_cuda_tensor *x = plan->stem_out;
    int r = 0;
    if (returned[0])
        plan->fpn_in[r++] = x;
    for (int b = 0; b < n_blocks; b++) {
        const vd_mnv3_block_config *bc = &cfg->mnv3.blocks[b];
        const vd_mnv3_block *mb = &model->mnv3.blocks[b];
        cuda_mnv3_block *pb = &plan->mnv3.blocks[b];
        vd_cuda_conv_weights *bw = st->mnv3.blocks[b];
        int exp = bc->expanded_channels, pad = (bc->kernel - 1) / 2;
        int oh = conv_out_size(x->h, bc->kernel, bc->stride, pad);
        int ow = conv_out_size(x->w, bc->kernel, bc->stride, pad);
        gboolean relu = bc->activation == VD_ACT_RELU;

        pb->hardswish = bc->activation == VD_ACT_HARDSWISH;
        pb->has_expand = mb->expand.out_channels > 0;
        pb->se_channels = mb->se_fc1.out_features;
        vd_cuda_tensor *t1 = x;
        if (pb->has_expand) {
            t1 = cuda_plan_tensor(st, plan, x->h, x->w, exp, temp1, error);
            if (t1 == NULL ||
                !vd_cuda_conv_init(L, &pb->expand, &bw[0], x, t1, NULL, relu, ws, error))
                return FALSE;
        }
        pb->expanded = t1;
        pb->dw_out = cuda_plan_tensor(st, plan, oh, ow, exp, temp2, error);
        vd_cuda_tensor *out =
            pb->dw_out == NULL ? NULL
                               : cuda_plan_tensor(st, plan, oh, ow, bc->out_channels, NULL, error);
        if (out == NULL ||
            !vd_cuda_conv_init(L, &pb->depthwise, &bw[1], t1, pb->dw_out, NULL, relu, ws, error) ||
            !vd_cuda_conv_init(L, &pb->project, &bw[2], pb->dw_out, out, mb->residual ? x : NULL,
                               FALSE, ws, error))
            return FALSE;
        x = out;
        if (returned[b + 1] && r < 4)
            plan->fpn_in[r++] = x;
    }
    plan->mnv3.n_blocks = n_blocks;
    if (n_features == cfg->mnv3.n_blocks + 2) {
        int f = cfg->mnv3.n_blocks + 1;
        plan->mnv3.last_out =
            cuda_plan_tensor(st, plan, x->h, x->w, st->mnv3.last.out_c, NULL, error);
        if (plan->mnv3.last_out == NULL ||
            !vd_cuda_conv_init(L, &plan->mnv3.last, &st->mnv3.last, x, plan->mnv3.last_out, NULL,
                               FALSE, ws, error))
            return FALSE;
        plan->mnv3.has_last = TRUE;
        if (returned[f] && r < 4)
            plan->fpn_in[r++] = plan->mnv3.last_out;
    }
    if (r != cfg->n_returned_layers) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%d of %d returned features planned", r,
                    cfg->n_returned_layers);
        return FALSE;
    }
    return TRUE;
}

/* Every block's convolutions (a plan that failed half way has not set
 * n_blocks), the last conv */
static void mnv3_clear(cuda_plan *plan)
{
    for (int b = 0; b < VD_MAX_BLOCKS; b++) {
        vd_cuda_conv_clear(&plan->mnv3.blocks[b].expand);
        vd_cuda_conv_clear(&plan->mnv3.blocks[b].depthwise);
        vd_cuda_conv_clear(&plan->mnv3.blocks[b].project);
    }
    vd_cuda_conv_clear(&plan->mnv3.last);
}

/* hardswish in place over every image slot of @t */
static gboolean hardswish_tensor(cuda_state *st, vd_cuda_tensor *t, GError **error)
{
    return vd_cuda_check(vd_hardswish(t->data, (size_t)t->n * vd_cuda_tensor_image_elements(t),
                                      st->dtype, st->layers.stream),
                         "hardswish", error);
}

/* MobileNetV3's features over every image slot of @plan (as the ResNet
 * convolutions run): convolutions with ReLU fused, hardswish and SE kernels
 * between them on the stream. */
static gboolean enqueue_mnv3(cuda_state *st, cuda_plan *plan, int n, GError **error)
{
    (void)n; /* every convolution and kernel runs over the plan's image slots */
    vd_cuda_layers *L = &st->layers;
    if (!vd_cuda_conv_run(L, &plan->stem, error) || !hardswish_tensor(st, plan->stem_out, error))
        return FALSE;
    for (int b = 0; b < plan->mnv3.n_blocks; b++) {
        cuda_mnv3_block *pb = &plan->mnv3.blocks[b];
        if (pb->has_expand && (!vd_cuda_conv_run(L, &pb->expand, error) ||
                               (pb->hardswish && !hardswish_tensor(st, pb->expanded, error))))
            return FALSE;
        if (!vd_cuda_conv_run(L, &pb->depthwise, error) ||
            (pb->hardswish && !hardswish_tensor(st, pb->dw_out, error)))
            return FALSE;
        if (pb->se_channels > 0) {
            vd_cuda_tensor *t = pb->dw_out;
            float *const *se = st->mnv3.se[b];
            if (!vd_cuda_check(vd_squeeze_excite(t->data, t->n, t->h * t->w, t->c, pb->se_channels,
                                                 se[0], se[1], se[2], se[3], plan->mnv3.se_means,
                                                 plan->mnv3.se_scales, st->dtype, L->stream),
                               "squeeze-excitation", error))
                return FALSE;
        }
        if (!vd_cuda_conv_run(L, &pb->project, error))
            return FALSE;
    }
    if (plan->mnv3.has_last && (!vd_cuda_conv_run(L, &plan->mnv3.last, error) ||
                                !hardswish_tensor(st, plan->mnv3.last_out, error)))
        return FALSE;
    return TRUE;
}

static void mnv3_convolutions(cuda_plan *plan, GPtrArray *out)
{
    for (int b = 0; b < plan->mnv3.n_blocks; b++) {
        cuda_mnv3_block *pb = &plan->mnv3.blocks[b];
        if (pb->has_expand)
            g_ptr_array_add(out, &pb->expand);
        g_ptr_array_add(out, &pb->depthwise);
        g_ptr_array_add(out, &pb->project);
    }
    if (plan->mnv3.has_last)
        g_ptr_array_add(out, &plan->mnv3.last);
}

const cuda_backbone vd_cuda_mnv3 = {
    .type = VD_BACKBONE_MOBILENET_V3,
    .supports = mnv3_supports,
    .upload = upload_mnv3_weights,
    .name = mnv3_name,
    .plan = plan_mnv3,
    .clear = mnv3_clear,
    .enqueue = enqueue_mnv3,
    .convolutions = mnv3_convolutions,
};
