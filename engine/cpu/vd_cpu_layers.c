/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's oneDNN layers (see vd_cpu_layers.h). Written against oneDNN's
 * v3 C API (3.0 and newer: Debian 13 has 3.7); the VD_DNNL2 branches are oneDNN
 * 2.x (Debian 12's 2.6), where a primitive descriptor is made from an operation
 * descriptor (*_desc_init, then dnnl_primitive_desc_create), a memory descriptor
 * is a struct the caller owns, the post-ops take a scale, and hardswish has no
 * parameters. Nothing outside this file depends on the version. */
#include "cpu/vd_cpu_layers.h"

#include "visiondetect/vd.h"

#include <math.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <string.h>

#if DNNL_VERSION_MAJOR < 3
#define VD_DNNL2 1
#endif

static gboolean check(dnnl_status_t status, const char *what, GError **error)
{
    if (status == dnnl_success)
        return TRUE;
    g_set_error(error, VD_ERROR,
                status == dnnl_out_of_memory ? VD_ERROR_OUT_OF_MEMORY : VD_ERROR_INTERNAL,
                "oneDNN failed in %s: %s", what, dnnl_status2str(status));
    return FALSE;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if (!check((call), what, error))                                                           \
            goto out;                                                                              \
    } while (0)

/* A memory descriptor this file owns for the length of one call: a struct in 2.x,
 * a handle to destroy in 3.x. Zero-initialise, then md_init. */
typedef struct {
    dnnl_memory_desc_t d;
} owned_md;

static dnnl_status_t md_init(owned_md *md, int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt,
                             dnnl_format_tag_t tag)
{
#ifdef VD_DNNL2
    return dnnl_memory_desc_init_by_tag(&md->d, ndims, dims, dt, tag);
#else
    return dnnl_memory_desc_create_with_tag(&md->d, ndims, dims, dt, tag);
#endif
}

static vd_layer_md md_get(const owned_md *md)
{
#ifdef VD_DNNL2
    return &md->d;
#else
    return md->d;
#endif
}

static void md_fini(owned_md *md)
{
#ifndef VD_DNNL2
    if (md->d != NULL)
        dnnl_memory_desc_destroy(md->d);
#endif
    memset(md, 0, sizeof(*md));
}

/* What one primitive descriptor is made from: its four memory descriptors and its
 * attributes. Zero-initialise; op_fini() frees what was made. */
typedef struct {
    owned_md src, wei, bias, dst;
    dnnl_primitive_attr_t attr;
} op_descs;

static void op_fini(op_descs *op)
{
    if (op->attr != NULL)
        dnnl_primitive_attr_destroy(op->attr);
    md_fini(&op->src);
    md_fini(&op->wei);
    md_fini(&op->bias);
    md_fini(&op->dst);
}

/* ------------------------------------------------------------------------ */
/* Engine, stream, ISA                                                       */

gboolean vd_layers_engine_new(dnnl_engine_t *engine, dnnl_stream_t *stream, GError **error)
{
    const char *what = "engine and stream creation";
    *engine = NULL;
    *stream = NULL;
    TRY(dnnl_engine_create(engine, dnnl_cpu, 0));
    TRY(dnnl_stream_create(stream, *engine, dnnl_stream_default_flags));
    return TRUE;
out:
    vd_layers_engine_free(*engine, *stream);
    *engine = NULL;
    *stream = NULL;
    return FALSE;
}

void vd_layers_engine_free(dnnl_engine_t engine, dnnl_stream_t stream)
{
    if (stream != NULL)
        dnnl_stream_destroy(stream);
    if (engine != NULL)
        dnnl_engine_destroy(engine);
}

gboolean vd_layers_wait(dnnl_stream_t stream, GError **error)
{
    return check(dnnl_stream_wait(stream), "stream wait", error);
}

dnnl_cpu_isa_t vd_layers_isa(void)
{
    return dnnl_get_effective_cpu_isa();
}

char *vd_layers_version(void)
{
    const dnnl_version_t *v = dnnl_version();
    return g_strdup_printf("%d.%d.%d", v->major, v->minor, v->patch);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

gboolean vd_layers_memory_new(dnnl_engine_t engine, int ndims, const dnnl_dims_t dims,
                              dnnl_data_type_t dt, dnnl_format_tag_t tag, void *handle,
                              dnnl_memory_t *out, const char *what, GError **error)
{
    owned_md md = {0};
    gboolean ok = FALSE;
    *out = NULL;
    TRY(md_init(&md, ndims, dims, dt, tag));
    TRY(dnnl_memory_create(out, md_get(&md), engine, handle));
    ok = TRUE;
out:
    md_fini(&md);
    return ok;
}

gboolean vd_layers_memory_like(dnnl_engine_t engine, vd_layer_md md, void *handle,
                               dnnl_memory_t *out, const char *what, GError **error)
{
    *out = NULL;
    return check(dnnl_memory_create(out, md, engine, handle), what, error);
}

vd_layer_md vd_layers_memory_md(dnnl_memory_t mem)
{
    vd_layer_md md = NULL;
    if (dnnl_memory_get_memory_desc(mem, &md) != dnnl_success)
        return NULL;
    return md;
}

void *vd_layers_memory_data(dnnl_memory_t mem)
{
    void *handle = NULL;
    if (dnnl_memory_get_data_handle(mem, &handle) != dnnl_success)
        return NULL;
    return handle;
}

gboolean vd_layers_memory_set_data(dnnl_memory_t mem, void *handle, const char *what,
                                   GError **error)
{
    return check(dnnl_memory_set_data_handle(mem, handle), what, error);
}

void vd_layers_memory_free(dnnl_memory_t mem)
{
    if (mem != NULL)
        dnnl_memory_destroy(mem);
}

size_t vd_layers_md_size(vd_layer_md md)
{
    return md != NULL ? dnnl_memory_desc_get_size(md) : 0;
}

gboolean vd_layers_md_equal(vd_layer_md a, vd_layer_md b)
{
    return dnnl_memory_desc_equal(a, b) != 0;
}

gboolean vd_layers_pack(dnnl_engine_t engine, dnnl_stream_t stream, dnnl_memory_t from,
                        vd_layer_md to, dnnl_memory_t *out, const char *what, GError **error)
{
    dnnl_primitive_t reorder = NULL;
    gboolean ok = FALSE;
    *out = NULL;
    if (!vd_layers_memory_like(engine, to, DNNL_MEMORY_ALLOCATE, out, what, error) ||
        !vd_layers_reorder_new(engine, vd_layers_memory_md(from), to, &reorder, what, error) ||
        !vd_layers_reorder(reorder, stream, from, *out, what, error) ||
        !vd_layers_wait(stream, error))
        goto out;
    ok = TRUE;
out:
    vd_layers_primitive_free(reorder);
    if (!ok) {
        vd_layers_memory_free(*out);
        *out = NULL;
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Primitive descriptors                                                     */

/* The attributes every layer gets: the user scratchpad (vd_layers_execute passes
 * the backend's shared one) and the post-ops: sum (@sum: dst's previous contents
 * times @sum_scale, read as @sum_dt; undef: dst's type), then @act. */
static gboolean attr_new(dnnl_primitive_attr_t *attr, gboolean sum, float sum_scale,
                         dnnl_data_type_t sum_dt, vd_activation act, const char *what,
                         GError **error)
{
    dnnl_post_ops_t ops = NULL;
    gboolean ok = FALSE;
    *attr = NULL;
    TRY(dnnl_primitive_attr_create(attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user));
    if (!sum && act == VD_ACT_NONE) {
        ok = TRUE;
        goto out;
    }
    TRY(dnnl_post_ops_create(&ops));
#ifdef VD_DNNL2
    if (sum)
        TRY(dnnl_post_ops_append_sum_v2(ops, sum_scale, sum_dt));
    if (act == VD_ACT_RELU)
        TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    else if (act == VD_ACT_HARDSWISH) /* x * relu6(x + 3) / 6, no parameters in 2.x */
        TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_hardswish, 0.0f, 0.0f));
    else if (act == VD_ACT_RELU6) /* min(max(x, alpha), beta) */
        TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, 0.0f, 6.0f));
#else
    if (sum)
        TRY(dnnl_post_ops_append_sum(ops, sum_scale, 0, sum_dt));
    if (act == VD_ACT_RELU)
        TRY(dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_relu, 0.0f, 0.0f));
    else if (act ==
             VD_ACT_HARDSWISH) /* x * max(0, min(1, alpha x + beta)): torch's with 1/6, 1/2 */
        TRY(dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_hardswish, 1.0f / 6.0f, 0.5f));
    else if (act == VD_ACT_RELU6) /* min(max(x, alpha), beta) */
        TRY(dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_clip, 0.0f, 6.0f));
#endif
    TRY(dnnl_primitive_attr_set_post_ops(*attr, ops));
    ok = TRUE;
out:
    if (ops != NULL)
        dnnl_post_ops_destroy(ops);
    if (!ok && *attr != NULL) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return ok;
}

gboolean vd_layers_is_int8(dnnl_data_type_t dt)
{
    return dt == dnnl_u8 || dt == dnnl_s8;
}

/* The scale that turns an int8 convolution's dst values into stored ones: dst's
 * own where it is int8, 1 for real values. */
static float dst_scale_of(const vd_conv_desc *desc)
{
    return vd_layers_is_int8(desc->dst_dt) ? desc->dst_scale : 1.0f;
}

/* An int8 convolution's post-ops and scales. oneDNN 2.x: one output scale per
 * output channel, src scale x weight scale / dst scale, applied to the
 * accumulator plus the bias before the post-ops, so the sum's scale is relative
 * to dst's (previous contents' scale / dst scale). 3.x: src, weights and dst
 * scales of their own, the bias added after src x weights, the post-ops on real
 * values and the dst scale last, so the sum's scale is the previous contents'. */
static gboolean attr_new_conv(dnnl_primitive_attr_t *attr, const vd_conv_desc *desc,
                              const char *what, GError **error)
{
    if (!vd_layers_is_int8(desc->src_dt))
        return attr_new(attr, desc->sum, 1.0f, dnnl_data_type_undef, desc->act, what, error);
    float dst_scale = dst_scale_of(desc);
    gboolean ok = FALSE;
    float *oscales = NULL;
#ifdef VD_DNNL2
    if (!attr_new(attr, desc->sum, desc->sum_scale / dst_scale, desc->sum_dt, desc->act, what,
                  error))
        return FALSE;
    oscales = g_new(float, desc->out_c);
    for (int oc = 0; oc < desc->out_c; oc++)
        oscales[oc] = desc->src_scale * desc->wei_scales[oc] / dst_scale;
    TRY(dnnl_primitive_attr_set_output_scales(*attr, desc->out_c, 1 << 1, oscales));
#else
    if (!attr_new(attr, desc->sum, desc->sum_scale, desc->sum_dt, desc->act, what, error))
        return FALSE;
    TRY(dnnl_primitive_attr_set_scales_mask(*attr, DNNL_ARG_SRC, 0));
    TRY(dnnl_primitive_attr_set_scales_mask(*attr, DNNL_ARG_WEIGHTS,
                                            MAX(desc->groups, 1) > 1 ? 3 : 1));
    if (vd_layers_is_int8(desc->dst_dt))
        TRY(dnnl_primitive_attr_set_scales_mask(*attr, DNNL_ARG_DST, 0));
#endif
    (void)dst_scale;
    ok = TRUE;
out:
    g_free(oscales);
    if (!ok) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return ok;
}

gboolean vd_layers_conv_pd(dnnl_engine_t engine, const vd_conv_desc *desc,
                           dnnl_primitive_desc_t *pd, const char *what, GError **error)
{
    int g = MAX(desc->groups, 1), k = desc->kernel;
    dnnl_dims_t src_dims = {desc->n, desc->in_c, desc->in_h, desc->in_w};
    dnnl_dims_t dst_dims = {desc->n, desc->out_c, desc->out_h, desc->out_w};
    dnnl_dims_t wei_dims = {desc->out_c, desc->in_c, k, k};
    dnnl_dims_t gwei_dims = {g, desc->out_c / g, desc->in_c / g, k, k};
    dnnl_dims_t bias_dims = {desc->out_c};
    dnnl_dims_t strides = {desc->stride, desc->stride};
    dnnl_dims_t pad = {desc->padding, desc->padding};
    /* oneDNN counts the dilation from 0 (torch's 1) */
    dnnl_dims_t dilates = {MAX(desc->dilation, 1) - 1, MAX(desc->dilation, 1) - 1};
    dnnl_alg_kind_t alg = desc->deconv     ? dnnl_deconvolution_direct
                          : desc->winograd ? dnnl_convolution_winograd
                                           : dnnl_convolution_direct;
    op_descs op = {0};
    gboolean ok = FALSE;

    *pd = NULL;
    if (desc->in_c % g != 0 || desc->out_c % g != 0 || (desc->deconv && g != 1)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%s: %d->%d channels in %d groups", what,
                    desc->in_c, desc->out_c, g);
        return FALSE;
    }
    if (desc->src_md == NULL)
        TRY(md_init(&op.src, 4, src_dims, desc->src_dt, desc->src_tag));
    TRY(md_init(&op.dst, 4, dst_dims, desc->dst_dt, desc->dst_tag));
    TRY(md_init(&op.wei, g > 1 ? 5 : 4, g > 1 ? gwei_dims : wei_dims,
                vd_layers_is_int8(desc->src_dt) ? dnnl_s8 : desc->src_dt, dnnl_format_tag_any));
    TRY(md_init(&op.bias, 1, bias_dims, dnnl_f32, dnnl_x));
    if (vd_layers_is_int8(desc->src_dt) && (desc->deconv || desc->wei_scales == NULL)) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%s: an int8 %s", what,
                    desc->deconv ? "transposed convolution" : "convolution without weight scales");
        goto out;
    }
    if (!attr_new_conv(&op.attr, desc, what, error))
        goto out;
    vd_layer_md src_md = desc->src_md != NULL ? desc->src_md : md_get(&op.src);
    vd_layer_md wei = md_get(&op.wei), bias = md_get(&op.bias), dst = md_get(&op.dst);
#ifdef VD_DNNL2
    if (desc->deconv) {
        dnnl_deconvolution_desc_t d;
        TRY(dnnl_dilated_deconvolution_forward_desc_init(
            &d, dnnl_forward_inference, alg, src_md, wei, bias, dst, strides, dilates, pad, pad));
        TRY(dnnl_primitive_desc_create(pd, &d, op.attr, engine, NULL));
    } else {
        dnnl_convolution_desc_t d;
        TRY(dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, alg, src_md, wei,
                                                       bias, dst, strides, dilates, pad, pad));
        TRY(dnnl_primitive_desc_create(pd, &d, op.attr, engine, NULL));
    }
#else
    if (desc->deconv)
        TRY(dnnl_deconvolution_forward_primitive_desc_create(pd, engine, dnnl_forward_inference,
                                                             alg, src_md, wei, bias, dst, strides,
                                                             dilates, pad, pad, op.attr));
    else
        TRY(dnnl_convolution_forward_primitive_desc_create(pd, engine, dnnl_forward_inference, alg,
                                                           src_md, wei, bias, dst, strides, dilates,
                                                           pad, pad, op.attr));
#endif
    ok = TRUE;
out:
    op_fini(&op);
    return ok;
}

gboolean vd_layers_matmul_pd(dnnl_engine_t engine, int rows, int in, int out,
                             dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt, vd_layer_md wei_md,
                             gboolean relu, dnnl_primitive_desc_t *pd, const char *what,
                             GError **error)
{
    dnnl_dims_t src_dims = {rows, in}, wei_dims = {in, out}, bias_dims = {1, out},
                dst_dims = {rows, out};
    op_descs op = {0};
    gboolean ok = FALSE;

    *pd = NULL;
    TRY(md_init(&op.src, 2, src_dims, src_dt, dnnl_ab));
    if (wei_md == NULL)
        TRY(md_init(&op.wei, 2, wei_dims, src_dt, dnnl_format_tag_any));
    TRY(md_init(&op.bias, 2, bias_dims, dnnl_f32, dnnl_ab));
    TRY(md_init(&op.dst, 2, dst_dims, dst_dt, dnnl_ab));
    if (!attr_new(&op.attr, FALSE, 1.0f, dnnl_data_type_undef, relu ? VD_ACT_RELU : VD_ACT_NONE,
                  what, error))
        goto out;
    vd_layer_md w = wei_md != NULL ? wei_md : md_get(&op.wei);
#ifdef VD_DNNL2
    dnnl_matmul_desc_t d;
    TRY(dnnl_matmul_desc_init(&d, md_get(&op.src), w, md_get(&op.bias), md_get(&op.dst)));
    TRY(dnnl_primitive_desc_create(pd, &d, op.attr, engine, NULL));
#else
    TRY(dnnl_matmul_primitive_desc_create(pd, engine, md_get(&op.src), w, md_get(&op.bias),
                                          md_get(&op.dst), op.attr));
#endif
    ok = TRUE;
out:
    op_fini(&op);
    return ok;
}

gboolean vd_layers_max_pool_pd(dnnl_engine_t engine, vd_layer_md src, vd_layer_md dst, int kernel,
                               int stride, int padding, dnnl_primitive_desc_t *pd, const char *what,
                               GError **error)
{
    return vd_layers_max_pool_pad_pd(engine, src, dst, kernel, stride, padding, padding, padding,
                                     pd, what, error);
}

gboolean vd_layers_max_pool_pad_pd(dnnl_engine_t engine, vd_layer_md src, vd_layer_md dst,
                                   int kernel, int stride, int padding, int padding_b,
                                   int padding_r, dnnl_primitive_desc_t *pd, const char *what,
                                   GError **error)
{
    dnnl_dims_t strides = {stride, stride}, window = {kernel, kernel}, dilation = {0, 0},
                pad = {padding, padding}, pad_r = {padding_b, padding_r};
    *pd = NULL;
#ifdef VD_DNNL2
    dnnl_pooling_v2_desc_t op;
    TRY(dnnl_pooling_v2_forward_desc_init(&op, dnnl_forward_inference, dnnl_pooling_max, src, dst,
                                          strides, window, dilation, pad, pad_r));
    TRY(dnnl_primitive_desc_create(pd, &op, NULL, engine, NULL));
#else
    TRY(dnnl_pooling_forward_primitive_desc_create(pd, engine, dnnl_forward_inference,
                                                   dnnl_pooling_max, src, dst, strides, window,
                                                   dilation, pad, pad_r, NULL));
#endif
    return TRUE;
out:
    return FALSE;
}

const char *vd_layers_pd_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (pd == NULL ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        impl == NULL)
        return "unknown";
    return impl;
}

size_t vd_layers_pd_scratchpad(const_dnnl_primitive_desc_t pd)
{
    return vd_layers_md_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
}

vd_layer_md vd_layers_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

void vd_layers_pd_free(dnnl_primitive_desc_t pd)
{
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
}

/* ------------------------------------------------------------------------ */
/* Primitives                                                                */

gboolean vd_layers_primitive_new(const_dnnl_primitive_desc_t pd, dnnl_primitive_t *prim,
                                 const char *what, GError **error)
{
    *prim = NULL;
    return check(dnnl_primitive_create(prim, pd), what, error);
}

gboolean vd_layers_reorder_new(dnnl_engine_t engine, vd_layer_md from, vd_layer_md to,
                               dnnl_primitive_t *prim, const char *what, GError **error)
{
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = FALSE;
    *prim = NULL;
    TRY(dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL));
    TRY(dnnl_primitive_create(prim, pd));
    ok = TRUE;
out:
    vd_layers_pd_free(pd);
    return ok;
}

#ifndef VD_DNNL2
/* A one-value (@n == 1) or per-channel float32 scale memory (3.x). */
static gboolean scale_memory(dnnl_engine_t engine, int n, const float *values, dnnl_memory_t *mem,
                             const char *what, GError **error)
{
    dnnl_dims_t dims = {n};
    if (!vd_layers_memory_new(engine, 1, dims, dnnl_f32, dnnl_x, DNNL_MEMORY_ALLOCATE, mem, what,
                              error))
        return FALSE;
    memcpy(vd_layers_memory_data(*mem), values, sizeof(float) * (size_t)n);
    return TRUE;
}
#endif

gboolean vd_layers_quantize_new(dnnl_engine_t engine, vd_layer_md from, vd_layer_md to, float scale,
                                dnnl_primitive_t *prim, vd_layer_scales *scales, const char *what,
                                GError **error)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    gboolean ok = FALSE;
    *prim = NULL;
    memset(scales, 0, sizeof(*scales));
    TRY(dnnl_primitive_attr_create(&attr));
#ifdef VD_DNNL2
    float inverse = 1.0f / scale;
    TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &inverse));
#else
    TRY(dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_DST, 0));
    if (!scale_memory(engine, 1, &scale, &scales->dst, what, error))
        goto out;
#endif
    TRY(dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr));
    TRY(dnnl_primitive_create(prim, pd));
    ok = TRUE;
out:
    vd_layers_pd_free(pd);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    if (!ok)
        vd_layers_scales_clear(scales);
    return ok;
}

gboolean vd_layers_conv_scales(dnnl_engine_t engine, const vd_conv_desc *desc,
                               vd_layer_scales *scales, const char *what, GError **error)
{
    memset(scales, 0, sizeof(*scales));
#ifndef VD_DNNL2
    if (!vd_layers_is_int8(desc->src_dt))
        return TRUE;
    if (!scale_memory(engine, 1, &desc->src_scale, &scales->src, what, error) ||
        !scale_memory(engine, desc->out_c, desc->wei_scales, &scales->wei, what, error) ||
        (vd_layers_is_int8(desc->dst_dt) &&
         !scale_memory(engine, 1, &desc->dst_scale, &scales->dst, what, error))) {
        vd_layers_scales_clear(scales);
        return FALSE;
    }
#else
    (void)engine;
    (void)desc;
    (void)what;
    (void)error;
#endif
    return TRUE;
}

void vd_layers_scales_clear(vd_layer_scales *scales)
{
    vd_layers_memory_free(scales->src);
    vd_layers_memory_free(scales->wei);
    vd_layers_memory_free(scales->dst);
    memset(scales, 0, sizeof(*scales));
}

int vd_layers_scale_args(const vd_layer_scales *scales, dnnl_exec_arg_t *args)
{
    int n = 0;
#ifndef VD_DNNL2
    if (scales->src != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, scales->src};
    if (scales->wei != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, scales->wei};
    if (scales->dst != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, scales->dst};
#else
    (void)scales;
    (void)args;
#endif
    return n;
}

const_dnnl_primitive_desc_t vd_layers_primitive_pd(dnnl_primitive_t prim)
{
    const_dnnl_primitive_desc_t pd = NULL;
    if (prim == NULL || dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success)
        return NULL;
    return pd;
}

void vd_layers_primitive_free(dnnl_primitive_t prim)
{
    if (prim != NULL)
        dnnl_primitive_destroy(prim);
}

gboolean vd_layers_execute(dnnl_primitive_t prim, dnnl_stream_t stream, int n_args,
                           const dnnl_exec_arg_t *args, const char *what, GError **error)
{
    return check(dnnl_primitive_execute(prim, stream, n_args, args), what, error);
}

gboolean vd_layers_reorder(dnnl_primitive_t prim, dnnl_stream_t stream, dnnl_memory_t from,
                           dnnl_memory_t to, const char *what, GError **error)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return vd_layers_execute(prim, stream, 2, args, what, error);
}

gboolean vd_layers_conv_weights(dnnl_engine_t engine, dnnl_stream_t stream,
                                const_dnnl_primitive_desc_t pd, const vd_conv_desc *desc,
                                const float *weight, const float *bias, dnnl_memory_t *weights,
                                dnnl_memory_t *bias_mem, const char *what, GError **error)
{
    int g = MAX(desc->groups, 1), k = desc->kernel;
    dnnl_dims_t wei_dims = {desc->out_c, desc->in_c, k, k};
    dnnl_dims_t gwei_dims = {g, desc->out_c / g, desc->in_c / g, k, k};
    dnnl_dims_t bias_dims = {desc->out_c};
    dnnl_memory_t user = NULL;
    gboolean int8 = vd_layers_is_int8(desc->src_dt);
    float *quantised = NULL;
    gboolean ok = FALSE;

    *weights = NULL;
    *bias_mem = NULL;
    if (int8) {
        /* round(w / scale) per output channel (each one's weights are contiguous
         * in [out][in / groups][k][k]), exact in float32, then converted to s8 by
         * the packing reorder */
        size_t per_oc = (size_t)(desc->in_c / g) * k * k;
        quantised = g_try_new(float, per_oc * desc->out_c);
        if (quantised == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory: %s", what);
            return FALSE;
        }
        for (int oc = 0; oc < desc->out_c; oc++)
            for (size_t i = 0; i < per_oc; i++) {
                float q = nearbyintf(weight[oc * per_oc + i] / desc->wei_scales[oc]);
                quantised[oc * per_oc + i] = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            }
        weight = quantised;
    }
    if (!vd_layers_memory_new(engine, g > 1 ? 5 : 4, g > 1 ? gwei_dims : wei_dims, dnnl_f32,
                              g > 1          ? dnnl_goihw
                              : desc->deconv ? dnnl_iohw
                                             : dnnl_oihw,
                              (void *)weight, &user, what, error) ||
        !vd_layers_pack(engine, stream, user, vd_layers_pd_md(pd, dnnl_query_weights_md), weights,
                        what, error) ||
        !vd_layers_memory_new(engine, 1, bias_dims, dnnl_f32, dnnl_x, DNNL_MEMORY_ALLOCATE,
                              bias_mem, what, error))
        goto out;
    float *b = vd_layers_memory_data(*bias_mem);
    memcpy(b, bias, sizeof(float) * (size_t)desc->out_c);
#ifdef VD_DNNL2
    /* 2.x adds the bias to the accumulator, before the output scale */
    if (int8)
        for (int oc = 0; oc < desc->out_c; oc++)
            b[oc] /= desc->src_scale * desc->wei_scales[oc];
#endif
    ok = TRUE;
out:
    vd_layers_memory_free(user);
    g_free(quantised);
    if (!ok) {
        vd_layers_memory_free(*weights);
        vd_layers_memory_free(*bias_mem);
        *weights = *bias_mem = NULL;
    }
    return ok;
}

vd_conv_desc vd_layers_probe_desc(int c, int h, int w, dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
    vd_conv_desc desc = {
        .n = 1,
        .in_c = c,
        .out_c = c,
        .groups = 1,
        .in_h = h,
        .in_w = w,
        .out_h = h,
        .out_w = w,
        .kernel = 3,
        .stride = 1,
        .padding = 1,
        .src_dt = dt,
        .dst_dt = dt,
        .src_tag = tag,
        .dst_tag = tag,
    };
    return desc;
}

gboolean vd_layers_has_winograd(dnnl_engine_t engine, dnnl_format_tag_t tag)
{
    vd_conv_desc desc = vd_layers_probe_desc(64, 32, 32, dnnl_f32, tag);
    desc.winograd = TRUE;
    dnnl_primitive_desc_t pd = NULL;
    gboolean found = vd_layers_conv_pd(engine, &desc, &pd, "Winograd convolution", NULL) &&
                     strstr(vd_layers_pd_impl(pd), "wino") != NULL;
    vd_layers_pd_free(pd);
    return found;
}

gboolean vd_layers_impl_is_reference(const char *impl)
{
#if defined(__x86_64__)
    gboolean x86 = TRUE;
#else
    gboolean x86 = FALSE;
#endif
    return strstr(impl, "ref") != NULL || (!x86 && strcmp(impl, "gemm:jit:bf16") == 0);
}

gboolean vd_layers_probe_bf16(vd_layers_bf16_probe *probe, GError **error)
{
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t conv = NULL, matmul = NULL;

    g_strlcpy(probe->conv, "none", sizeof(probe->conv));
    g_strlcpy(probe->matmul, "none", sizeof(probe->matmul));
    probe->native = FALSE;
    if (!vd_layers_engine_new(&engine, &stream, error))
        return FALSE;
    /* "no implementation" is an answer here, not an error */
    vd_conv_desc desc = vd_layers_probe_desc(64, 32, 32, dnnl_bf16, dnnl_format_tag_any);
    gboolean has_conv = vd_layers_conv_pd(engine, &desc, &conv, "bf16 convolution", NULL);
    gboolean has_matmul = vd_layers_matmul_pd(engine, 64, 256, 64, dnnl_bf16, dnnl_bf16, NULL,
                                              FALSE, &matmul, "bf16 matmul", NULL);
    if (has_conv)
        g_strlcpy(probe->conv, vd_layers_pd_impl(conv), sizeof(probe->conv));
    if (has_matmul)
        g_strlcpy(probe->matmul, vd_layers_pd_impl(matmul), sizeof(probe->matmul));
    probe->native = has_conv && has_matmul && !vd_layers_impl_is_reference(probe->conv) &&
                    !vd_layers_impl_is_reference(probe->matmul);
    vd_layers_pd_free(conv);
    vd_layers_pd_free(matmul);
    vd_layers_engine_free(engine, stream);
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                      */

dnnl_status_t vd_layers_sgemm(char transa, char transb, int m, int n, int k, float alpha,
                              const float *a, int lda, const float *b, int ldb, float beta,
                              float *c, int ldc)
{
    return dnnl_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *vd_layers_status_name(dnnl_status_t status)
{
    return dnnl_status2str(status);
}
