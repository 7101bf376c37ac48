/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CUDA backend (engine/cuda/): error mapping, the counted
 * synchronisation wrapper, device memory, and the cuDNN / cuBLASLt layers. Not
 * installed; only the engine's .c files under cuda/ include it. */
#ifndef VD_CUDA_PRIVATE_H
#define VD_CUDA_PRIVATE_H

#include "vd_context_private.h"
#include "vd_kernels.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

G_BEGIN_DECLS

/* ------------------------------------------------------------------------ */
/* Errors: each returns TRUE on success, else sets @error once, naming @what. */

gboolean vd_cuda_check(cudaError_t status, const char *what, GError **error);
gboolean vd_cudnn_check(cudnnStatus_t status, const char *what, GError **error);
gboolean vd_cublas_check(cublasStatus_t status, const char *what, GError **error);

/* cuDNN 9's statuses are a category (BAD_PARAM 2000, NOT_SUPPORTED 3000,
 * INTERNAL_ERROR 4000, EXECUTION_FAILED 5000) plus a specific code within it
 * (3002 NOT_SUPPORTED_SHAPE, 4004 device allocation failed, ...): compare them
 * by category. */
#ifndef CUDNN_STATUS_CATEGORY
#define CUDNN_STATUS_CATEGORY(status) (status)
#endif

/* Whether cuDNN refused a configuration it does not support (NOT_SUPPORTED and
 * its specific codes), which a convolution answers by trying its next
 * candidate. BAD_PARAM is not a refusal: a parameter cuDNN does not take is a
 * bug of ours, reported as an error rather than hidden behind a slower path. */
static inline gboolean vd_cudnn_refused(cudnnStatus_t status)
{
    return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------------ */
/* The batch plan's size (engine/cuda/BATCHING.md, "Plans"): a power of two of
 * image slots, at least 2, at most @max_slots. It grows at once to a batch
 * larger than it; it shrinks when batches stay small: after
 * VD_BATCH_SHRINK_AFTER batches in a row of at most half its slots, it becomes
 * the power of two that fits the largest of them. One large batch (a burst
 * after a stall) thus does not make every later small batch run, and hold
 * activations for, all its slots; a size that alternates keeps its plan (a
 * rebuild waits for the device, re-plans cuDNN and recaptures the graphs). */

#define VD_BATCH_SHRINK_AFTER 32

typedef struct {
    int small_in_a_row; /* batches in a row of at most half the plan's slots */
    int largest_small;  /* the largest of them */
} vd_batch_shrink;

static inline int vd_batch_slots_for(int n, int max_slots)
{
    int slots = 2;
    while (slots < n && slots < max_slots)
        slots *= 2;
    return slots < max_slots ? slots : max_slots;
}

/* The slots the batch plan should have for a batch of @n (2 .. @max_slots)
 * when it has @slots (0: no plan yet): @slots to keep it, else the size to
 * rebuild it with. Counts the small batches in @shrink. */
static inline int vd_batch_plan_slots(vd_batch_shrink *shrink, int slots, int n, int max_slots)
{
    if (slots < n) {
        shrink->small_in_a_row = shrink->largest_small = 0;
        return vd_batch_slots_for(n, max_slots);
    }
    if (slots <= 2 || n > slots / 2) {
        shrink->small_in_a_row = shrink->largest_small = 0;
        return slots;
    }
    shrink->small_in_a_row++;
    if (n > shrink->largest_small)
        shrink->largest_small = n;
    if (shrink->small_in_a_row < VD_BATCH_SHRINK_AFTER)
        return slots;
    int smaller = vd_batch_slots_for(shrink->largest_small, max_slots);
    shrink->small_in_a_row = shrink->largest_small = 0;
    return smaller;
}

/* ------------------------------------------------------------------------ */
/* Synchronisation: every host wait of the backend goes through these two, and
 * each increments @count (per context), so that tests and benchmarks can assert
 * the number of host synchronisations per frame. */

gboolean vd_cuda_sync_event(guint64 *count, cudaEvent_t event, GError **error);
gboolean vd_cuda_sync_stream(guint64 *count, cudaStream_t stream, GError **error);

/* ------------------------------------------------------------------------ */
/* Device memory: a list of blocks freed together. */

typedef struct {
    GPtrArray *blocks;
    size_t bytes;
    gboolean stream_ordered; /* cudaMallocAsync / cudaFreeAsync on @stream */
    cudaStream_t stream;
} vd_cuda_pool;

/* Blocks from cudaMalloc, freed with cudaFree (which waits for the whole
 * device: every context of the process). */
void vd_cuda_pool_init(vd_cuda_pool *pool);
/* Blocks from the device's stream-ordered allocator on @stream (cudaMallocAsync,
 * freed with cudaFreeAsync: no device-wide wait, and the memory is reused by
 * the next allocations on @stream), where @device supports memory pools; else
 * as vd_cuda_pool_init. Free the pool before destroying @stream. */
void vd_cuda_pool_init_stream_ordered(vd_cuda_pool *pool, cudaStream_t stream, int device);
/* A new zero-filled block of @bytes (asynchronously zeroed on @stream, which
 * must be the pool's stream for a stream-ordered pool), or NULL with
 * VD_ERROR_OUT_OF_MEMORY. */
void *vd_cuda_pool_alloc(vd_cuda_pool *pool, size_t bytes, cudaStream_t stream, const char *what,
                         GError **error);
/* Frees every block; the caller has synchronised the work that used them.
 * clear keeps the pool usable, free releases it. */
void vd_cuda_pool_clear(vd_cuda_pool *pool);
void vd_cuda_pool_free(vd_cuda_pool *pool);

/* ------------------------------------------------------------------------ */
/* Layers */

/* An activation of @n images: NHWC with the image outermost (image i at
 * data + i * h * w * c elements), @c channels, in the context's dtype. */
typedef struct {
    int h, w, c;
    void *data;
    int n;
} vd_cuda_tensor;

/* Elements of one image of @t. */
static inline size_t vd_cuda_tensor_image_elements(const vd_cuda_tensor *t)
{
    return (size_t)t->h * t->w * t->c;
}

/* A convolution's device weights: [out][k][k][in] (cuDNN's NHWC filter layout)
 * in the context's dtype, bias [out] in the same dtype. in_c may exceed the
 * model's input channels (zero weights), out_c its output channels (zero rows).
 * groups > 1 (a depthwise convolution: groups == out_c, in_c 1): in_c is the
 * input channels of one group, the input has in_c * groups; 0 or 1: ungrouped. */
typedef struct {
    int out_c, in_c, kernel, stride, padding;
    void *weight;
    void *bias;
    int groups;
    char name[48]; /* the layer, for errors and vd_context_kernels() ("" unnamed) */
} vd_cuda_conv_weights;

typedef enum {
    VD_CUDA_CONV_FUSED = 0, /* cudnnConvolutionBiasActivationForward */
    VD_CUDA_CONV_UNFUSED,   /* convolution, then bias / residual / ReLU passes */
} vd_cuda_conv_mode;

#define VD_CUDA_MAX_ALGOS 8

/* One convolution of a plan: dst = act(conv(src) + bias (+ residual)). */
typedef struct {
    const vd_cuda_conv_weights *weights;
    vd_cuda_tensor *src, *dst, *residual;
    gboolean relu;
    cudnnTensorDescriptor_t x_desc, y_desc, bias_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    vd_cuda_conv_mode mode;
    cudnnConvolutionFwdAlgo_t algos[VD_CUDA_MAX_ALGOS]; /* candidates, best first */
    size_t algo_bytes[VD_CUDA_MAX_ALGOS];
    int n_algos, algo;
    cudnnConvolutionFwdAlgo_t unfused_algo;
    size_t unfused_bytes;
    /* the demotions (candidates cuDNN refused at run time), and the last one's
     * algorithm and status: what vd_context_kernels() reports */
    int n_demotions;
    cudnnConvolutionFwdAlgo_t demoted_algo;
    cudnnStatus_t demoted_status;
} vd_cuda_conv;

typedef struct {
    cudnnHandle_t cudnn;
    cublasLtHandle_t cublaslt;
    cudaStream_t stream;
    vd_dtype dtype;
    cudnnActivationDescriptor_t relu, identity;
    void *workspace; /* shared by the convolutions, grown at plan time */
    size_t workspace_bytes;
    void *lt_workspace;
    size_t lt_workspace_bytes;
    /* vd_cuda_upload_floats' fp32 staging, grown as needed (setup only; the
     * caller frees it with vd_cuda_upload_done) */
    float *upload_tmp;
    size_t upload_tmp_bytes;
    guint64 *sync_count; /* the context's counter of host synchronisations */
    guint64 n_demotions; /* convolution candidates refused at run time, every plan's */
} vd_cuda_layers;

/* Uploads one convolution (float32 OIHW from the model) as NHWC weights padded
 * to @in_c / @out_c channels. */
gboolean vd_cuda_conv_weights_upload(vd_cuda_layers *layers, vd_cuda_pool *pool,
                                     vd_cuda_conv_weights *dst, const float *weight,
                                     const float *bias, int out_c, int in_c, int kernel, int stride,
                                     int padding, int padded_out_c, int padded_in_c,
                                     GError **error);

/* Describes the convolution and picks its algorithm candidates; *workspace_bytes
 * is raised to what they need. */
gboolean vd_cuda_conv_init(vd_cuda_layers *layers, vd_cuda_conv *conv,
                           const vd_cuda_conv_weights *weights, vd_cuda_tensor *src,
                           vd_cuda_tensor *dst, vd_cuda_tensor *residual, gboolean relu,
                           size_t *workspace_bytes, GError **error);
/* Enqueues the convolution. A configuration cuDNN refuses (NOT_SUPPORTED) falls
 * back to the next candidate, then to the unfused path, and stays there; each
 * such demotion is counted in layers->n_demotions and recorded in @conv
 * (vd_cuda_conv_describe). Any other status (BAD_PARAM included) fails with
 * @error naming the layer, the algorithm and the status. */
gboolean vd_cuda_conv_run(vd_cuda_layers *layers, vd_cuda_conv *conv, GError **error);
void vd_cuda_conv_clear(vd_cuda_conv *conv);
/* What runs @conv now, as a new string: "cudnn fused <algorithm>" or "cudnn
 * unfused <algorithm>", and after a demotion how many and the last one's
 * refused algorithm and status. */
char *vd_cuda_conv_describe(const vd_cuda_conv *conv);
/* cuDNN's name of a forward algorithm ("IMPLICIT_PRECOMP_GEMM"; a static string). */
const char *vd_cuda_conv_algo_name(cudnnConvolutionFwdAlgo_t algo);

/* A linear layer through cuBLASLt: Y[rows][out_stride] = act(X[rows][in] W^T + b),
 * fp16 operands with fp32 accumulation (fp32 throughout in fp32 mode). */
typedef struct {
    int in, out, out_stride; /* out_stride >= out, multiple of 8 */
    void *weight;            /* [out_stride][in], context dtype (padded rows zero) */
    void *bias;              /* [out_stride], in the output dtype */
    vd_dtype out_dtype;
    gboolean relu;
    int rows;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a_layout, b_layout, c_layout;
    cublasLtMatmulAlgo_t algo;
    gboolean has_algo;
} vd_cuda_linear;

gboolean vd_cuda_linear_upload(vd_cuda_layers *layers, vd_cuda_pool *pool, vd_cuda_linear *lin,
                               const float *weight, const float *bias, int out, int in,
                               int out_stride, vd_dtype out_dtype, gboolean relu, GError **error);
/* Plans the product for @rows rows of input (the proposal capacity). */
gboolean vd_cuda_linear_plan(vd_cuda_layers *layers, vd_cuda_linear *lin, int rows, GError **error);
gboolean vd_cuda_linear_run(vd_cuda_layers *layers, vd_cuda_linear *lin, const void *x, void *y,
                            GError **error);
void vd_cuda_linear_clear(vd_cuda_linear *lin);

/* Host float32 -> device in @dtype (through a device staging buffer for fp16,
 * grown as needed and reused: one cudaFree per growth, not one per tensor).
 * Synchronises (counted): setup only. vd_cuda_upload_done frees the staging. */
gboolean vd_cuda_upload_floats(vd_cuda_layers *layers, void *dst, const float *src, size_t n,
                               vd_dtype dtype, GError **error);
void vd_cuda_upload_done(vd_cuda_layers *layers);

G_END_DECLS

#endif /* VD_CUDA_PRIVATE_H */
