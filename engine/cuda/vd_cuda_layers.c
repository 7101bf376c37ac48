/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cuDNN convolutions and cuBLASLt linear layers of the CUDA backend.
 *
 * Convolutions: NHWC activations and filters, fp16 storage with fp32
 * accumulation on tensor cores (CUDNN_TENSOR_OP_MATH), or fp32 without TF32
 * (CUDNN_FMA_MATH) so that fp32 mode stays comparable with the CPU. Bias, the
 * residual sum of a ResNet block and ReLU are fused through
 * cudnnConvolutionBiasActivationForward; cuDNN only accepts the identity
 * activation there with IMPLICIT_PRECOMP_GEMM, and may refuse other
 * configurations at run time (NOT_SUPPORTED), so every convolution keeps a list
 * of candidates and an unfused fallback (convolution, then cudnnAddTensor for
 * the residual and the bias, then cudnnActivationForward).
 *
 * The legacy convolution API is deprecated in cuDNN 9 but complete and
 * graph-capturable; the warnings are silenced for this file only. */
#include "vd_config.h"
#include "cuda/vd_cuda_private.h"

#include <string.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Largest workspace one convolution may ask for. */
#define CONV_WORKSPACE_LIMIT ((size_t)512 << 20)

static cudnnDataType_t cudnn_type(vd_dtype dtype)
{
    return dtype == VD_DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

gboolean vd_cuda_upload_floats(vd_cuda_layers *layers, void *dst, const float *src, size_t n,
                               vd_dtype dtype, GError **error)
{
    float *tmp = NULL;
    if (n == 0)
        return TRUE;
    if (dtype != VD_DTYPE_F32) {
        /* each use ends with the wait below, so the staging is free again */
        if (n * sizeof(float) > layers->upload_tmp_bytes) {
            vd_cuda_upload_done(layers);
            if (!vd_cuda_check(cudaMalloc((void **)&layers->upload_tmp, n * sizeof(float)),
                               "uploading weights", error)) {
                cudaGetLastError();
                layers->upload_tmp = NULL;
                return FALSE;
            }
            layers->upload_tmp_bytes = n * sizeof(float);
        }
        tmp = layers->upload_tmp;
    }
    /* setup only: the wait (counted) lets the caller free @src at once */
    return vd_cuda_check(cudaMemcpyAsync(tmp != NULL ? (void *)tmp : dst, src, n * sizeof(float),
                                         cudaMemcpyHostToDevice, layers->stream),
                         "uploading weights", error) &&
           (tmp == NULL || vd_cuda_check(vd_convert_from_f32(tmp, n, dtype, dst, layers->stream),
                                         "converting weights", error)) &&
           vd_cuda_sync_stream(layers->sync_count, layers->stream, error);
}

void vd_cuda_upload_done(vd_cuda_layers *layers)
{
    cudaFree(layers->upload_tmp);
    layers->upload_tmp = NULL;
    layers->upload_tmp_bytes = 0;
}

gboolean vd_cuda_conv_weights_upload(vd_cuda_layers *layers, vd_cuda_pool *pool,
                                     vd_cuda_conv_weights *dst, const float *weight,
                                     const float *bias, int out_c, int in_c, int kernel, int stride,
                                     int padding, int padded_out_c, int padded_in_c, GError **error)
{
    size_t kk = (size_t)kernel * kernel;
    size_t n = (size_t)padded_out_c * kk * padded_in_c;
    size_t esize = vd_dtype_size(layers->dtype);
    gboolean ok = FALSE;
    float *host = g_try_malloc0(n * sizeof(float));
    float *host_bias = g_try_malloc0((size_t)padded_out_c * sizeof(float));
    if (host == NULL || host_bias == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory preparing convolution weights");
        goto out_free;
    }
    /* OIHW -> O H W I (cuDNN's NHWC filter layout), zero padded */
    for (int o = 0; o < out_c; o++)
        for (int i = 0; i < in_c; i++)
            for (size_t p = 0; p < kk; p++)
                host[((size_t)o * kk + p) * padded_in_c + i] =
                    weight[((size_t)o * in_c + i) * kk + p];
    memcpy(host_bias, bias, (size_t)out_c * sizeof(float));

    dst->out_c = padded_out_c;
    dst->in_c = padded_in_c;
    dst->kernel = kernel;
    dst->stride = stride;
    dst->padding = padding;
    dst->groups = 1;
    dst->weight = vd_cuda_pool_alloc(pool, n * esize, layers->stream, "convolution weights", error);
    if (dst->weight == NULL)
        goto out_free;
    dst->bias = vd_cuda_pool_alloc(pool, (size_t)padded_out_c * esize, layers->stream,
                                   "convolution bias", error);
    if (dst->bias == NULL)
        goto out_free;
    ok = vd_cuda_upload_floats(layers, dst->weight, host, n, layers->dtype, error) &&
         vd_cuda_upload_floats(layers, dst->bias, host_bias, (size_t)padded_out_c, layers->dtype,
                               error);
out_free:
    g_free(host);
    g_free(host_bias);
    return ok;
}

void vd_cuda_conv_clear(vd_cuda_conv *conv)
{
    if (conv->x_desc != NULL)
        cudnnDestroyTensorDescriptor(conv->x_desc);
    if (conv->y_desc != NULL)
        cudnnDestroyTensorDescriptor(conv->y_desc);
    if (conv->bias_desc != NULL)
        cudnnDestroyTensorDescriptor(conv->bias_desc);
    if (conv->w_desc != NULL)
        cudnnDestroyFilterDescriptor(conv->w_desc);
    if (conv->conv_desc != NULL)
        cudnnDestroyConvolutionDescriptor(conv->conv_desc);
    memset(conv, 0, sizeof(*conv));
}

#define CUDNN_TRY(call, what)                                                                      \
    do {                                                                                           \
        if (!vd_cudnn_check((call), (what), error))                                                \
            goto out_fail;                                                                         \
    } while (0)

gboolean vd_cuda_conv_init(vd_cuda_layers *layers, vd_cuda_conv *conv,
                           const vd_cuda_conv_weights *weights, vd_cuda_tensor *src,
                           vd_cuda_tensor *dst, vd_cuda_tensor *residual, gboolean relu,
                           size_t *workspace_bytes, GError **error)
{
    cudnnDataType_t type = cudnn_type(layers->dtype);
    const vd_cuda_conv_weights *w = weights;
    int groups = w->groups > 1 ? w->groups : 1;
    memset(conv, 0, sizeof(*conv));
    conv->weights = weights;
    conv->src = src;
    conv->dst = dst;
    conv->residual = residual;
    conv->relu = relu;

    if (src->n < 1 || dst->n != src->n || (residual != NULL && residual->n != dst->n) ||
        src->c != w->in_c * groups || dst->c != w->out_c || w->out_c % groups != 0 ||
        dst->h != (src->h + 2 * w->padding - w->kernel) / w->stride + 1 ||
        dst->w != (src->w + 2 * w->padding - w->kernel) / w->stride + 1 ||
        (residual != NULL &&
         (residual->c != dst->c || residual->h != dst->h || residual->w != dst->w))) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "convolution %d->%d (k%d s%d, %d group%s) planned on tensors %dx%dx%dx%d -> "
                    "%dx%dx%dx%d",
                    w->in_c * groups, w->out_c, w->kernel, w->stride, groups, groups > 1 ? "s" : "",
                    src->n, src->h, src->w, src->c, dst->n, dst->h, dst->w, dst->c);
        return FALSE;
    }

    CUDNN_TRY(cudnnCreateTensorDescriptor(&conv->x_desc), "tensor descriptor");
    CUDNN_TRY(cudnnCreateTensorDescriptor(&conv->y_desc), "tensor descriptor");
    CUDNN_TRY(cudnnCreateTensorDescriptor(&conv->bias_desc), "tensor descriptor");
    CUDNN_TRY(cudnnCreateFilterDescriptor(&conv->w_desc), "filter descriptor");
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&conv->conv_desc), "convolution descriptor");
    /* one image first: the algorithms are those a single image gets (so a
     * batch's images get the single image's numbers), the batch's N set below */
    CUDNN_TRY(cudnnSetTensor4dDescriptor(conv->x_desc, CUDNN_TENSOR_NHWC, type, 1, src->c, src->h,
                                         src->w),
              "input descriptor");
    CUDNN_TRY(cudnnSetTensor4dDescriptor(conv->y_desc, CUDNN_TENSOR_NHWC, type, 1, dst->c, dst->h,
                                         dst->w),
              "output descriptor");
    CUDNN_TRY(cudnnSetTensor4dDescriptor(conv->bias_desc, CUDNN_TENSOR_NHWC, type, 1, dst->c, 1, 1),
              "bias descriptor");
    CUDNN_TRY(cudnnSetFilter4dDescriptor(conv->w_desc, type, CUDNN_TENSOR_NHWC, w->out_c, w->in_c,
                                         w->kernel, w->kernel),
              "filter descriptor");
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(conv->conv_desc, w->padding, w->padding, w->stride,
                                              w->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT),
              "convolution descriptor");
    CUDNN_TRY(cudnnSetConvolutionMathType(conv->conv_desc, layers->dtype == VD_DTYPE_F16
                                                               ? CUDNN_TENSOR_OP_MATH
                                                               : CUDNN_FMA_MATH),
              "convolution math type");
    /* depthwise: the filter descriptor holds one group's input channels */
    if (groups > 1)
        CUDNN_TRY(cudnnSetConvolutionGroupCount(conv->conv_desc, groups),
                  "convolution group count");

    /* the unfused path's algorithm, and the candidates for the fused call */
    {
        cudnnConvolutionFwdAlgoPerf_t perf[VD_CUDA_MAX_ALGOS];
        int returned = 0;
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(layers->cudnn, conv->x_desc, conv->w_desc,
                                                         conv->conv_desc, conv->y_desc,
                                                         VD_CUDA_MAX_ALGOS, &returned, perf),
                  "convolution algorithm heuristics");
        gboolean found = FALSE;
        for (int i = 0; i < returned; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > CONV_WORKSPACE_LIMIT)
                continue;
            if (!found) {
                conv->unfused_algo = perf[i].algo;
                conv->unfused_bytes = perf[i].memory;
                found = TRUE;
            }
            /* cuDNN's fused call takes the identity activation with this
             * algorithm only */
            if (relu || perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
                conv->algos[conv->n_algos] = perf[i].algo;
                conv->algo_bytes[conv->n_algos] = perf[i].memory;
                conv->n_algos++;
            }
        }
        if (!found) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "cuDNN has no algorithm for the convolution %d->%d k%d s%d on %dx%d",
                        w->in_c, w->out_c, w->kernel, w->stride, src->h, src->w);
            goto out_fail;
        }
        if (!relu && conv->n_algos == 0) {
            size_t bytes = 0;
            if (cudnnGetConvolutionForwardWorkspaceSize(
                    layers->cudnn, conv->x_desc, conv->w_desc, conv->conv_desc, conv->y_desc,
                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                    &bytes) == CUDNN_STATUS_SUCCESS &&
                bytes <= CONV_WORKSPACE_LIMIT) {
                conv->algos[0] = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
                conv->algo_bytes[0] = bytes;
                conv->n_algos = 1;
            }
        }
        if (src->n > 1) {
            /* the batch is cuDNN's N: one call for every image of the plan,
             * with the single image's algorithms and the batch's workspace */
            int kept = 0;
            CUDNN_TRY(cudnnSetTensor4dDescriptor(conv->x_desc, CUDNN_TENSOR_NHWC, type, src->n,
                                                 src->c, src->h, src->w),
                      "input descriptor");
            CUDNN_TRY(cudnnSetTensor4dDescriptor(conv->y_desc, CUDNN_TENSOR_NHWC, type, dst->n,
                                                 dst->c, dst->h, dst->w),
                      "output descriptor");
            /* the unfused fallback is dropped at this N (SIZE_MAX: conv_run_unfused
             * refuses it) when cuDNN cannot size it or it needs more than the
             * limit, rather than failing a plan whose fused candidates work */
            if (cudnnGetConvolutionForwardWorkspaceSize(
                    layers->cudnn, conv->x_desc, conv->w_desc, conv->conv_desc, conv->y_desc,
                    conv->unfused_algo, &conv->unfused_bytes) != CUDNN_STATUS_SUCCESS ||
                conv->unfused_bytes > CONV_WORKSPACE_LIMIT)
                conv->unfused_bytes = SIZE_MAX;
            for (int i = 0; i < conv->n_algos; i++) {
                size_t bytes = 0;
                if (cudnnGetConvolutionForwardWorkspaceSize(
                        layers->cudnn, conv->x_desc, conv->w_desc, conv->conv_desc, conv->y_desc,
                        conv->algos[i], &bytes) != CUDNN_STATUS_SUCCESS ||
                    bytes > CONV_WORKSPACE_LIMIT)
                    continue;
                conv->algos[kept] = conv->algos[i];
                conv->algo_bytes[kept] = bytes;
                kept++;
            }
            conv->n_algos = kept;
            if (kept == 0 && conv->unfused_bytes == SIZE_MAX) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "cuDNN has no algorithm for the convolution %d->%d k%d s%d on %dx%d "
                            "for %d images",
                            w->in_c, w->out_c, w->kernel, w->stride, src->h, src->w, src->n);
                goto out_fail;
            }
        }
        conv->mode = conv->n_algos > 0 ? VD_CUDA_CONV_FUSED : VD_CUDA_CONV_UNFUSED;
        /* sized by what runs: the first fused candidate (used unless cuDNN
         * refuses it) and the unfused fallback, not every candidate's need (up
         * to CONV_WORKSPACE_LIMIT); a later candidate that needs more than the
         * plan's workspace is skipped by vd_cuda_conv_run */
        if (conv->n_algos > 0)
            *workspace_bytes = MAX(*workspace_bytes, conv->algo_bytes[0]);
        if (conv->unfused_bytes != SIZE_MAX)
            *workspace_bytes = MAX(*workspace_bytes, conv->unfused_bytes);
    }
    return TRUE;

out_fail:
    vd_cuda_conv_clear(conv);
    return FALSE;
}

static cudnnStatus_t conv_run_unfused(vd_cuda_layers *layers, vd_cuda_conv *conv)
{
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t status;
    if (conv->unfused_bytes > layers->workspace_bytes)
        return CUDNN_STATUS_NOT_SUPPORTED;
    status = cudnnConvolutionForward(layers->cudnn, &one, conv->x_desc, conv->src->data,
                                     conv->w_desc, conv->weights->weight, conv->conv_desc,
                                     conv->unfused_algo, layers->workspace, layers->workspace_bytes,
                                     &zero, conv->y_desc, conv->dst->data);
    if (status == CUDNN_STATUS_SUCCESS && conv->residual != NULL)
        status = cudnnAddTensor(layers->cudnn, &one, conv->y_desc, conv->residual->data, &one,
                                conv->y_desc, conv->dst->data);
    if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnAddTensor(layers->cudnn, &one, conv->bias_desc, conv->weights->bias, &one,
                                conv->y_desc, conv->dst->data);
    if (status == CUDNN_STATUS_SUCCESS && conv->relu)
        status = cudnnActivationForward(layers->cudnn, layers->relu, &one, conv->y_desc,
                                        conv->dst->data, &zero, conv->y_desc, conv->dst->data);
    return status;
}

const char *vd_cuda_conv_algo_name(cudnnConvolutionFwdAlgo_t algo)
{
    switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
        return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
        return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
        return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
    default:
        return "unknown";
    }
}

static const char *conv_layer_name(const vd_cuda_conv *conv)
{
    return conv->weights != NULL && conv->weights->name[0] != '\0' ? conv->weights->name
                                                                   : "(unnamed)";
}

char *vd_cuda_conv_describe(const vd_cuda_conv *conv)
{
    gboolean fused = conv->mode == VD_CUDA_CONV_FUSED && conv->algo < conv->n_algos;
    const char *algo = vd_cuda_conv_algo_name(fused ? conv->algos[conv->algo] : conv->unfused_algo);
    if (conv->n_demotions == 0)
        return g_strdup_printf("cudnn %s %s", fused ? "fused" : "unfused", algo);
    return g_strdup_printf("cudnn %s %s, after %d demotion%s (last: fused %s refused, %s, "
                           "status %d)",
                           fused ? "fused" : "unfused", algo, conv->n_demotions,
                           conv->n_demotions == 1 ? "" : "s",
                           vd_cuda_conv_algo_name(conv->demoted_algo),
                           cudnnGetErrorString(conv->demoted_status), (int)conv->demoted_status);
}

gboolean vd_cuda_conv_run(vd_cuda_layers *layers, vd_cuda_conv *conv, GError **error)
{
    const float one = 1.0f, zero = 0.0f;
    while (conv->mode == VD_CUDA_CONV_FUSED) {
        const void *z = conv->residual != NULL ? conv->residual->data : conv->dst->data;
        cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
        if (conv->algo_bytes[conv->algo] <= layers->workspace_bytes)
            status = cudnnConvolutionBiasActivationForward(
                layers->cudnn, &one, conv->x_desc, conv->src->data, conv->w_desc,
                conv->weights->weight, conv->conv_desc, conv->algos[conv->algo], layers->workspace,
                layers->workspace_bytes, conv->residual != NULL ? &one : &zero, conv->y_desc, z,
                conv->bias_desc, conv->weights->bias, conv->relu ? layers->relu : layers->identity,
                conv->y_desc, conv->dst->data);
        if (status == CUDNN_STATUS_SUCCESS)
            return TRUE;
        if (!vd_cudnn_refused(status)) {
            char *what =
                g_strdup_printf("convolution %s (fused, algorithm %s)", conv_layer_name(conv),
                                vd_cuda_conv_algo_name(conv->algos[conv->algo]));
            gboolean ok = vd_cudnn_check(status, what, error);
            g_free(what);
            return ok;
        }
        /* refused (not supported): the next candidate, then the unfused path,
         * for good; recorded for vd_context_kernels() */
        conv->n_demotions++;
        conv->demoted_algo = conv->algos[conv->algo];
        conv->demoted_status = status;
        layers->n_demotions++;
        if (++conv->algo >= conv->n_algos)
            conv->mode = VD_CUDA_CONV_UNFUSED;
    }
    cudnnStatus_t status = conv_run_unfused(layers, conv);
    if (status == CUDNN_STATUS_SUCCESS)
        return TRUE;
    char *what = g_strdup_printf("convolution %s (unfused, algorithm %s)", conv_layer_name(conv),
                                 vd_cuda_conv_algo_name(conv->unfused_algo));
    gboolean ok = vd_cudnn_check(status, what, error);
    g_free(what);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Linear layers                                                              */

void vd_cuda_linear_clear(vd_cuda_linear *lin)
{
    if (lin->desc != NULL)
        cublasLtMatmulDescDestroy(lin->desc);
    if (lin->a_layout != NULL)
        cublasLtMatrixLayoutDestroy(lin->a_layout);
    if (lin->b_layout != NULL)
        cublasLtMatrixLayoutDestroy(lin->b_layout);
    if (lin->c_layout != NULL)
        cublasLtMatrixLayoutDestroy(lin->c_layout);
    lin->desc = NULL;
    lin->a_layout = lin->b_layout = lin->c_layout = NULL;
    lin->has_algo = FALSE;
    lin->rows = 0;
}

gboolean vd_cuda_linear_upload(vd_cuda_layers *layers, vd_cuda_pool *pool, vd_cuda_linear *lin,
                               const float *weight, const float *bias, int out, int in,
                               int out_stride, vd_dtype out_dtype, gboolean relu, GError **error)
{
    gboolean ok = FALSE;
    size_t n = (size_t)out_stride * in;
    float *host = g_try_malloc0(n * sizeof(float));
    float *host_bias = g_try_malloc0((size_t)out_stride * sizeof(float));
    memset(lin, 0, sizeof(*lin));
    if (host == NULL || host_bias == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory preparing a linear layer");
        goto out_free;
    }
    memcpy(host, weight, (size_t)out * in * sizeof(float));
    memcpy(host_bias, bias, (size_t)out * sizeof(float));
    lin->in = in;
    lin->out = out;
    lin->out_stride = out_stride;
    lin->out_dtype = out_dtype;
    lin->relu = relu;
    lin->weight = vd_cuda_pool_alloc(pool, n * vd_dtype_size(layers->dtype), layers->stream,
                                     "linear weights", error);
    lin->bias = lin->weight == NULL
                    ? NULL
                    : vd_cuda_pool_alloc(pool, (size_t)out_stride * vd_dtype_size(out_dtype),
                                         layers->stream, "linear bias", error);
    if (lin->bias == NULL)
        goto out_free;
    ok = vd_cuda_upload_floats(layers, lin->weight, host, n, layers->dtype, error) &&
         vd_cuda_upload_floats(layers, lin->bias, host_bias, (size_t)out_stride, out_dtype, error);
out_free:
    g_free(host);
    g_free(host_bias);
    return ok;
}

#define CUBLAS_TRY(call, what)                                                                     \
    do {                                                                                           \
        if (!vd_cublas_check((call), (what), error))                                               \
            goto out_fail;                                                                         \
    } while (0)

static cudaDataType_t cuda_type(vd_dtype dtype)
{
    return dtype == VD_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The alignment (a power of two, at most the 256 bytes cuBLASLt assumes by
 * default) of every multiple of @block_bytes from a 256-byte aligned base. */
static uint32_t block_alignment(size_t block_bytes)
{
    uint32_t align = 256;
    while (align > 1 && block_bytes % align != 0)
        align /= 2;
    return align;
}

/* Row-major Y[R][N] = X[R][K] W[N][K]^T is, column-major, Y^T (N x R) =
 * W^T (N x K, i.e. W stored K x N transposed) times X^T (K x R): A = W with
 * op T, B = X, C = D = Y with leading dimension out_stride. The bias is the
 * epilogue's per-row (of the column-major D) vector. */
gboolean vd_cuda_linear_plan(vd_cuda_layers *layers, vd_cuda_linear *lin, int rows, GError **error)
{
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t result;
    int returned = 0;
    cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = lin->relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t in_type = cuda_type(layers->dtype), out_type = cuda_type(lin->out_dtype);
    cudaDataType_t bias_type = out_type;

    vd_cuda_linear_clear(lin);
    lin->rows = rows;
    CUBLAS_TRY(cublasLtMatmulDescCreate(&lin->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "matmul descriptor");
    CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(lin->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)),
        "matmul descriptor");
    CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(lin->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)),
        "matmul descriptor");
    CUBLAS_TRY(cublasLtMatmulDescSetAttribute(lin->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)),
               "matmul epilogue");
    CUBLAS_TRY(cublasLtMatmulDescSetAttribute(lin->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                              &lin->bias, sizeof(lin->bias)),
               "matmul bias");
    CUBLAS_TRY(cublasLtMatmulDescSetAttribute(lin->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                              &bias_type, sizeof(bias_type)),
               "matmul bias type");
    CUBLAS_TRY(
        cublasLtMatrixLayoutCreate(&lin->a_layout, in_type, lin->in, lin->out_stride, lin->in),
        "matrix layout");
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&lin->b_layout, in_type, lin->in, rows, lin->in),
               "matrix layout");
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&lin->c_layout, out_type, lin->out_stride, rows,
                                          lin->out_stride),
               "matrix layout");
    CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref), "matmul preference");
    CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &layers->lt_workspace_bytes,
                                                    sizeof(layers->lt_workspace_bytes)),
               "matmul preference");
    /* a batch runs the product on each image's rows, at offsets of whole
     * row blocks: the heuristics assume 256-byte aligned matrices unless told
     * (an odd proposal count, e.g. 150 rows of a 456-float predictor output,
     * puts the second image's block at 64 bytes) */
    {
        const size_t in_bytes = vd_dtype_size(layers->dtype);
        const size_t out_bytes = vd_dtype_size(lin->out_dtype);
        const cublasLtMatmulPreferenceAttributes_t attrs[3] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        const uint32_t cd = block_alignment((size_t)rows * lin->out_stride * out_bytes);
        const uint32_t aligns[3] = {block_alignment((size_t)rows * lin->in * in_bytes), cd, cd};
        for (int k = 0; k < 3; k++)
            CUBLAS_TRY(
                cublasLtMatmulPreferenceSetAttribute(pref, attrs[k], &aligns[k], sizeof(aligns[k])),
                "matmul alignment");
    }
    CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(layers->cublaslt, lin->desc, lin->a_layout,
                                              lin->b_layout, lin->c_layout, lin->c_layout, pref, 1,
                                              &result, &returned),
               "matmul heuristics");
    if (returned < 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "cuBLASLt has no algorithm for a %dx%d by %dx%d product", rows, lin->in,
                    lin->in, lin->out_stride);
        goto out_fail;
    }
    lin->algo = result.algo;
    lin->has_algo = TRUE;
    cublasLtMatmulPreferenceDestroy(pref);
    return TRUE;

out_fail:
    if (pref != NULL)
        cublasLtMatmulPreferenceDestroy(pref);
    vd_cuda_linear_clear(lin);
    return FALSE;
}

gboolean vd_cuda_linear_run(vd_cuda_layers *layers, vd_cuda_linear *lin, const void *x, void *y,
                            GError **error)
{
    const float one = 1.0f, zero = 0.0f;
    return vd_cublas_check(cublasLtMatmul(layers->cublaslt, lin->desc, &one, lin->weight,
                                          lin->a_layout, x, lin->b_layout, &zero, y, lin->c_layout,
                                          y, lin->c_layout, lin->has_algo ? &lin->algo : NULL,
                                          layers->lt_workspace, layers->lt_workspace_bytes,
                                          layers->stream),
                           "linear layer", error);
}
