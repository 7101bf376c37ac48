/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CUDA backend utilities: error mapping (each failure reported once, as a GError
 * naming the operation), the counted synchronisation wrapper, and device memory
 * pools. */
#include "vd_config.h"
#include "cuda/vd_cuda_private.h"

static int cuda_error_code(cudaError_t status)
{
    switch (status) {
    case cudaErrorMemoryAllocation:
        return VD_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidValue:
        return VD_ERROR_INTERNAL;
    default:
        return VD_ERROR_DEVICE;
    }
}

gboolean vd_cuda_check(cudaError_t status, const char *what, GError **error)
{
    if (status == cudaSuccess)
        return TRUE;
    g_set_error(error, VD_ERROR, cuda_error_code(status), "CUDA failed in %s: %s (%s)", what,
                cudaGetErrorString(status), cudaGetErrorName(status));
    return FALSE;
}

gboolean vd_cudnn_check(cudnnStatus_t status, const char *what, GError **error)
{
    if (status == CUDNN_STATUS_SUCCESS)
        return TRUE;
    int code = VD_ERROR_INTERNAL;
    if (status == CUDNN_STATUS_ALLOC_FAILED
#if CUDNN_MAJOR >= 9
        || status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
#endif
    )
        code = VD_ERROR_OUT_OF_MEMORY;
    else if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED)
        code = VD_ERROR_UNSUPPORTED;
    else if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_EXECUTION_FAILED)
        code = VD_ERROR_DEVICE;
    /* the specific code too: cuDNN 9's strings name only some of them */
    g_set_error(error, VD_ERROR, code, "cuDNN failed in %s: %s (status %d)", what,
                cudnnGetErrorString(status), (int)status);
    return FALSE;
}

gboolean vd_cublas_check(cublasStatus_t status, const char *what, GError **error)
{
    if (status == CUBLAS_STATUS_SUCCESS)
        return TRUE;
    int code = VD_ERROR_INTERNAL;
    if (status == CUBLAS_STATUS_ALLOC_FAILED)
        code = VD_ERROR_OUT_OF_MEMORY;
    else if (status == CUBLAS_STATUS_NOT_SUPPORTED)
        code = VD_ERROR_UNSUPPORTED;
    else if (status == CUBLAS_STATUS_EXECUTION_FAILED)
        code = VD_ERROR_DEVICE;
    g_set_error(error, VD_ERROR, code, "cuBLAS failed in %s: status %d", what, (int)status);
    return FALSE;
}

gboolean vd_cuda_sync_event(guint64 *count, cudaEvent_t event, GError **error)
{
    (*count)++;
    return vd_cuda_check(cudaEventSynchronize(event), "waiting for the frame", error);
}

gboolean vd_cuda_sync_stream(guint64 *count, cudaStream_t stream, GError **error)
{
    (*count)++;
    return vd_cuda_check(cudaStreamSynchronize(stream), "stream synchronisation", error);
}

void vd_cuda_pool_init(vd_cuda_pool *pool)
{
    pool->blocks = g_ptr_array_new();
    pool->bytes = 0;
    pool->stream_ordered = FALSE;
    pool->stream = NULL;
}

void vd_cuda_pool_init_stream_ordered(vd_cuda_pool *pool, cudaStream_t stream, int device)
{
    int supported = 0;
    vd_cuda_pool_init(pool);
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) !=
        cudaSuccess) {
        cudaGetLastError();
        supported = 0;
    }
    pool->stream_ordered = supported != 0;
    pool->stream = stream;
}

void *vd_cuda_pool_alloc(vd_cuda_pool *pool, size_t bytes, cudaStream_t stream, const char *what,
                         GError **error)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 256;
    cudaError_t status =
        pool->stream_ordered ? cudaMallocAsync(&p, bytes, pool->stream) : cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        g_set_error(error, VD_ERROR, cuda_error_code(status),
                    "CUDA could not allocate %zu bytes of device memory for %s: %s", bytes, what,
                    cudaGetErrorString(status));
        return NULL;
    }
    g_ptr_array_add(pool->blocks, p);
    pool->bytes += bytes;
    if (!vd_cuda_check(cudaMemsetAsync(p, 0, bytes, stream), what, error))
        return NULL;
    return p;
}

/* Frees every block (in the stream's order for a stream-ordered pool). */
static void pool_release(vd_cuda_pool *pool)
{
    for (guint i = 0; i < pool->blocks->len; i++) {
        void *p = g_ptr_array_index(pool->blocks, i);
        if (pool->stream_ordered)
            cudaFreeAsync(p, pool->stream);
        else
            cudaFree(p);
    }
    cudaGetLastError();
    g_ptr_array_set_size(pool->blocks, 0);
    pool->bytes = 0;
}

void vd_cuda_pool_clear(vd_cuda_pool *pool)
{
    if (pool->blocks != NULL)
        pool_release(pool);
    pool->bytes = 0;
}

void vd_cuda_pool_free(vd_cuda_pool *pool)
{
    if (pool->blocks != NULL) {
        pool_release(pool);
        g_ptr_array_unref(pool->blocks);
    }
    pool->blocks = NULL;
    pool->bytes = 0;
}
