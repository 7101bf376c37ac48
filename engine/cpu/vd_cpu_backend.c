/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend: torchvision's Faster R-CNN inference (docs/torchvision-inference.md,
 * "spec" below) with
 * oneDNN convolutions and matrix products, and the plain-C small ops of
 * vd_cpu_ops.c.
 *
 * Every oneDNN call goes through vd_cpu_layers.c (oneDNN 2.x and 3.x). Each
 * backbone has its own file (vd_cpu_resnet.c, vd_cpu_mnv3.c) that plans it,
 * registered in cpu_backbones[] by the model's backbone type; each kind of
 * detector a cpu_detector, registered in cpu_detectors[]: the two-stage one (the
 * RPN, the RoI heads) is in this file, the one-stage one (RetinaNet, FCOS:
 * engine/RETINANET.md) in vd_cpu_onestage.c. This file plans the FPN and the
 * anchors that every kind shares, runs the whole and holds what they share
 * (vd_cpu_private.h). A plan (one per padded input size) holds its run
 * from the input conversion to the heads' convolutions (the RPN's, a one-stage
 * head's) as a list of steps
 * (cpu_step: a convolution, a oneDNN primitive with its arguments, a
 * hand-written op such as the FPN's upsampling, the stream's wait), each with
 * its calibration record, which detect_one() runs in order between the
 * stages' marks and the observer's points; the RoI heads run per frame on the
 * proposals.
 *
 * Layout: activations are in oneDNN's blocked layout from the first convolution to
 * RoIAlign, so that no layer reorders its input; only the network input is NHWC
 * (pre-processing writes it). The channel block follows the ISA oneDNN runs
 * (dnnl_get_effective_cpu_isa(), which ONEDNN_MAX_CPU_ISA caps): nChw16c with
 * AVX-512, nChw8c with AVX2, AVX and SSE4.1, the layouts each ISA's kernels take
 * (any other sends oneDNN to its reference loops, hundreds of times slower; the
 * engine suite's kernels test checks every primitive's implementation at several
 * ISAs). Everything that reads the blocked tensors (upsampling, the pool level,
 * the RPN decode, RoIAlign) takes the block from the tensor.
 * Everything that depends on the padded input size (convolution primitives,
 * weights reordered into the layout each primitive wants, activation buffers,
 * anchors) lives in a "plan" built on the first frame of a size and reused until
 * the size changes. The box head's matrix products (one per linear, over all RoIs)
 * are oneDNN matmul primitives with weights packed once per context.
 *
 * Convolution algorithm: float32 3x3 stride-1 convolutions of 64 channels or more
 * (use_winograd) run Winograd: oneDNN 2.x's kernels on AVX-512 (jit_wino_4x3,
 * F(4x4, 3x3), and jit_fp32_wino_2x3, F(2x2, 3x3), which it picks for 64 channels)
 * where their scratchpad stays within 16 MB, otherwise (below AVX-512, where
 * oneDNN has none, and with oneDNN 2.x on AVX-512 for the largest maps) ours,
 * vd_cpu_winograd.c, F(4x4, 3x3): its transforms on the blocked layouts around
 * oneDNN's sgemm; on AVX-512 with oneDNN 3.x, which has no Winograd kernel, ours
 * as F(2x2, 3x3) (see cpu_create).
 * Accuracy against a double reference on the networks' channel counts
 * (tests/engine/test_winograd.c): ours F(4x4, 3x3) at most 1.9e-6 of max |y|, as
 * oneDNN 2.x's; ours F(2x2, 3x3) 2.9e-7, as oneDNN's AVX-512 direct kernels.
 * VD_CPU_WINOGRAD=0 in the environment turns Winograd off,
 * =own makes every Winograd convolution ours (for measurements).
 *
 * Precision:
 * - fp32: everything in float32.
 * - bf16 (VD_PRECISION_BF16, and AUTO where the processor has it natively): every convolution
 * (backbone, FPN, RPN) reads and writes bfloat16 activations with bfloat16 weights and float32
 *   accumulation and bias (oneDNN's avx512_core_bf16 kernels: only where the
 *   processor has AVX512-BF16 or AMX; elsewhere oneDNN would emulate them, many
 *   times slower than float32, so context creation refuses bf16 there with
 *   VD_ERROR_UNSUPPORTED, and on every aarch64 CPU, where Debian's oneDNN has
 *   reference loops alone for bf16 even with BF16: refuse_bf16_aarch64); the RPN
 *   head writes float32; RoIAlign reads the
 *   bfloat16 P levels, interpolates in float32 and rounds its output to bfloat16;
 *   the box head's linears run in bfloat16 with float32 accumulation, the
 *   predictor writes float32; all small ops and post-processing are float32. This
 *   follows torch's autocast (convolutions and linears in the low precision,
 *   roi_align in float32 on the low-precision features). bf16 runs no Winograd:
 *   float32 Winograd on the large FPN/RPN maps gains too little there for its
 *   266 MB scratchpad at 800x1088 (tools/bench/CPU.md, "Figures behind choices").
 * - int8 (VD_PRECISION_INT8, on CPUs with VNNI or, on XNNPACK's layers, the dot
 *   product, for ResNet backbones of a calibrated
 *   model): post-training static quantisation. Weights s8 with one symmetric scale
 *   per output channel (max |w| / 127, computed at planning from the folded
 *   weights), activations one scale per tensor from the model's calibrated ranges
 *   (vd_calibration.c; max |x| / 255 after a ReLU, / 127 signed). The stem runs in
 *   float (three input channels gain nothing from VNNI, and quantising the
 *   normalised image would be coarser than its 8 bits); its max-pool's output is
 *   quantised to u8 and every block of the body runs in int8 with bias, ReLU and
 *   the residual sum fused (the shortcut's downsample writes s8 into the block's
 *   output, which the last convolution adds onto); the FPN's lateral convolutions
 *   read the u8 stage outputs and write the top-down sums in s8, its 3x3
 *   convolutions write real P levels (RoIAlign reads them), which are quantised
 *   again for the RPN's 3x3 convolution. Everything else (RoIAlign, the RPN head,
 *   v2's further RPN convolutions, the box and mask heads, the small ops) runs in
 *   bf16 where the processor has it natively, else fp32: these layers decide the
 *   scores and box coordinates directly, and cost a small share of the frame.
 *   Activations are NHWC (the VNNI and AMX int8 kernels' layout). Where the layers
 *   run XNNPACK (aarch64 with the dot product), the same plan runs its per-channel
 *   int8 operators (vd_cpu_xnnpack.h: the zero points, the sums, the real outputs),
 *   the rest in float32.
 * - fp16 (VD_PRECISION_FP16, never AUTO): only where XNNPACK runs the layers
 *   (vd_cpu_xnnpack.h) and has fp16 kernels for the processor (aarch64 with the
 *   FP16 arithmetic; x86 with AVX2/F16C, where the tests force XNNPACK), refused
 *   naming the cause elsewhere (refuse_fp16). As bf16: every convolution
 *   (backbone, FPN, RPN, v2's conv box head), the max-pool and the box head's
 *   linears are XNNPACK's _f16 operators with the float32 weights rounded as
 *   XNNPACK packs them, reading and writing fp16 activations (dnnl_f16); the RPN
 *   head and the predictor write float32 (widened after the layer, in the pass that
 *   also adds residuals and applies hardswish on widened values); RoIAlign reads
 *   the fp16 levels, interpolates in float32 and rounds its output to fp16; the
 *   mask branch, all small ops and post-processing are float32. No oneDNN f16
 *   reorder runs (reference loops on aarch64): the input's conversion and the RoI
 *   stacks' transposes are loops (vd_cpu_half.h).
 *
 * Memory: buffers whose lifetimes do not overlap are shared (see cpu_plan), one
 * oneDNN scratchpad serves all primitives. */
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

static size_t dt_size(dnnl_data_type_t dt)
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
static void note_scratchpad(cpu_state *st, const_dnnl_primitive_desc_t pd)
{
    st->scratch_needed = MAX(st->scratch_needed, vd_layers_pd_scratchpad(pd));
}

/* Makes the shared scratchpad as large as the primitives created so far need. */
static gboolean ensure_scratchpad(cpu_state *st, GError **error)
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
static gboolean conv_init(cpu_state *st, cpu_conv *cv, const float *weight, const float *bias,
                          int out_c, int in_c, int kernel, int stride, int padding, int groups,
                          int dilation, cpu_tensor *src, cpu_tensor *dst, gboolean sum,
                          vd_activation act, const cpu_quant *q, GError **error)
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
        if (dilation > 1 || act == VD_ACT_RELU6) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "convolution %d->%d channels: a dilated convolution or ReLU6 does not run "
                        "on XNNPACK's layers (SSD, SSDlite)",
                        in_c, out_c);
            g_free(wei_scales);
            return FALSE;
        }
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
            cv->wino = vd_wino_new(weight, bias, out_c, in_c, st->cb, st->wino_tile, error);
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
static gboolean layer_run(cpu_state *st, dnnl_primitive_t prim, dnnl_memory_t src,
                          dnnl_memory_t weights, dnnl_memory_t bias, dnnl_memory_t dst,
                          const vd_layer_scales *scales, const char *what, GError **error)
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

static void plan_free(cpu_plan *plan)
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

/* relu(@src) into @dst, both of one shape, layout and type (LastLevelP6P7's
 * input of P7); NaN stays NaN as in torch. */
static gboolean step_relu(cpu_state *st, const cpu_step *step, GError **error)
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
static double steps_macs(const cpu_plan *plan, guint from, guint to)
{
    double macs = 0.0;
    for (guint i = from; i < to; i++) {
        const cpu_step *step = &g_array_index(plan->steps, cpu_step, i);
        macs += step->conv != NULL ? step->conv->macs : step->macs;
    }
    return macs;
}

/* Steps [@from, @to) of the plan, each followed by its calibration record. */
static gboolean run_steps(cpu_state *st, const cpu_plan *plan, guint from, guint to, GError **error)
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

/* LastLevelP6P7 (one-stage detectors): P6 = conv3x3/2 of P5 or C5, P7 =
 * conv3x3/2 of relu(P6), in tensors of their own (float layers only: int8 covers
 * the two-stage detectors). */
static gboolean plan_p6p7(cpu_state *st, cpu_plan *plan, GError **error)
{
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
    plan_step_conv(plan, &plan->fpn_p6);
    plan_step(plan, step_wait, "FPN P6");
    cpu_step *relu = plan_step(plan, step_relu, "FPN P6's ReLU");
    relu->src = p6;
    relu->dst = plan->p6_relu;
    plan_step_conv(plan, &plan->fpn_p7);
    return TRUE;
}

/* The FPN in the activation type, every kind of detector's: the top-down sums in
 * the temps, the P levels, the pool level or P6 and P7. int8: the lateral
 * convolutions read the quantised C_i and write the top-down sums in s8 (the
 * upsampling copies them as they are), the 3x3 output convolutions read those and
 * write real P levels (RoIAlign's input). */
static gboolean plan_fpn(cpu_state *st, cpu_plan *plan, GError **error)
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

/* The anchors of every level, once per size (spec §3), every kind's: torchvision's
 * AnchorGenerator, A per location on each level. */
static gboolean plan_anchors(cpu_state *st, cpu_plan *plan, GError **error)
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

static cpu_plan *plan_new(cpu_state *st, int padded_h, int padded_w, GError **error)
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
static void observe_tensor(vd_context *ctx, const char *name, const cpu_tensor *t)
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

/* MultiScaleRoIAlign's scales (spec §5.2), from the feature heights and the
 * resized image height; torchvision caches them at its first forward, and so do
 * we (per plan and resized height). */
static void pooler_scales(cpu_state *st, cpu_plan *plan, int resized_h)
{
    const vd_config *cfg = &st->model->config;
    int heights[VD_MAX_FPN_LEVELS];
    for (int l = 0; l < cfg->n_roi_levels; l++)
        heights[l] = plan->fpn_out[l]->h;
    vd_pooler_levels_update(&plan->pooler, heights, cfg->n_roi_levels, resized_h);
}

/* acc[i] += ((w1*v1[i] + w2*v2[i]) + w3*v3[i]) + w4*v4[i] for every channel of one
 * bilinear sample @s of a map (@n_cb vectors of @CB channels, @bstride elements
 * apart, pixels @pstride apart: tensor_strides), float32, bfloat16 or fp16 (@DT: widened
 * to float32 first, exactly): the four-term sum first, then added, as torchvision's CPU
 * kernel (and vd_roi_align_nhwc) does. Inlined with constant @CB and @DT. */
static inline __attribute__((always_inline)) void
roi_accumulate_block(float *restrict acc, const void *restrict f, size_t bstride, size_t pstride,
                     const vd_math_roi_sample *s, int n_cb, const int CB, const dnnl_data_type_t DT)
{
    const float w1 = s->w[0], w2 = s->w[1], w3 = s->w[2], w4 = s->w[3];
#define ROI_AT(k, i) load_f32(f, DT, at + (size_t)s->pos[k] * pstride + (i))
    for (int cb = 0; cb < n_cb; cb++) {
        size_t at = (size_t)cb * bstride;
        float *restrict a = acc + cb * CB;
#pragma omp simd
        for (int i = 0; i < CB; i++)
            a[i] +=
                ((w1 * ROI_AT(0, i) + w2 * ROI_AT(1, i)) + w3 * ROI_AT(2, i)) + w4 * ROI_AT(3, i);
    }
#undef ROI_AT
}

/* One sample into the accumulators, for either vector width (16 or 8: the blocks,
 * or NHWC's channels in vectors; each with its loop unrolled at compile time). */
VD_CPU_HOT static void roi_accumulate(float *restrict acc, const void *features,
                                      dnnl_data_type_t dt, size_t bstride, size_t pstride,
                                      const vd_math_roi_sample *s, int n_cb, int cb)
{
    if (dt == dnnl_bf16 && cb == 16)
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 16, dnnl_bf16);
    else if (dt == dnnl_bf16)
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 8, dnnl_bf16);
    else if (dt == dnnl_f16 && cb == 16)
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 16, dnnl_f16);
    else if (dt == dnnl_f16)
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 8, dnnl_f16);
    else if (cb == 16)
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 16, dnnl_f32);
    else
        roi_accumulate_block(acc, features, bstride, pstride, s, n_cb, 8, dnnl_f32);
}

/* roi_align (aligned=False, spec §5.5) over one feature map, blocked or NHWC with
 * a multiple of 8 channels (float32, or bfloat16 or fp16 read as float32 as torch's
 * autocast runs roi_align in float32), the
 * arithmetic of vd_roi_align_nhwc: RoI r goes to output row roi_index[r] in torch's
 * flatten order [channels][pooled * pooled] (that of the model's fc6 weights, which
 * float32 then uses as they are), float32 or rounded to bfloat16 or fp16 (@out_dt). The
 * bins of one RoI are accumulated channel-innermost and transposed once. */
static void roi_align_features(const cpu_tensor *f, const float *rois, const int *roi_index,
                               int n_rois, float spatial_scale, int pooled, int sampling_ratio,
                               void *out, dnnl_data_type_t out_dt, size_t out_roi_stride)
{
    int CB;
    size_t bstride, pstride;
    tensor_strides(f, &CB, &bstride, &pstride);
    int C = f->c, n_cb = (C + CB - 1) / CB;
#pragma omp parallel
    {
        int n_bins = pooled * pooled;
        float *bins = g_malloc((size_t)n_bins * n_cb * CB * sizeof(float));
#pragma omp for schedule(dynamic, 8)
        for (int r = 0; r < n_rois; r++) {
            size_t row = (size_t)(roi_index ? roi_index[r] : r) * out_roi_stride;
            vd_math_roi_geometry g = vd_math_roi_geometry_of(rois + 4 * (size_t)r, spatial_scale,
                                                             pooled, pooled, sampling_ratio);
            for (int ph = 0; ph < pooled; ph++) {
                for (int pw = 0; pw < pooled; pw++) {
                    float *acc = bins + ((size_t)ph * pooled + pw) * n_cb * CB;
                    memset(acc, 0, (size_t)n_cb * CB * sizeof(float));
                    for (int iy = 0; iy < g.grid_h; iy++) {
                        float y = vd_math_roi_sample_coord(g.start_y, ph, g.bin_h, iy, g.grid_h);
                        for (int ix = 0; ix < g.grid_w; ix++) {
                            float x =
                                vd_math_roi_sample_coord(g.start_x, pw, g.bin_w, ix, g.grid_w);
                            vd_math_roi_sample s = vd_math_roi_bilinear(y, x, f->h, f->w);
                            roi_accumulate(acc, f->data, f->dt, bstride, pstride, &s, n_cb, CB);
                        }
                    }
                    /* a division, not a reciprocal product */
                    float count = g.count;
                    for (int c = 0; c < C; c++)
                        acc[c] = acc[c] / count;
                }
            }
            size_t stride = (size_t)n_cb * CB;
            if (out_dt != dnnl_f32) {
                uint16_t *dst = (uint16_t *)out + row;
                for (int c = 0; c < C; c++)
                    for (int b = 0; b < n_bins; b++)
                        store_f32(dst, out_dt, (size_t)c * n_bins + b, bins[b * stride + c]);
            } else {
                float *dst = (float *)out + row;
                for (int c = 0; c < C; c++)
                    for (int b = 0; b < n_bins; b++)
                        dst[(size_t)c * n_bins + b] = bins[b * stride + c];
            }
        }
        g_free(bins);
    }
}

/* ------------------------------------------------------------------------ */
/* Box head: matmul primitives over all RoIs                                  */

static void packed_linear_clear(cpu_packed_linear *pl)
{
    vd_xnn_op_free(pl->xnn);
    vd_layers_memory_free(pl->weights);
    vd_layers_memory_free(pl->bias);
    memset(pl, 0, sizeof(*pl));
}

/* Packs one linear layer (torch's [out][in] float32 weight) once per context into
 * the layout (and type: bfloat16 in bf16 mode) the matmul primitive wants for
 * @rows RoIs. In float32 with @borrow, when oneDNN's matmul takes the weights as
 * they are at the same speed (its brgemm kernels on AVX-512, its sgemm "gemm:jit"
 * below, where a packed copy saves nothing and costs memory: tools/bench/CPU.md,
 * "Figures behind choices in the code"), uses them in place: @weight
 * must then outlive the context (the model's weights do). With XNNPACK
 * (cpu_state.xnn), its linear operator with ReLU fused where @relu, which packs
 * its own copy, from the activation type to it (@relu: fc6, fc7) or to float32
 * (the predictor). */
static gboolean linear_pack(cpu_state *st, cpu_packed_linear *pl, const float *weight,
                            const float *bias, int in, int out, int rows, gboolean borrow,
                            gboolean relu, GError **error)
{
    dnnl_data_type_t dt = act_dt(st);
    dnnl_dims_t wei_dims = {in, out}, bias_dims = {1, out};
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = FALSE;

    pl->in = in;
    pl->out = out;
    if (st->xnn != NULL) {
        pl->xnn = vd_xnn_linear_new(st->xnn, in, out, weight, bias, relu, act_dt(st),
                                    relu ? act_dt(st) : dnnl_f32, "box head linear", error);
        return pl->xnn != NULL;
    }
    /* [out][in] row-major is the {in, out} matrix with tag ba */
    if (!vd_layers_memory_new(st->engine, 2, wei_dims, dnnl_f32, dnnl_ba, (void *)weight, &user,
                              "box head weights", error))
        goto out_free;
    if (borrow && !st->bf16 &&
        vd_layers_matmul_pd(st->engine, rows, in, out, dt, dt, vd_layers_memory_md(user), FALSE,
                            &pd, "box head matmul", NULL)) {
        const char *impl = vd_layers_pd_impl(pd);
        gboolean fast = strstr(impl, "brg") != NULL || g_str_has_prefix(impl, "gemm:");
        vd_layers_pd_free(pd);
        pd = NULL;
        if (fast) {
            pl->weights = user;
            user = NULL;
        }
    }
    if (pl->weights == NULL &&
        (!vd_layers_matmul_pd(st->engine, rows, in, out, dt, dt, NULL, FALSE, &pd,
                              "box head matmul", error) ||
         !vd_layers_pack(st->engine, st->stream, user, vd_layers_pd_md(pd, dnnl_query_weights_md),
                         &pl->weights, "box head weights", error)))
        goto out_free;
    if (!vd_layers_memory_new(st->engine, 2, bias_dims, dnnl_f32, dnnl_ab, DNNL_MEMORY_ALLOCATE,
                              &pl->bias, "box head bias", error))
        goto out_free;
    memcpy(vd_layers_memory_data(pl->bias), bias, sizeof(float) * (size_t)out);
    ok = TRUE;
out_free:
    vd_layers_memory_free(user);
    vd_layers_pd_free(pd);
    return ok;
}

static void linear_clear(cpu_linear *l)
{
    vd_layers_primitive_free(l->prim);
    vd_layers_memory_free(l->src);
    vd_layers_memory_free(l->dst);
    memset(l, 0, sizeof(*l));
}

/* The matmul of one packed layer for @rows rows of @src into @dst. */
static gboolean linear_init(cpu_state *st, cpu_linear *l, const cpu_packed_linear *pl, int rows,
                            void *src, dnnl_data_type_t src_dt, void *dst, dnnl_data_type_t dst_dt,
                            gboolean relu, GError **error)
{
    const char *what = "box head matmul";
    dnnl_primitive_desc_t pd = NULL;
    l->rows = rows;
    l->macs = (double)rows * pl->in * pl->out;
    if (pl->xnn != NULL) {
        /* XNNPACK's operator (float32 or fp16), on memory objects that carry the
         * pointers as oneDNN's do */
        dnnl_dims_t src_dims = {rows, pl->in}, dst_dims = {rows, pl->out};
        l->xnn = pl->xnn;
        return vd_layers_memory_new(st->engine, 2, src_dims, src_dt, dnnl_ab, src, &l->src, what,
                                    error) &&
               vd_layers_memory_new(st->engine, 2, dst_dims, dst_dt, dnnl_ab, dst, &l->dst, what,
                                    error);
    }
    gboolean ok = vd_layers_matmul_pd(st->engine, rows, pl->in, pl->out, src_dt, dst_dt,
                                      vd_layers_memory_md(pl->weights), relu, &pd, what, error) &&
                  vd_layers_primitive_new(pd, &l->prim, what, error) &&
                  vd_layers_memory_like(st->engine, vd_layers_pd_md(pd, dnnl_query_src_md), src,
                                        &l->src, what, error) &&
                  vd_layers_memory_like(st->engine, vd_layers_pd_md(pd, dnnl_query_dst_md), dst,
                                        &l->dst, what, error);
    if (ok)
        note_scratchpad(st, pd);
    l->weights = pl->weights;
    vd_layers_pd_free(pd);
    return ok;
}

static gboolean linear_run(cpu_state *st, const cpu_linear *l, const cpu_packed_linear *pl,
                           GError **error)
{
    if (l->xnn != NULL)
        return vd_xnn_run(st->xnn, l->xnn, l->rows, vd_layers_memory_data(l->src),
                          vd_layers_memory_data(l->dst), error);
    return layer_run(st, l->prim, l->src, l->weights, pl->bias, l->dst, NULL, "box head matmul",
                     error);
}

static void roi_convs_clear(cpu_roi_convs *rc)
{
    for (int j = 0; j < CPU_MAX_ROI_LAYERS; j++) {
        cpu_roi_layer *l = &rc->layers[j];
        vd_layers_primitive_free(l->prim);
        vd_xnn_op_free(l->xnn);
        vd_layers_primitive_free(rc->relayout[j]);
        dnnl_memory_t mems[] = {l->src, l->weights,           l->bias,
                                l->dst, rc->relayout_from[j], rc->relayout_to[j]};
        for (int k = 0; k < 6; k++)
            vd_layers_memory_free(mems[k]);
    }
    vd_layers_primitive_free(rc->to_blocked);
    vd_layers_primitive_free(rc->to_plain);
    dnnl_memory_t mems[] = {rc->plain_in, rc->blocked_in, rc->blocked_out, rc->plain_out};
    for (int k = 0; k < 4; k++)
        vd_layers_memory_free(mems[k]);
    free(rc->buffers[0]);
    free(rc->buffers[1]);
    memset(rc, 0, sizeof(*rc));
}

/* The multiply-adds of a stack (@specs, @n layers) over @rows RoIs of @size x
 * @size: a convolution's output elements x input channels x kernel area, a
 * transposed convolution's input elements x output channels x kernel area (each
 * input pixel meets every tap once). */
static double roi_stack_macs(const cpu_roi_layer_spec *specs, int n, int rows, int size)
{
    double macs = 0.0;
    for (int j = 0; j < n; j++) {
        const vd_conv *w = specs[j].conv;
        int k = w->kernel, s = w->stride, p = w->padding;
        double taps = (double)w->in_channels * w->out_channels * k * k;
        if (specs[j].deconv) {
            macs += (double)rows * size * size * taps;
            size = (size - 1) * s - 2 * p + k;
        } else {
            size = (size + 2 * p - k) / s + 1;
            macs += (double)rows * size * size * taps;
        }
    }
    return macs;
}

/* The primitive of one layer of a stack (@spec) for @rows RoIs of @size x @size
 * in @dt (weights given in float32, packed into the layout the primitive picks;
 * float32 bias): src in @src_md (NULL: the layout oneDNN prefers), dst in the
 * layout it prefers; its output size *@out_size; *@max_bytes grows to the larger
 * of src and dst. */
static gboolean roi_layer_init(cpu_state *st, cpu_roi_layer *l, const cpu_roi_layer_spec *spec,
                               int rows, int size, dnnl_data_type_t dt, vd_layer_md src_md,
                               int *out_size, size_t *max_bytes, const char *what, GError **error)
{
    const vd_conv *w = spec->conv;
    int k = w->kernel, s = w->stride, p = w->padding;
    int osize = spec->deconv ? (size - 1) * s - 2 * p + k : (size + 2 * p - k) / s + 1;
    vd_conv_desc desc = {
        .deconv = spec->deconv,
        .n = rows,
        .in_c = w->in_channels,
        .out_c = w->out_channels,
        .groups = 1,
        .in_h = size,
        .in_w = size,
        .out_h = osize,
        .out_w = osize,
        .kernel = k,
        .stride = s,
        .padding = p,
        .src_dt = dt,
        .dst_dt = dt,
        .src_tag = dnnl_format_tag_any,
        .dst_tag = dnnl_format_tag_any,
        .src_md = src_md,
        .act = spec->relu ? VD_ACT_RELU : VD_ACT_NONE,
    };
    dnnl_primitive_desc_t pd = NULL;
    if (st->xnn != NULL) {
        /* XNNPACK's operator in NHWC (roi_convs_init_xnn) */
        desc.src_tag = desc.dst_tag = dnnl_nhwc;
        desc.src_md = NULL;
        l->xnn = vd_xnn_conv_new(st->xnn, &desc, w->weight, w->bias, what, error);
        if (l->xnn == NULL)
            return FALSE;
        *out_size = osize;
        *max_bytes = MAX(*max_bytes, (size_t)rows * size * size * desc.in_c * dt_size(dt));
        *max_bytes = MAX(*max_bytes, (size_t)rows * osize * osize * desc.out_c * dt_size(dt));
        return TRUE;
    }
    gboolean ok = vd_layers_conv_pd(st->engine, &desc, &pd, what, error);
    if (ok)
        ok = vd_layers_primitive_new(pd, &l->prim, what, error) &&
             vd_layers_conv_weights(st->engine, st->stream, pd, &desc, w->weight, w->bias,
                                    &l->weights, &l->bias, what, error);
    if (ok) {
        note_scratchpad(st, pd);
        *out_size = osize;
        *max_bytes = MAX(*max_bytes, vd_layers_md_size(vd_layers_pd_md(pd, dnnl_query_src_md)));
        *max_bytes = MAX(*max_bytes, vd_layers_md_size(vd_layers_pd_md(pd, dnnl_query_dst_md)));
    }
    vd_layers_pd_free(pd);
    return ok;
}

/* The primitive descriptor of @l (oneDNN's layers). */
static const_dnnl_primitive_desc_t roi_layer_pd(const cpu_roi_layer *l)
{
    return vd_layers_primitive_pd(l->prim);
}

/* With XNNPACK's layers: the operators of a convolution stack as roi_convs_init
 * makes it, all NHWC, its input and output transposed by loops (roi_convs_run). */
static gboolean roi_convs_init_xnn(cpu_state *st, cpu_roi_convs *rc,
                                   const cpu_roi_layer_spec *specs, int n, int rows, int size,
                                   dnnl_data_type_t dt, const char *what, GError **error)
{
    size_t max_bytes = 0;
    int out_size = size;
    for (int j = 0; j < n; j++)
        if (!roi_layer_init(st, &rc->layers[j], &specs[j], rows, out_size, dt, NULL, &out_size,
                            &max_bytes, what, error))
            return FALSE;
    rc->n_layers = n;
    rc->rows = rows;
    rc->in_c = specs[0].conv->in_channels;
    rc->in_size = size;
    rc->out_c = specs[n - 1].conv->out_channels;
    rc->out_size = out_size;
    rc->es = dt_size(dt);
    for (int k = 0; k < 2; k++)
        if (!(rc->buffers[k] = alloc_aligned(max_bytes, what, error)))
            return FALSE;
    return TRUE;
}

/* @rows images of @c x @hw elements of @es bytes, NCHW -> NHWC (@to_nhwc) or back. */
static void transpose_rows(const char *src, char *dst, int rows, int c, size_t hw, size_t es,
                           gboolean to_nhwc)
{
#pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        const char *s = src + (size_t)r * c * hw * es;
        char *d = dst + (size_t)r * c * hw * es;
        for (int ch = 0; ch < c; ch++)
            for (size_t p = 0; p < hw; p++) {
                size_t nchw = ((size_t)ch * hw + p) * es, nhwc = (p * c + ch) * es;
                if (to_nhwc)
                    memcpy(d + nhwc, s + nchw, es);
                else
                    memcpy(d + nchw, s + nhwc, es);
            }
    }
}

/* The primitives of a convolution stack (@specs, @n layers, @n >= 1) for @rows RoIs
 * of @size x @size in @dt: each layer's dst in the layout oneDNN prefers, its src
 * with @follow_layouts the previous layer's dst layout (the first layer's: the one
 * oneDNN prefers), without it the one oneDNN prefers for the layer (a given one can
 * select a reference implementation: the deconvolution's on the convolutions'
 * layout) and a reorder between two layers that disagree; the reorders in from and
 * out to torch's NCHW. @what names the stack in errors. */
static gboolean roi_convs_init(cpu_state *st, cpu_roi_convs *rc, const cpu_roi_layer_spec *specs,
                               int n, int rows, int size, dnnl_data_type_t dt,
                               gboolean follow_layouts, const char *what, GError **error)
{
    rc->macs = roi_stack_macs(specs, n, rows, size);
    if (st->xnn != NULL)
        return roi_convs_init_xnn(st, rc, specs, n, rows, size, dt, what, error);
    /* descriptors borrowed from the layers' primitives */
    vd_layer_md prev_md = NULL;
    size_t max_bytes = 0;
    int out_size = size;

    for (int j = 0; j < n; j++) {
        if (!roi_layer_init(st, &rc->layers[j], &specs[j], rows, out_size, dt,
                            follow_layouts ? prev_md : NULL, &out_size, &max_bytes, what, error))
            return FALSE;
        prev_md = vd_layers_pd_md(roi_layer_pd(&rc->layers[j]), dnnl_query_dst_md);
    }
    rc->n_layers = n;
    for (int k = 0; k < 2; k++)
        if (!(rc->buffers[k] = alloc_aligned(max_bytes, what, error)))
            return FALSE;
    /* the data alternates between the two buffers: cur holds the layer's input */
    int cur = 0;
    vd_layer_md first_src_md = NULL;
    for (int j = 0; j < n; j++) {
        cpu_roi_layer *l = &rc->layers[j];
        const_dnnl_primitive_desc_t cpd = roi_layer_pd(l);
        vd_layer_md src_md = vd_layers_pd_md(cpd, dnnl_query_src_md);
        if (j == 0) {
            first_src_md = src_md;
        } else if (!vd_layers_md_equal(prev_md, src_md)) {
            if (!vd_layers_reorder_new(st->engine, prev_md, src_md, &rc->relayout[j], what,
                                       error) ||
                !vd_layers_memory_like(st->engine, prev_md, rc->buffers[cur], &rc->relayout_from[j],
                                       what, error) ||
                !vd_layers_memory_like(st->engine, src_md, rc->buffers[1 - cur],
                                       &rc->relayout_to[j], what, error))
                return FALSE;
            cur = 1 - cur;
        }
        prev_md = vd_layers_pd_md(cpd, dnnl_query_dst_md);
        if (!vd_layers_memory_like(st->engine, src_md, rc->buffers[cur], &l->src, what, error) ||
            !vd_layers_memory_like(st->engine, prev_md, rc->buffers[1 - cur], &l->dst, what, error))
            return FALSE;
        cur = 1 - cur;
    }
    dnnl_dims_t in_dims = {rows, specs[0].conv->in_channels, size, size};
    dnnl_dims_t out_dims = {rows, specs[n - 1].conv->out_channels, out_size, out_size};
    return vd_layers_memory_new(st->engine, 4, in_dims, dt, dnnl_nchw, DNNL_MEMORY_NONE,
                                &rc->plain_in, what, error) &&
           vd_layers_reorder_new(st->engine, vd_layers_memory_md(rc->plain_in), first_src_md,
                                 &rc->to_blocked, what, error) &&
           vd_layers_memory_like(st->engine, first_src_md, rc->buffers[0], &rc->blocked_in, what,
                                 error) &&
           vd_layers_memory_new(st->engine, 4, out_dims, dt, dnnl_nchw, DNNL_MEMORY_NONE,
                                &rc->plain_out, what, error) &&
           vd_layers_reorder_new(st->engine, prev_md, vd_layers_memory_md(rc->plain_out),
                                 &rc->to_plain, what, error) &&
           vd_layers_memory_like(st->engine, prev_md, rc->buffers[cur], &rc->blocked_out, what,
                                 error);
}

/* The stack over @in (the RoI features, NCHW per RoI), its NCHW output written to
 * @out (which may be @in). */
static gboolean roi_convs_run(cpu_state *st, const cpu_roi_convs *rc, void *in, void *out,
                              const char *what, GError **error)
{
    if (rc->layers[0].xnn != NULL) {
        transpose_rows(in, rc->buffers[0], rc->rows, rc->in_c, (size_t)rc->in_size * rc->in_size,
                       rc->es, TRUE);
        for (int j = 0; j < rc->n_layers; j++)
            if (!vd_xnn_run(st->xnn, rc->layers[j].xnn, 0, rc->buffers[j % 2],
                            rc->buffers[1 - j % 2], error))
                return FALSE;
        transpose_rows(rc->buffers[rc->n_layers % 2], out, rc->rows, rc->out_c,
                       (size_t)rc->out_size * rc->out_size, rc->es, FALSE);
        return TRUE;
    }
    if (!vd_layers_memory_set_data(rc->plain_in, in, what, error) ||
        !vd_layers_memory_set_data(rc->plain_out, out, what, error) ||
        !vd_layers_reorder(rc->to_blocked, st->stream, rc->plain_in, rc->blocked_in, what, error))
        return FALSE;
    for (int j = 0; j < rc->n_layers; j++) {
        const cpu_roi_layer *l = &rc->layers[j];
        if (rc->relayout[j] != NULL &&
            !vd_layers_reorder(rc->relayout[j], st->stream, rc->relayout_from[j],
                               rc->relayout_to[j], what, error))
            return FALSE;
        if (l->xnn != NULL
                ? !vd_xnn_run(st->xnn, l->xnn, 0, vd_layers_memory_data(l->src),
                              vd_layers_memory_data(l->dst), error)
                : !layer_run(st, l->prim, l->src, l->weights, l->bias, l->dst, NULL, what, error))
            return FALSE;
    }
    return vd_layers_reorder(rc->to_plain, st->stream, rc->blocked_out, rc->plain_out, what, error);
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
                          act_dt(st), TRUE, "box head convolutions", error);
}

static void box_plans_clear(cpu_state *st)
{
    for (int i = 0; i < BOX_HEAD_CACHE; i++) {
        roi_convs_clear(&st->box_plans[i].convs);
        linear_clear(&st->box_plans[i].fc6);
        linear_clear(&st->box_plans[i].fc7);
        linear_clear(&st->box_plans[i].predictor);
        st->box_plans[i].rows = 0;
    }
}

/* Row counts are rounded up to a multiple of this, so that a video's proposal
 * counts reuse a handful of primitives; the extra rows compute on stale RoI
 * features and are ignored. The most frequent count, the post-NMS top-n, runs
 * exactly (150 rows, not 160: 6 % of the 320 MobileNet's box head). */
#define BOX_ROWS_QUANTUM 16

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

/* ------------------------------------------------------------------------ */
/* RoI heads over the final detections (Mask R-CNN's mask branch, Keypoint
 * R-CNN's keypoint branch): convolutions over all detections at once          */

static void roi_head_plan_clear(cpu_roi_head_plan *hp)
{
    roi_convs_clear(&hp->convs);
    free(hp->pooled);
    free(hp->out);
    memset(hp, 0, sizeof(*hp));
}

void roi_head_plans_clear(cpu_roi_head_plans *plans)
{
    for (int i = 0; i < ROI_HEAD_PLAN_CACHE; i++)
        roi_head_plan_clear(&plans->plans[i]);
}

static gboolean roi_head_plan_init(cpu_state *st, cpu_roi_head_plan *hp,
                                   const cpu_roi_layer_spec *specs, int n_specs, int rows, int P,
                                   const char *what, GError **error)
{
    int C = specs[0].conv->in_channels, S = P;
    for (int j = 0; j < n_specs; j++) {
        const vd_conv *w = specs[j].conv;
        S = specs[j].deconv ? (S - 1) * w->stride - 2 * w->padding + w->kernel
                            : (S + 2 * w->padding - w->kernel) / w->stride + 1;
    }
    hp->out_c = specs[n_specs - 1].conv->out_channels;
    hp->out_size = S;
    /* every layer takes the src layout oneDNN prefers for it */
    if (!roi_convs_init(st, &hp->convs, specs, n_specs, rows, P, dnnl_f32, FALSE, what, error) ||
        !(hp->pooled = alloc_aligned((size_t)rows * C * P * P * sizeof(float), what, error)) ||
        !(hp->out = alloc_aligned((size_t)rows * hp->out_c * S * S * sizeof(float), what, error)))
        return FALSE;
    /* the rows past the detections compute on these (finite) zeros */
    memset(hp->pooled, 0, (size_t)rows * C * P * P * sizeof(float));
    return TRUE;
}

cpu_roi_head_plan *roi_head_plan(cpu_state *st, cpu_roi_head_plans *plans,
                                 const cpu_roi_layer_spec *specs, int n_specs, int n, int pool_size,
                                 const char *what, GError **error)
{
    int rows =
        MAX((n + BOX_ROWS_QUANTUM - 1) / BOX_ROWS_QUANTUM * BOX_ROWS_QUANTUM, BOX_ROWS_QUANTUM);
    for (int i = 0; i < ROI_HEAD_PLAN_CACHE; i++)
        if (plans->plans[i].rows == rows)
            return &plans->plans[i];
    cpu_roi_head_plan *hp = &plans->plans[plans->next];
    plans->next = (plans->next + 1) % ROI_HEAD_PLAN_CACHE;
    roi_head_plan_clear(hp);
    if (!roi_head_plan_init(st, hp, specs, n_specs, rows, pool_size, what, error) ||
        !ensure_scratchpad(st, error)) {
        roi_head_plan_clear(hp);
        return NULL;
    }
    hp->rows = rows;
    return hp;
}

gboolean roi_head_pool(cpu_plan *plan, vd_pooler_levels *pooler, int n_levels, const float *boxes,
                       int n, int resized_h, int pool_size, int sampling_ratio,
                       cpu_roi_head_plan *hp, const char *what, GError **error)
{
    int P = pool_size, C = plan->fpn_out[0]->c;
    int *level_of = try_alloc((size_t)n, what, error);
    int *index = level_of ? try_alloc((size_t)n, what, error) : NULL;
    float *rois = index ? try_alloc((size_t)n * 4, what, error) : NULL;
    if (rois == NULL) {
        g_free(level_of);
        g_free(index);
        return FALSE;
    }
    int heights[VD_MAX_FPN_LEVELS];
    for (int l = 0; l < n_levels; l++)
        heights[l] = plan->fpn_out[l]->h;
    vd_pooler_levels_update(pooler, heights, n_levels, resized_h);
    for (int i = 0; i < n; i++)
        level_of[i] = vd_roi_level(boxes + 4 * (size_t)i, pooler->k_min, pooler->k_max);
    for (int l = 0; l < n_levels; l++) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (level_of[i] != l)
                continue;
            memcpy(rois + 4 * (size_t)m, boxes + 4 * (size_t)i, 4 * sizeof(float));
            index[m++] = i;
        }
        if (m > 0)
            roi_align_features(plan->fpn_out[l], rois, index, m, pooler->scales[l], P,
                               sampling_ratio, hp->pooled, dnnl_f32, (size_t)C * P * P);
    }
    g_free(level_of);
    g_free(index);
    g_free(rois);
    return TRUE;
}

gboolean roi_head_run(cpu_state *st, cpu_roi_head_plan *hp, const char *what, GError **error)
{
    return roi_convs_run(st, &hp->convs, hp->pooled, hp->out, what, error) &&
           vd_layers_wait(st->stream, error);
}

void roi_head_kernels(GArray *out, GStringChunk *strings, const cpu_roi_head_plans *plans,
                      const char *head, const char *const *kinds, const char *const *names)
{
    for (int i = 0; i < ROI_HEAD_PLAN_CACHE; i++) {
        const cpu_roi_head_plan *hp = &plans->plans[i];
        if (hp->rows == 0)
            continue;
        kernel_add(out, strings, hp->convs.to_blocked, "reorder", "%s.in[%d rows]", head, hp->rows);
        for (int j = 0; j < hp->convs.n_layers; j++)
            kernel_add(out, strings, hp->convs.relayout[j], "reorder", "%s.relayout%d[%d rows]",
                       head, j, hp->rows);
        for (int j = 0; j < hp->convs.n_layers; j++)
            kernel_add_op(out, strings, hp->convs.layers[j].prim, hp->convs.layers[j].xnn, kinds[j],
                          "%s[%d rows]", names[j], hp->rows);
        kernel_add(out, strings, hp->convs.to_plain, "reorder", "%s.out[%d rows]", head, hp->rows);
    }
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

/* RoIHeads.postprocess_detections (spec §6.2) and the rescale of spec §1.5. */
void write_detections(const vd_image *image, int rh, int rw, const float *boxes,
                      const float *scores, const int *labels, const int *keep, int kept,
                      vd_result *result)
{
    float ry = (float)image->height / (float)rh;
    float rx = (float)image->width / (float)rw;
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
}

int write_nms_detections(vd_context *ctx, const vd_image *image, int rh, int rw, const float *boxes,
                         const float *scores, const int *labels, int m, int *keep,
                         vd_result *result)
{
    int kept = vd_batched_nms(boxes, scores, labels, m, ctx->params.nms_threshold, keep);
    kept = MIN(kept, ctx->params.max_detections);
    write_detections(image, rh, rw, boxes, scores, labels, keep, kept, result);
    return kept;
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

static gboolean detect_one(cpu_state *st, vd_context *ctx, const vd_image *image, vd_result *result,
                           gboolean observe, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int rh, rw, ph, pw;
    if (image->width <= 0 || image->height <= 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "image size %dx%d is empty",
                    image->width, image->height);
        return FALSE;
    }
    vd_context_stages_begin(ctx);
    vd_config_transform_sizes(cfg, image->height, image->width, &rh, &rw, &ph, &pw);
    if (st->plan == NULL || st->plan->padded_h != ph || st->plan->padded_w != pw) {
        plan_free(st->plan);
        st->plan = plan_new(st, ph, pw, error);
        if (st->plan == NULL || !ensure_scratchpad(st, error))
            return FALSE;
    }
    cpu_plan *plan = st->plan;

    if (!vd_cpu_preprocess(image, cfg->image_mean, cfg->image_std, cfg->resize_arithmetic, rh, rw,
                           ph, pw, plan->input->data, error))
        return FALSE;
    if (observe) {
        float size[2] = {(float)rh, (float)rw};
        int64_t shape[1] = {2};
        vd_context_observe(ctx, "image_size", size, shape, 1);
        observe_tensor(ctx, "input", plan->input);
    }
    vd_context_stage_mark(ctx, VD_STAGE_PREPROCESS);

    if (!run_steps(st, plan, 0, plan->steps_backbone, error))
        return FALSE;
    st->frames_seen += st->ranges_seen != NULL;
    vd_context_stage_add_macs(ctx, steps_macs(plan, 0, plan->steps_backbone));
    vd_context_stage_mark(ctx, VD_STAGE_BACKBONE);
    if (!run_steps(st, plan, plan->steps_backbone, plan->steps_fpn, error))
        return FALSE;
    vd_context_stage_add_macs(ctx, steps_macs(plan, plan->steps_backbone, plan->steps_fpn));
    if (observe) {
        for (int l = 0; l < plan->n_levels; l++) {
            char name[32];
            if (cfg->detector == VD_DETECTOR_SSD)
                g_snprintf(name, sizeof(name), "features.%d", l);
            else if (l < plan->n_returned)
                g_snprintf(name, sizeof(name), "fpn.%d", l);
            else if (cfg->fpn_p6p7)
                g_snprintf(name, sizeof(name), "fpn.p%d", 6 + l - plan->n_returned);
            else
                g_snprintf(name, sizeof(name), "fpn.pool");
            observe_tensor(ctx, name, plan->fpn_out[l]);
        }
        int64_t shape[2] = {plan->n_anchors, 4};
        vd_context_observe(ctx, "anchors", plan->anchors, shape, 2);
    }
    vd_context_stage_mark(ctx, VD_STAGE_FPN);

    if (!run_steps(st, plan, plan->steps_fpn, plan->steps->len, error))
        return FALSE;
    /* the RPN's (two-stage) or the dense head's (one-stage): the detector marks it */
    vd_context_stage_add_macs(ctx, steps_macs(plan, plan->steps_fpn, plan->steps->len));
    return st->detector->detect(st, ctx, plan, rh, rw, image, result, observe, error);
}

/* ------------------------------------------------------------------------ */
/* Backend interface                                                         */

static void cpu_destroy(void *p)
{
    cpu_state *st = p;
    if (st == NULL)
        return;
    plan_free(st->plan);
    box_plans_clear(st);
    roi_head_plans_clear(&st->mask_plans);
    roi_head_plans_clear(&st->keypoint_plans);
    packed_linear_clear(&st->fc6);
    packed_linear_clear(&st->fc7);
    packed_linear_clear(&st->predictor);
    free(st->pooled);
    free(st->h6);
    free(st->h7);
    free(st->head_out);
    vd_layers_memory_free(st->scratch_mem);
    free(st->scratch);
    free(st->wino_ws);
    g_free(st->rpn_head_weight);
    g_free(st->rpn_head_bias);
    if (st->detector != NULL && st->detector->clear != NULL)
        st->detector->clear(st);
    if (st->ranges_seen != NULL)
        g_hash_table_unref(st->ranges_seen);
    vd_xnn_free(st->xnn);
    vd_layers_engine_free(st->engine, st->stream);
    g_free(st);
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

/* The activations' layout (act_tag). oneDNN's convolution kernels take either
 * its blocked layout (the direct JIT kernels) or NHWC (the brgemm kernels,
 * among them AMX's, whose bf16 ones have 11x the throughput of float32 on the
 * same cores for an FPN-sized 3x3 convolution). Asked with format_tag_any about
 * a typical 3x3 convolution of the FPN and RPN (256 channels, ReLU), oneDNN says
 * which kernel it would run: where that is an AMX kernel on NHWC, every
 * activation from the stem's output to RoIAlign is NHWC, so that no layer
 * between them reorders (the upsampling, the pool level, the RPN decode,
 * squeeze-and-excitation and RoIAlign read either layout). Elsewhere the
 * blocked layout stays, also where oneDNN would pick its AVX-512 brgemm kernels
 * on NHWC (3.x), where NHWC is slower (tools/bench/CPU.md, 2026-12-06, activation
 * layouts). Winograd keeps the
 * blocked layout its transforms read; NHWC needs a multiple of 8 FPN channels
 * (RoIAlign's vectors). VD_CPU_LAYOUT ("nhwc", "blocked") overrides the
 * choice, for measurements. */
static gboolean choose_layout(cpu_state *st, GError **error)
{
    const char *forced = g_getenv("VD_CPU_LAYOUT");
    st->act_tag = st->block_tag;
    if (st->xnn != NULL) {
        /* XNNPACK's operators take NHWC only (and RoIAlign reads it in vectors of 8) */
        if (st->model->config.fpn_channels % 8 != 0) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "the CPU backend's layers run XNNPACK here (%s), on NHWC activations, "
                        "which need a multiple of 8 FPN channels, not %d",
                        st->layers_why, st->model->config.fpn_channels);
            return FALSE;
        }
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE;
        return TRUE;
    }
    if (st->int8) {
        /* the int8 kernels (VNNI brgemm, AMX) take NHWC; the float layers follow so
         * that nothing between them reorders */
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE;
        return TRUE;
    }
    if (g_strcmp0(forced, "nhwc") == 0 && st->model->config.fpn_channels % 8 == 0) {
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE; /* its transforms read blocks */
    }
    if (forced != NULL || st->winograd || st->own_winograd ||
        st->model->config.fpn_channels % 8 != 0)
        return TRUE;

    dnnl_data_type_t dt = act_dt(st);
    enum { C = 256, HW = 64 };
    vd_conv_desc desc = vd_layers_probe_desc(C, HW, HW, dt, dnnl_format_tag_any);
    desc.act = VD_ACT_RELU;
    dnnl_dims_t dims = {1, C, HW, HW};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t nhwc = NULL;
    gboolean ok = vd_layers_conv_pd(st->engine, &desc, &pd, "the layout probe", error) &&
                  vd_layers_memory_new(st->engine, 4, dims, dt, dnnl_nhwc, DNNL_MEMORY_NONE, &nhwc,
                                       "the layout probe", error);
    if (ok && strstr(vd_layers_pd_impl(pd), "amx") != NULL &&
        vd_layers_md_equal(vd_layers_pd_md(pd, dnnl_query_dst_md), vd_layers_memory_md(nhwc)))
        st->act_tag = dnnl_nhwc;
    vd_layers_memory_free(nhwc);
    vd_layers_pd_free(pd);
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
static const cpu_detector vd_cpu_two_stage = {
    .kind = VD_DETECTOR_TWO_STAGE,
    .supports = two_stage_supports,
    .prepare = prepare_weights,
    .clear = NULL, /* cpu_destroy() frees the RPN head and the box head */
    .plan = plan_rpn,
    .plan_clear = NULL, /* plan_free() frees the RPN's convolutions */
    .detect = detect_two_stage,
    .kernels = two_stage_kernels,
};

/* The kinds of detector, by the model's (vd_cpu_private.h). */
static const cpu_detector *const cpu_detectors[] = {&vd_cpu_two_stage, &vd_cpu_one_stage,
                                                    &vd_cpu_ssd};

static const cpu_detector *detector_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cpu_detectors); i++)
        if (cpu_detectors[i]->kind == model->config.detector)
            return cpu_detectors[i];
    return &vd_cpu_two_stage;
}

/* The backbones, by the model's backbone type (vd_cpu_private.h). */
static const cpu_backbone *const cpu_backbones[] = {&vd_cpu_resnet, &vd_cpu_mnv3,
                                                    &vd_cpu_ssd_backbone};

static const cpu_backbone *backbone_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cpu_backbones); i++)
        if (cpu_backbones[i]->type == model->config.backbone_type)
            return cpu_backbones[i];
    return NULL;
}

/* The precision a CPU context runs for @params: AUTO is fp32 when calibrating
 * (calibration records float32 activations), else bf16 where the processor has
 * it natively (@native_bf16: AVX512-BF16, AMX), where it is faster than fp32 and
 * keeps the bundled model's accuracy (tools/bench/CPU.md, models/README.md), and
 * fp32 elsewhere. */
static vd_precision cpu_precision(const vd_context_params *params, gboolean native_bf16)
{
    if (params->precision != VD_PRECISION_AUTO)
        return params->precision;
    if (params->calibrate)
        return VD_PRECISION_FP32;
    return native_bf16 ? VD_PRECISION_BF16 : VD_PRECISION_FP32;
}

/* Refuses @precision, which oneDNN has no kernel for on this CPU, naming what the
 * CPU runs (its ISA as its architecture's, and the cap): on x86 what it needs
 * (@x86_needs) and @why; on aarch64, where oneDNN has none, what the processor has
 * that this oneDNN does not use (@unused, or NULL). bf16 on aarch64:
 * refuse_bf16_aarch64. */
static void refuse_precision(GError **error, const vd_cpu_caps *caps, const char *precision,
                             const char *x86_needs, const char *why, const char *instead,
                             const char *unused)
{
    const char *cap = g_getenv("ONEDNN_MAX_CPU_ISA");
    char *runs = g_strdup_printf("%s%s%s", caps->description,
                                 cap != NULL ? ", capped by ONEDNN_MAX_CPU_ISA=" : "",
                                 cap != NULL ? cap : "");
    if (caps->arch == VD_CPU_ARCH_AARCH64)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s has no oneDNN kernel on this aarch64 CPU, which runs %s%s%s "
                    "(%s runs on x86 with %s): use fp32",
                    precision, runs, unused != NULL ? "; the processor has " : "",
                    unused != NULL ? unused : "", precision, x86_needs);
    else
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s needs a CPU with %s, and this one runs %s (%s): use %s",
                    precision, x86_needs, runs, why, instead);
    g_free(runs);
}

/* Refuses bf16 on aarch64, naming what the processor has and what oneDNN gives
 * the bf16 layers when asked (vd_layers_probe_bf16). Debian 13's oneDNN (3.7.2,
 * without Arm Compute Library) has reference loops alone there, BF16 processor or
 * not: a bf16 convolution is ref:any in the layouts of its choice and in NHWC, on
 * Advanced SIMD and on SVE at 256 and 512 bits (its SVE brgemm kernels take float32
 * and int8 only, and ignore the bf16 fpmath mode), and its bf16 matmul,
 * "gemm:jit:bf16", calls its reference GEMM off x86; XNNPACK (2024-11) has no bf16
 * operator (docs/engine.md, "bf16 on arm64"). */
static void refuse_bf16_aarch64(GError **error, const vd_cpu_caps *caps)
{
    const char *cap = g_getenv("ONEDNN_MAX_CPU_ISA");
    char *version = vd_layers_version();
    vd_layers_bf16_probe probe;
    GError *probe_error = NULL;
    GString *s = g_string_new(NULL);

    g_string_printf(s,
                    "precision bf16 has no oneDNN kernel on this aarch64 CPU, which runs %s%s%s: ",
                    caps->description, cap != NULL ? ", capped by ONEDNN_MAX_CPU_ISA=" : "",
                    cap != NULL ? cap : "");
    g_string_append(s, caps->bf16 ? "the processor has BF16, but "
                                  : "the processor has no BF16 (Neoverse V1, N2 and later have "
                                    "it), and ");
    if (!vd_layers_probe_bf16(&probe, &probe_error))
        g_string_append_printf(s, "oneDNN %s could not be asked (%s)", version,
                               probe_error->message);
    else
        g_string_append_printf(
            s,
            "oneDNN %s, asked for a bf16 3x3 convolution in the layouts of its choice, gives %s, "
            "and for a bf16 matmul %s%s",
            version, probe.conv, probe.matmul,
            probe.native ? ", which the engine does not run bf16 with on aarch64 (its bf16 is "
                           "checked on x86 alone)"
                         : ": reference loops or none (its SVE kernels take float32 and int8 "
                           "only; its bf16 matmul is its reference GEMM off x86)");
    g_string_append(s, "; XNNPACK has no bf16 operator; bf16 runs on x86 with AVX512_BF16 or "
                       "AMX: use fp32");
    g_set_error_literal(error, VD_ERROR, VD_ERROR_UNSUPPORTED, s->str);
    g_string_free(s, TRUE);
    g_clear_error(&probe_error);
    g_free(version);
}

/* Refuses fp16 (where fp16_runs() says no), naming the cause: oneDNN's layers
 * (@layers_why says why they run), an aarch64 CPU without the FP16 arithmetic, or
 * XNNPACK without fp16 kernels for this processor (@f16_why). */
static void refuse_fp16(GError **error, const vd_cpu_caps *caps, gboolean xnn,
                        const char *layers_why, const char *f16_why)
{
    const char *head = "precision fp16 needs XNNPACK's layers and the CPU's FP16 arithmetic "
                       "(aarch64 asimdhp, Cortex-A76 and later; on x86 XNNPACK's AVX2 and F16C "
                       "kernels)";
    if (!xnn)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; the CPU backend's layers run oneDNN here (%s%s), which has no fp16 "
                    "kernels for this CPU (%s): use fp32%s",
                    head, layers_why, vd_xnn_built() ? "" : "; this build has no XNNPACK",
                    caps->description, caps->native_bf16 ? " or bf16" : "");
    else if (caps->arch == VD_CPU_ARCH_AARCH64 && !caps->fp16)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; this aarch64 CPU runs %s, without the FP16 arithmetic: use fp32", head,
                    caps->description);
    else
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; the layers run XNNPACK here (%s), but %s (%s): use fp32", head, layers_why,
                    f16_why, caps->description);
}

/* Whether fp16 runs here: XNNPACK's layers (@xnn), on an aarch64 CPU with the
 * FP16 arithmetic, where XNNPACK has fp16 kernels (*@f16_why says why not). */
static gboolean fp16_runs(const vd_cpu_caps *caps, gboolean xnn, const char **f16_why)
{
    *f16_why = "";
    return xnn && (caps->arch != VD_CPU_ARCH_AARCH64 || caps->fp16) &&
           vd_xnn_f16_supported(f16_why);
}

/* What the CPU backend runs on this machine (oneDNN's ISA, capped by
 * ONEDNN_MAX_CPU_ISA): fp32, bf16 where the processor has it natively, fp16 on
 * XNNPACK's layers with the CPU's FP16 arithmetic, int8 with VNNI (on XNNPACK's
 * layers: with the dot product) on a calibrated ResNet model, calibration in fp32
 * on a ResNet model, and a box head whose fc6 takes the pooler's output. */
static gboolean cpu_supports(const vd_model *model, const vd_context_params *params, GError **error)
{
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    const vd_config *cfg = &model->config;
    const cpu_backbone *backbone = backbone_of(model);
    /* XNNPACK's layers (vd_cpu_xnnpack.h) run float32, fp16 or int8: AUTO is fp32 there */
    gboolean xnn = FALSE;
    const char *why = NULL;
    if (!vd_xnn_choose_for(params->precision == VD_PRECISION_INT8, &xnn, &why, error))
        return FALSE;
    vd_precision precision = cpu_precision(params, caps.native_bf16 && !xnn);
    if (backbone == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CPU backend does not support the backbone of this model (%s)",
                    vd_model_description(model));
        return FALSE;
    }
    if (precision != VD_PRECISION_FP32 && precision != VD_PRECISION_BF16 &&
        precision != VD_PRECISION_FP16 && precision != VD_PRECISION_INT8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s is not supported on the CPU backend (fp32, bf16, fp16 or int8)",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (!detector_of(model)->supports(model, precision, params, error))
        return FALSE;
    if ((params->calibrate || precision == VD_PRECISION_INT8) && !backbone->int8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "int8 covers the ResNet backbones, not %s (%s): use fp32 or bf16",
                    model->backbone_name, vd_model_description(model));
        return FALSE;
    }
    if (params->calibrate && precision != VD_PRECISION_FP32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "int8 calibration runs in fp32, not %s",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (precision == VD_PRECISION_INT8) {
        const char *int8_why = NULL;
        if (xnn && !vd_xnn_int8_supported(&int8_why)) {
            const char *head = "precision int8 on XNNPACK's layers needs the CPU's dot product "
                               "(aarch64 asimddp: Cortex-A76, Neoverse N1 and later)";
            if (caps.arch == VD_CPU_ARCH_AARCH64 && !caps.dotprod)
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s; the layers run XNNPACK here (%s), and this CPU runs %s, without "
                            "the dot product: use fp32",
                            head, why, caps.description);
            else
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s; the layers run XNNPACK here (%s), but %s (%s): use fp32", head,
                            why, int8_why, caps.description);
            return FALSE;
        }
        if (!xnn && !caps.int8) {
            refuse_precision(error, &caps, "int8", "VNNI (AVX512-VNNI, AVX-VNNI or AMX)",
                             "without it int8 products are emulated in 16 bits and saturate",
                             "fp32 or bf16",
                             caps.dotprod ? "the dot product, which this oneDNN does not use for "
                                            "int8 (XNNPACK's int8 layers do, where they run)"
                                          : NULL);
            return FALSE;
        }
        if (model->int8_ranges == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "precision int8 needs a calibrated model, and %s has no int8 calibration: "
                        "make one with vd-detect --calibrate",
                        vd_model_description(model));
            return FALSE;
        }
        if (cfg->fpn_channels % 8 != 0) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "precision int8 needs a multiple of 8 FPN channels, not %d",
                        cfg->fpn_channels);
            return FALSE;
        }
    }

    if (precision == VD_PRECISION_BF16 && caps.arch == VD_CPU_ARCH_AARCH64) {
        refuse_bf16_aarch64(error, &caps);
        return FALSE;
    }
    if (precision == VD_PRECISION_BF16 && !caps.native_bf16) {
        refuse_precision(error, &caps, "bf16", "AVX512_BF16 or AMX",
                         "without it bf16 would be emulated, many times slower than fp32", "fp32",
                         NULL);
        return FALSE;
    }
    const char *f16_why = NULL;
    if (precision == VD_PRECISION_FP16 && !fp16_runs(&caps, xnn, &f16_why)) {
        refuse_fp16(error, &caps, xnn, why, f16_why);
        return FALSE;
    }
    if (xnn && precision != VD_PRECISION_FP32 && precision != VD_PRECISION_FP16 &&
        precision != VD_PRECISION_INT8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s: the CPU backend's layers run XNNPACK here (%s), in fp32, fp16 "
                    "(with the CPU's FP16 arithmetic) or int8 (with its dot product): use fp32",
                    vd_precision_name(precision), why);
        return FALSE;
    }
    return TRUE;
}

/* After cpu_supports(). */
static void *cpu_create(vd_context *ctx, GError **error)
{
    /* What oneDNN runs here: the machine's ISA, capped by ONEDNN_MAX_CPU_ISA. */
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    gboolean xnn = FALSE;
    const char *layers_why = NULL;
    if (!vd_xnn_choose_for(ctx->params.precision == VD_PRECISION_INT8, &xnn, &layers_why, error))
        return NULL;
    gboolean native_bf16 = caps.native_bf16 && !xnn; /* XNNPACK's layers: no bf16 */
    ctx->params.precision = cpu_precision(&ctx->params, native_bf16);

    cpu_state *st = g_new0(cpu_state, 1);
    st->layers_why = layers_why;
    st->model = ctx->model;
    st->backbone = backbone_of(ctx->model);
    st->detector = detector_of(ctx->model);
    st->caps = caps;
    st->cb = caps.channel_block;
    st->block_tag = st->cb == 16 ? dnnl_nChw16c : dnnl_nChw8c;
    st->act_tag = st->block_tag;
    st->int8 = ctx->params.precision == VD_PRECISION_INT8;
    /* int8 runs its float layers in bf16 where the processor has it natively */
    st->bf16 = ctx->params.precision == VD_PRECISION_BF16 || (st->int8 && native_bf16);
    /* fp16: XNNPACK's layers only (cpu_supports) */
    st->fp16 = ctx->params.precision == VD_PRECISION_FP16;
    if (ctx->params.calibrate)
        st->ranges_seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    st->n_threads = ctx->params.n_threads > 0 ? ctx->params.n_threads : omp_get_num_procs();
    /* the weight reorders below run OpenMP too */
    omp_set_num_threads(st->n_threads);
    if (!vd_layers_engine_new(&st->engine, &st->stream, error) ||
        (xnn && (st->xnn = vd_xnn_new(st->n_threads, error)) == NULL)) {
        cpu_destroy(st);
        return NULL;
    }
    /* oneDNN 2.x has float32 Winograd kernels for AVX-512 only, 3.x none. Ours
     * runs wherever oneDNN has none: F(4x4, 3x3) below AVX-512 (blocks of 8) and
     * F(2x2, 3x3) on AVX-512 (3.x): ours F(4x4, 3x3), as accurate as oneDNN 2.x's,
     * moves Keypoint R-CNN's keypoints and Mask R-CNN v2's masks (two sizes) past
     * the parity tolerances in the Debian 13 root, which F(2x2, 3x3), as accurate
     * as the direct kernels there, keeps (docs/engine.md). VD_CPU_WINOGRAD (for
     * measurements): 0 none, "own" ours on every ISA. */
    const char *winograd = g_getenv("VD_CPU_WINOGRAD");
    gboolean onednn_winograd = vd_layers_has_winograd(st->engine, st->block_tag);
    st->winograd =
        g_strcmp0(winograd, "0") != 0 && g_strcmp0(winograd, "own") != 0 && onednn_winograd;
    st->own_winograd = g_strcmp0(winograd, "own") == 0 ||
                       (g_strcmp0(winograd, "0") != 0 && !st->winograd && caps.own_winograd_ok);
    st->wino_tile = st->cb == 16 && !onednn_winograd ? 2 : 4;
    if (st->bf16 || st->fp16) /* float32 only (use_winograd) */
        st->winograd = st->own_winograd = FALSE;
    if (!choose_layout(st, error) || !st->detector->prepare(st, error)) {
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

static char *cpu_describe(void *p, const vd_context *ctx)
{
    cpu_state *st = p;
    char *version = vd_layers_version();
    char block[16];
    g_snprintf(block, sizeof(block), "nChw%dc", st->cb);
    /* which library runs the layers, and why: where XNNPACK does, and where oneDNN
     * runs its reference kernels (XNNPACK absent or not starting) */
    gboolean layers = st->xnn != NULL || strstr(st->layers_why, "reference") != NULL;
    char *s = g_strdup_printf("cpu: oneDNN %s, ISA %s, %s%s, %d threads, layout %s, "
                              "Winograd %s%s%s%s",
                              version, st->caps.description, st->int8 ? "int8 + " : "",
                              st->fp16   ? "fp16"
                              : st->bf16 ? "bf16"
                                         : "fp32",
                              st->n_threads, st->act_tag == dnnl_nhwc ? "nhwc" : block,
                              st->winograd       ? "oneDNN"
                              : st->own_winograd ? "own"
                                                 : "off",
                              !layers           ? ""
                              : st->xnn != NULL ? ", layers XNNPACK ("
                                                : ", layers oneDNN (",
                              layers ? st->layers_why : "", layers ? ")" : "");
    g_free(version);
    return s;
}

static void kernel_add_v(GArray *out, GStringChunk *strings, dnnl_primitive_t prim,
                         const vd_xnn_op *op, const char *kind, const char *layer_fmt, va_list ap)
{
    if (prim == NULL && op == NULL)
        return;
    const char *impl =
        prim != NULL ? vd_layers_pd_impl(vd_layers_primitive_pd(prim)) : vd_xnn_op_impl(op);
    char *layer = g_strdup_vprintf(layer_fmt, ap);
    vd_kernel_info k = {
        .layer = g_string_chunk_insert_const(strings, layer),
        .kind = kind,
        .implementation = g_string_chunk_insert_const(strings, impl),
    };
    g_free(layer);
    g_array_append_val(out, k);
}

void kernel_add(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const char *kind,
                const char *layer_fmt, ...)
{
    va_list ap;
    va_start(ap, layer_fmt);
    kernel_add_v(out, strings, prim, NULL, kind, layer_fmt, ap);
    va_end(ap);
}

void kernel_add_op(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const vd_xnn_op *op,
                   const char *kind, const char *layer_fmt, ...)
{
    va_list ap;
    va_start(ap, layer_fmt);
    kernel_add_v(out, strings, prim, op, kind, layer_fmt, ap);
    va_end(ap);
}

/* A convolution's primitive, or our Winograd. */
void conv_kernels(GArray *out, GStringChunk *strings, const cpu_conv *cv, const char *layer)
{
    if (cv->wino != NULL) {
        vd_kernel_info k = {
            .layer = g_string_chunk_insert_const(strings, layer),
            .kind = "convolution",
            .implementation =
                vd_wino_tile(cv->wino) == 2 ? "vd_winograd_2x3:sgemm" : "vd_winograd_4x3:sgemm",
        };
        g_array_append_val(out, k);
        return;
    }
    kernel_add_op(out, strings, cv->prim, cv->xnn, "convolution", "%s", layer);
}

static void cpu_kernels(void *p, GArray *out, GStringChunk *strings)
{
    cpu_state *st = p;
    cpu_plan *plan = st->plan;
    char name[96];
    if (plan != NULL) {
        kernel_add(out, strings, plan->input_convert, "reorder", "transform.input");
        plan->backbone->kernels(st, plan, out, strings);
        /* SSD has no FPN: its n_returned counts the feature maps its heads read */
        int n_fpn = st->model->config.detector == VD_DETECTOR_SSD ? 0 : plan->n_returned;
        for (int i = 0; i < n_fpn; i++) {
            g_snprintf(name, sizeof(name), "backbone.fpn.inner_blocks.%d", i);
            conv_kernels(out, strings, &plan->fpn_inner[i], name);
            g_snprintf(name, sizeof(name), "backbone.fpn.layer_blocks.%d", i);
            conv_kernels(out, strings, &plan->fpn_layer[i], name);
        }
        if (st->model->config.fpn_p6p7) {
            conv_kernels(out, strings, &plan->fpn_p6, "backbone.fpn.extra_blocks.p6");
            conv_kernels(out, strings, &plan->fpn_p7, "backbone.fpn.extra_blocks.p7");
        }
    }
    st->detector->kernels(st, plan, out, strings);
}

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

static char *cpu_calibration(void *p, GError **error)
{
    cpu_state *st = p;
    if (st->ranges_seen == NULL || st->frames_seen == 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "no frame has been run to calibrate on");
        return NULL;
    }
    return vd_calibration_to_json(st->ranges_seen, st->frames_seen);
}

const vd_backend vd_cpu_backend = {
    .name = "cpu",
    .supports = cpu_supports,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .detect = cpu_detect,
    .describe = cpu_describe,
    .kernels = cpu_kernels,
    .calibration = cpu_calibration,
};
