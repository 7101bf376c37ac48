/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's plans (vd_cpu_private.h): the activation tensors, the
 * convolutions (oneDNN's or the engine's Winograd, through vd_cpu_layers.c), the
 * list of steps a plan runs, the network input and int8's quantisation steps, and
 * the calibration's range records; what every kind of detector and every backbone
 * builds its plan from. */
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

void *try_alloc(size_t n_floats, const char *what, GError **error)
{
    void *p = n_floats == 0 ? g_malloc0(sizeof(float)) : g_try_malloc0(n_floats * sizeof(float));
    if (p == NULL)
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory: %zu floats for %s",
                    n_floats, what);
    return p;
}

/* A zeroed buffer of @bytes aligned for the vector kernels (64 bytes), with 128
 * bytes more that XNNPACK's kernels may read past a tensor's end; free(). */
void *alloc_aligned(size_t bytes, const char *what, GError **error)
{
    void *p = NULL;
    bytes = MAX((bytes + 63) / 64 * 64, 64) + 128;
    if (posix_memalign(&p, 64, bytes) != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory: %zu bytes for %s",
                    bytes, what);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

size_t dt_size(dnnl_data_type_t dt)
{
    return dt == dnnl_bf16 || dt == dnnl_f16 ? 2 : vd_layers_is_int8(dt) ? 1 : 4;
}

dnnl_data_type_t act_dt(const cpu_state *st)
{
    return st->fp16 ? dnnl_f16 : st->bf16 ? dnnl_bf16 : dnnl_f32;
}

/* Bytes of an h x w x c activation (blocked with @cb > 0: channels padded to a
 * multiple of @cb). */
size_t tensor_bytes(int h, int w, int c, dnnl_data_type_t dt, int cb)
{
    int cp = cb > 0 ? (c + cb - 1) / cb * cb : c;
    return (size_t)h * w * cp * dt_size(dt);
}

/* Bytes of an h x w x c activation in the state's blocked layout. */
size_t act_bytes(const cpu_state *st, int h, int w, int c, dnnl_data_type_t dt)
{
    return tensor_bytes(h, w, c, dt, st->cb);
}

size_t tensor_size(const cpu_tensor *t)
{
    return tensor_bytes(t->h, t->w, t->c, t->dt, t->cb);
}

static void tensor_free(gpointer p)
{
    cpu_tensor *t = p;
    vd_layers_memory_free(t->mem);
    g_free(t);
}

/* A tensor of the plan in layout @tag over @data (shared, at least tensor_bytes()
 * large) or over a new buffer (data NULL). */
cpu_tensor *plan_tensor_tag(cpu_state *st, cpu_plan *plan, int h, int w, int c, dnnl_data_type_t dt,
                            dnnl_format_tag_t tag, void *data, GError **error)
{
    dnnl_dims_t dims = {1, c, h, w};
    cpu_tensor *t = g_new0(cpu_tensor, 1);
    t->h = h;
    t->w = w;
    t->c = c;
    t->dt = dt;
    t->tag = tag;
    t->cb = tag == st->block_tag ? st->cb : tag == dnnl_nhwc ? c : 0;
    g_ptr_array_add(plan->tensors, t);
    if (data == NULL) {
        data = alloc_aligned(tensor_size(t), "an activation", error);
        if (data == NULL)
            return NULL;
        g_ptr_array_add(plan->buffers, data);
    }
    t->data = data;
    if (!vd_layers_memory_new(st->engine, 4, dims, dt, tag, t->data, &t->mem, "an activation",
                              error))
        return NULL;
    return t;
}

/* An activation (@act: in the state's layout, act_tag) or NHWC tensor of the plan. */
cpu_tensor *plan_tensor(cpu_state *st, cpu_plan *plan, int h, int w, int c, dnnl_data_type_t dt,
                        gboolean act, void *data, GError **error)
{
    return plan_tensor_tag(st, plan, h, w, c, dt, act ? st->act_tag : dnnl_nhwc, data, error);
}

static gboolean tensor_blocked(const cpu_tensor *t)
{
    return t->tag == dnnl_nChw16c || t->tag == dnnl_nChw8c;
}

/* How a tensor's channels are laid out for the loops that walk them in vectors:
 * channel c of pixel p is at (c / *vb) * *block_stride + p * *pixel_stride + c % *vb
 * elements. Blocked: vectors are the blocks; NHWC: vectors of 16 (or 8, or 1)
 * consecutive channels of a pixel. */
void tensor_strides(const cpu_tensor *t, int *vb, size_t *block_stride, size_t *pixel_stride)
{
    if (tensor_blocked(t)) {
        *vb = t->cb;
        *block_stride = (size_t)t->h * t->w * t->cb;
        *pixel_stride = (size_t)t->cb;
    } else {
        *vb = t->c % 16 == 0 ? 16 : t->c % 8 == 0 ? 8 : 1;
        *block_stride = (size_t)*vb;
        *pixel_stride = (size_t)t->c;
    }
}

void conv_clear(cpu_conv *cv)
{
    vd_wino_unref(cv->wino);
    vd_xnn_op_free(cv->xnn);
    vd_layers_scales_clear(&cv->scales);
    vd_layers_primitive_free(cv->prim);
    vd_layers_memory_free(cv->weights);
    vd_layers_memory_free(cv->bias);
    memset(cv, 0, sizeof(*cv));
}

int conv_out_size(int n, int kernel, int stride, int padding)
{
    return (n + 2 * padding - kernel) / stride + 1;
}

/* Records the scratchpad that primitive @pd (created with the user scratchpad
 * mode) needs. */
void note_scratchpad(cpu_state *st, const_dnnl_primitive_desc_t pd)
{
    st->scratch_needed = MAX(st->scratch_needed, vd_layers_pd_scratchpad(pd));
}

/* Makes the shared scratchpad as large as the primitives created so far need. */
gboolean ensure_scratchpad(cpu_state *st, GError **error)
{
    if (st->wino_ws_needed > st->wino_ws_size) {
        free(st->wino_ws);
        st->wino_ws_size = 0;
        st->wino_ws = alloc_aligned(st->wino_ws_needed, "the Winograd workspace", error);
        if (st->wino_ws == NULL)
            return FALSE;
        st->wino_ws_size = st->wino_ws_needed;
    }
    if (st->scratch_needed <= st->scratch_size)
        return TRUE;
    dnnl_dims_t dims = {(dnnl_dim_t)st->scratch_needed};
    vd_layers_memory_free(st->scratch_mem);
    st->scratch_mem = NULL;
    free(st->scratch);
    st->scratch_size = 0;
    st->scratch = alloc_aligned(st->scratch_needed, "the oneDNN scratchpad", error);
    if (st->scratch == NULL)
        return FALSE;
    if (!vd_layers_memory_new(st->engine, 1, dims, dnnl_u8, dnnl_x, st->scratch, &st->scratch_mem,
                              "the scratchpad", error))
        return FALSE;
    st->scratch_size = st->scratch_needed;
    return TRUE;
}

/* Whether a convolution runs Winograd F(4x4, 3x3): float32 3x3 stride 1 with at
 * least 64 input channels on maps of at least 256 pixels, where both oneDNN's
 * Winograd and ours beat the direct kernels on the shapes of ResNet-18/50-FPN
 * (tools/bench/CPU.md, "Figures behind choices in the code"). The price is the
 * transformed 6x6 kernels: 4x the weight memory of those layers. */
static gboolean use_winograd(const cpu_state *st, int kernel, int stride, int in_c, int groups,
                             vd_activation act, const cpu_tensor *src, const cpu_tensor *dst)
{
    if (!(st->winograd || st->own_winograd) || kernel != 3 || stride != 1 || groups != 1 ||
        act == VD_ACT_HARDSWISH || act == VD_ACT_RELU6 || src->dt != dnnl_f32 ||
        dst->dt != dnnl_f32 || !tensor_blocked(src) || !tensor_blocked(dst))
        return FALSE;
    return in_c >= 64 && dst->h * dst->w >= 256;
}

/* oneDNN's Winograd kernel for more than 64 channels on a large map transforms the
 * whole input and output at once (a 266 MB scratchpad for 256 channels at
 * 200x272); where its scratchpad would exceed this, the convolution runs ours,
 * which works on chunks of tiles, and is as fast there (tools/bench/CPU.md,
 * "Figures behind choices in the code"). */
#define WINOGRAD_SCRATCH_BUDGET ((size_t)16 << 20)

/* Creates the primitive of one convolution src -> dst (dst has the output shape)
 * of @groups groups (1, or in_c == out_c: depthwise), reorders the weights into the
 * layout the primitive prefers (and the source's data type), and fuses the sum
 * with dst's previous contents and/or the activation @act (ReLU or hardswish:
 * oneDNN's eltwise post-ops, hardswish x * relu6(x + 3) / 6 as torch). */
gboolean conv_init(cpu_state *st, cpu_conv *cv, const float *weight, const float *bias, int out_c,
                   int in_c, int kernel, int stride, int padding, int groups, int dilation,
                   cpu_tensor *src, cpu_tensor *dst, gboolean sum, vd_activation act,
                   const cpu_quant *q, GError **error)
{
    vd_conv_desc desc = {
        .n = 1,
        .in_c = in_c,
        .out_c = out_c,
        .groups = groups,
        .in_h = src->h,
        .in_w = src->w,
        .out_h = dst->h,
        .out_w = dst->w,
        .kernel = kernel,
        .stride = stride,
        .padding = padding,
        .dilation = dilation,
        .src_dt = src->dt,
        .dst_dt = dst->dt,
        .src_tag = src->tag,
        .dst_tag = dst->tag,
        .sum = sum,
        .act = act,
    };
    dnnl_primitive_desc_t pd = NULL;
    float *wei_scales = NULL;
    gboolean ok = FALSE;

    if (src->c != in_c || dst->c != out_c) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "convolution %d->%d channels on tensors of %d->%d", in_c, out_c, src->c,
                    dst->c);
        return FALSE;
    }
    if (groups < 1 || in_c % groups != 0 || out_c % groups != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "convolution %d->%d channels in %d groups",
                    in_c, out_c, groups);
        return FALSE;
    }
    /* the direct convolution's count, whichever algorithm runs it */
    cv->macs = (double)dst->h * dst->w * out_c * (in_c / groups) * kernel * kernel;

    /* Winograd where it pays (use_winograd): oneDNN's where it has a kernel for
     * this ISA and its scratchpad fits the budget, else ours where the channels
     * are whole blocks; the direct algorithm otherwise. */
    cv->src_t = src;
    cv->dst_t = dst;
    if (vd_layers_is_int8(src->dt)) {
        /* symmetric per-output-channel weight scales: max |w| / 127 */
        size_t per_oc = (size_t)(in_c / groups) * kernel * kernel;
        wei_scales = g_new(float, out_c);
        for (int oc = 0; oc < out_c; oc++) {
            float m = 0.0f;
            for (size_t i = 0; i < per_oc; i++)
                m = MAX(m, fabsf(weight[oc * per_oc + i]));
            wei_scales[oc] = m > 0.0f ? m / 127.0f : 1.0f;
        }
        desc.wei_scales = wei_scales;
        desc.src_scale = q->src_scale;
        desc.dst_scale = q->dst_scale;
        desc.sum_scale = q->sum_scale;
        desc.sum_dt = q->sum_dt;
    }
    if (st->xnn != NULL) {
        if (src->tag != dnnl_nhwc || dst->tag != dnnl_nhwc) {
            g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                        "convolution %d->%d channels: XNNPACK takes NHWC tensors only", in_c,
                        out_c);
            g_free(wei_scales);
            return FALSE;
        }
        cv->xnn = vd_xnn_conv_new(st->xnn, &desc, weight, bias, "convolution", error);
        g_free(wei_scales);
        return cv->xnn != NULL;
    }
    gboolean winograd = use_winograd(st, kernel, stride, in_c, groups, act, src, dst) &&
                        padding == 1 && dilation <= 1;
    if (winograd && st->winograd) {
        desc.winograd = TRUE;
        if (vd_layers_conv_pd(st->engine, &desc, &pd, "Winograd convolution", NULL) &&
            (strstr(vd_layers_pd_impl(pd), "wino") == NULL ||
             vd_layers_pd_scratchpad(pd) > WINOGRAD_SCRATCH_BUDGET)) {
            /* not one of oneDNN's Winograd kernels, or too large a scratchpad */
            vd_layers_pd_free(pd);
            pd = NULL;
        }
        desc.winograd = pd != NULL;
    }
    if (pd == NULL && winograd && in_c % st->cb == 0 && out_c % st->cb == 0 && src->h == dst->h &&
        src->w == dst->w) {
        GHashTable *shared = st->planning != NULL ? st->planning->wino_weights : NULL;
        cv->wino = shared != NULL ? g_hash_table_lookup(shared, weight) : NULL;
        if (cv->wino != NULL) {
            vd_wino_ref(cv->wino);
        } else {
            cv->wino = vd_wino_new(weight, bias, out_c, in_c, st->cb, st->wino_kind, error);
            if (cv->wino == NULL)
                goto out_free_pd;
            if (shared != NULL)
                g_hash_table_insert(shared, (gpointer)weight, vd_wino_ref(cv->wino));
        }
        cv->sum = sum;
        cv->relu = act == VD_ACT_RELU;
        st->wino_ws_needed =
            MAX(st->wino_ws_needed, vd_wino_workspace_size(cv->wino, st->n_threads));
        ok = TRUE;
        goto out_free_pd;
    }
    if (pd == NULL && !vd_layers_conv_pd(st->engine, &desc, &pd, "convolution", error))
        goto out_free_pd;
    /* weights: plain OIHW float32 from the model -> the primitive's layout and type,
     * once per plan */
    if (!vd_layers_primitive_new(pd, &cv->prim, "convolution", error) ||
        !vd_layers_conv_weights(st->engine, st->stream, pd, &desc, weight, bias, &cv->weights,
                                &cv->bias, "convolution weights", error) ||
        !vd_layers_conv_scales(st->engine, &desc, &cv->scales, "convolution scales", error))
        goto out_free_pd;
    note_scratchpad(st, pd);
    cv->src = src->mem;
    cv->dst = dst->mem;
    ok = TRUE;

out_free_pd:
    g_free(wei_scales);
    vd_layers_pd_free(pd);
    return ok;
}

gboolean conv_init_model_q(cpu_state *st, cpu_conv *cv, const vd_conv *w, cpu_tensor *src,
                           cpu_tensor *dst, gboolean sum, vd_activation act, const cpu_quant *q,
                           GError **error)
{
    return conv_init(st, cv, w->weight, w->bias, w->out_channels, w->in_channels, w->kernel,
                     w->stride, w->padding, MAX(w->groups, 1), w->dilation, src, dst, sum, act, q,
                     error);
}

gboolean conv_init_model(cpu_state *st, cpu_conv *cv, const vd_conv *w, cpu_tensor *src,
                         cpu_tensor *dst, gboolean sum, vd_activation act, GError **error)
{
    return conv_init_model_q(st, cv, w, src, dst, sum, act, NULL, error);
}

/* Executes a convolution or matmul primitive with the state's shared scratchpad
 * (and an int8 one's @scales, NULL for others). */
gboolean layer_run(cpu_state *st, dnnl_primitive_t prim, dnnl_memory_t src, dnnl_memory_t weights,
                   dnnl_memory_t bias, dnnl_memory_t dst, const vd_layer_scales *scales,
                   const char *what, GError **error)
{
    dnnl_exec_arg_t args[8] = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_BIAS, bias},
        {DNNL_ARG_DST, dst},
    };
    int n = 4;
    if (st->scratch_mem != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, st->scratch_mem};
    if (scales != NULL)
        n += vd_layers_scale_args(scales, args + n);
    return vd_layers_execute(prim, st->stream, n, args, what, error);
}

gboolean conv_run(cpu_state *st, const cpu_conv *cv, GError **error)
{
    if (cv->wino != NULL)
        return vd_wino_run(cv->wino, cv->src_t->data, cv->dst_t->data, cv->dst_t->h, cv->dst_t->w,
                           cv->sum, cv->relu, st->wino_ws, st->n_threads, error);
    if (cv->xnn != NULL)
        return vd_xnn_run(st->xnn, cv->xnn, 0, cv->src_t->data, cv->dst_t->data, error);
    return layer_run(st, cv->prim, cv->src, cv->weights, cv->bias, cv->dst, &cv->scales,
                     "convolution", error);
}

/* ------------------------------------------------------------------------ */
/* Plans: everything that depends on the padded input size                   */

void plan_free(cpu_plan *plan)
{
    if (plan == NULL)
        return;
    conv_clear(&plan->stem);
    vd_layers_primitive_free(plan->input_convert);
    if (plan->backbone != NULL)
        plan->backbone->clear(plan);
    for (int i = 0; i < 4; i++) {
        conv_clear(&plan->fpn_inner[i]);
        conv_clear(&plan->fpn_layer[i]);
    }
    conv_clear(&plan->fpn_p6);
    conv_clear(&plan->fpn_p7);
    if (plan->detector != NULL && plan->detector->plan_clear != NULL)
        plan->detector->plan_clear(plan);
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        vd_layers_primitive_free(plan->fpn_quantize[l]);
        vd_xnn_op_free(plan->fpn_quantize_xnn[l]);
        vd_layers_scales_clear(&plan->fpn_quantize_scales[l]);
        conv_clear(&plan->rpn_conv[l]);
        for (int j = 0; j < VD_MAX_RPN_CONVS - 1; j++)
            conv_clear(&plan->rpn_conv_more[l][j]);
        conv_clear(&plan->rpn_head[l]);
    }
    if (plan->tensors != NULL)
        g_ptr_array_unref(plan->tensors);
    if (plan->buffers != NULL)
        g_ptr_array_unref(plan->buffers);
    if (plan->wino_weights != NULL)
        g_hash_table_unref(plan->wino_weights);
    if (plan->steps != NULL)
        g_array_unref(plan->steps);
    if (plan->names != NULL)
        g_string_chunk_free(plan->names);
    g_free(plan->anchors);
    g_free(plan);
}

/* The run's steps (cpu_step) */

cpu_step *plan_step(cpu_plan *plan, cpu_step_fn run, const char *what)
{
    cpu_step step = {.run = run, .what = what};
    g_array_append_val(plan->steps, step);
    return &g_array_index(plan->steps, cpu_step, plan->steps->len - 1);
}

static gboolean step_conv(cpu_state *st, const cpu_step *step, GError **error)
{
    return conv_run(st, step->conv, error);
}

cpu_step *plan_step_conv(cpu_plan *plan, const cpu_conv *cv)
{
    cpu_step *step = plan_step(plan, step_conv, "convolution");
    step->conv = cv;
    return step;
}

static gboolean step_primitive(cpu_state *st, const cpu_step *step, GError **error)
{
    dnnl_exec_arg_t args[5] = {step->args[0], step->args[1]}; /* and up to 3 scales */
    int n = step->n_args;
    if (step->scales != NULL)
        n += vd_layers_scale_args(step->scales, args + n);
    return vd_layers_execute(step->prim, st->stream, n, args, step->what, error);
}

cpu_step *plan_step_primitive(cpu_plan *plan, dnnl_primitive_t prim, int src_arg,
                              const cpu_tensor *src, int dst_arg, const cpu_tensor *dst,
                              const vd_layer_scales *scales, const char *what)
{
    cpu_step *step = plan_step(plan, step_primitive, what);
    step->prim = prim;
    step->args[0] = (dnnl_exec_arg_t){src_arg, src->mem};
    step->args[1] = (dnnl_exec_arg_t){dst_arg, dst->mem};
    step->n_args = 2;
    step->scales = scales;
    return step;
}

static gboolean step_xnn(cpu_state *st, const cpu_step *step, GError **error)
{
    return vd_xnn_run(st->xnn, (vd_xnn_op *)step->data, 0, step->src->data, step->dst->data, error);
}

cpu_step *plan_step_xnn(cpu_plan *plan, vd_xnn_op *op, const cpu_tensor *src, cpu_tensor *dst,
                        const char *what)
{
    cpu_step *step = plan_step(plan, step_xnn, what);
    step->data = op;
    step->src = src;
    step->dst = dst;
    return step;
}

gboolean step_wait(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)step;
    return vd_layers_wait(st->stream, error);
}

void step_record(const cpu_state *st, cpu_plan *plan, cpu_step *step, const cpu_tensor *t,
                 const char *format, ...)
{
    if (st->ranges_seen == NULL) /* not calibrating: no name to build */
        return;
    va_list ap;
    va_start(ap, format);
    char *name = g_strdup_vprintf(format, ap);
    va_end(ap);
    step->record = g_string_chunk_insert(plan->names, name);
    step->record_t = t;
    g_free(name);
}

/* relu(@src) into @dst, both of one shape, layout and type (LastLevelP6P7's
 * input of P7); NaN stays NaN as in torch. */
gboolean step_relu(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    size_t bytes = tensor_size(step->src);
    if (step->src->dt == dnnl_f32) {
        const float *s = step->src->data;
        float *d = step->dst->data;
#pragma omp parallel for
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            d[i] = s[i] < 0.0f ? 0.0f : s[i];
    } else {
        /* bfloat16 and fp16: a negative number has the sign bit and is not NaN */
        const uint16_t *s = step->src->data;
        uint16_t *d = step->dst->data;
        uint16_t inf = step->src->dt == dnnl_bf16 ? 0x7f80u : 0x7c00u;
#pragma omp parallel for
        for (size_t i = 0; i < bytes / sizeof(uint16_t); i++)
            d[i] = (s[i] & 0x8000u) && (s[i] & 0x7fffu) <= inf ? 0u : s[i];
    }
    return TRUE;
}

/* The multiply-adds of one run of steps [@from, @to) (vd_stage_stats.gflop). */
double steps_macs(const cpu_plan *plan, guint from, guint to)
{
    double macs = 0.0;
    for (guint i = from; i < to; i++) {
        const cpu_step *step = &g_array_index(plan->steps, cpu_step, i);
        macs += step->conv != NULL ? step->conv->macs : step->macs;
    }
    return macs;
}

/* Steps [@from, @to) of the plan, each followed by its calibration record. */
gboolean run_steps(cpu_state *st, const cpu_plan *plan, guint from, guint to, GError **error)
{
    for (guint i = from; i < to; i++) {
        const cpu_step *step = &g_array_index(plan->steps, cpu_step, i);
        if (!step->run(st, step, error) ||
            (step->record != NULL && !range_record(st, step->record, step->record_t, error)))
            return FALSE;
    }
    return TRUE;
}

/* The stem's input layout: NCHW before blocked activations (the direct kernels'
 * 3-channel input), NHWC before NHWC ones (the brgemm kernels take no other). */
static dnnl_format_tag_t stem_tag(const cpu_state *st)
{
    return st->act_tag == dnnl_nhwc ? dnnl_nhwc : dnnl_nchw;
}

/* The network input rounded to fp16 (NHWC to NHWC, XNNPACK's fp16 layers): a
 * plain loop, where oneDNN's f16 reorder would be a reference one on aarch64. */
static gboolean step_input_f16(cpu_state *st, const cpu_step *step, GError **error)
{
    (void)st;
    (void)error;
    const float *src = step->src->data;
    uint16_t *dst = step->dst->data;
    ptrdiff_t n = (ptrdiff_t)step->src->h * step->src->w * step->src->c;
#pragma omp parallel for
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = vd_f32_to_f16(src[i]);
    return TRUE;
}

gboolean plan_input(cpu_state *st, cpu_plan *plan, char *temps, size_t in_bytes,
                    dnnl_data_type_t dt, GError **error)
{
    plan->input =
        plan_tensor(st, plan, plan->padded_h, plan->padded_w, 3, dnnl_f32, FALSE, temps, error);
    plan->stem_in = plan->input == NULL
                        ? NULL
                        : plan_tensor_tag(st, plan, plan->padded_h, plan->padded_w, 3, dt,
                                          stem_tag(st), temps + in_bytes, error);
    if (plan->stem_in != NULL && dt == dnnl_f16) {
        if (plan->stem_in->tag != dnnl_nhwc) {
            g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "fp16 input in a layout not NHWC");
            return FALSE;
        }
        cpu_step *step = plan_step(plan, step_input_f16, "input conversion");
        step->src = plan->input;
        step->dst = plan->stem_in;
        return TRUE;
    }
    if (plan->stem_in == NULL ||
        !vd_layers_reorder_new(st->engine, vd_layers_memory_md(plan->input->mem),
                               vd_layers_memory_md(plan->stem_in->mem), &plan->input_convert,
                               "input conversion", error))
        return FALSE;
    plan_step_primitive(plan, plan->input_convert, DNNL_ARG_FROM, plan->input, DNNL_ARG_TO,
                        plan->stem_in, NULL, "input conversion");
    return TRUE;
}

size_t round64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* The int8 scale of activation @name from the model's calibrated range: max |x|
 * over 255 for an unsigned tensor (after a ReLU), over 127 for a signed one. */
gboolean range_scale(const cpu_state *st, const char *name, gboolean is_unsigned, float *scale,
                     GError **error)
{
    const float *range = g_hash_table_lookup(st->model->int8_ranges, name);
    if (range == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the model's int8 calibration has no range for %s (calibrate it again with "
                    "vd-detect --calibrate)",
                    name);
        return FALSE;
    }
    *scale = (*range > 0.0f ? *range : 1.0f) / (is_unsigned ? 255.0f : 127.0f);
    return TRUE;
}

gboolean plan_quantize(cpu_state *st, cpu_plan *plan, const cpu_tensor *from, cpu_tensor *to,
                       float scale, dnnl_primitive_t *prim, vd_layer_scales *scales, vd_xnn_op **op,
                       GError **error)
{
    if (st->xnn != NULL) {
        *op = vd_xnn_quantize_new(st->xnn, (size_t)from->h * from->w * from->c, scale, to->dt,
                                  "int8 quantisation", error);
        if (*op == NULL)
            return FALSE;
        plan_step_xnn(plan, *op, from, to, "int8 quantisation");
        return TRUE;
    }
    if (!vd_layers_quantize_new(st->engine, vd_layers_memory_md(from->mem),
                                vd_layers_memory_md(to->mem), scale, prim, scales,
                                "int8 quantisation", error))
        return FALSE;
    plan_step_primitive(plan, *prim, DNNL_ARG_FROM, from, DNNL_ARG_TO, to, scales,
                        "int8 quantisation");
    return TRUE;
}

cpu_plan *plan_new(cpu_state *st, int padded_h, int padded_w, GError **error)
{
    cpu_plan *plan = g_new0(cpu_plan, 1);
    plan->padded_h = padded_h;
    plan->padded_w = padded_w;
    plan->tensors = g_ptr_array_new_with_free_func(tensor_free);
    plan->buffers = g_ptr_array_new_with_free_func(free);
    plan->wino_weights = g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)vd_wino_unref);
    plan->pooler.resized_h = -1;
    plan->mask_pooler.resized_h = -1;
    plan->keypoint_pooler.resized_h = -1;

    plan->steps = g_array_new(FALSE, FALSE, sizeof(cpu_step));
    plan->names = g_string_chunk_new(256);

    plan->backbone = st->backbone;
    plan->detector = st->detector;

    st->planning = plan;
    gboolean ok = st->backbone->plan(st, plan, error);
    if (ok) {
        plan_step(plan, step_wait, "backbone");
        plan->steps_backbone = plan->steps->len;
        if (st->model->config.detector == VD_DETECTOR_SSD) {
            /* no FPN: the feature maps are the backbone's; the detector makes its
             * default boxes */
            plan->steps_fpn = plan->steps->len;
            ok = st->detector->plan(st, plan, error);
        } else {
            ok = plan_fpn(st, plan, error) && plan_anchors(st, plan, error) &&
                 st->detector->plan(st, plan, error);
        }
    }
    st->planning = NULL;
    if (!ok) {
        plan_free(plan);
        return NULL;
    }
    return plan;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* Calibration: the largest |value| of float32 tensor @t, kept under @name when
 * larger than what earlier frames gave (NaN is ignored). */
gboolean range_record(cpu_state *st, const char *name, const cpu_tensor *t, GError **error)
{
    if (st->ranges_seen == NULL || t->dt != dnnl_f32)
        return TRUE;
    if (!vd_layers_wait(st->stream, error))
        return FALSE;
    const float *v = t->data;
    size_t n = tensor_size(t) / sizeof(float);
    float m = 0.0f;
#pragma omp parallel for reduction(max : m)
    for (size_t i = 0; i < n; i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    float *seen = g_hash_table_lookup(st->ranges_seen, name);
    if (seen == NULL) {
        seen = g_new0(float, 1);
        g_hash_table_insert(st->ranges_seen, g_strdup(name), seen);
    }
    *seen = MAX(*seen, m);
    return TRUE;
}

void observe_tensor_channels(vd_context *ctx, const char *name, const cpu_tensor *t, int n_c)
{
    if (!vd_context_observing(ctx))
        return;
    n_c = n_c > 0 ? MIN(n_c, t->c) : t->c;
    size_t hw = (size_t)t->h * t->w;
    float *nchw = g_try_malloc(MAX(hw * n_c, 1) * sizeof(float));
    if (nchw == NULL)
        return;
    for (int c = 0; c < n_c; c++)
        for (size_t p = 0; p < hw; p++) {
            size_t at = t->cb > 0             ? ((size_t)(c / t->cb) * hw + p) * t->cb + c % t->cb
                        : t->tag == dnnl_nchw ? (size_t)c * hw + p
                                              : p * t->c + c;
            nchw[(size_t)c * hw + p] = load_f32(t->data, t->dt, at);
        }
    int64_t shape[4] = {1, n_c, t->h, t->w};
    vd_context_observe(ctx, name, nchw, shape, 4);
    g_free(nchw);
}

/* Passes a tensor to the observer as float32 NCHW. */
void observe_tensor(vd_context *ctx, const char *name, const cpu_tensor *t)
{
    observe_tensor_channels(ctx, name, t, 0);
}

int count_nonfinite(const float *values, size_t n)
{
    int count = 0;
    for (size_t i = 0; i < n; i++)
        count += !isfinite(values[i]);
    return count;
}
