/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's layers: every oneDNN call of the CPU engine goes through this
 * file's functions (convolution, transposed convolution, max pooling, matmul,
 * reorder, post-ops, memory, GEMM), written against oneDNN's v3 C API. oneDNN 2.x
 * (Debian 12's 2.6) differs in how primitive descriptors are made (operation
 * descriptors first), in memory descriptors (a struct there, an opaque handle in
 * 3.x), in post-op arguments and in the ISA list; those differences live in
 * vd_cpu_layers.c alone.
 *
 * Errors: GError in VD_ERROR (VD_ERROR_OUT_OF_MEMORY where oneDNN ran out of
 * memory, VD_ERROR_INTERNAL otherwise) naming @what and oneDNN's status.
 * Ownership: what a vd_layers_*_new or vd_layers_*_pd function makes is the
 * caller's, freed with the matching vd_layers_*_free; a vd_layer_md is borrowed
 * from the memory object or primitive (descriptor) it was taken from and valid as
 * long as that lives. Thread safety: as oneDNN's (one stream per context, used by
 * one thread at a time). */
#ifndef VD_CPU_LAYERS_H
#define VD_CPU_LAYERS_H

#include "vd_model_private.h"

#include <glib.h>
#include <oneapi/dnnl/dnnl.h>

G_BEGIN_DECLS

/* A borrowed, read-only memory descriptor. */
#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t vd_layer_md;
#else
typedef const dnnl_memory_desc_t *vd_layer_md;
#endif

/* One convolution (or transposed convolution) of @n images of @in_c x @in_h x @in_w
 * into @out_c x @out_h x @out_w, square kernel, stride and padding. src and dst are
 * described by their data type and layout tag (dnnl_format_tag_any: the primitive
 * chooses), or src by @src_md where that is set; the weights take src's data type
 * in the layout the primitive chooses, the bias is float32. Post-ops in order: the
 * sum with dst's previous contents (@sum), then @act. */
typedef struct {
    gboolean deconv;   /* transposed convolution (torch's [in][out][kh][kw] weights) */
    gboolean winograd; /* oneDNN's Winograd algorithm instead of the direct one */
    int n, in_c, out_c, groups;
    int in_h, in_w, out_h, out_w;
    int kernel, stride, padding;
    int dilation; /* torch's (0 or 1: none) */
    dnnl_data_type_t src_dt, dst_dt;
    dnnl_format_tag_t src_tag, dst_tag;
    vd_layer_md src_md; /* NULL: src_dt and src_tag */
    gboolean sum;
    vd_activation act;
    /* int8 (src_dt u8 or s8, the weights s8; vd_layers_is_int8): a stored value times
     * its tensor's scale is the real one. @wei_scales: out_c per-output-channel scales
     * (vd_layers_conv_weights quantises the weights to round(w / scale)); @dst_scale:
     * dst's where dst_dt is int8 (a float32/bfloat16 dst holds real values); @sum_scale
     * and @sum_dt: the scale and type of dst's previous contents, which @sum adds
     * (1 and dst_dt for real values). */
    const float *wei_scales;
    float src_scale, dst_scale, sum_scale;
    dnnl_data_type_t sum_dt;
} vd_conv_desc;

/* The scales an int8 primitive takes when it runs (oneDNN 3.x: execution arguments;
 * 2.x bakes them into the primitive and leaves these NULL). */
typedef struct {
    dnnl_memory_t src, wei, dst;
} vd_layer_scales;

/* ---- engine, stream, ISA ---- */

gboolean vd_layers_engine_new(dnnl_engine_t *engine, dnnl_stream_t *stream, GError **error);
void vd_layers_engine_free(dnnl_engine_t engine, dnnl_stream_t stream);
/* Waits for everything submitted to @stream. */
gboolean vd_layers_wait(dnnl_stream_t stream, GError **error);

/* The ISA oneDNN runs (the machine's, capped by ONEDNN_MAX_CPU_ISA), as oneDNN
 * returns it: read it through vd_cpu_caps (vd_cpu_isa.h), which knows what its
 * value means on each architecture. */
dnnl_cpu_isa_t vd_layers_isa(void);
/* "3.7.2": oneDNN's version as loaded. */
char *vd_layers_version(void);

/* Whether @dt is u8 or s8. */
gboolean vd_layers_is_int8(dnnl_data_type_t dt);

/* ---- memory ---- */

/* A memory object of @ndims @dims in @dt and layout @tag over @handle (a buffer at
 * least vd_layers_md_size() large that outlives it, DNNL_MEMORY_ALLOCATE: its own,
 * DNNL_MEMORY_NONE: set later). */
gboolean vd_layers_memory_new(dnnl_engine_t engine, int ndims, const dnnl_dims_t dims,
                              dnnl_data_type_t dt, dnnl_format_tag_t tag, void *handle,
                              dnnl_memory_t *out, const char *what, GError **error);
/* The same over descriptor @md. */
gboolean vd_layers_memory_like(dnnl_engine_t engine, vd_layer_md md, void *handle,
                               dnnl_memory_t *out, const char *what, GError **error);
/* @mem's descriptor, valid as long as @mem. */
vd_layer_md vd_layers_memory_md(dnnl_memory_t mem);
void *vd_layers_memory_data(dnnl_memory_t mem);
gboolean vd_layers_memory_set_data(dnnl_memory_t mem, void *handle, const char *what,
                                   GError **error);
void vd_layers_memory_free(dnnl_memory_t mem); /* NULL: nothing */
size_t vd_layers_md_size(vd_layer_md md);
gboolean vd_layers_md_equal(vd_layer_md a, vd_layer_md b);

/* *@out: new memory in layout @to holding @from's values (converted to @to's data
 * type), reordered once now (at planning time). */
gboolean vd_layers_pack(dnnl_engine_t engine, dnnl_stream_t stream, dnnl_memory_t from,
                        vd_layer_md to, dnnl_memory_t *out, const char *what, GError **error);

/* ---- primitive descriptors (the user scratchpad mode: see vd_layers_execute) ---- */

gboolean vd_layers_conv_pd(dnnl_engine_t engine, const vd_conv_desc *desc,
                           dnnl_primitive_desc_t *pd, const char *what, GError **error);
/* A matmul of @rows x @in by @in x @out into @rows x @out, row-major src and dst,
 * weights in @wei_md (NULL: the layout the primitive chooses, in src's type), a
 * float32 bias of 1 x @out, ReLU fused with @relu. */
gboolean vd_layers_matmul_pd(dnnl_engine_t engine, int rows, int in, int out,
                             dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt, vd_layer_md wei_md,
                             gboolean relu, dnnl_primitive_desc_t *pd, const char *what,
                             GError **error);
/* Max pooling @src -> @dst, square window, stride and padding (padding excluded:
 * torch's -inf). */
gboolean vd_layers_max_pool_pd(dnnl_engine_t engine, vd_layer_md src, vd_layer_md dst, int kernel,
                               int stride, int padding, dnnl_primitive_desc_t *pd, const char *what,
                               GError **error);
/* The same with @padding_b on the bottom and @padding_r on the right (torch's
 * ceil_mode adds them). */
gboolean vd_layers_max_pool_pad_pd(dnnl_engine_t engine, vd_layer_md src, vd_layer_md dst,
                                   int kernel, int stride, int padding, int padding_b,
                                   int padding_r, dnnl_primitive_desc_t *pd, const char *what,
                                   GError **error);
/* The implementation's name ("brg:avx512_core", "ref:any", ...). */
const char *vd_layers_pd_impl(const_dnnl_primitive_desc_t pd);
/* Bytes of scratchpad the primitive needs. */
size_t vd_layers_pd_scratchpad(const_dnnl_primitive_desc_t pd);
/* The descriptor of argument @what (dnnl_query_src_md, _weights_md, _dst_md). */
vd_layer_md vd_layers_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what);
void vd_layers_pd_free(dnnl_primitive_desc_t pd); /* NULL: nothing */

/* ---- primitives ---- */

gboolean vd_layers_primitive_new(const_dnnl_primitive_desc_t pd, dnnl_primitive_t *prim,
                                 const char *what, GError **error);
/* A reorder (layout and/or data type conversion) @from -> @to. */
gboolean vd_layers_reorder_new(dnnl_engine_t engine, vd_layer_md from, vd_layer_md to,
                               dnnl_primitive_t *prim, const char *what, GError **error);
/* A reorder that quantises real values @from into int8 @to of scale @scale (stored =
 * round(real / scale), saturated); *@scales: what it takes when it runs
 * (vd_layers_scale_args). */
gboolean vd_layers_quantize_new(dnnl_engine_t engine, vd_layer_md from, vd_layer_md to, float scale,
                                dnnl_primitive_t *prim, vd_layer_scales *scales, const char *what,
                                GError **error);
/* The scales an int8 convolution of @desc takes when it runs (none with oneDNN 2.x). */
gboolean vd_layers_conv_scales(dnnl_engine_t engine, const vd_conv_desc *desc,
                               vd_layer_scales *scales, const char *what, GError **error);
void vd_layers_scales_clear(vd_layer_scales *scales);
/* Appends @scales' execution arguments to @args (room for 3); returns how many. */
int vd_layers_scale_args(const vd_layer_scales *scales, dnnl_exec_arg_t *args);
/* @prim's descriptor, owned by @prim. */
const_dnnl_primitive_desc_t vd_layers_primitive_pd(dnnl_primitive_t prim);
void vd_layers_primitive_free(dnnl_primitive_t prim); /* NULL: nothing */

/* Runs @prim on @stream with @args. */
gboolean vd_layers_execute(dnnl_primitive_t prim, dnnl_stream_t stream, int n_args,
                           const dnnl_exec_arg_t *args, const char *what, GError **error);
/* A reorder @from -> @to. */
gboolean vd_layers_reorder(dnnl_primitive_t prim, dnnl_stream_t stream, dnnl_memory_t from,
                           dnnl_memory_t to, const char *what, GError **error);

/* The weights of a convolution (@weight: float32 [out][in/groups][k][k],
 * [groups][out/groups][in/groups][k][k] grouped, [in][out][k][k] transposed) packed
 * into the layout of @pd, and its float32 bias (@bias, out_c values). int8: the
 * weights quantised with desc->wei_scales, the bias as the version's primitive
 * takes it. */
gboolean vd_layers_conv_weights(dnnl_engine_t engine, dnnl_stream_t stream,
                                const_dnnl_primitive_desc_t pd, const vd_conv_desc *desc,
                                const float *weight, const float *bias, dnnl_memory_t *weights,
                                dnnl_memory_t *bias_mem, const char *what, GError **error);

/* The descriptor of a 3x3 convolution of @c to @c channels on one @h x @w image of
 * @dt in layout @tag (stride 1, padding 1, no post-op): the shape the backend asks
 * oneDNN about to choose a layout, Winograd or XNNPACK, and vd-roofline times. */
vd_conv_desc vd_layers_probe_desc(int c, int h, int w, dnnl_data_type_t dt, dnnl_format_tag_t tag);

/* Whether oneDNN has a float32 Winograd convolution kernel here (for activations
 * in layout @tag): 2.x on AVX-512, 3.x nowhere. */
gboolean vd_layers_has_winograd(dnnl_engine_t engine, dnnl_format_tag_t tag);

/* What oneDNN gives the bf16 layers on this CPU (its ISA, capped by
 * ONEDNN_MAX_CPU_ISA): the implementation it picks for a bf16 3x3 convolution
 * (vd_layers_probe_desc's, 64 channels on 32x32, every layout its choice) and for a
 * bf16 matmul (64x256 by 256x64, the weights' layout its choice), "none" where it
 * has no implementation, and whether both are kernels of its own for the CPU
 * rather than reference loops (vd_layers_impl_is_reference). Makes and frees an
 * engine of its own; callable from any thread. */
typedef struct {
    char conv[64], matmul[64];
    gboolean native; /* both found, neither a reference implementation */
} vd_layers_bf16_probe;

gboolean vd_layers_probe_bf16(vd_layers_bf16_probe *probe, GError **error);

/* Whether @impl, an implementation name oneDNN gives, is a reference one: "ref" in
 * the name, and, off x86, the bf16 matmul "gemm:jit:bf16", whose GEMM
 * (gemm_bf16bf16f32) has a JIT kernel on x86 alone and elsewhere calls oneDNN's
 * reference loops (ref_gemm_bf16bf16f32) despite its name. */
gboolean vd_layers_impl_is_reference(const char *impl);

/* ---- GEMM ---- */

/* C = alpha op(A) op(B) + beta C, row-major float32 (oneDNN's sgemm). Callable
 * from several threads at once, hence a status rather than a GError. */
dnnl_status_t vd_layers_sgemm(char transa, char transb, int m, int n, int k, float alpha,
                              const float *a, int lda, const float *b, int ldb, float beta,
                              float *c, int ldc);
/* oneDNN's name of @status. */
const char *vd_layers_status_name(dnnl_status_t status);

G_END_DECLS

#endif /* VD_CPU_LAYERS_H */
