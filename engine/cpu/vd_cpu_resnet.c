/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's ResNet backbone (resnet_fpn_backbone's body: the stem, the
 * max-pool and the BasicBlock or Bottleneck stages up to the last one the FPN
 * takes), in fp32, bf16, fp16 or int8 (vd_cpu_backend.c says how int8 runs): its
 * plan (tensors, convolutions and the steps that run them, with calibration's
 * records) and its kernels. On XNNPACK's layers int8 runs the same plan on its
 * qs8 operators (vd_cpu_xnnpack.h: u8 tensors hold qs8 with zero point -128). */
#include "vd_config.h"
#include "cpu/vd_cpu_private.h"

static gboolean maxpool_init(cpu_state *st, cpu_plan *plan, GError **error)
{
    if (st->xnn != NULL) {
        const cpu_tensor *in = plan->resnet.stem_out;
        plan->resnet.maxpool_xnn =
            vd_xnn_max_pool_new(st->xnn, in->c, in->h, in->w, 3, 2, 1, in->dt, "max-pool", error);
        return plan->resnet.maxpool_xnn != NULL;
    }
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = vd_layers_max_pool_pd(st->engine, vd_layers_memory_md(plan->resnet.stem_out->mem),
                                        vd_layers_memory_md(plan->resnet.pool_out->mem), 3, 2, 1,
                                        &pd, "max-pool", error) &&
                  vd_layers_primitive_new(pd, &plan->resnet.maxpool, "max-pool", error);
    vd_layers_pd_free(pd);
    return ok;
}

/* A block's steps: the shortcut first (the last convolution adds itself onto
 * the output), conv1, conv2 (Bottleneck), the last; calibration's records under
 * "<block>.<convolution>" and the block's output under "<block>". */
static void plan_block_steps(const cpu_state *st, cpu_plan *plan, const cpu_block *pb,
                             gboolean bottleneck)
{
    const cpu_conv *last = bottleneck ? &pb->conv3 : &pb->conv2;
    if (pb->has_downsample)
        step_record(st, plan, plan_step_conv(plan, &pb->downsample), pb->downsample.dst_t,
                    "%s.downsample.0", pb->name);
    step_record(st, plan, plan_step_conv(plan, &pb->conv1), pb->conv1.dst_t, "%s.conv1", pb->name);
    if (bottleneck)
        step_record(st, plan, plan_step_conv(plan, &pb->conv2), pb->conv2.dst_t, "%s.conv2",
                    pb->name);
    step_record(st, plan, plan_step_conv(plan, last), last->dst_t, "%s", pb->name);
}

/* The input tensors, the backbone's tensors and convolutions, and the plan's two
 * shared buffers (sized here for the FPN and RPN as well; see cpu_plan). int8:
 * the max-pool's output is quantised to u8 and every block runs in int8 (u8
 * activations after their ReLU, the downsample's s8), the stem in float. */
static gboolean plan_backbone(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    gboolean bottleneck = cfg->resnet.block == VD_BLOCK_BOTTLENECK;
    dnnl_data_type_t dt = act_dt(st);
    dnnl_data_type_t qdt = st->int8 ? dnnl_u8 : dt; /* the blocks' activations */
    int stem_c = model->stem.out_channels;
    int sh =
        conv_out_size(plan->padded_h, model->stem.kernel, model->stem.stride, model->stem.padding);
    int sw =
        conv_out_size(plan->padded_w, model->stem.kernel, model->stem.stride, model->stem.padding);
    int h = conv_out_size(sh, 3, 2, 1), w = conv_out_size(sw, 3, 2, 1); /* max-pool */

    /* sizes: block intermediates and stage outputs */
    size_t max_temp = 0;
    int stage_h[4] = {0}, stage_w[4] = {0}, stage_c[4] = {0};
    {
        int th = h, tw = w;
        for (int b = 0; b < model->resnet.n_blocks; b++) {
            const vd_block *mb = &model->resnet.blocks[b];
            int stride = bottleneck ? mb->conv2.stride : mb->conv1.stride;
            int oh = conv_out_size(th, 3, stride, 1), ow = conv_out_size(tw, 3, stride, 1);
            size_t c1 = bottleneck ? act_bytes(st, th, tw, mb->conv1.out_channels, dt)
                                   : act_bytes(st, oh, ow, mb->conv1.out_channels, dt);
            size_t c2 = act_bytes(st, oh, ow, mb->conv2.out_channels, dt);
            max_temp = MAX(max_temp, MAX(c1, c2));
            th = oh;
            tw = ow;
            for (int s = 0; s < model->resnet.n_stages_used; s++)
                if (b + 1 == vd_resnet_stage_end(&model->resnet, s)) {
                    stage_h[s] = th;
                    stage_w[s] = tw;
                    stage_c[s] = (bottleneck ? mb->conv3 : mb->conv2).out_channels;
                }
        }
    }
    max_temp = round64(max_temp);
    size_t in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dnnl_f32, 0));
    size_t stem_in_bytes = round64(tensor_bytes(plan->padded_h, plan->padded_w, 3, dt, 0));
    size_t pool_bytes = round64(act_bytes(st, h, w, stem_c, dt));
    /* a first stage without a downsample (BasicBlock ResNets) outputs into the
     * max-pool's tensor, which must then outlive the temps */
    gboolean pool_is_stage_out =
        !model->resnet.blocks[model->resnet.stage_first_block[0]].has_downsample;
    size_t sums = 0, hidden = 0;
    for (int i = 0; i < cfg->n_returned_layers; i++) {
        int s = cfg->returned_layers[i] - 1;
        size_t b = round64(act_bytes(st, stage_h[s], stage_w[s], cfg->fpn_channels, dt));
        sums += b;
        hidden = MAX(hidden, b);
    }
    plan->scratch_bytes =
        MAX(act_bytes(st, sh, sw, stem_c, dt),
            pool_is_stage_out ? 0 : act_bytes(st, stage_h[0], stage_w[0], stage_c[0], dt));
    plan->temps_bytes =
        MAX(MAX(2 * max_temp + (pool_is_stage_out ? 0 : pool_bytes), in_bytes + stem_in_bytes),
            MAX(sums, hidden));
    plan->scratch = alloc_aligned(plan->scratch_bytes, "activations", error);
    if (plan->scratch == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, plan->scratch);
    plan->temps = alloc_aligned(plan->temps_bytes, "activations", error);
    if (plan->temps == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, plan->temps);
    char *temps = plan->temps;

    if (!plan_input(st, plan, temps, in_bytes, dt, error))
        return FALSE;
    plan->resnet.stem_out = plan_tensor(st, plan, sh, sw, stem_c, dt, TRUE, plan->scratch, error);
    if (plan->resnet.stem_out == NULL ||
        !conv_init_model(st, &plan->stem, &model->stem, plan->stem_in, plan->resnet.stem_out, FALSE,
                         VD_ACT_RELU, error))
        return FALSE;
    plan_step_conv(plan, &plan->stem);
    void *pool_data = pool_is_stage_out ? NULL : temps + 2 * max_temp;
    plan->resnet.pool_out =
        plan_tensor(st, plan, h, w, stem_c, dt, TRUE, st->int8 ? NULL : pool_data, error);
    if (plan->resnet.pool_out == NULL || !maxpool_init(st, plan, error))
        return FALSE;
    step_record(st, plan,
                plan->resnet.maxpool_xnn != NULL
                    ? plan_step_xnn(plan, plan->resnet.maxpool_xnn, plan->resnet.stem_out,
                                    plan->resnet.pool_out, "max-pool")
                    : plan_step_primitive(plan, plan->resnet.maxpool, DNNL_ARG_SRC,
                                          plan->resnet.stem_out, DNNL_ARG_DST,
                                          plan->resnet.pool_out, NULL, "max-pool"),
                plan->resnet.pool_out, "backbone.body.maxpool");
    void *temp1 = temps, *temp2 = temps + max_temp;

    cpu_tensor *x = plan->resnet.pool_out;
    float x_scale = 1.0f; /* int8: x's */
    if (st->int8) {
        plan->resnet.pool_q = plan_tensor(st, plan, h, w, stem_c, dnnl_u8, TRUE, pool_data, error);
        if (plan->resnet.pool_q == NULL ||
            !range_scale(st, "backbone.body.maxpool", TRUE, &x_scale, error) ||
            !plan_quantize(st, plan, plan->resnet.pool_out, plan->resnet.pool_q, x_scale,
                           &plan->resnet.pool_quantize, &plan->resnet.pool_quantize_scales,
                           &plan->resnet.pool_quantize_xnn, error))
            return FALSE;
        x = plan->resnet.pool_q;
    }
    for (int s = 0; s < model->resnet.n_stages_used; s++) {
        int first = model->resnet.stage_first_block[s];
        int last_block = vd_resnet_stage_end(&model->resnet, s);
        for (int b = first; b < last_block; b++) {
            const vd_block *mb = &model->resnet.blocks[b];
            cpu_block *pb = &plan->resnet.blocks[b];
            const vd_conv *last = bottleneck ? &mb->conv3 : &mb->conv2;
            int stride = bottleneck ? mb->conv2.stride : mb->conv1.stride;
            int oh = conv_out_size(x->h, 3, stride, 1), ow = conv_out_size(x->w, 3, stride, 1);
            cpu_tensor *out, *shortcut = NULL;
            /* int8 scales: conv1's and conv2's outputs (bottleneck), the shortcut's,
             * the block's output */
            float s1 = 1.0f, s2 = 1.0f, s_short = x_scale, s_out = 1.0f;
            char name[64];

            g_snprintf(pb->name, sizeof(pb->name), "backbone.body.layer%d.%d", s + 1, b - first);
            if (st->int8) {
                g_snprintf(name, sizeof(name), "%s.conv1", pb->name);
                if (!range_scale(st, name, TRUE, &s1, error) ||
                    !range_scale(st, pb->name, TRUE, &s_out, error))
                    return FALSE;
                g_snprintf(name, sizeof(name), "%s.conv2", pb->name);
                if (bottleneck && !range_scale(st, name, TRUE, &s2, error))
                    return FALSE;
                g_snprintf(name, sizeof(name), "%s.downsample.0", pb->name);
                if (mb->has_downsample && !range_scale(st, name, FALSE, &s_short, error))
                    return FALSE;
            }
            pb->has_downsample = mb->has_downsample;
            if (mb->has_downsample) {
                /* C2, the first stage's output, in the scratch (the stem output is dead) */
                void *data =
                    b == model->resnet.stage_first_block[0] &&
                            act_bytes(st, oh, ow, last->out_channels, qdt) <= plan->scratch_bytes
                        ? plan->scratch
                        : NULL;
                out = plan_tensor(st, plan, oh, ow, last->out_channels, qdt, TRUE, data, error);
                /* int8: the shortcut is signed, an s8 view of the output's buffer
                 * that the last convolution adds onto */
                shortcut = out == NULL || !st->int8
                               ? out
                               : plan_tensor(st, plan, oh, ow, last->out_channels, dnnl_s8, TRUE,
                                             out->data, error);
                cpu_quant q = {x_scale, s_short, 1.0f, dnnl_data_type_undef};
                if (shortcut == NULL ||
                    !conv_init_model_q(st, &pb->downsample, &mb->downsample, x, shortcut, FALSE,
                                       VD_ACT_NONE, st->int8 ? &q : NULL, error))
                    return FALSE;
            } else {
                if (x->c != last->out_channels || stride != 1) {
                    g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                                "block %d changes its shape without a downsample", b);
                    return FALSE;
                }
                out = x; /* identity shortcut: the residual sum is computed in place */
            }
            cpu_quant q1 = {x_scale, s1, 1.0f, dnnl_data_type_undef};
            cpu_quant q2 = {s1, s2, 1.0f, dnnl_data_type_undef};
            cpu_quant q_last = {bottleneck ? s2 : s1, s_out, s_short,
                                mb->has_downsample ? dnnl_s8 : dnnl_u8};
            const cpu_quant *use1 = st->int8 ? &q1 : NULL, *use2 = st->int8 ? &q2 : NULL,
                            *use_last = st->int8 ? &q_last : NULL;
            if (bottleneck) {
                cpu_tensor *t1 = plan_tensor(st, plan, x->h, x->w, mb->conv1.out_channels, qdt,
                                             TRUE, temp1, error);
                cpu_tensor *t2 = t1 == NULL ? NULL
                                            : plan_tensor(st, plan, oh, ow, mb->conv2.out_channels,
                                                          qdt, TRUE, temp2, error);
                if (t2 == NULL ||
                    !conv_init_model_q(st, &pb->conv1, &mb->conv1, x, t1, FALSE, VD_ACT_RELU, use1,
                                       error) ||
                    !conv_init_model_q(st, &pb->conv2, &mb->conv2, t1, t2, FALSE, VD_ACT_RELU, use2,
                                       error) ||
                    !conv_init_model_q(st, &pb->conv3, &mb->conv3, t2, out, TRUE, VD_ACT_RELU,
                                       use_last, error))
                    return FALSE;
            } else {
                cpu_tensor *t1 =
                    plan_tensor(st, plan, oh, ow, mb->conv1.out_channels, qdt, TRUE, temp1, error);
                if (t1 == NULL ||
                    !conv_init_model_q(st, &pb->conv1, &mb->conv1, x, t1, FALSE, VD_ACT_RELU, use1,
                                       error) ||
                    !conv_init_model_q(st, &pb->conv2, &mb->conv2, t1, out, TRUE, VD_ACT_RELU,
                                       use_last, error))
                    return FALSE;
            }
            plan_block_steps(st, plan, pb, bottleneck);
            x = out;
            x_scale = s_out;
        }
        plan->resnet.stage_scale[s] = x_scale;
        plan->resnet.stage_out[s] = x;
    }
    for (int i = 0; i < cfg->n_returned_layers; i++) {
        plan->returned_out[i] = plan->resnet.stage_out[cfg->returned_layers[i] - 1];
        plan->returned_scale[i] = plan->resnet.stage_scale[cfg->returned_layers[i] - 1];
    }
    return TRUE;
}

/* Every block, not n_blocks: a plan that failed half way has blocks set up
 * before its count is (the others are zero, which conv_clear() takes). */
static void resnet_clear(cpu_plan *plan)
{
    vd_layers_primitive_free(plan->resnet.maxpool);
    vd_xnn_op_free(plan->resnet.maxpool_xnn);
    vd_layers_primitive_free(plan->resnet.pool_quantize);
    vd_layers_scales_clear(&plan->resnet.pool_quantize_scales);
    vd_xnn_op_free(plan->resnet.pool_quantize_xnn);
    for (guint i = 0; i < G_N_ELEMENTS(plan->resnet.blocks); i++) {
        conv_clear(&plan->resnet.blocks[i].conv1);
        conv_clear(&plan->resnet.blocks[i].conv2);
        conv_clear(&plan->resnet.blocks[i].conv3);
        conv_clear(&plan->resnet.blocks[i].downsample);
    }
}

static void resnet_kernels(const cpu_state *st, const cpu_plan *plan, GArray *out,
                           GStringChunk *strings)
{
    const vd_model *m = st->model;
    char name[96];
    conv_kernels(out, strings, &plan->stem, "backbone.body.conv1");
    kernel_add_op(out, strings, plan->resnet.maxpool, plan->resnet.maxpool_xnn, "pooling",
                  "backbone.body.maxpool");
    kernel_add_op(out, strings, plan->resnet.pool_quantize, plan->resnet.pool_quantize_xnn,
                  "reorder", "backbone.body.maxpool.quantise");
    for (int s = 0; s < m->resnet.n_stages_used; s++) {
        int last = vd_resnet_stage_end(&m->resnet, s);
        for (int b = m->resnet.stage_first_block[s]; b < last; b++) {
            const cpu_block *pb = &plan->resnet.blocks[b];
            const char *convs[] = {"conv1", "conv2", "conv3", "downsample.0"};
            const cpu_conv *cvs[] = {&pb->conv1, &pb->conv2, &pb->conv3, &pb->downsample};
            for (int i = 0; i < 4; i++) {
                g_snprintf(name, sizeof(name), "backbone.body.layer%d.%d.%s", s + 1,
                           b - m->resnet.stage_first_block[s], convs[i]);
                conv_kernels(out, strings, cvs[i], name);
            }
        }
    }
}

const cpu_backbone vd_cpu_resnet = {
    .type = VD_BACKBONE_RESNET,
    .plan = plan_backbone,
    .clear = resnet_clear,
    .kernels = resnet_kernels,
    .int8 = TRUE,
};
