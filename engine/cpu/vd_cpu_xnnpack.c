/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's layers on XNNPACK (see vd_cpu_xnnpack.h): its operator API
 * (create with the packed weights, reshape for the shapes, setup with the
 * pointers, run on a pthreadpool), float32 or fp16 NHWC (the _f16 operators, given
 * float32 weights with XNN_FLAG_FP32_STATIC_WEIGHTS, which XNNPACK packs as fp16).
 * XNNPACK fuses a clamp (ReLU, ReLU6) into its convolutions and linear layers; a
 * sum with dst's previous contents, hardswish and an fp16 layer's widening to a
 * float32 output run after the layer, in one pass over its output on the same pool (in
 * float32 on the fp16 values, rounded back to fp16 where the output is fp16). */
#include "cpu/vd_cpu_xnnpack.h"

#include "cpu/vd_cpu_half.h"
#include "cpu/vd_cpu_isa.h"

#include "vd_config.h"
#include "vd_math.h"
#include "visiondetect/vd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_XNNPACK
#include <pthreadpool.h>
#include <xnnpack.h>
#endif

gboolean vd_xnn_built(void)
{
#if HAVE_XNNPACK
    return TRUE;
#else
    return FALSE;
#endif
}

/* Whether @impl (oneDNN's implementation name) is a reference loop: "ref:any", or
 * a scheme over one, such as "gemm:ref" (a convolution as a product on the
 * reference sgemm). */
static gboolean is_reference(const char *impl)
{
    return g_str_has_prefix(impl, "ref") || strstr(impl, ":ref") != NULL;
}

typedef struct {
    gboolean use;
    const char *why;
} choice;

/* Whether XNNPACK initialises in this process (it reads the processor from the
 * kernel: its cpuinfo needs /sys/devices/system/cpu) */
static gboolean starts(void);

static choice probe(void)
{
    /* a 3x3 float32 convolution of 64 channels in NHWC, as the layers run it */
    vd_conv_desc desc = vd_layers_probe_desc(64, 32, 32, dnnl_f32, dnnl_nhwc);
    desc.act = VD_ACT_RELU;
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    choice c = {FALSE, "oneDNN has fast kernels for this CPU"};
    if (!vd_layers_engine_new(&engine, &stream, NULL) ||
        !vd_layers_conv_pd(engine, &desc, &pd, "the XNNPACK probe", NULL)) {
        vd_layers_engine_free(engine, stream);
        c.why = "oneDNN made no convolution for the probe";
        return c;
    }
    if (is_reference(vd_layers_pd_impl(pd))) {
        c.use = vd_xnn_built() && starts();
        c.why = c.use ? "oneDNN has only reference kernels for this CPU"
                : !vd_xnn_built()
                    ? "oneDNN has only reference kernels for this CPU, and this build has no "
                      "XNNPACK"
                    : "oneDNN has only reference kernels for this CPU, and XNNPACK did not "
                      "initialise here (xnn_initialize failed: it reads the processor from "
                      "/sys/devices/system/cpu, which a container or chroot may lack)";
    }
    vd_layers_pd_free(pd);
    vd_layers_engine_free(engine, stream);
    return c;
}

gboolean vd_xnn_choose(gboolean *use, const char **why, GError **error)
{
    static GMutex lock;
    static gboolean probed;
    static choice probed_choice;
    const char *forced = g_getenv("VD_CPU_LAYERS");

    if (forced != NULL && *forced != '\0') {
        if (g_str_equal(forced, "onednn")) {
            *use = FALSE;
            *why = "VD_CPU_LAYERS=onednn";
            return TRUE;
        }
        if (g_str_equal(forced, "xnnpack")) {
            if (!vd_xnn_built()) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "VD_CPU_LAYERS=xnnpack, but this build has no XNNPACK");
                return FALSE;
            }
            *use = TRUE;
            *why = "VD_CPU_LAYERS=xnnpack";
            return TRUE;
        }
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "VD_CPU_LAYERS=%s: expected \"onednn\" or \"xnnpack\"", forced);
        return FALSE;
    }
    g_mutex_lock(&lock);
    if (!probed) {
        probed_choice = probe();
        probed = TRUE;
    }
    *use = probed_choice.use;
    *why = probed_choice.why;
    g_mutex_unlock(&lock);
    return TRUE;
}

gboolean vd_xnn_choose_for(gboolean int8, gboolean *use, const char **why, GError **error)
{
    if (!vd_xnn_choose(use, why, error))
        return FALSE;
    const char *forced = g_getenv("VD_CPU_LAYERS");
    if (*use || !int8 || (forced != NULL && *forced != '\0'))
        return TRUE;
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    const char *int8_why = NULL;
    if (caps.arch == VD_CPU_ARCH_AARCH64 && !caps.int8 && vd_xnn_built() && starts() &&
        vd_xnn_int8_supported(&int8_why)) {
        *use = TRUE;
        *why = "int8, which oneDNN has no kernel for on this CPU";
    }
    return TRUE;
}

#if HAVE_XNNPACK

typedef enum { OP_CONV, OP_DECONV, OP_LINEAR, OP_POOL, OP_CONVERT } op_kind;

/* int8 convolutions: qs8 to qs8, or qd8 (a qs8 source with its own parameters) to
 * float32 */
typedef enum { Q_NONE, Q_QS8, Q_QD8_F32 } quant_kind;

struct vd_xnn {
    pthreadpool_t pool;
    void *workspace; /* the convolutions' (XNNPACK's indirection and packing) */
    size_t workspace_size;
    void *tmp; /* a layer's output before the sum, or an fp16 one before widening */
    size_t tmp_size;
    void *tmp2; /* int8: the previous contents of a sum's dst, widened */
    size_t tmp2_size;
};

struct vd_xnn_op {
    op_kind kind;
    xnn_operator_t op;
    char *what;
    size_t workspace_size; /* a convolution's, from its reshape */
    size_t dst_floats;     /* output values per run (a linear layer's per row) */
    gboolean f16;          /* an _f16 operator: fp16 input and output */
    gboolean widen;        /* f16, its output widened to float32 into dst (via tmp) */
    int out;               /* a linear layer's outputs */
    int rows;              /* the rows a linear layer was last reshaped for (0: none) */
    /* the pass after the layer: dst = act(dst + layer) with sum, else act(layer) */
    gboolean sum;
    vd_activation act; /* VD_ACT_HARDSWISH, or VD_ACT_RELU(6) with sum (else fused) */
    quant_kind quant;
    /* int8 with sum: dst's previous contents widened (into tmp2), their f32 add onto
     * the output (in tmp), the sum quantised into dst */
    xnn_operator_t widen_sum, add, requantize;
    /* qd8: the source's quantisation, repeated for XNNPACK's reads past the batch */
    struct xnn_quantization_params src_q[1 + XNN_EXTRA_QUANTIZATION_PARAMS];
};

static const char *status_name(enum xnn_status s)
{
    switch (s) {
    case xnn_status_success:
        return "success";
    case xnn_status_uninitialized:
        return "uninitialized";
    case xnn_status_invalid_parameter:
        return "invalid parameter";
    case xnn_status_invalid_state:
        return "invalid state";
    case xnn_status_unsupported_parameter:
        return "unsupported parameter";
    case xnn_status_unsupported_hardware:
        return "unsupported hardware";
    case xnn_status_out_of_memory:
        return "out of memory";
    default:
        return "unknown status";
    }
}

static gboolean check(enum xnn_status s, const char *call, const char *what, GError **error)
{
    if (s == xnn_status_success)
        return TRUE;
    g_set_error(error, VD_ERROR,
                s == xnn_status_out_of_memory ? VD_ERROR_OUT_OF_MEMORY : VD_ERROR_INTERNAL,
                "XNNPACK failed in %s of %s: %s", call, what, status_name(s));
    return FALSE;
}

static gboolean initialize(GError **error)
{
    static gsize once;
    static enum xnn_status status;
    if (g_once_init_enter(&once)) {
        status = xnn_initialize(NULL);
        g_once_init_leave(&once, 1);
    }
    return check(status, "xnn_initialize", "the library", error);
}

static gboolean starts(void)
{
    return initialize(NULL);
}

vd_xnn *vd_xnn_new(int n_threads, GError **error)
{
    if (!initialize(error))
        return NULL;
    vd_xnn *x = g_new0(vd_xnn, 1);
    x->pool = pthreadpool_create((size_t)MAX(n_threads, 1));
    if (x->pool == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "XNNPACK: no thread pool of %d threads", n_threads);
        g_free(x);
        return NULL;
    }
    return x;
}

void vd_xnn_free(vd_xnn *x)
{
    if (x == NULL)
        return;
    pthreadpool_destroy(x->pool);
    free(x->workspace);
    free(x->tmp);
    free(x->tmp2);
    g_free(x);
}

void vd_xnn_op_free(vd_xnn_op *op)
{
    if (op == NULL)
        return;
    if (op->op != NULL)
        xnn_delete_operator(op->op);
    if (op->widen_sum != NULL)
        xnn_delete_operator(op->widen_sum);
    if (op->add != NULL)
        xnn_delete_operator(op->add);
    if (op->requantize != NULL)
        xnn_delete_operator(op->requantize);
    g_free(op->what);
    g_free(op);
}

const char *vd_xnn_op_impl(const vd_xnn_op *op)
{
    if (op->kind == OP_CONVERT)
        return "xnnpack:convert_f32_qs8";
    if (op->quant == Q_QS8)
        return "xnnpack:qs8_qc8w";
    if (op->quant == Q_QD8_F32)
        return op->add != NULL ? "xnnpack:qd8_f32_qc8w+add" : "xnnpack:qd8_f32_qc8w";
    return op->f16 ? "xnnpack:f16" : "xnnpack:f32";
}

/* XNNPACK's zero point of an int8 tensor the plan types @dt (see vd_cpu_xnnpack.h):
 * -128 for u8 (after a ReLU), 0 for s8. */
static int8_t zero_point(dnnl_data_type_t dt)
{
    return dt == dnnl_u8 ? -128 : 0;
}

/* Whether XNNPACK runs int8 here: on aarch64 only with the dot product (without it
 * XNNPACK's qs8 kernels widen to 16-bit products, several times slower, and every
 * targeted processor has it); its qs8_qc8w convolution probed once a process. */
gboolean vd_xnn_int8_supported(const char **why)
{
    static gsize once;
    static enum xnn_status status;
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    if (caps.arch == VD_CPU_ARCH_AARCH64 && !caps.dotprod) {
        *why = "the processor has no dot product (asimddp), which XNNPACK's fast int8 kernels "
               "need";
        return FALSE;
    }
    if (g_once_init_enter(&once)) {
        enum xnn_status st = xnn_initialize(NULL);
        if (st == xnn_status_success) {
            const int8_t w[8 * 8] = {0};
            const int32_t b[8] = {0};
            const float ws[8] = {1, 1, 1, 1, 1, 1, 1, 1};
            xnn_operator_t op = NULL;
            st = xnn_create_convolution2d_nhwc_qs8_qc8w(0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 8, 8, 8, 8,
                                                        0, 1.0f, ws, w, b, 0, 1.0f, -128, 127, 0,
                                                        NULL, NULL, &op);
            if (op != NULL)
                xnn_delete_operator(op);
        }
        status = st;
        g_once_init_leave(&once, 1);
    }
    *why = status == xnn_status_success ? "XNNPACK runs its int8 operators here"
           : status == xnn_status_unsupported_hardware
               ? "XNNPACK has no int8 kernels for this processor"
               : "XNNPACK made no int8 operator";
    return status == xnn_status_success;
}

/* Whether XNNPACK runs its fp16 operators on this processor: they exist where its
 * hardware configuration has fp16 kernels (aarch64 with the FP16 arithmetic, x86
 * with AVX2 and F16C); elsewhere their create calls answer "unsupported hardware".
 * Probed once a process with a small convolution. */
gboolean vd_xnn_f16_supported(const char **why)
{
    static gsize once;
    static enum xnn_status status;
    if (g_once_init_enter(&once)) {
        enum xnn_status st = xnn_initialize(NULL);
        if (st == xnn_status_success) {
            const float w[8 * 8] = {0}, b[8] = {0};
            xnn_operator_t op = NULL;
            st = xnn_create_convolution2d_nhwc_f16(0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 8, 8, 8, 8, w,
                                                   b, -INFINITY, INFINITY,
                                                   XNN_FLAG_FP32_STATIC_WEIGHTS, NULL, NULL, &op);
            if (op != NULL)
                xnn_delete_operator(op);
        }
        status = st;
        g_once_init_leave(&once, 1);
    }
    *why = status == xnn_status_success ? "XNNPACK runs fp16 operators here"
           : status == xnn_status_unsupported_hardware
               ? "XNNPACK has no fp16 kernels for this processor"
               : "XNNPACK made no fp16 operator";
    return status == xnn_status_success;
}

/* Whether @src and @dst (dnnl_f32 or dnnl_f16) make an operator XNNPACK runs here:
 * float32, fp16, or fp16 widened to a float32 output; *@f16, *@widen say which. */
static gboolean op_types(dnnl_data_type_t src, dnnl_data_type_t dst, gboolean *f16, gboolean *widen,
                         const char *what, GError **error)
{
    *f16 = src == dnnl_f16;
    *widen = *f16 && dst == dnnl_f32;
    if ((src == dnnl_f32 && dst == dnnl_f32) || (*f16 && (dst == dnnl_f16 || *widen)))
        return TRUE;
    g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                "%s: XNNPACK's layers run float32 or fp16 here, not %s to %s", what,
                src == dnnl_bf16 ? "bf16" : "this type", dst == dnnl_bf16 ? "bf16" : "this type");
    return FALSE;
}

static vd_xnn_op *op_new(op_kind kind, const char *what)
{
    vd_xnn_op *op = g_new0(vd_xnn_op, 1);
    op->kind = kind;
    op->what = g_strdup(what);
    return op;
}

/* Grows *@buf to @bytes (64-byte aligned); FALSE when out of memory. */
static gboolean grow(void **buf, size_t *size, size_t bytes, const char *what, GError **error)
{
    if (bytes <= *size)
        return TRUE;
    free(*buf);
    *buf = NULL;
    *size = 0;
    bytes = (bytes + 63) / 64 * 64 + 128; /* and XNNPACK's reads past the end */
    if (posix_memalign(buf, 64, bytes) != 0) {
        *buf = NULL;
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory: %zu bytes for %s",
                    bytes, what);
        return FALSE;
    }
    *size = bytes;
    return TRUE;
}

/* torch's weights in XNNPACK's layout, [groups][out/groups][kh][kw][in/groups]:
 * from [out][in/groups][kh][kw] (a convolution) or [in][out][kh][kw] (a transposed
 * one, groups 1). */
static float *xnn_weights(const vd_conv_desc *d, const float *w)
{
    int k2 = d->kernel * d->kernel;
    int ig = d->in_c / d->groups;
    float *t = g_new(float, (size_t)d->out_c *ig *k2);
    for (int o = 0; o < d->out_c; o++)
        for (int i = 0; i < ig; i++)
            for (int s = 0; s < k2; s++) {
                size_t from =
                    d->deconv ? ((size_t)i * d->out_c + o) * k2 + s : ((size_t)o * ig + i) * k2 + s;
                t[((size_t)o * k2 + s) * ig + i] = w[from];
            }
    return t;
}

/* An int8 convolution (vd_cpu_xnnpack.h): the weights quantised with
 * desc->wei_scales (round(w / scale), in [-127, 127]) in XNNPACK's layout @w; a
 * qs8_qc8w operator (its bias in int32 at src's scale times the channel's) to an
 * int8 dst, a qd8_f32_qc8w one (float32 bias) to a float32 dst or one with a sum.
 * The ReLU: an int8 dst's clamp at its zero point (u8's -128 is the saturation), a
 * float32 dst's at 0. A sum, as x86's in the accumulator, rounds nothing between
 * the product and dst: the convolution's real output (in tmp) plus dst's previous
 * contents widened (XNNPACK's qs8 -> f32 conversion into tmp2, its f32 add), then
 * quantised into dst (its f32 -> qs8 conversion, whose saturation at u8's -128 is
 * the ReLU after the sum; a signed dst takes none). */
static gboolean conv_new_int8(vd_xnn *x, vd_xnn_op *op, const vd_conv_desc *desc, const float *w,
                              const float *bias, size_t *out_h, size_t *out_w, size_t *align,
                              const char *what, GError **error)
{
    gboolean to_int8 = vd_layers_is_int8(desc->dst_dt);
    gboolean relu = desc->act == VD_ACT_RELU;
    if (desc->deconv || (!to_int8 && desc->dst_dt != dnnl_f32) || desc->wei_scales == NULL ||
        desc->act == VD_ACT_HARDSWISH || desc->act == VD_ACT_RELU6 ||
        (desc->sum && (!to_int8 || (relu && desc->dst_dt != dnnl_u8)))) {
        g_set_error(
            error, VD_ERROR, VD_ERROR_INTERNAL,
            "%s: XNNPACK's int8 convolutions take no transposed convolution, "
            "hardswish, ReLU6, sum onto a float32 output or ReLU after a sum onto a signed one",
            what);
        return FALSE;
    }
    int k2 = desc->kernel * desc->kernel;
    size_t ig = (size_t)(desc->in_c / desc->groups), og = (size_t)(desc->out_c / desc->groups);
    size_t per_oc = ig * (size_t)k2;
    int8_t *wq = g_new(int8_t, (size_t)desc->out_c * per_oc);
    for (int o = 0; o < desc->out_c; o++)
        for (size_t i = 0; i < per_oc; i++) {
            float q = roundf(w[o * per_oc + i] / desc->wei_scales[o]);
            wq[o * per_oc + i] = (int8_t)CLAMP(q, -127.0f, 127.0f);
        }
    uint32_t p = (uint32_t)desc->padding, k = (uint32_t)desc->kernel, s = (uint32_t)desc->stride;
    uint32_t d = (uint32_t)MAX(desc->dilation, 1);
    size_t ic = (size_t)desc->in_c, oc = (size_t)desc->out_c;
    int8_t src_zp = zero_point(desc->src_dt);
    gboolean ok;
    if (to_int8 && !desc->sum) {
        int32_t *bq = g_new0(int32_t, desc->out_c);
        for (int o = 0; bias != NULL && o < desc->out_c; o++) {
            double b = rint((double)bias[o] / ((double)desc->src_scale * desc->wei_scales[o]));
            bq[o] = (int32_t)CLAMP(b, -2147483647.0, 2147483647.0);
        }
        int8_t dst_zp = zero_point(desc->dst_dt);
        op->quant = Q_QS8;
        ok = check(xnn_create_convolution2d_nhwc_qs8_qc8w(
                       p, p, p, p, k, k, s, s, d, d, (uint32_t)desc->groups, ig, og, ic, oc, src_zp,
                       desc->src_scale, desc->wei_scales, wq, bq, dst_zp, desc->dst_scale,
                       relu ? dst_zp : -128, 127, 0, NULL, NULL, &op->op),
                   "xnn_create_convolution2d_nhwc_qs8_qc8w", what, error) &&
             check(xnn_reshape_convolution2d_nhwc_qs8_qc8w(
                       op->op, (size_t)desc->n, (size_t)desc->in_h, (size_t)desc->in_w,
                       &op->workspace_size, align, out_h, out_w, x->pool),
                   "xnn_reshape_convolution2d_nhwc_qs8_qc8w", what, error);
        g_free(bq);
    } else {
        op->quant = Q_QD8_F32;
        for (guint i = 0; i < G_N_ELEMENTS(op->src_q); i++)
            op->src_q[i] = (struct xnn_quantization_params){src_zp, desc->src_scale};
        ok = check(xnn_create_convolution2d_nhwc_qd8_f32_qc8w(
                       p, p, p, p, k, k, s, s, d, d, (uint32_t)desc->groups, ig, og, ic, oc,
                       desc->wei_scales, wq, bias, relu && !desc->sum ? 0.0f : -INFINITY, INFINITY,
                       0, NULL, NULL, &op->op),
                   "xnn_create_convolution2d_nhwc_qd8_f32_qc8w", what, error) &&
             check(xnn_reshape_convolution2d_nhwc_qd8_f32_qc8w(
                       op->op, (size_t)desc->n, (size_t)desc->in_h, (size_t)desc->in_w,
                       &op->workspace_size, align, out_h, out_w, x->pool),
                   "xnn_reshape_convolution2d_nhwc_qd8_f32_qc8w", what, error);
        if (ok && desc->sum) {
            struct xnn_quantization_params sum_q = {zero_point(desc->sum_dt), desc->sum_scale},
                                           dst_q = {zero_point(desc->dst_dt), desc->dst_scale};
            size_t n = (size_t)desc->n * desc->out_h * desc->out_w * desc->out_c;
            ok = check(xnn_create_unary_elementwise_nc(xnn_unary_convert, xnn_datatype_qint8,
                                                       xnn_datatype_fp32, NULL, &sum_q, NULL, 0,
                                                       &op->widen_sum),
                       "xnn_create_unary_elementwise_nc (qs8 -> f32)", what, error) &&
                 check(xnn_reshape_unary_elementwise_nc(op->widen_sum, 1, n, n, n, x->pool),
                       "xnn_reshape_unary_elementwise_nc (qs8 -> f32)", what, error) &&
                 check(xnn_create_binary_elementwise_nd(xnn_binary_add, xnn_datatype_fp32, NULL,
                                                        NULL, NULL, 0, &op->add),
                       "xnn_create_binary_elementwise_nd (f32 add)", what, error) &&
                 check(xnn_reshape_binary_elementwise_nd(op->add, 1, &n, 1, &n, x->pool),
                       "xnn_reshape_binary_elementwise_nd (f32 add)", what, error) &&
                 check(xnn_create_unary_elementwise_nc(xnn_unary_convert, xnn_datatype_fp32,
                                                       xnn_datatype_qint8, NULL, NULL, &dst_q, 0,
                                                       &op->requantize),
                       "xnn_create_unary_elementwise_nc (f32 -> qs8)", what, error) &&
                 check(xnn_reshape_unary_elementwise_nc(op->requantize, 1, n, n, n, x->pool),
                       "xnn_reshape_unary_elementwise_nc (f32 -> qs8)", what, error) &&
                 grow(&x->tmp2, &x->tmp2_size, n * sizeof(float), "a residual sum's input", error);
        }
    }
    g_free(wq); /* XNNPACK packed its own copy */
    return ok;
}

vd_xnn_op *vd_xnn_conv_new(vd_xnn *x, const vd_conv_desc *desc, const float *weight,
                           const float *bias, const char *what, GError **error)
{
    gboolean f16 = FALSE, widen = FALSE;
    gboolean int8 = vd_layers_is_int8(desc->src_dt);
    if (!int8 && !op_types(desc->src_dt, desc->dst_dt, &f16, &widen, what, error))
        return NULL;
    if (desc->deconv && (desc->groups != 1 || desc->sum || MAX(desc->dilation, 1) > 1)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: a grouped or dilated transposed convolution, or one with a sum", what);
        return NULL;
    }
    if (widen && desc->sum) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: a sum onto a float32 output of an fp16 layer", what);
        return NULL;
    }
    vd_xnn_op *op = op_new(desc->deconv ? OP_DECONV : OP_CONV, what);
    op->f16 = f16;
    op->widen = widen;
    /* ReLU and ReLU6 are XNNPACK's clamp unless a sum comes first; hardswish is ours */
    gboolean clamp = (desc->act == VD_ACT_RELU || desc->act == VD_ACT_RELU6) && !desc->sum;
    op->sum = desc->sum && !int8; /* int8: XNNPACK's add */
    op->act = int8 || clamp ? VD_ACT_NONE : desc->act;
    float lo = clamp ? 0.0f : -INFINITY;
    float hi = clamp && desc->act == VD_ACT_RELU6 ? 6.0f : INFINITY;
    float *w = xnn_weights(desc, weight);
    uint32_t p = (uint32_t)desc->padding, k = (uint32_t)desc->kernel, s = (uint32_t)desc->stride;
    /* torch's dilation (1: none), as XNNPACK counts it */
    uint32_t d = (uint32_t)MAX(desc->dilation, 1);
    size_t ig = (size_t)(desc->in_c / desc->groups), og = (size_t)(desc->out_c / desc->groups);
    size_t out_h = 0, out_w = 0, align = 0;
    enum xnn_status st;
    gboolean ok;

    /* fp16: the float32 weights and bias, which XNNPACK rounds as it packs them */
    uint32_t flags = f16 ? XNN_FLAG_FP32_STATIC_WEIGHTS : 0;
    size_t ic = (size_t)desc->in_c, oc = (size_t)desc->out_c;
    if (int8) {
        ok = conv_new_int8(x, op, desc, w, bias, &out_h, &out_w, &align, what, error);
    } else if (desc->deconv && f16) {
        st = xnn_create_deconvolution2d_nhwc_f16(p, p, p, p, k, k, s, s, 1, 1, 1, ig, og, ic, oc, w,
                                                 bias, lo, hi, flags, NULL, NULL, &op->op);
        ok = check(st, "xnn_create_deconvolution2d_nhwc_f16", what, error) &&
             check(xnn_reshape_deconvolution2d_nhwc_f16(op->op, (size_t)desc->n, (size_t)desc->in_h,
                                                        (size_t)desc->in_w, 0, 0, &out_h, &out_w,
                                                        x->pool),
                   "xnn_reshape_deconvolution2d_nhwc_f16", what, error);
    } else if (desc->deconv) {
        st = xnn_create_deconvolution2d_nhwc_f32(p, p, p, p, k, k, s, s, 1, 1, 1, ig, og, ic, oc, w,
                                                 bias, lo, hi, 0, NULL, NULL, &op->op);
        ok = check(st, "xnn_create_deconvolution2d_nhwc_f32", what, error) &&
             check(xnn_reshape_deconvolution2d_nhwc_f32(op->op, (size_t)desc->n, (size_t)desc->in_h,
                                                        (size_t)desc->in_w, 0, 0, &out_h, &out_w,
                                                        x->pool),
                   "xnn_reshape_deconvolution2d_nhwc_f32", what, error);
    } else if (f16) {
        st = xnn_create_convolution2d_nhwc_f16(p, p, p, p, k, k, s, s, d, d, (uint32_t)desc->groups,
                                               ig, og, ic, oc, w, bias, lo, hi, flags, NULL, NULL,
                                               &op->op);
        ok = check(st, "xnn_create_convolution2d_nhwc_f16", what, error) &&
             check(xnn_reshape_convolution2d_nhwc_f16(op->op, (size_t)desc->n, (size_t)desc->in_h,
                                                      (size_t)desc->in_w, &op->workspace_size,
                                                      &align, &out_h, &out_w, x->pool),
                   "xnn_reshape_convolution2d_nhwc_f16", what, error);
    } else {
        st = xnn_create_convolution2d_nhwc_f32(p, p, p, p, k, k, s, s, d, d, (uint32_t)desc->groups,
                                               ig, og, ic, oc, w, bias, lo, hi, 0, NULL, NULL,
                                               &op->op);
        ok = check(st, "xnn_create_convolution2d_nhwc_f32", what, error) &&
             check(xnn_reshape_convolution2d_nhwc_f32(op->op, (size_t)desc->n, (size_t)desc->in_h,
                                                      (size_t)desc->in_w, &op->workspace_size,
                                                      &align, &out_h, &out_w, x->pool),
                   "xnn_reshape_convolution2d_nhwc_f32", what, error);
    }
    g_free(w); /* XNNPACK packed its own copy */
    if (ok && (out_h != (size_t)desc->out_h || out_w != (size_t)desc->out_w)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: XNNPACK's output is %zux%zu, not %dx%d", what, out_h, out_w, desc->out_h,
                    desc->out_w);
        ok = FALSE;
    }
    if (ok && align > 64) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: XNNPACK's workspace wants %zu-byte alignment", what, align);
        ok = FALSE;
    }
    op->dst_floats = (size_t)desc->n * desc->out_h * desc->out_w * desc->out_c;
    size_t value_size = f16 ? 2 : sizeof(float); /* of tmp's values (int8: a sum's real ones) */
    /* the context's shared buffers, grown now rather than at a frame */
    ok =
        ok &&
        grow(&x->workspace, &x->workspace_size, op->workspace_size, "XNNPACK's workspace", error) &&
        (!(op->sum || op->widen || op->add != NULL) ||
         grow(&x->tmp, &x->tmp_size, op->dst_floats * value_size, "a convolution's output", error));
    if (!ok) {
        vd_xnn_op_free(op);
        return NULL;
    }
    return op;
}

vd_xnn_op *vd_xnn_linear_new(vd_xnn *x, int in, int out, const float *weight, const float *bias,
                             gboolean relu, dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt,
                             const char *what, GError **error)
{
    (void)x;
    gboolean f16, widen;
    if (!op_types(src_dt, dst_dt, &f16, &widen, what, error))
        return NULL;
    vd_xnn_op *op = op_new(OP_LINEAR, what);
    op->out = out;
    op->dst_floats = (size_t)out;
    op->f16 = f16;
    op->widen = widen;
    float lo = relu ? 0.0f : -INFINITY;
    if (f16 ? !check(xnn_create_fully_connected_nc_f16(
                         (size_t)in, (size_t)out, (size_t)in, (size_t)out, weight, bias, lo,
                         INFINITY, XNN_FLAG_FP32_STATIC_WEIGHTS, NULL, NULL, &op->op),
                     "xnn_create_fully_connected_nc_f16", what, error)
            : !check(xnn_create_fully_connected_nc_f32((size_t)in, (size_t)out, (size_t)in,
                                                       (size_t)out, weight, bias, lo, INFINITY, 0,
                                                       NULL, NULL, &op->op),
                     "xnn_create_fully_connected_nc_f32", what, error)) {
        vd_xnn_op_free(op);
        return NULL;
    }
    return op;
}

vd_xnn_op *vd_xnn_max_pool_new(vd_xnn *x, int c, int in_h, int in_w, int kernel, int stride,
                               int padding, dnnl_data_type_t dt, const char *what, GError **error)
{
    int out_h = (in_h + 2 * padding - kernel) / stride + 1;
    int out_w = (in_w + 2 * padding - kernel) / stride + 1;
    vd_xnn_pool_desc desc = {.c = c,
                             .in_h = in_h,
                             .in_w = in_w,
                             .out_h = out_h,
                             .out_w = out_w,
                             .kernel = kernel,
                             .stride = stride,
                             .pad_top = padding,
                             .pad_left = padding,
                             .pad_bottom = padding,
                             .pad_right = padding};
    return vd_xnn_max_pool_pad_new(x, &desc, dt, what, error);
}

gboolean vd_xnn_max_pool_runs(int kernel, int stride, const char **why)
{
    /* XNNPACK refuses, at the operator's creation, a 1x1 window (a copy or a
     * subsampling, no pooling) and a stride over the window (inputs skipped) */
    *why = kernel < 2        ? "XNNPACK's max pooling takes no 1x1 window"
           : stride > kernel ? "XNNPACK's max pooling takes no stride longer than its window"
                             : "XNNPACK's max pooling runs it";
    return kernel >= 2 && stride <= kernel;
}

vd_xnn_op *vd_xnn_max_pool_pad_new(vd_xnn *x, const vd_xnn_pool_desc *d, dnnl_data_type_t dt,
                                   const char *what, GError **error)
{
    gboolean f16, widen;
    const char *why = NULL;
    if (!op_types(dt, dt, &f16, &widen, what, error))
        return NULL;
    if (!vd_xnn_max_pool_runs(d->kernel, d->stride, &why)) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "%s: %s", what, why);
        return NULL;
    }
    vd_xnn_op *op = op_new(OP_POOL, what);
    op->f16 = f16;
    uint32_t pt = (uint32_t)d->pad_top, pl = (uint32_t)d->pad_left, pb = (uint32_t)d->pad_bottom,
             pr = (uint32_t)d->pad_right, k = (uint32_t)d->kernel, s = (uint32_t)d->stride;
    size_t c = (size_t)d->c, out_h = 0, out_w = 0;
    gboolean ok = f16 ? check(xnn_create_max_pooling2d_nhwc_f16(pt, pr, pb, pl, k, k, s, s, 1, 1,
                                                                -INFINITY, INFINITY, 0, &op->op),
                              "xnn_create_max_pooling2d_nhwc_f16", what, error) &&
                            check(xnn_reshape_max_pooling2d_nhwc_f16(op->op, 1, (size_t)d->in_h,
                                                                     (size_t)d->in_w, c, c, c,
                                                                     &out_h, &out_w, x->pool),
                                  "xnn_reshape_max_pooling2d_nhwc_f16", what, error)
                      : check(xnn_create_max_pooling2d_nhwc_f32(pt, pr, pb, pl, k, k, s, s, 1, 1,
                                                                -INFINITY, INFINITY, 0, &op->op),
                              "xnn_create_max_pooling2d_nhwc_f32", what, error) &&
                            check(xnn_reshape_max_pooling2d_nhwc_f32(op->op, 1, (size_t)d->in_h,
                                                                     (size_t)d->in_w, c, c, c,
                                                                     &out_h, &out_w, x->pool),
                                  "xnn_reshape_max_pooling2d_nhwc_f32", what, error);
    if (ok && (out_h != (size_t)d->out_h || out_w != (size_t)d->out_w)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: XNNPACK's output is %zux%zu, not %dx%d", what, out_h, out_w, d->out_h,
                    d->out_w);
        ok = FALSE;
    }
    if (!ok) {
        vd_xnn_op_free(op);
        return NULL;
    }
    op->dst_floats = out_h * out_w * c;
    return op;
}

vd_xnn_op *vd_xnn_quantize_new(vd_xnn *x, size_t n_values, float scale, dnnl_data_type_t dt,
                               const char *what, GError **error)
{
    vd_xnn_op *op = op_new(OP_CONVERT, what);
    struct xnn_quantization_params q = {zero_point(dt), scale};
    if (!vd_layers_is_int8(dt)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%s: a quantisation to a float type", what);
        vd_xnn_op_free(op);
        return NULL;
    }
    if (!check(xnn_create_unary_elementwise_nc(xnn_unary_convert, xnn_datatype_fp32,
                                               xnn_datatype_qint8, NULL, NULL, &q, 0, &op->op),
               "xnn_create_unary_elementwise_nc (f32 -> qs8)", what, error) ||
        !check(xnn_reshape_unary_elementwise_nc(op->op, 1, n_values, n_values, n_values, x->pool),
               "xnn_reshape_unary_elementwise_nc (f32 -> qs8)", what, error)) {
        vd_xnn_op_free(op);
        return NULL;
    }
    op->dst_floats = n_values;
    return op;
}

/* The pass after a layer: dst = act(dst + add) (@add NULL: act(dst)), float32;
 * fp16 (@f16): the same on the values widened, rounded back to fp16; @widen: dst
 * (float32) = act(add) from the fp16 output in @add. */
typedef struct {
    void *dst;
    const void *add;
    vd_activation act;
    gboolean f16, widen;
} epilogue;

static inline float activate(float v, vd_activation act)
{
    if (act == VD_ACT_RELU)
        return v > 0.0f ? v : 0.0f;
    if (act == VD_ACT_RELU6)
        return v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f;
    if (act == VD_ACT_HARDSWISH)
        return vd_math_hardswish(v);
    return v;
}

static void epilogue_tile(void *p, size_t start, size_t n)
{
    const epilogue *e = p;
    if (e->widen) {
        float *restrict d = (float *)e->dst + start;
        const uint16_t *restrict a = (const uint16_t *)e->add + start;
        for (size_t i = 0; i < n; i++)
            d[i] = activate(vd_f16_to_f32(a[i]), e->act);
    } else if (e->f16) {
        uint16_t *restrict d = (uint16_t *)e->dst + start;
        const uint16_t *restrict a = e->add != NULL ? (const uint16_t *)e->add + start : NULL;
        for (size_t i = 0; i < n; i++) {
            float v = vd_f16_to_f32(d[i]);
            if (a != NULL)
                v += vd_f16_to_f32(a[i]);
            d[i] = vd_f32_to_f16(activate(v, e->act));
        }
    } else {
        float *restrict d = (float *)e->dst + start;
        const float *restrict a = e->add != NULL ? (const float *)e->add + start : NULL;
        for (size_t i = 0; i < n; i++)
            d[i] = activate(a != NULL ? d[i] + a[i] : d[i], e->act);
    }
}

gboolean vd_xnn_run(vd_xnn *x, vd_xnn_op *op, int rows, const void *src, void *dst, GError **error)
{
    const char *what = op->what;
    size_t n = op->dst_floats;
    /* into tmp where the pass after it adds dst's contents or widens */
    void *out = op->sum || op->widen || op->add != NULL ? x->tmp : dst;
    enum xnn_status st;
    switch (op->kind) {
    case OP_CONV:
        st = op->quant == Q_QS8
                 ? xnn_setup_convolution2d_nhwc_qs8_qc8w(op->op, x->workspace, src, out)
             : op->quant == Q_QD8_F32 ? xnn_setup_convolution2d_nhwc_qd8_f32_qc8w(
                                            op->op, x->workspace, src, out, op->src_q)
             : op->f16 ? xnn_setup_convolution2d_nhwc_f16(op->op, x->workspace, src, out)
                       : xnn_setup_convolution2d_nhwc_f32(op->op, x->workspace, src, out);
        if (!check(st, "xnn_setup_convolution2d_nhwc", what, error))
            return FALSE;
        break;
    case OP_DECONV:
        st = op->f16 ? xnn_setup_deconvolution2d_nhwc_f16(op->op, src, out)
                     : xnn_setup_deconvolution2d_nhwc_f32(op->op, src, out);
        if (!check(st, "xnn_setup_deconvolution2d_nhwc", what, error))
            return FALSE;
        break;
    case OP_LINEAR:
        if (rows != op->rows) {
            st = op->f16 ? xnn_reshape_fully_connected_nc_f16(op->op, (size_t)rows, x->pool)
                         : xnn_reshape_fully_connected_nc_f32(op->op, (size_t)rows, x->pool);
            if (!check(st, "xnn_reshape_fully_connected_nc", what, error))
                return FALSE;
        }
        op->rows = rows;
        n *= (size_t)rows;
        if (op->widen) {
            /* the rows vary: tmp grows to the largest seen */
            if (!grow(&x->tmp, &x->tmp_size, n * 2, "a linear layer's output", error))
                return FALSE;
            out = x->tmp;
        }
        st = op->f16 ? xnn_setup_fully_connected_nc_f16(op->op, src, out)
                     : xnn_setup_fully_connected_nc_f32(op->op, src, out);
        if (!check(st, "xnn_setup_fully_connected_nc", what, error))
            return FALSE;
        break;
    case OP_CONVERT:
        if (!check(xnn_setup_unary_elementwise_nc(op->op, src, dst),
                   "xnn_setup_unary_elementwise_nc", what, error))
            return FALSE;
        break;
    case OP_POOL:
        st = op->f16 ? xnn_setup_max_pooling2d_nhwc_f16(op->op, src, out)
                     : xnn_setup_max_pooling2d_nhwc_f32(op->op, src, out);
        if (!check(st, "xnn_setup_max_pooling2d_nhwc", what, error))
            return FALSE;
        break;
    }
    if (!check(xnn_run_operator(op->op, x->pool), "xnn_run_operator", what, error))
        return FALSE;
    if (op->add != NULL)
        return check(xnn_setup_unary_elementwise_nc(op->widen_sum, dst, x->tmp2),
                     "xnn_setup_unary_elementwise_nc (qs8 -> f32)", what, error) &&
               check(xnn_run_operator(op->widen_sum, x->pool), "xnn_run_operator (qs8 -> f32)",
                     what, error) &&
               check(xnn_setup_binary_elementwise_nd(op->add, x->tmp, x->tmp2, x->tmp),
                     "xnn_setup_binary_elementwise_nd (f32 add)", what, error) &&
               check(xnn_run_operator(op->add, x->pool), "xnn_run_operator (f32 add)", what,
                     error) &&
               check(xnn_setup_unary_elementwise_nc(op->requantize, x->tmp, dst),
                     "xnn_setup_unary_elementwise_nc (f32 -> qs8)", what, error) &&
               check(xnn_run_operator(op->requantize, x->pool), "xnn_run_operator (f32 -> qs8)",
                     what, error);
    if (op->sum || op->widen || op->act != VD_ACT_NONE) {
        epilogue e = {dst, op->sum || op->widen ? x->tmp : NULL, op->act, op->f16, op->widen};
        pthreadpool_parallelize_1d_tile_1d(x->pool, epilogue_tile, &e, n, 4096, 0);
    }
    return TRUE;
}

#else /* !HAVE_XNNPACK */

static gboolean not_built(const char *what, GError **error)
{
    g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "%s: this build has no XNNPACK", what);
    return FALSE;
}

vd_xnn *vd_xnn_new(int n_threads, GError **error)
{
    (void)n_threads;
    not_built("the CPU backend's layers", error);
    return NULL;
}

void vd_xnn_free(vd_xnn *x)
{
    (void)x;
}

vd_xnn_op *vd_xnn_conv_new(vd_xnn *x, const vd_conv_desc *desc, const float *weight,
                           const float *bias, const char *what, GError **error)
{
    (void)x, (void)desc, (void)weight, (void)bias;
    not_built(what, error);
    return NULL;
}

vd_xnn_op *vd_xnn_linear_new(vd_xnn *x, int in, int out, const float *weight, const float *bias,
                             gboolean relu, dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt,
                             const char *what, GError **error)
{
    (void)x, (void)in, (void)out, (void)weight, (void)bias, (void)relu, (void)src_dt, (void)dst_dt;
    not_built(what, error);
    return NULL;
}

vd_xnn_op *vd_xnn_max_pool_new(vd_xnn *x, int c, int in_h, int in_w, int kernel, int stride,
                               int padding, dnnl_data_type_t dt, const char *what, GError **error)
{
    (void)x, (void)c, (void)in_h, (void)in_w, (void)kernel, (void)stride, (void)padding, (void)dt;
    not_built(what, error);
    return NULL;
}

vd_xnn_op *vd_xnn_max_pool_pad_new(vd_xnn *x, const vd_xnn_pool_desc *d, dnnl_data_type_t dt,
                                   const char *what, GError **error)
{
    (void)x, (void)d, (void)dt;
    not_built(what, error);
    return NULL;
}

gboolean vd_xnn_max_pool_runs(int kernel, int stride, const char **why)
{
    (void)kernel, (void)stride;
    *why = "this build has no XNNPACK";
    return FALSE;
}

gboolean vd_xnn_run(vd_xnn *x, vd_xnn_op *op, int rows, const void *src, void *dst, GError **error)
{
    (void)x, (void)op, (void)rows, (void)src, (void)dst;
    return not_built("a layer", error);
}

const char *vd_xnn_op_impl(const vd_xnn_op *op)
{
    (void)op;
    return "none";
}

gboolean vd_xnn_f16_supported(const char **why)
{
    *why = "this build has no XNNPACK";
    return FALSE;
}

gboolean vd_xnn_int8_supported(const char **why)
{
    *why = "this build has no XNNPACK";
    return FALSE;
}

vd_xnn_op *vd_xnn_quantize_new(vd_xnn *x, size_t n_values, float scale, dnnl_data_type_t dt,
                               const char *what, GError **error)
{
    (void)x, (void)n_values, (void)scale, (void)dt;
    not_built(what, error);
    return NULL;
}

static gboolean starts(void)
{
    return FALSE;
}

void vd_xnn_op_free(vd_xnn_op *op)
{
    (void)op;
}

#endif /* HAVE_XNNPACK */
