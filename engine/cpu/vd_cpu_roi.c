/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's RoI machinery, shared by the two-stage detectors' box, mask
 * and keypoint heads (vd_cpu_rcnn.c, vd_cpu_keypoint.c): RoIAlign over the FPN's
 * blocked or NHWC levels (MultiScaleRoIAlign's level mapping), the linear layers
 * as oneDNN matmul primitives with weights packed once per context, and the
 * convolution stacks run over all RoIs at once (a batch of RoI maps). */
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

/* MultiScaleRoIAlign's scales (spec §5.2), from the feature heights and the
 * resized image height; torchvision caches them at its first forward, and so do
 * we (per plan and resized height). */
void pooler_scales(cpu_state *st, cpu_plan *plan, int resized_h)
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
void roi_align_features(const cpu_tensor *f, const float *rois, const int *roi_index, int n_rois,
                        float spatial_scale, int pooled, int sampling_ratio, void *out,
                        dnnl_data_type_t out_dt, size_t out_roi_stride)
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
            if (out_dt == dnnl_bf16) {
                /* the type's loop, not a type test per element */
                uint16_t *dst = (uint16_t *)out + row;
                for (int c = 0; c < C; c++)
                    for (int b = 0; b < n_bins; b++)
                        dst[(size_t)c * n_bins + b] = f32_to_bf16(bins[b * stride + c]);
            } else if (out_dt != dnnl_f32) {
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

void packed_linear_clear(cpu_packed_linear *pl)
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
gboolean linear_pack(cpu_state *st, cpu_packed_linear *pl, const float *weight, const float *bias,
                     int in, int out, int rows, gboolean borrow, gboolean relu, GError **error)
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

void linear_clear(cpu_linear *l)
{
    vd_layers_primitive_free(l->prim);
    vd_layers_memory_free(l->src);
    vd_layers_memory_free(l->dst);
    memset(l, 0, sizeof(*l));
}

/* The matmul of one packed layer for @rows rows of @src into @dst. */
gboolean linear_init(cpu_state *st, cpu_linear *l, const cpu_packed_linear *pl, int rows, void *src,
                     dnnl_data_type_t src_dt, void *dst, dnnl_data_type_t dst_dt, gboolean relu,
                     GError **error)
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

gboolean linear_run(cpu_state *st, const cpu_linear *l, const cpu_packed_linear *pl, GError **error)
{
    if (l->xnn != NULL)
        return vd_xnn_run(st->xnn, l->xnn, l->rows, vd_layers_memory_data(l->src),
                          vd_layers_memory_data(l->dst), error);
    return layer_run(st, l->prim, l->src, l->weights, pl->bias, l->dst, NULL, "box head matmul",
                     error);
}

void roi_convs_clear(cpu_roi_convs *rc)
{
    for (int j = 0; j < CPU_MAX_ROI_LAYERS; j++) {
        cpu_roi_layer *l = &rc->layers[j];
        vd_layers_primitive_free(l->prim);
        vd_xnn_op_free(l->xnn);
        vd_wino_unref(l->wino);
        vd_layers_primitive_free(rc->relayout[j]);
        dnnl_memory_t mems[] = {l->src,     l->weights,           l->bias,
                                l->dst,     rc->relayout_from[j], rc->relayout_to[j],
                                l->wino_in, l->wino_out};
        for (guint k = 0; k < G_N_ELEMENTS(mems); k++)
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

/* Whether a layer of a RoI head (@spec over maps of @size, in @dt) runs our
 * Winograd: with roi_winograd, a float32 3x3 convolution of stride 1 and padding 1
 * whose channels are whole blocks. Over a RoI head's 14x14 maps of 256 and 512
 * channels F(2x2, 3x3) takes 4/9 of the direct multiplications, as accurate as the
 * direct kernels (the keypoint heatmaps' argmax and the masks' 0.5 threshold are
 * what a less accurate one would move: vd_cpu_plan.c, use_winograd); the direct
 * kernels already run at the float32 peak there (tools/bench/CPU.md). */
static gboolean roi_layer_winograd(const cpu_state *st, const cpu_roi_layer_spec *spec,
                                   dnnl_data_type_t dt)
{
    const vd_conv *w = spec->conv;
    return st->roi_winograd && dt == dnnl_f32 && !spec->deconv && w->kernel == 3 &&
           w->stride == 1 && w->padding == 1 && w->in_channels >= 64 &&
           w->in_channels % st->cb == 0 && w->out_channels % st->cb == 0;
}

/* The layout of @l's src (@dst FALSE) or dst: its primitive's, or with our
 * Winograd the blocked one it reads and writes. */
static vd_layer_md roi_layer_md(const cpu_roi_layer *l, gboolean dst)
{
    if (l->wino != NULL)
        return vd_layers_memory_md(dst ? l->wino_out : l->wino_in);
    return vd_layers_pd_md(vd_layers_primitive_pd(l->prim),
                           dst ? dnnl_query_dst_md : dnnl_query_src_md);
}

/* The primitive of one layer of a stack (@spec) for @rows RoIs of @size x @size
 * in @dt (weights given in float32, packed into the layout the primitive picks;
 * float32 bias): src in @src_md (NULL: the layout oneDNN prefers), dst in the
 * layout it prefers; with @winograd where roi_layer_winograd says so, ours on the
 * blocked layout instead; its output size *@out_size; *@max_bytes grows to the
 * larger of src and dst. */
static gboolean roi_layer_init(cpu_state *st, cpu_roi_layer *l, const cpu_roi_layer_spec *spec,
                               int rows, int size, dnnl_data_type_t dt, vd_layer_md src_md,
                               gboolean winograd, int *out_size, size_t *max_bytes,
                               const char *what, GError **error)
{
    const vd_conv *w = spec->conv;
    int k = w->kernel, s = w->stride, p = w->padding;
    int osize = spec->deconv ? (size - 1) * s - 2 * p + k : (size + 2 * p - k) / s + 1;
    if (winograd && roi_layer_winograd(st, spec, dt)) {
        dnnl_dims_t in_dims = {rows, w->in_channels, size, size};
        dnnl_dims_t out_dims = {rows, w->out_channels, osize, osize};
        l->wino = vd_wino_new(w->weight, w->bias, w->out_channels, w->in_channels, st->cb,
                              VD_WINO_2X3, error);
        if (l->wino == NULL ||
            !vd_layers_memory_new(st->engine, 4, in_dims, dt, st->block_tag, DNNL_MEMORY_NONE,
                                  &l->wino_in, what, error) ||
            !vd_layers_memory_new(st->engine, 4, out_dims, dt, st->block_tag, DNNL_MEMORY_NONE,
                                  &l->wino_out, what, error))
            return FALSE;
        l->size = size;
        l->relu = spec->relu;
        st->wino_ws_needed =
            MAX(st->wino_ws_needed, vd_wino_workspace_size(l->wino, st->n_threads));
        *out_size = osize;
        *max_bytes = MAX(*max_bytes, vd_layers_md_size(vd_layers_memory_md(l->wino_in)));
        *max_bytes = MAX(*max_bytes, vd_layers_md_size(vd_layers_memory_md(l->wino_out)));
        return TRUE;
    }
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

/* With XNNPACK's layers: the operators of a convolution stack as roi_convs_init
 * makes it, all NHWC, its input and output transposed by loops (roi_convs_run). */
static gboolean roi_convs_init_xnn(cpu_state *st, cpu_roi_convs *rc,
                                   const cpu_roi_layer_spec *specs, int n, int rows, int size,
                                   dnnl_data_type_t dt, const char *what, GError **error)
{
    size_t max_bytes = 0;
    int out_size = size;
    for (int j = 0; j < n; j++)
        if (!roi_layer_init(st, &rc->layers[j], &specs[j], rows, out_size, dt, NULL, FALSE,
                            &out_size, &max_bytes, what, error))
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
gboolean roi_convs_init(cpu_state *st, cpu_roi_convs *rc, const cpu_roi_layer_spec *specs, int n,
                        int rows, int size, dnnl_data_type_t dt, gboolean follow_layouts,
                        gboolean winograd, const char *what, GError **error)
{
    rc->macs = roi_stack_macs(specs, n, rows, size);
    if (st->xnn != NULL)
        return roi_convs_init_xnn(st, rc, specs, n, rows, size, dt, what, error);
    /* descriptors borrowed from the layers' primitives (or Winograd's memories) */
    vd_layer_md prev_md = NULL;
    size_t max_bytes = 0;
    int out_size = size;

    for (int j = 0; j < n; j++) {
        if (!roi_layer_init(st, &rc->layers[j], &specs[j], rows, out_size, dt,
                            follow_layouts ? prev_md : NULL, winograd, &out_size, &max_bytes, what,
                            error))
            return FALSE;
        prev_md = roi_layer_md(&rc->layers[j], TRUE);
    }
    rc->n_layers = n;
    rc->rows = rows;
    for (int k = 0; k < 2; k++)
        if (!(rc->buffers[k] = alloc_aligned(max_bytes, what, error)))
            return FALSE;
    /* the data alternates between the two buffers: cur holds the layer's input */
    int cur = 0;
    vd_layer_md first_src_md = NULL;
    for (int j = 0; j < n; j++) {
        cpu_roi_layer *l = &rc->layers[j];
        vd_layer_md src_md = roi_layer_md(l, FALSE);
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
        prev_md = roi_layer_md(l, TRUE);
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
gboolean roi_convs_run(cpu_state *st, const cpu_roi_convs *rc, void *in, void *out,
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
        if (l->wino != NULL) {
            /* the reorder before it ran on the stream: wait for it */
            if (!vd_layers_wait(st->stream, error) ||
                !vd_wino_run_batch(l->wino, vd_layers_memory_data(l->src),
                                   vd_layers_memory_data(l->dst), rc->rows, l->size, l->size, FALSE,
                                   l->relu, st->wino_ws, st->n_threads, error))
                return FALSE;
        } else if (l->xnn != NULL ? !vd_xnn_run(st->xnn, l->xnn, 0, vd_layers_memory_data(l->src),
                                                vd_layers_memory_data(l->dst), error)
                                  : !layer_run(st, l->prim, l->src, l->weights, l->bias, l->dst,
                                               NULL, what, error)) {
            return FALSE;
        }
    }
    return vd_layers_reorder(rc->to_plain, st->stream, rc->blocked_out, rc->plain_out, what, error);
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
    if (!roi_convs_init(st, &hp->convs, specs, n_specs, rows, P, dnnl_f32, FALSE, TRUE, what,
                        error) ||
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
        for (int j = 0; j < hp->convs.n_layers; j++) {
            const cpu_roi_layer *l = &hp->convs.layers[j];
            if (l->wino != NULL) {
                char *layer = g_strdup_printf("%s[%d rows]", names[j], hp->rows);
                kernel_add_wino(out, strings, l->wino, kinds[j], layer);
                g_free(layer);
            } else {
                kernel_add_op(out, strings, l->prim, l->xnn, kinds[j], "%s[%d rows]", names[j],
                              hp->rows);
            }
        }
        kernel_add(out, strings, hp->convs.to_plain, "reorder", "%s.out[%d rows]", head, hp->rows);
    }
}
