/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's layers on XNNPACK (see vd_cpu_xnnpack.h): its operator API
 * (create with the packed weights, reshape for the shapes, setup with the
 * pointers, run on a pthreadpool), float32 NHWC. XNNPACK fuses a clamp (ReLU)
 * into its convolutions and linear layers; a sum with dst's previous contents and
 * hardswish run after the layer, in one pass over its output on the same pool. */
#include "cpu/vd_cpu_xnnpack.h"

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

static choice probe(void)
{
    /* a 3x3 float32 convolution of 64 channels in NHWC, as the layers run it */
    vd_conv_desc desc = vd_layers_probe_desc(64, 32, dnnl_f32, dnnl_nhwc);
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
        c.use = vd_xnn_built();
        c.why = c.use ? "oneDNN has only reference kernels for this CPU"
                      : "oneDNN has only reference kernels for this CPU, and this build has no "
                        "XNNPACK";
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

#if HAVE_XNNPACK

typedef enum { OP_CONV, OP_DECONV, OP_LINEAR, OP_POOL } op_kind;

struct vd_xnn {
    pthreadpool_t pool;
    void *workspace; /* the convolutions' (XNNPACK's indirection and packing) */
    size_t workspace_size;
    float *tmp; /* a convolution's output before the sum */
    size_t tmp_size;
};

struct vd_xnn_op {
    op_kind kind;
    xnn_operator_t op;
    char *what;
    size_t workspace_size; /* a convolution's, from its reshape */
    size_t dst_floats;     /* per run (a linear layer's per row) */
    int out;               /* a linear layer's outputs */
    int rows;              /* the rows a linear layer was last reshaped for (0: none) */
    /* the pass after the layer: dst = act(dst + layer) with sum, else act(layer) */
    gboolean sum;
    vd_activation act; /* VD_ACT_HARDSWISH, or VD_ACT_RELU with sum (else fused) */
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
    g_free(x);
}

void vd_xnn_op_free(vd_xnn_op *op)
{
    if (op == NULL)
        return;
    if (op->op != NULL)
        xnn_delete_operator(op->op);
    g_free(op->what);
    g_free(op);
}

const char *vd_xnn_op_impl(const vd_xnn_op *op)
{
    (void)op;
    return "xnnpack:f32";
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

vd_xnn_op *vd_xnn_conv_new(vd_xnn *x, const vd_conv_desc *desc, const float *weight,
                           const float *bias, const char *what, GError **error)
{
    if (desc->src_dt != dnnl_f32 || desc->dst_dt != dnnl_f32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: XNNPACK's layers run float32 only here", what);
        return NULL;
    }
    if (desc->deconv && (desc->groups != 1 || desc->sum)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "%s: a grouped transposed convolution, or one with a sum", what);
        return NULL;
    }
    vd_xnn_op *op = op_new(desc->deconv ? OP_DECONV : OP_CONV, what);
    /* ReLU is XNNPACK's clamp unless a sum comes first; hardswish is ours */
    op->sum = desc->sum;
    op->act = desc->act == VD_ACT_RELU && !desc->sum ? VD_ACT_NONE : desc->act;
    float lo = desc->act == VD_ACT_RELU && !desc->sum ? 0.0f : -INFINITY;
    float *w = xnn_weights(desc, weight);
    uint32_t p = (uint32_t)desc->padding, k = (uint32_t)desc->kernel, s = (uint32_t)desc->stride;
    size_t ig = (size_t)(desc->in_c / desc->groups), og = (size_t)(desc->out_c / desc->groups);
    size_t out_h = 0, out_w = 0, align = 0;
    enum xnn_status st;
    gboolean ok;

    if (desc->deconv) {
        st = xnn_create_deconvolution2d_nhwc_f32(p, p, p, p, k, k, s, s, 1, 1, 1, ig, og,
                                                 (size_t)desc->in_c, (size_t)desc->out_c, w, bias,
                                                 lo, INFINITY, 0, NULL, NULL, &op->op);
        ok = check(st, "xnn_create_deconvolution2d_nhwc_f32", what, error) &&
             check(xnn_reshape_deconvolution2d_nhwc_f32(op->op, (size_t)desc->n, (size_t)desc->in_h,
                                                        (size_t)desc->in_w, 0, 0, &out_h, &out_w,
                                                        x->pool),
                   "xnn_reshape_deconvolution2d_nhwc_f32", what, error);
    } else {
        st = xnn_create_convolution2d_nhwc_f32(p, p, p, p, k, k, s, s, 1, 1, (uint32_t)desc->groups,
                                               ig, og, (size_t)desc->in_c, (size_t)desc->out_c, w,
                                               bias, lo, INFINITY, 0, NULL, NULL, &op->op);
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
    /* the context's shared buffers, grown now rather than at a frame */
    ok =
        ok &&
        grow(&x->workspace, &x->workspace_size, op->workspace_size, "XNNPACK's workspace", error) &&
        (!op->sum || grow((void **)&x->tmp, &x->tmp_size, op->dst_floats * sizeof(float),
                          "a convolution's output", error));
    if (!ok) {
        vd_xnn_op_free(op);
        return NULL;
    }
    return op;
}

vd_xnn_op *vd_xnn_linear_new(vd_xnn *x, int in, int out, const float *weight, const float *bias,
                             gboolean relu, const char *what, GError **error)
{
    (void)x;
    vd_xnn_op *op = op_new(OP_LINEAR, what);
    op->out = out;
    op->dst_floats = (size_t)out;
    if (!check(xnn_create_fully_connected_nc_f32((size_t)in, (size_t)out, (size_t)in, (size_t)out,
                                                 weight, bias, relu ? 0.0f : -INFINITY, INFINITY, 0,
                                                 NULL, NULL, &op->op),
               "xnn_create_fully_connected_nc_f32", what, error)) {
        vd_xnn_op_free(op);
        return NULL;
    }
    return op;
}

vd_xnn_op *vd_xnn_max_pool_new(vd_xnn *x, int c, int in_h, int in_w, int kernel, int stride,
                               int padding, const char *what, GError **error)
{
    vd_xnn_op *op = op_new(OP_POOL, what);
    uint32_t p = (uint32_t)padding, k = (uint32_t)kernel, s = (uint32_t)stride;
    size_t out_h = 0, out_w = 0;
    if (!check(xnn_create_max_pooling2d_nhwc_f32(p, p, p, p, k, k, s, s, 1, 1, -INFINITY, INFINITY,
                                                 0, &op->op),
               "xnn_create_max_pooling2d_nhwc_f32", what, error) ||
        !check(xnn_reshape_max_pooling2d_nhwc_f32(op->op, 1, (size_t)in_h, (size_t)in_w, (size_t)c,
                                                  (size_t)c, (size_t)c, &out_h, &out_w, x->pool),
               "xnn_reshape_max_pooling2d_nhwc_f32", what, error)) {
        vd_xnn_op_free(op);
        return NULL;
    }
    op->dst_floats = out_h * out_w * (size_t)c;
    return op;
}

/* The pass after a layer: dst = act(dst + add) (@add NULL: act(dst)). */
typedef struct {
    float *dst;
    const float *add;
    vd_activation act;
} epilogue;

static void epilogue_tile(void *p, size_t start, size_t n)
{
    const epilogue *e = p;
    float *restrict d = e->dst + start;
    const float *restrict a = e->add != NULL ? e->add + start : NULL;
    for (size_t i = 0; i < n; i++) {
        float v = a != NULL ? d[i] + a[i] : d[i];
        if (e->act == VD_ACT_RELU)
            v = v > 0.0f ? v : 0.0f;
        else if (e->act == VD_ACT_HARDSWISH)
            v = vd_math_hardswish(v);
        d[i] = v;
    }
}

gboolean vd_xnn_run(vd_xnn *x, vd_xnn_op *op, int rows, const void *src, void *dst, GError **error)
{
    const char *what = op->what;
    size_t n = op->dst_floats;
    float *out = dst;
    switch (op->kind) {
    case OP_CONV:
        if (op->sum)
            out = x->tmp; /* sized when the op was made */
        if (!check(xnn_setup_convolution2d_nhwc_f32(op->op, x->workspace, src, out),
                   "xnn_setup_convolution2d_nhwc_f32", what, error))
            return FALSE;
        break;
    case OP_DECONV:
        if (!check(xnn_setup_deconvolution2d_nhwc_f32(op->op, src, out),
                   "xnn_setup_deconvolution2d_nhwc_f32", what, error))
            return FALSE;
        break;
    case OP_LINEAR:
        if (rows != op->rows &&
            !check(xnn_reshape_fully_connected_nc_f32(op->op, (size_t)rows, x->pool),
                   "xnn_reshape_fully_connected_nc_f32", what, error))
            return FALSE;
        op->rows = rows;
        n *= (size_t)rows;
        if (!check(xnn_setup_fully_connected_nc_f32(op->op, src, out),
                   "xnn_setup_fully_connected_nc_f32", what, error))
            return FALSE;
        break;
    case OP_POOL:
        if (!check(xnn_setup_max_pooling2d_nhwc_f32(op->op, src, out),
                   "xnn_setup_max_pooling2d_nhwc_f32", what, error))
            return FALSE;
        break;
    }
    if (!check(xnn_run_operator(op->op, x->pool), "xnn_run_operator", what, error))
        return FALSE;
    if (op->sum || op->act != VD_ACT_NONE) {
        epilogue e = {dst, op->sum ? x->tmp : NULL, op->act};
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
                             gboolean relu, const char *what, GError **error)
{
    (void)x, (void)in, (void)out, (void)weight, (void)bias, (void)relu;
    not_built(what, error);
    return NULL;
}

vd_xnn_op *vd_xnn_max_pool_new(vd_xnn *x, int c, int in_h, int in_w, int kernel, int stride,
                               int padding, const char *what, GError **error)
{
    (void)x, (void)c, (void)in_h, (void)in_w, (void)kernel, (void)stride, (void)padding;
    not_built(what, error);
    return NULL;
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

void vd_xnn_op_free(vd_xnn_op *op)
{
    (void)op;
}

#endif /* HAVE_XNNPACK */
