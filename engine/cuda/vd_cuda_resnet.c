/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend's ResNet backbone (resnet_fpn_backbone's body: the stem, the
 * max-pool and the BasicBlock or Bottleneck stages up to the last one the FPN
 * takes): what it supports, its weights, its plan, its enqueueing and its
 * convolutions' list. */
#include "vd_config.h"
#include "cuda/vd_cuda_backbone.h"

/* Every ResNet body the loader accepts */
static gboolean resnet_supports(const vd_model *model, GError **error)
{
    (void)model;
    (void)error;
    return TRUE;
}

/* The blocks' convolutions */
static gboolean upload_resnet_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    for (int b = 0; b < m->resnet.n_blocks; b++) {
        const vd_block *mb = &m->resnet.blocks[b];
        const vd_conv *convs[4] = {&mb->conv1, &mb->conv2, &mb->conv3, &mb->downsample};
        for (int i = 0; i < 4; i++) {
            if (convs[i]->out_channels == 0 || (i == 3 && !mb->has_downsample))
                continue;
            if (!cuda_upload_conv(st, &st->resnet.blocks[b][i], convs[i], convs[i]->in_channels,
                                  convs[i]->out_channels, error))
                return FALSE;
        }
    }
    return TRUE;
}

/* Its convolutions' weights after torchvision's conv1 and layer<s>.<b>.<conv> */
static void resnet_name(cuda_state *st)
{
    const vd_model *m = st->model;
#define NAME(w, ...) g_snprintf((w).name, sizeof((w).name), __VA_ARGS__)
    NAME(st->stem, "backbone.body.conv1");
    for (int b = 0; b < m->resnet.n_blocks; b++) {
        static const char *const conv_names[4] = {"conv1", "conv2", "conv3", "downsample.0"};
        int stage = 0;
        while (stage + 1 < 4 && m->resnet.stage_first_block[stage + 1] > 0 &&
               b >= m->resnet.stage_first_block[stage + 1])
            stage++;
        for (int i = 0; i < 4; i++)
            NAME(st->resnet.blocks[b][i], "backbone.body.layer%d.%d.%s", stage + 1,
                 b - m->resnet.stage_first_block[stage], conv_names[i]);
    }
#undef NAME
}

static gboolean plan_backbone(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error)
{
    const vd_model *model = st->model;
    gboolean bottleneck = model->config.resnet.block == VD_BLOCK_BOTTLENECK;
    vd_cuda_layers *L = &st->layers;

    int h =
        conv_out_size(plan->padded_h, model->stem.kernel, model->stem.stride, model->stem.padding);
    int w =
        conv_out_size(plan->padded_w, model->stem.kernel, model->stem.stride, model->stem.padding);
    plan->stem_out = cuda_plan_tensor(st, plan, h, w, st->stem.out_c, NULL, error);
    if (plan->stem_out == NULL || !vd_cuda_conv_init(L, &plan->stem, &st->stem, plan->input,
                                                     plan->stem_out, NULL, TRUE, ws, error))
        return FALSE;
    plan->resnet.pool_out =
        cuda_plan_tensor(st, plan, conv_out_size(h, 3, 2, 1), conv_out_size(w, 3, 2, 1),
                         st->stem.out_c, NULL, error);
    if (plan->resnet.pool_out == NULL)
        return FALSE;

    /* block intermediates share two buffers sized for the largest */
    size_t max_temp = 0;
    {
        int th = plan->resnet.pool_out->h, tw = plan->resnet.pool_out->w;
        for (int b = 0; b < model->resnet.n_blocks; b++) {
            const vd_block *mb = &model->resnet.blocks[b];
            int stride = bottleneck ? mb->conv2.stride : mb->conv1.stride;
            int oh = conv_out_size(th, 3, stride, 1), ow = conv_out_size(tw, 3, stride, 1);
            size_t c1 = bottleneck ? (size_t)th * tw * mb->conv1.out_channels
                                   : (size_t)oh * ow * mb->conv1.out_channels;
            size_t c2 = (size_t)oh * ow * mb->conv2.out_channels;
            max_temp = MAX(max_temp, MAX(c1, c2));
            th = oh;
            tw = ow;
        }
    }
    size_t esize = vd_dtype_size(st->dtype);
    max_temp *= (size_t)plan->n_images;
    void *temp1 =
        vd_cuda_pool_alloc(&plan->pool, max_temp * esize, L->stream, "block intermediates", error);
    void *temp2 = temp1 == NULL ? NULL
                                : vd_cuda_pool_alloc(&plan->pool, max_temp * esize, L->stream,
                                                     "block intermediates", error);
    if (temp2 == NULL)
        return FALSE;

    vd_cuda_tensor *x = plan->resnet.pool_out;
    for (int s = 0; s < model->resnet.n_stages_used; s++) {
        int first = model->resnet.stage_first_block[s];
        int last_block = vd_resnet_stage_end(&model->resnet, s);
        for (int b = first; b < last_block; b++) {
            const vd_block *mb = &model->resnet.blocks[b];
            cuda_block *pb = &plan->resnet.blocks[b];
            vd_cuda_conv_weights *bw = st->resnet.blocks[b];
            int stride = bottleneck ? mb->conv2.stride : mb->conv1.stride;
            int oh = conv_out_size(x->h, 3, stride, 1), ow = conv_out_size(x->w, 3, stride, 1);
            int out_c = bottleneck ? mb->conv3.out_channels : mb->conv2.out_channels;

            pb->has_downsample = mb->has_downsample;
            if (mb->has_downsample) {
                pb->shortcut = cuda_plan_tensor(st, plan, oh, ow, out_c, NULL, error);
                if (pb->shortcut == NULL ||
                    !vd_cuda_conv_init(L, &pb->downsample, &bw[3], x, pb->shortcut, NULL, FALSE, ws,
                                       error))
                    return FALSE;
            } else {
                if (x->c != out_c || stride != 1) {
                    g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                                "block %d changes its shape without a downsample", b);
                    return FALSE;
                }
                pb->shortcut = x;
            }
            vd_cuda_tensor *out = cuda_plan_tensor(st, plan, oh, ow, out_c, NULL, error);
            if (out == NULL)
                return FALSE;
            if (bottleneck) {
                vd_cuda_tensor *t1 =
                    cuda_plan_tensor(st, plan, x->h, x->w, mb->conv1.out_channels, temp1, error);
                vd_cuda_tensor *t2 =
                    t1 == NULL
                        ? NULL
                        : cuda_plan_tensor(st, plan, oh, ow, mb->conv2.out_channels, temp2, error);
                if (t2 == NULL ||
                    !vd_cuda_conv_init(L, &pb->conv1, &bw[0], x, t1, NULL, TRUE, ws, error) ||
                    !vd_cuda_conv_init(L, &pb->conv2, &bw[1], t1, t2, NULL, TRUE, ws, error) ||
                    !vd_cuda_conv_init(L, &pb->conv3, &bw[2], t2, out, pb->shortcut, TRUE, ws,
                                       error))
                    return FALSE;
            } else {
                vd_cuda_tensor *t1 =
                    cuda_plan_tensor(st, plan, oh, ow, mb->conv1.out_channels, temp1, error);
                if (t1 == NULL ||
                    !vd_cuda_conv_init(L, &pb->conv1, &bw[0], x, t1, NULL, TRUE, ws, error) ||
                    !vd_cuda_conv_init(L, &pb->conv2, &bw[1], t1, out, pb->shortcut, TRUE, ws,
                                       error))
                    return FALSE;
            }
            x = out;
        }
        plan->resnet.stage_out[s] = x;
    }
    plan->resnet.n_blocks = model->resnet.n_blocks;
    for (int i = 0; i < model->config.n_returned_layers && i < 4; i++)
        plan->fpn_in[i] = plan->resnet.stage_out[model->config.returned_layers[i] - 1];
    return TRUE;
}

/* Every block's convolutions: a plan that failed half way has not set n_blocks */
static void resnet_clear(cuda_plan *plan)
{
    for (int b = 0; b < VD_MAX_BLOCKS; b++) {
        vd_cuda_conv_clear(&plan->resnet.blocks[b].conv1);
        vd_cuda_conv_clear(&plan->resnet.blocks[b].conv2);
        vd_cuda_conv_clear(&plan->resnet.blocks[b].conv3);
        vd_cuda_conv_clear(&plan->resnet.blocks[b].downsample);
    }
}

/* The stem, the max-pool image by image, the blocks (the shortcut first) */
static gboolean enqueue_resnet(cuda_state *st, cuda_plan *plan, int n, GError **error)
{
    vd_cuda_layers *L = &st->layers;
    cudaStream_t s = L->stream;
    vd_dtype dt = st->dtype;
    gboolean bottleneck = st->model->config.resnet.block == VD_BLOCK_BOTTLENECK;
    if (!vd_cuda_conv_run(L, &plan->stem, error))
        return FALSE;
    for (int i = 0; i < n; i++)
        CUDA_TRY(vd_max_pool_3x3s2(image_of(plan->stem_out, i, dt), plan->stem_out->h,
                                   plan->stem_out->w, plan->stem_out->c,
                                   image_of(plan->resnet.pool_out, i, dt), plan->resnet.pool_out->h,
                                   plan->resnet.pool_out->w, dt, s),
                 "max pooling");
    for (int b = 0; b < plan->resnet.n_blocks; b++) {
        cuda_block *pb = &plan->resnet.blocks[b];
        if (pb->has_downsample && !vd_cuda_conv_run(L, &pb->downsample, error))
            return FALSE;
        if (!vd_cuda_conv_run(L, &pb->conv1, error) || !vd_cuda_conv_run(L, &pb->conv2, error))
            return FALSE;
        if (bottleneck && !vd_cuda_conv_run(L, &pb->conv3, error))
            return FALSE;
    }
    return TRUE;

out_fail:
    return FALSE;
}

static void resnet_convolutions(cuda_plan *plan, GPtrArray *out)
{
    for (int b = 0; b < plan->resnet.n_blocks; b++) {
        cuda_block *pb = &plan->resnet.blocks[b];
        if (pb->has_downsample)
            g_ptr_array_add(out, &pb->downsample);
        g_ptr_array_add(out, &pb->conv1);
        g_ptr_array_add(out, &pb->conv2);
        if (pb->conv3.weights != NULL)
            g_ptr_array_add(out, &pb->conv3);
    }
}

const cuda_backbone vd_cuda_resnet = {
    .type = VD_BACKBONE_RESNET,
    .supports = resnet_supports,
    .upload = upload_resnet_weights,
    .name = resnet_name,
    .plan = plan_backbone,
    .clear = resnet_clear,
    .enqueue = enqueue_resnet,
    .convolutions = resnet_convolutions,
};
