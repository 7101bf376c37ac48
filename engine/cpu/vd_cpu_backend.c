/* The CPU backend: torchvision's Faster R-CNN inference (spec/fasterrcnn.md) with
 * oneDNN convolutions and matrix products, and the plain-C small ops of
 * vd_cpu_ops.c.
 *
 * Activations are NHWC float32 from the first convolution to RoIAlign. Everything
 * that depends on the padded input size (convolution primitives, reordered
 * weights, activation buffers, anchors) lives in a "plan" built on the first
 * frame of a size and reused until the size changes. */
#include "vd_config.h"
#include "vd_context_private.h"
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* oneDNN plumbing                                                           */

static gboolean dnnl_check(dnnl_status_t status, const char *what, GError **error)
{
    if (status == dnnl_success)
        return TRUE;
    g_set_error(error, VD_ERROR,
                status == dnnl_out_of_memory ? VD_ERROR_OUT_OF_MEMORY : VD_ERROR_INTERNAL,
                "oneDNN failed in %s: %s", what, dnnl_status2str(status));
    return FALSE;
}

#define DNNL_TRY(call, what)                                                                       \
    do {                                                                                           \
        if (!dnnl_check((call), (what), error))                                                    \
            goto out_fail;                                                                         \
    } while (0)

/* One NHWC float32 activation of one image: a oneDNN memory object over a buffer
 * that is either its own or shared with other intermediates. Owned by the plan. */
typedef struct {
    int h, w, c;
    float *data;
    dnnl_memory_t mem;
} cpu_tensor;

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t weights;
    dnnl_memory_t bias;
    dnnl_memory_t src; /* borrowed from the tensors */
    dnnl_memory_t dst;
} cpu_conv;

typedef struct {
    cpu_conv conv1, conv2, conv3, downsample;
    gboolean has_downsample;
} cpu_block;

typedef struct {
    int padded_h, padded_w;
    GPtrArray *tensors;       /* cpu_tensor*, all of the plan's */
    GPtrArray *buffers;       /* float*, all of the plan's */

    cpu_tensor *input;        /* [Hp][Wp][3] */
    cpu_tensor *stem_out;
    cpu_tensor *pool_out;
    cpu_tensor *stage_out[4]; /* C2..C5 (the stages computed) */
    cpu_conv stem;
    dnnl_primitive_t maxpool;
    cpu_block blocks[VD_MAX_BLOCKS];
    int n_blocks;

    int n_levels;                            /* FPN outputs, incl. the pool level */
    int n_returned;
    cpu_tensor *fpn_sum[4];                  /* lateral + upsampled ("last" chain) */
    cpu_tensor *fpn_out[VD_MAX_FPN_LEVELS];  /* P levels */
    cpu_conv fpn_inner[4];
    cpu_conv fpn_layer[4];

    cpu_tensor *rpn_hidden[VD_MAX_FPN_LEVELS];
    cpu_tensor *rpn_out[VD_MAX_FPN_LEVELS];  /* [h][w][A + 4A] */
    cpu_conv rpn_conv[VD_MAX_FPN_LEVELS];
    cpu_conv rpn_head[VD_MAX_FPN_LEVELS];

    float *anchors;                          /* all levels, [n_anchors][4] */
    int n_anchors;
    int level_anchor_offset[VD_MAX_FPN_LEVELS + 1];

    /* RoI pooler (spec §5.2), cached as torchvision does on its first forward */
    int roi_k_min, roi_k_max;
    float roi_scales[VD_MAX_FPN_LEVELS];
    int resized_h_for_scales;
} cpu_plan;

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int n_threads;
    const vd_model *model;

    /* size-independent, prepared once */
    float *rpn_head_weight;  /* cls and bbox 1x1 convs merged: [A + 4A][C] */
    float *rpn_head_bias;
    float *fc6_weight;       /* permuted to the NHWC flatten order [out][P*P*C] */
    float *predictor_weight; /* cls_score and bbox_pred merged: [K + 4K][rep] */
    float *predictor_bias;

    cpu_plan *plan;
} cpu_state;

static void *try_alloc(size_t n_floats, const char *what, GError **error)
{
    void *p = n_floats == 0 ? g_malloc0(sizeof(float)) : g_try_malloc0(n_floats * sizeof(float));
    if (p == NULL)
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory: %zu floats for %s", n_floats, what);
    return p;
}

static void tensor_free(gpointer p)
{
    cpu_tensor *t = p;
    if (t->mem != NULL)
        dnnl_memory_destroy(t->mem);
    g_free(t);
}

/* A tensor of the plan over @data (shared) or over a new buffer (data NULL). */
static cpu_tensor *plan_tensor(cpu_state *st, cpu_plan *plan, int h, int w, int c, float *data,
                               GError **error)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {1, c, h, w};
    cpu_tensor *t = g_new0(cpu_tensor, 1);
    t->h = h;
    t->w = w;
    t->c = c;
    g_ptr_array_add(plan->tensors, t);
    if (data == NULL) {
        data = try_alloc((size_t)h * w * c, "an activation", error);
        if (data == NULL)
            return NULL;
        g_ptr_array_add(plan->buffers, data);
    }
    t->data = data;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nhwc), "memory desc");
    DNNL_TRY(dnnl_memory_create(&t->mem, &md, st->engine, t->data), "memory create");
    return t;
out_fail:
    return NULL;
}

static void conv_clear(cpu_conv *cv)
{
    if (cv->prim != NULL)
        dnnl_primitive_destroy(cv->prim);
    if (cv->weights != NULL)
        dnnl_memory_destroy(cv->weights);
    if (cv->bias != NULL)
        dnnl_memory_destroy(cv->bias);
    memset(cv, 0, sizeof(*cv));
}

static int conv_out_size(int n, int kernel, int stride, int padding)
{
    return (n + 2 * padding - kernel) / stride + 1;
}

/* Creates the primitive of one convolution src -> dst (dst has the output shape),
 * reorders the weights into the layout the primitive prefers, and fuses the sum
 * with dst's previous contents and/or a ReLU. */
static gboolean conv_init(cpu_state *st, cpu_conv *cv, const float *weight, const float *bias,
                          int out_c, int in_c, int kernel, int stride, int padding,
                          cpu_tensor *src, cpu_tensor *dst, gboolean sum, gboolean relu,
                          GError **error)
{
    dnnl_memory_desc_t src_md, wei_any_md, wei_user_md, bias_md, dst_md;
    dnnl_dims_t src_dims = {1, in_c, src->h, src->w};
    dnnl_dims_t dst_dims = {1, out_c, dst->h, dst->w};
    dnnl_dims_t wei_dims = {out_c, in_c, kernel, kernel};
    dnnl_dims_t bias_dims = {out_c};
    dnnl_dims_t strides = {stride, stride};
    dnnl_dims_t pad = {padding, padding};
    dnnl_convolution_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL, reorder_pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t user_weights = NULL;
    gboolean ok = FALSE;

    if (src->c != in_c || dst->c != out_c) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "convolution %d->%d channels on tensors of %d->%d", in_c, out_c, src->c,
                    dst->c);
        return FALSE;
    }
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nhwc), "conv src");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc), "conv dst");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_any_md, 4, wei_dims, dnnl_f32, dnnl_format_tag_any),
             "conv weights");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_user_md, 4, wei_dims, dnnl_f32, dnnl_oihw),
             "conv weights");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x), "conv bias");
    DNNL_TRY(dnnl_convolution_forward_desc_init(&desc, dnnl_forward_inference,
                                                dnnl_convolution_direct, &src_md, &wei_any_md,
                                                &bias_md, &dst_md, strides, pad, pad),
             "convolution desc");

    DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr");
    DNNL_TRY(dnnl_post_ops_create(&ops), "post ops");
    if (sum)
        DNNL_TRY(dnnl_post_ops_append_sum(ops, 1.0f), "sum post-op");
    if (relu)
        DNNL_TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f),
                 "relu post-op");
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "set post-ops");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, attr, st->engine, NULL),
             "convolution primitive desc");
    DNNL_TRY(dnnl_primitive_create(&cv->prim, pd), "convolution primitive");

    /* weights: plain OIHW from the model -> the primitive's layout, once per plan */
    const dnnl_memory_desc_t *wei_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    DNNL_TRY(dnnl_memory_create(&cv->weights, wei_md, st->engine, DNNL_MEMORY_ALLOCATE),
             "weights memory");
    DNNL_TRY(dnnl_memory_create(&user_weights, &wei_user_md, st->engine, (void *)weight),
             "weights memory");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&reorder_pd, &wei_user_md, st->engine, wei_md,
                                                st->engine, NULL),
             "weights reorder desc");
    DNNL_TRY(dnnl_primitive_create(&reorder, reorder_pd), "weights reorder");
    {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user_weights}, {DNNL_ARG_TO, cv->weights}};
        DNNL_TRY(dnnl_primitive_execute(reorder, st->stream, 2, args), "weights reorder");
        DNNL_TRY(dnnl_stream_wait(st->stream), "stream wait");
    }
    DNNL_TRY(dnnl_memory_create(&cv->bias, &bias_md, st->engine, DNNL_MEMORY_ALLOCATE),
             "bias memory");
    {
        void *handle = NULL;
        DNNL_TRY(dnnl_memory_get_data_handle(cv->bias, &handle), "bias handle");
        memcpy(handle, bias, sizeof(float) * (size_t)out_c);
    }
    cv->src = src->mem;
    cv->dst = dst->mem;
    ok = TRUE;

out_fail:
    if (user_weights != NULL)
        dnnl_memory_destroy(user_weights);
    if (reorder != NULL)
        dnnl_primitive_destroy(reorder);
    if (reorder_pd != NULL)
        dnnl_primitive_desc_destroy(reorder_pd);
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    if (ops != NULL)
        dnnl_post_ops_destroy(ops);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return ok;
}

static gboolean conv_init_model(cpu_state *st, cpu_conv *cv, const vd_conv *w, cpu_tensor *src,
                                cpu_tensor *dst, gboolean sum, gboolean relu, GError **error)
{
    return conv_init(st, cv, w->weight, w->bias, w->out_channels, w->in_channels, w->kernel,
                     w->stride, w->padding, src, dst, sum, relu, error);
}

static gboolean conv_run(cpu_state *st, const cpu_conv *cv, GError **error)
{
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, cv->src},
        {DNNL_ARG_WEIGHTS, cv->weights},
        {DNNL_ARG_BIAS, cv->bias},
        {DNNL_ARG_DST, cv->dst},
    };
    DNNL_TRY(dnnl_primitive_execute(cv->prim, st->stream, 4, args), "convolution");
    return TRUE;
out_fail:
    return FALSE;
}

/* ------------------------------------------------------------------------ */
/* Plans: everything that depends on the padded input size                   */

static void plan_free(cpu_plan *plan)
{
    if (plan == NULL)
        return;
    conv_clear(&plan->stem);
    if (plan->maxpool != NULL)
        dnnl_primitive_destroy(plan->maxpool);
    for (int i = 0; i < plan->n_blocks; i++) {
        conv_clear(&plan->blocks[i].conv1);
        conv_clear(&plan->blocks[i].conv2);
        conv_clear(&plan->blocks[i].conv3);
        conv_clear(&plan->blocks[i].downsample);
    }
    for (int i = 0; i < 4; i++) {
        conv_clear(&plan->fpn_inner[i]);
        conv_clear(&plan->fpn_layer[i]);
    }
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        conv_clear(&plan->rpn_conv[l]);
        conv_clear(&plan->rpn_head[l]);
    }
    if (plan->tensors != NULL)
        g_ptr_array_unref(plan->tensors);
    if (plan->buffers != NULL)
        g_ptr_array_unref(plan->buffers);
    g_free(plan->anchors);
    g_free(plan);
}

static gboolean maxpool_init(cpu_state *st, cpu_plan *plan, GError **error)
{
    dnnl_memory_desc_t src_md, dst_md;
    cpu_tensor *s = plan->stem_out, *d = plan->pool_out;
    dnnl_dims_t src_dims = {1, s->c, s->h, s->w};
    dnnl_dims_t dst_dims = {1, d->c, d->h, d->w};
    dnnl_dims_t strides = {2, 2}, kernel = {3, 3}, dilation = {0, 0}, pad = {1, 1};
    dnnl_pooling_v2_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = FALSE;

    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nhwc), "pool src");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc), "pool dst");
    /* oneDNN's max pooling excludes the padding, i.e. pads with -inf as torch does */
    DNNL_TRY(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, dnnl_pooling_max,
                                               &src_md, &dst_md, strides, kernel, dilation, pad,
                                               pad),
             "max-pool desc");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, NULL, st->engine, NULL), "max-pool pd");
    DNNL_TRY(dnnl_primitive_create(&plan->maxpool, pd), "max-pool primitive");
    ok = TRUE;
out_fail:
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

static gboolean plan_backbone(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    gboolean bottleneck = cfg->block == VD_BLOCK_BOTTLENECK;

    int h = conv_out_size(plan->padded_h, model->stem.kernel, model->stem.stride,
                          model->stem.padding);
    int w = conv_out_size(plan->padded_w, model->stem.kernel, model->stem.stride,
                          model->stem.padding);
    plan->stem_out = plan_tensor(st, plan, h, w, model->stem.out_channels, NULL, error);
    if (plan->stem_out == NULL ||
        !conv_init_model(st, &plan->stem, &model->stem, plan->input, plan->stem_out, FALSE, TRUE,
                         error))
        return FALSE;
    h = conv_out_size(h, 3, 2, 1);
    w = conv_out_size(w, 3, 2, 1);
    plan->pool_out = plan_tensor(st, plan, h, w, model->stem.out_channels, NULL, error);
    if (plan->pool_out == NULL || !maxpool_init(st, plan, error))
        return FALSE;

    /* Block intermediates (conv1 and conv2 outputs) share two buffers sized for the
     * largest of them. */
    size_t max_temp = 0;
    {
        int th = h, tw = w;
        for (int b = 0; b < model->n_blocks; b++) {
            const vd_block *mb = &model->blocks[b];
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
    float *temp1 = try_alloc(max_temp, "block intermediates", error);
    if (temp1 == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, temp1);
    float *temp2 = try_alloc(max_temp, "block intermediates", error);
    if (temp2 == NULL)
        return FALSE;
    g_ptr_array_add(plan->buffers, temp2);

    cpu_tensor *x = plan->pool_out;
    for (int s = 0; s < model->n_stages_used; s++) {
        int first = model->stage_first_block[s];
        int last_block = s + 1 < model->n_stages_used ? model->stage_first_block[s + 1]
                                                      : model->n_blocks;
        for (int b = first; b < last_block; b++) {
            const vd_block *mb = &model->blocks[b];
            cpu_block *pb = &plan->blocks[b];
            const vd_conv *last = bottleneck ? &mb->conv3 : &mb->conv2;
            int stride = bottleneck ? mb->conv2.stride : mb->conv1.stride;
            int oh = conv_out_size(x->h, 3, stride, 1), ow = conv_out_size(x->w, 3, stride, 1);
            cpu_tensor *out;

            pb->has_downsample = mb->has_downsample;
            if (mb->has_downsample) {
                out = plan_tensor(st, plan, oh, ow, last->out_channels, NULL, error);
                if (out == NULL || !conv_init_model(st, &pb->downsample, &mb->downsample, x, out,
                                                    FALSE, FALSE, error))
                    return FALSE;
            } else {
                if (x->c != last->out_channels || stride != 1) {
                    g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                                "block %d changes its shape without a downsample", b);
                    return FALSE;
                }
                out = x; /* identity shortcut: the residual sum is computed in place */
            }
            if (bottleneck) {
                cpu_tensor *t1 = plan_tensor(st, plan, x->h, x->w, mb->conv1.out_channels, temp1,
                                             error);
                cpu_tensor *t2 = t1 == NULL ? NULL
                                            : plan_tensor(st, plan, oh, ow,
                                                          mb->conv2.out_channels, temp2, error);
                if (t2 == NULL ||
                    !conv_init_model(st, &pb->conv1, &mb->conv1, x, t1, FALSE, TRUE, error) ||
                    !conv_init_model(st, &pb->conv2, &mb->conv2, t1, t2, FALSE, TRUE, error) ||
                    !conv_init_model(st, &pb->conv3, &mb->conv3, t2, out, TRUE, TRUE, error))
                    return FALSE;
            } else {
                cpu_tensor *t1 = plan_tensor(st, plan, oh, ow, mb->conv1.out_channels, temp1,
                                             error);
                if (t1 == NULL ||
                    !conv_init_model(st, &pb->conv1, &mb->conv1, x, t1, FALSE, TRUE, error) ||
                    !conv_init_model(st, &pb->conv2, &mb->conv2, t1, out, TRUE, TRUE, error))
                    return FALSE;
            }
            x = out;
        }
        plan->stage_out[s] = x;
    }
    plan->n_blocks = model->n_blocks;
    return TRUE;
}

static gboolean plan_fpn_rpn(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    int n_ret = cfg->n_returned_layers;
    int fc = cfg->fpn_channels;
    int A = cfg->anchors_per_location;

    plan->n_returned = n_ret;
    plan->n_levels = cfg->n_fpn_levels;
    for (int i = 0; i < n_ret; i++) {
        cpu_tensor *c = plan->stage_out[cfg->returned_layers[i] - 1];
        plan->fpn_sum[i] = plan_tensor(st, plan, c->h, c->w, fc, NULL, error);
        plan->fpn_out[i] = plan_tensor(st, plan, c->h, c->w, fc, NULL, error);
        if (plan->fpn_sum[i] == NULL || plan->fpn_out[i] == NULL)
            return FALSE;
        /* the top level's lateral has nothing to add; the others sum onto the
         * upsampled chain already written into fpn_sum */
        gboolean sum = i + 1 < n_ret;
        if (!conv_init_model(st, &plan->fpn_inner[i], &model->fpn_inner[i], c, plan->fpn_sum[i],
                             sum, FALSE, error) ||
            !conv_init_model(st, &plan->fpn_layer[i], &model->fpn_layer[i], plan->fpn_sum[i],
                             plan->fpn_out[i], FALSE, FALSE, error))
            return FALSE;
    }
    if (cfg->fpn_pool_level) {
        cpu_tensor *top = plan->fpn_out[n_ret - 1];
        plan->fpn_out[n_ret] =
            plan_tensor(st, plan, (top->h + 1) / 2, (top->w + 1) / 2, fc, NULL, error);
        if (plan->fpn_out[n_ret] == NULL)
            return FALSE;
    }

    for (int l = 0; l < plan->n_levels; l++) {
        cpu_tensor *p = plan->fpn_out[l];
        plan->rpn_hidden[l] = plan_tensor(st, plan, p->h, p->w, fc, NULL, error);
        plan->rpn_out[l] = plan_tensor(st, plan, p->h, p->w, 5 * A, NULL, error);
        if (plan->rpn_hidden[l] == NULL || plan->rpn_out[l] == NULL)
            return FALSE;
        if (!conv_init_model(st, &plan->rpn_conv[l], &model->rpn_conv, p, plan->rpn_hidden[l],
                             FALSE, TRUE, error) ||
            !conv_init(st, &plan->rpn_head[l], st->rpn_head_weight, st->rpn_head_bias, 5 * A, fc,
                       1, 1, 0, plan->rpn_hidden[l], plan->rpn_out[l], FALSE, FALSE, error))
            return FALSE;
    }

    /* anchors, once per size (spec §3) */
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
                        plan->fpn_out[l]->w, plan->anchors + (size_t)plan->level_anchor_offset[l] * 4);
    }
    return TRUE;
}

static cpu_plan *plan_new(cpu_state *st, int padded_h, int padded_w, GError **error)
{
    cpu_plan *plan = g_new0(cpu_plan, 1);
    plan->padded_h = padded_h;
    plan->padded_w = padded_w;
    plan->tensors = g_ptr_array_new_with_free_func(tensor_free);
    plan->buffers = g_ptr_array_new_with_free_func(g_free);
    plan->resized_h_for_scales = -1;

    plan->input = plan_tensor(st, plan, padded_h, padded_w, 3, NULL, error);
    if (plan->input == NULL || !plan_backbone(st, plan, error) || !plan_fpn_rpn(st, plan, error)) {
        plan_free(plan);
        return NULL;
    }
    return plan;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

static gboolean run_backbone(cpu_state *st, cpu_plan *plan, GError **error)
{
    const vd_model *model = st->model;
    if (!conv_run(st, &plan->stem, error))
        return FALSE;
    {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, plan->stem_out->mem},
                                   {DNNL_ARG_DST, plan->pool_out->mem}};
        DNNL_TRY(dnnl_primitive_execute(plan->maxpool, st->stream, 2, args), "max-pool");
    }
    for (int b = 0; b < plan->n_blocks; b++) {
        const cpu_block *pb = &plan->blocks[b];
        /* the shortcut first: conv3/conv2 adds itself onto the output */
        if (pb->has_downsample && !conv_run(st, &pb->downsample, error))
            return FALSE;
        if (!conv_run(st, &pb->conv1, error) || !conv_run(st, &pb->conv2, error))
            return FALSE;
        if (model->config.block == VD_BLOCK_BOTTLENECK && !conv_run(st, &pb->conv3, error))
            return FALSE;
    }
    DNNL_TRY(dnnl_stream_wait(st->stream), "stream wait");
    return TRUE;
out_fail:
    return FALSE;
}

/* nearest upsampling of @src into @dst (torch's 'nearest' with an explicit size,
 * spec §2.3): src index = min(floor(dst * f32(in/out)), in - 1). */
static void upsample_nearest(const cpu_tensor *src, cpu_tensor *dst)
{
    float sy = (float)src->h / (float)dst->h;
    float sx = (float)src->w / (float)dst->w;
    int c = dst->c;
#pragma omp parallel for
    for (int y = 0; y < dst->h; y++) {
        int iy = MIN((int)floorf((float)y * sy), src->h - 1);
        for (int x = 0; x < dst->w; x++) {
            int ix = MIN((int)floorf((float)x * sx), src->w - 1);
            memcpy(dst->data + ((size_t)y * dst->w + x) * c,
                   src->data + ((size_t)iy * src->w + ix) * c, sizeof(float) * (size_t)c);
        }
    }
}

static gboolean run_fpn(cpu_state *st, cpu_plan *plan, GError **error)
{
    int n = plan->n_returned;
    for (int i = n - 1; i >= 0; i--) {
        if (i + 1 < n)
            upsample_nearest(plan->fpn_sum[i + 1], plan->fpn_sum[i]);
        if (!conv_run(st, &plan->fpn_inner[i], error))
            return FALSE;
        DNNL_TRY(dnnl_stream_wait(st->stream), "stream wait");
        if (!conv_run(st, &plan->fpn_layer[i], error))
            return FALSE;
    }
    DNNL_TRY(dnnl_stream_wait(st->stream), "stream wait");
    if (plan->n_levels > n) {
        /* LastLevelMaxPool: max_pool2d(P_top, 1, 2, 0) == P_top[::2, ::2] */
        const cpu_tensor *top = plan->fpn_out[n - 1];
        cpu_tensor *pool = plan->fpn_out[n];
        for (int y = 0; y < pool->h; y++)
            for (int x = 0; x < pool->w; x++)
                memcpy(pool->data + ((size_t)y * pool->w + x) * pool->c,
                       top->data + ((size_t)(2 * y) * top->w + 2 * x) * top->c,
                       sizeof(float) * (size_t)pool->c);
    }
    return TRUE;
out_fail:
    return FALSE;
}

static void observe_nhwc(vd_context *ctx, const char *name, const cpu_tensor *t)
{
    if (!vd_context_observing(ctx))
        return;
    float *nchw = g_try_malloc((size_t)t->h * t->w * t->c * sizeof(float));
    if (nchw == NULL)
        return;
    for (int c = 0; c < t->c; c++)
        for (size_t p = 0; p < (size_t)t->h * t->w; p++)
            nchw[(size_t)c * t->h * t->w + p] = t->data[p * t->c + c];
    int64_t shape[4] = {1, t->c, t->h, t->w};
    vd_context_observe(ctx, name, nchw, shape, 4);
    g_free(nchw);
}

/* RPN (spec §4): per-level top-k on the logits, decode, sigmoid, clip, small-box
 * and score filters, per-level NMS, post-NMS top-n. Returns the number of
 * proposals written to @proposals ([n][4], descending score) and @scores. */
static int run_rpn(cpu_state *st, cpu_plan *plan, int resized_h, int resized_w,
                   float **proposals_out, float **scores_out, GError **error)
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
        int n_l = out->h * out->w * A;
        const float *anchors = plan->anchors + (size_t)plan->level_anchor_offset[l] * 4;
        for (int i = 0; i < n_l; i++)
            logits[i] = out->data[(size_t)(i / A) * 5 * A + i % A];
        int k = vd_topk(logits, n_l, cfg->rpn_pre_nms_top_n, top);
        for (int j = 0; j < k; j++) {
            int i = top[j];
            const float *d = out->data + (size_t)(i / A) * 5 * A + A + (i % A) * 4;
            memcpy(deltas + 4 * j, d, 4 * sizeof(float));
            memcpy(refs + 4 * j, anchors + 4 * (size_t)i, 4 * sizeof(float));
            scores[n + j] = vd_math_sigmoid(logits[i]);
            levels[n + j] = l;
        }
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

/* MultiScaleRoIAlign's scales (spec §5.2), from the feature heights and the
 * resized image height; torchvision caches them at its first forward, and so do
 * we (per plan and resized height). */
static void pooler_scales(cpu_state *st, cpu_plan *plan, int resized_h)
{
    const vd_config *cfg = &st->model->config;
    if (plan->resized_h_for_scales == resized_h)
        return;
    for (int l = 0; l < cfg->n_roi_levels; l++) {
        double approx = (double)plan->fpn_out[l]->h / (double)resized_h;
        float lg = log2f((float)approx);
        plan->roi_scales[l] = exp2f(nearbyintf(lg));
    }
    plan->roi_k_min = (int)(-log2f(plan->roi_scales[0]));
    plan->roi_k_max = (int)(-log2f(plan->roi_scales[cfg->n_roi_levels - 1]));
    plan->resized_h_for_scales = resized_h;
}

static gboolean run_box_head(cpu_state *st, vd_context *ctx, cpu_plan *plan, const float *props,
                             int n_props, int resized_h, float **head_out, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    int P = cfg->roi_output_size;
    int C = cfg->fpn_channels;
    int in6 = model->fc6.in_features;
    int rep = cfg->representation_size;
    int K = cfg->num_classes;
    int n_out = 5 * K;
    gboolean ok = FALSE;

    float *pooled = try_alloc((size_t)n_props * in6, "RoI features", error);
    float *h6 = pooled ? try_alloc((size_t)n_props * rep, "box head", error) : NULL;
    float *h7 = h6 ? try_alloc((size_t)n_props * rep, "box head", error) : NULL;
    float *out = h7 ? try_alloc((size_t)n_props * n_out, "box head", error) : NULL;
    int *level_of = out ? try_alloc((size_t)n_props, "RoI levels", error) : NULL;
    int *index = level_of ? try_alloc((size_t)n_props, "RoI levels", error) : NULL;
    float *rois = index ? try_alloc((size_t)n_props * 4, "RoI levels", error) : NULL;
    if (rois == NULL)
        goto out_free;

    pooler_scales(st, plan, resized_h);
    for (int i = 0; i < n_props; i++)
        level_of[i] = vd_roi_level(props + 4 * (size_t)i, plan->roi_k_min, plan->roi_k_max);
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
        const cpu_tensor *f = plan->fpn_out[l];
        vd_roi_align_nhwc(f->data, f->h, f->w, C, rois, index, m, plan->roi_scales[l], P,
                          cfg->roi_sampling_ratio, pooled, in6);
    }
    vd_context_stage_mark(ctx, "roi_align");

    if (n_props > 0) {
        DNNL_TRY(dnnl_sgemm('N', 'T', n_props, rep, in6, 1.0f, pooled, in6, st->fc6_weight, in6,
                            0.0f, h6, rep),
                 "fc6");
#pragma omp parallel for
        for (int i = 0; i < n_props; i++)
            for (int j = 0; j < rep; j++) {
                float v = h6[(size_t)i * rep + j] + model->fc6.bias[j];
                h6[(size_t)i * rep + j] = v > 0.0f ? v : 0.0f;
            }
        DNNL_TRY(dnnl_sgemm('N', 'T', n_props, rep, rep, 1.0f, h6, rep, model->fc7.weight, rep,
                            0.0f, h7, rep),
                 "fc7");
#pragma omp parallel for
        for (int i = 0; i < n_props; i++)
            for (int j = 0; j < rep; j++) {
                float v = h7[(size_t)i * rep + j] + model->fc7.bias[j];
                h7[(size_t)i * rep + j] = v > 0.0f ? v : 0.0f;
            }
        DNNL_TRY(dnnl_sgemm('N', 'T', n_props, n_out, rep, 1.0f, h7, rep, st->predictor_weight,
                            rep, 0.0f, out, n_out),
                 "box predictor");
        for (int i = 0; i < n_props; i++)
            for (int j = 0; j < n_out; j++)
                out[(size_t)i * n_out + j] += st->predictor_bias[j];
    }
    *head_out = out;
    out = NULL;
    ok = TRUE;

out_fail:
out_free:
    g_free(pooled);
    g_free(h6);
    g_free(h7);
    g_free(out);
    g_free(level_of);
    g_free(index);
    g_free(rois);
    return ok;
}

/* RoIHeads.postprocess_detections (spec §6.2) and the rescale of spec §1.5. */
static gboolean postprocess(cpu_state *st, vd_context *ctx, const float *props, int n_props,
                            float *head, int resized_h, int resized_w, const vd_image *image,
                            vd_result *result, GError **error)
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
        float *logits = row;              /* K class logits, softmaxed in place */
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
    int kept = vd_batched_nms(boxes, scores, labels, m, ctx->params.nms_threshold, keep);
    kept = MIN(kept, ctx->params.max_detections);

    float ry = (float)image->height / (float)resized_h;
    float rx = (float)image->width / (float)resized_w;
    result->width = image->width;
    result->height = image->height;
    result->n_detections = kept;
    result->detections = g_new0(vd_detection, MAX(kept, 1));
    for (int j = 0; j < kept; j++) {
        const float *b = boxes + 4 * (size_t)keep[j];
        vd_detection *d = &result->detections[j];
        d->x1 = b[0] * rx;
        d->y1 = b[1] * ry;
        d->x2 = b[2] * rx;
        d->y2 = b[3] * ry;
        d->score = scores[keep[j]];
        d->label = labels[keep[j]];
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

static gboolean detect_one(cpu_state *st, vd_context *ctx, const vd_image *image,
                           vd_result *result, gboolean observe, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int rh, rw, ph, pw;
    float *props = NULL, *pscores = NULL, *head = NULL;
    gboolean ok = FALSE;

    if (image->width <= 0 || image->height <= 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "image size %dx%d is empty",
                    image->width, image->height);
        return FALSE;
    }
    vd_context_stages_begin(ctx);
    vd_transform_sizes(image->height, image->width, cfg->min_size, cfg->max_size,
                       cfg->size_divisible, &rh, &rw, &ph, &pw);
    if (st->plan == NULL || st->plan->padded_h != ph || st->plan->padded_w != pw) {
        plan_free(st->plan);
        st->plan = plan_new(st, ph, pw, error);
        if (st->plan == NULL)
            return FALSE;
    }
    cpu_plan *plan = st->plan;

    if (!vd_cpu_preprocess(image, cfg->image_mean, cfg->image_std, rh, rw, ph, pw,
                           plan->input->data, error))
        return FALSE;
    if (observe) {
        float size[2] = {(float)rh, (float)rw};
        int64_t shape[1] = {2};
        vd_context_observe(ctx, "image_size", size, shape, 1);
        observe_nhwc(ctx, "input", plan->input);
    }
    vd_context_stage_mark(ctx, "preprocess");

    if (!run_backbone(st, plan, error))
        return FALSE;
    vd_context_stage_mark(ctx, "backbone");
    if (!run_fpn(st, plan, error))
        return FALSE;
    if (observe) {
        for (int l = 0; l < plan->n_levels; l++) {
            char name[32];
            if (l < plan->n_returned)
                g_snprintf(name, sizeof(name), "fpn.%d", l);
            else
                g_snprintf(name, sizeof(name), "fpn.pool");
            observe_nhwc(ctx, name, plan->fpn_out[l]);
        }
        int64_t shape[2] = {plan->n_anchors, 4};
        vd_context_observe(ctx, "anchors", plan->anchors, shape, 2);
    }
    vd_context_stage_mark(ctx, "fpn");

    for (int l = 0; l < plan->n_levels; l++)
        if (!conv_run(st, &plan->rpn_conv[l], error) || !conv_run(st, &plan->rpn_head[l], error))
            return FALSE;
    if (!dnnl_check(dnnl_stream_wait(st->stream), "stream wait", error))
        return FALSE;
    int n_props = run_rpn(st, plan, rh, rw, &props, &pscores, error);
    if (n_props < 0)
        return FALSE;
    if (observe) {
        int64_t shape[2] = {n_props, 4};
        vd_context_observe(ctx, "proposals", props, shape, 2);
        vd_context_observe(ctx, "proposal_scores", pscores, shape, 1);
    }
    vd_context_stage_mark(ctx, "rpn");

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
    vd_context_stage_mark(ctx, "box_head");

    ok = postprocess(st, ctx, props, n_props, head, rh, rw, image, result, error);
    vd_context_stage_mark(ctx, "postprocess");

out_free:
    g_free(props);
    g_free(pscores);
    g_free(head);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Backend interface                                                         */

static void cpu_destroy(void *p)
{
    cpu_state *st = p;
    if (st == NULL)
        return;
    plan_free(st->plan);
    g_free(st->rpn_head_weight);
    g_free(st->rpn_head_bias);
    g_free(st->fc6_weight);
    g_free(st->predictor_weight);
    g_free(st->predictor_bias);
    if (st->stream != NULL)
        dnnl_stream_destroy(st->stream);
    if (st->engine != NULL)
        dnnl_engine_destroy(st->engine);
    g_free(st);
}

/* Size-independent weight preparation: merged RPN head, fc6 permuted to the NHWC
 * flatten order of our RoIAlign output, merged box predictor. */
static gboolean prepare_weights(cpu_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int A = cfg->anchors_per_location, C = cfg->fpn_channels;
    int P = cfg->roi_output_size, K = cfg->num_classes, rep = cfg->representation_size;

    st->rpn_head_weight = try_alloc((size_t)5 * A * C, "RPN head", error);
    st->rpn_head_bias = st->rpn_head_weight ? try_alloc((size_t)5 * A, "RPN head", error) : NULL;
    st->fc6_weight =
        st->rpn_head_bias ? try_alloc((size_t)m->fc6.out_features * m->fc6.in_features, "fc6", error)
                          : NULL;
    st->predictor_weight = st->fc6_weight ? try_alloc((size_t)5 * K * rep, "predictor", error) : NULL;
    st->predictor_bias = st->predictor_weight ? try_alloc((size_t)5 * K, "predictor", error) : NULL;
    if (st->predictor_bias == NULL)
        return FALSE;

    memcpy(st->rpn_head_weight, m->rpn_cls.weight, sizeof(float) * A * C);
    memcpy(st->rpn_head_weight + (size_t)A * C, m->rpn_bbox.weight, sizeof(float) * 4 * A * C);
    memcpy(st->rpn_head_bias, m->rpn_cls.bias, sizeof(float) * A);
    memcpy(st->rpn_head_bias + A, m->rpn_bbox.bias, sizeof(float) * 4 * A);

    for (int o = 0; o < m->fc6.out_features; o++) {
        const float *src = m->fc6.weight + (size_t)o * m->fc6.in_features;
        float *dst = st->fc6_weight + (size_t)o * m->fc6.in_features;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < P * P; p++)
                dst[(size_t)p * C + c] = src[(size_t)c * P * P + p];
    }
    memcpy(st->predictor_weight, m->cls_score.weight, sizeof(float) * K * rep);
    memcpy(st->predictor_weight + (size_t)K * rep, m->bbox_pred.weight, sizeof(float) * 4 * K * rep);
    memcpy(st->predictor_bias, m->cls_score.bias, sizeof(float) * K);
    memcpy(st->predictor_bias + K, m->bbox_pred.bias, sizeof(float) * 4 * K);
    return TRUE;
}

static void *cpu_create(vd_context *ctx, GError **error)
{
    if (ctx->params.precision == VD_PRECISION_AUTO)
        ctx->params.precision = VD_PRECISION_FP32;
    if (ctx->params.precision != VD_PRECISION_FP32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s is not supported on the CPU backend (fp32 only)",
                    ctx->params.precision == VD_PRECISION_FP16 ? "fp16" : "bf16");
        return NULL;
    }
    const vd_config *cfg = &ctx->model->config;
    if (cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size !=
        ctx->model->fc6.in_features) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "fc6 takes %d inputs, the pooler gives %d",
                    ctx->model->fc6.in_features,
                    cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size);
        return NULL;
    }

    cpu_state *st = g_new0(cpu_state, 1);
    st->model = ctx->model;
    st->n_threads = ctx->params.n_threads > 0 ? ctx->params.n_threads : omp_get_num_procs();
    if (!dnnl_check(dnnl_engine_create(&st->engine, dnnl_cpu, 0), "engine create", error) ||
        !dnnl_check(dnnl_stream_create(&st->stream, st->engine, dnnl_stream_default_flags),
                    "stream create", error) ||
        !prepare_weights(st, error)) {
        cpu_destroy(st);
        return NULL;
    }
    return st;
}

static gboolean cpu_detect(void *p, vd_context *ctx, const vd_image *images, int n_images,
                           vd_result *results, GError **error)
{
    cpu_state *st = p;
    /* OpenMP's thread count is per calling thread: set it for this one. */
    omp_set_num_threads(st->n_threads);
    for (int i = 0; i < n_images; i++)
        if (!detect_one(st, ctx, &images[i], &results[i], i == 0 && vd_context_observing(ctx),
                        error))
            return FALSE;
    return TRUE;
}

const vd_backend vd_cpu_backend = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .detect = cpu_detect,
};
