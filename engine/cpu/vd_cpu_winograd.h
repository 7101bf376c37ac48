/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Winograd F(4x4, 3x3) and F(2x2, 3x3) convolutions for the CPU backend, where
 * oneDNN has none, and for the float32 RoI heads over the detections (the mask and
 * keypoint branches: F(2x2, 3x3) over the batch of RoIs, vd_wino_run_batch).
 *
 * oneDNN 2.6 has Winograd kernels for AVX-512 only; below it (AVX2, AVX, SSE4.1) a
 * 3x3 stride-1 convolution runs its direct algorithm, which costs 2.25 times the
 * multiplications of F(2x2, 3x3) and 4 times those of F(4x4, 3x3); 3.x has no
 * Winograd kernel at all. This module does what oneDNN 2.x's AVX-512 kernel does,
 * on the same blocked layouts (nChw8c, nChw16c): the input and output transforms
 * here (F(4x4, 3x3): the interpolation points 0, +-1, 1/2, -2 and infinity, better
 * conditioned than the 0, +-1, +-2 of Lavin and Gray's matrices and oneDNN's
 * jit_wino_4x3; F(2x2, 3x3): 0, +-1 and infinity; F(4x4, 3x3) on 0, +-1, +-i and
 * infinity, as accurate as F(2x2, 3x3)), the 36 (16, 46) products of each chunk of
 * tiles by oneDNN's sgemm, summed in blocks of 64 input channels; bias, the sum with
 * the destination's contents and ReLU are fused into the output transform. Not
 * installed. */
#ifndef VD_CPU_WINOGRAD_H
#define VD_CPU_WINOGRAD_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

typedef struct vd_wino vd_wino;

/* The algorithm (the values are the output tile's side where it is the only
 * difference): */
typedef enum {
    /* F(2x2, 3x3): 4x4 input tiles, 4/9 of the direct multiplications, the direct
     * kernels' accuracy */
    VD_WINO_2X3 = 2,
    /* F(4x4, 3x3) on real points: 6x6 input tiles, a quarter of them, the accuracy
     * of oneDNN 2.x's Winograd (and of its AVX2 direct kernels) */
    VD_WINO_4X3 = 4,
    /* F(4x4, 3x3) on the points 0, +-1, +-i: 46/144 of them, F(2x2, 3x3)'s accuracy */
    VD_WINO_4X3_COMPLEX = 5,
} vd_wino_kind;

/* Transforms the weights of a 3x3 stride-1 padding-1 convolution (@weight
 * [out_c][in_c][3][3] float32, @bias [out_c]) for activations in channel blocks of
 * @cb (8 or 16; both channel counts multiples of it), for @kind. NULL with @error
 * set when out of memory. */
vd_wino *vd_wino_new(const float *weight, const float *bias, int out_c, int in_c, int cb,
                     vd_wino_kind kind, GError **error);
/* Its implementation's name, as vd_context_kernels() gives it:
 * "vd_winograd_2x3:sgemm", "vd_winograd_4x3:sgemm" or
 * "vd_winograd_4x3_complex:sgemm" (static). */
const char *vd_wino_name(const vd_wino *wino);
/* Reference counting (not thread-safe: the backend's planning thread only); unref
 * of NULL is a no-op. */
vd_wino *vd_wino_ref(vd_wino *wino);
void vd_wino_unref(vd_wino *wino);

/* Bytes of workspace vd_wino_run() needs for @n_threads threads. */
size_t vd_wino_workspace_size(const vd_wino *wino, int n_threads);

/* dst = [relu](conv(src) + bias [+ dst]) for one image of @h x @w, src and dst
 * blocked ([C / cb][h][w][cb] float32), with OpenMP over chunks of tiles on
 * @n_threads threads. @workspace holds at least vd_wino_workspace_size() bytes,
 * 64-byte aligned. FALSE with @error set when oneDNN's sgemm fails. */
gboolean vd_wino_run(const vd_wino *wino, const float *src, float *dst, int h, int w, gboolean sum,
                     gboolean relu, void *workspace, int n_threads, GError **error);
/* The same for @n_images images one after the other in @src and @dst ([n][C / cb]
 * [h][w][cb]: oneDNN's nChw8c / nChw16c of a batch), their tiles in shared chunks. */
gboolean vd_wino_run_batch(const vd_wino *wino, const float *src, float *dst, int n_images, int h,
                           int w, gboolean sum, gboolean relu, void *workspace, int n_threads,
                           GError **error);

G_END_DECLS

#endif /* VD_CPU_WINOGRAD_H */
