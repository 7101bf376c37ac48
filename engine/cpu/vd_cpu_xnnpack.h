/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's layers run by XNNPACK instead of oneDNN: on CPUs where oneDNN
 * has only its reference loops (aarch64 with Advanced SIMD alone, the Cortex-A76 /
 * Neoverse N1 class, where Debian builds oneDNN without Arm Compute Library),
 * every convolution, transposed convolution, max pooling and linear layer of the
 * float32 or fp16 engine, and int8's quantised convolutions. Activations are NHWC,
 * float32 or fp16 (dnnl_f16: XNNPACK's _f16 operators, float32 weights rounded as
 * XNNPACK packs them), as XNNPACK's operators take them; oneDNN keeps the reorders
 * and the layers it runs fast.
 *
 * int8 (vd_conv_desc's int8 fields, as oneDNN's int8 layers take them): XNNPACK's
 * signed 8-bit operators with per-output-channel weights (qc8w). A tensor the plan
 * types dnnl_u8 (an activation after a ReLU, scale max / 255) holds XNNPACK qs8 with
 * zero point -128, so that the ReLU's outputs use all 256 values (stored = u8 - 128;
 * saturating at -128 is the ReLU); a dnnl_s8 one (scale max / 127) zero point 0.
 * An int8 output: qs8_qc8w convolutions; a float32 one (the FPN's P levels, the
 * RPN's hidden layer): qd8_f32_qc8w, given the source's calibrated scale and zero
 * point as its quantisation parameters. A sum with dst's previous contents (the
 * residual and top-down sums), as x86 adds in the accumulator: the qd8_f32_qc8w
 * convolution's real output plus dst's contents widened (XNNPACK's qs8 -> f32
 * conversion and f32 add), quantised into dst (its f32 -> qs8 conversion).
 *
 * vd_xnn_choose() decides per process: XNNPACK where oneDNN's float32 NHWC
 * convolution is a reference one here and this build has XNNPACK; VD_CPU_LAYERS
 * ("xnnpack", "onednn") overrides that, for tests and measurements.
 *
 * Errors: GError in VD_ERROR naming the layer and XNNPACK's status. Ownership: a
 * vd_xnn is a context's (vd_xnn_free), an op its layer's (vd_xnn_op_free); an op
 * runs with the vd_xnn it was made with. Thread safety: one thread at a time per
 * vd_xnn (its thread pool and workspace). */
#ifndef VD_CPU_XNNPACK_H
#define VD_CPU_XNNPACK_H

#include "cpu/vd_cpu_layers.h"

#include <glib.h>

G_BEGIN_DECLS

typedef struct vd_xnn vd_xnn;
typedef struct vd_xnn_op vd_xnn_op;

/* *@use: whether this process's contexts run their layers on XNNPACK (float32,
 * or fp16 where vd_xnn_f16_supported()): where oneDNN has only a reference kernel for a float32
 * NHWC convolution and the build has XNNPACK (probed once a process), or as VD_CPU_LAYERS says.
 * *@why: a static phrase saying why, for the description and refusals. FALSE with
 * @error: VD_CPU_LAYERS asks for what cannot be. */
gboolean vd_xnn_choose(gboolean *use, const char **why, GError **error);

/* vd_xnn_choose() for a context of int8 (@int8) or another precision: int8 on an
 * aarch64 CPU where oneDNN keeps the float layers (SVE) but has no int8 kernel runs
 * every layer on XNNPACK where XNNPACK runs int8 there (vd_xnn_int8_supported), unless
 * VD_CPU_LAYERS says otherwise. */
gboolean vd_xnn_choose_for(gboolean int8, gboolean *use, const char **why, GError **error);

/* Whether the build has XNNPACK. */
gboolean vd_xnn_built(void);

/* Whether XNNPACK runs its fp16 operators on this processor (its hardware
 * configuration: aarch64 with the FP16 arithmetic, x86 with AVX2 and F16C), probed
 * once a process; *@why: a static phrase saying why, either way. */
gboolean vd_xnn_f16_supported(const char **why);

/* A context's XNNPACK state: a thread pool of @n_threads and the shared
 * workspace. */
vd_xnn *vd_xnn_new(int n_threads, GError **error);
void vd_xnn_free(vd_xnn *x); /* NULL: nothing */

/* Whether XNNPACK runs int8 here: its qs8_qc8w operators on a processor with fast
 * int8 kernels (aarch64: the dot product, ASIMDDP; x86: any, where the tests force
 * XNNPACK), probed once a process; *@why: a static phrase saying why, either way. */
gboolean vd_xnn_int8_supported(const char **why);

/* A convolution or transposed convolution (@desc: NHWC src and dst of desc->n
 * images, float32, fp16, or fp16 to a float32 dst (widened after the layer, without
 * a sum); int8 src (u8, s8) to int8 or float32 dst, see above; desc->sum adds dst's
 * previous contents before desc->act: ReLU, ReLU6 (XNNPACK's clamp where no sum
 * comes first; not int8) or hardswish; desc->dilation (a convolution's, float32 or
 * fp16 or int8; none for a transposed one)) with
 * torch's weights (@weight as vd_cpu_layers.h's vd_layers_conv_weights takes
 * them, @bias out_c values or NULL), packed now. */
vd_xnn_op *vd_xnn_conv_new(vd_xnn *x, const vd_conv_desc *desc, const float *weight,
                           const float *bias, const char *what, GError **error);
/* A linear layer (torch's [out][in] @weight, @bias, float32) with ReLU fused where
 * @relu, for any number of rows (vd_xnn_run's @rows), from @src_dt to @dst_dt as a
 * convolution's. */
vd_xnn_op *vd_xnn_linear_new(vd_xnn *x, int in, int out, const float *weight, const float *bias,
                             gboolean relu, dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt,
                             const char *what, GError **error);
/* Max pooling of @c channels of @in_h x @in_w in @dt (float32 or fp16), square
 * window, stride and padding (padding excluded, as torch's -inf). */
vd_xnn_op *vd_xnn_max_pool_new(vd_xnn *x, int c, int in_h, int in_w, int kernel, int stride,
                               int padding, dnnl_data_type_t dt, const char *what, GError **error);

/* A max pooling's shape with a padding of its own on each side: torch's
 * ceil_mode is the bottom and right padding that gives its output size. */
typedef struct {
    int c, in_h, in_w, out_h, out_w;
    int kernel, stride; /* square */
    int pad_top, pad_left, pad_bottom, pad_right;
} vd_xnn_pool_desc;

/* Max pooling of @d (@dt float32 or fp16; padding excluded, as torch's -inf);
 * fails where XNNPACK's output is not @d's out_h x out_w. */
vd_xnn_op *vd_xnn_max_pool_pad_new(vd_xnn *x, const vd_xnn_pool_desc *d, dnnl_data_type_t dt,
                                   const char *what, GError **error);

/* Whether XNNPACK's max pooling takes a @kernel x @kernel window at @stride (it
 * refuses a 1x1 window and a stride longer than the window); *@why: a static
 * phrase saying why not, for a refusal at context creation. */
gboolean vd_xnn_max_pool_runs(int kernel, int stride, const char **why);

/* The quantisation of @n_values float32 values into int8 @dt (u8 or s8 as above) of
 * scale @scale: XNNPACK's f32 -> qs8 conversion. */
vd_xnn_op *vd_xnn_quantize_new(vd_xnn *x, size_t n_values, float scale, dnnl_data_type_t dt,
                               const char *what, GError **error);

/* Runs @op from @src into @dst (@rows rows for a linear layer, ignored
 * otherwise). XNNPACK may read up to 128 bytes past @src's end. */
gboolean vd_xnn_run(vd_xnn *x, vd_xnn_op *op, int rows, const void *src, void *dst, GError **error);

/* "xnnpack:f32", "xnnpack:f16", int8's "xnnpack:qs8_qc8w", "xnnpack:qd8_f32_qc8w"
 * (with "+add" where a sum follows) and "xnnpack:convert_f32_qs8", for the list of
 * kernels. */
const char *vd_xnn_op_impl(const vd_xnn_op *op);
void vd_xnn_op_free(vd_xnn_op *op); /* NULL: nothing */

G_END_DECLS

#endif /* VD_CPU_XNNPACK_H */
