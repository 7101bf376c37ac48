/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to kernels/: helpers shared by the .cu files (not installed, not
 * included by host C code). */
#ifndef VD_KERNELS_COMMON_CUH
#define VD_KERNELS_COMMON_CUH

#include "vd_kernels.h"
#include "vd_math.h"

#include <cuda_fp16.h>
#include <math.h>

/* Loads and stores that convert between the storage type and float32. */
static __device__ __forceinline__ float vd_load(const float *p)
{
    return *p;
}
static __device__ __forceinline__ float vd_load(const __half *p)
{
    return __half2float(*p);
}
static __device__ __forceinline__ void vd_store(float *p, float v)
{
    *p = v;
}
static __device__ __forceinline__ void vd_store(__half *p, float v)
{
    *p = __float2half_rn(v);
}

static inline unsigned vd_blocks_for(long long n, int threads, unsigned max_blocks)
{
    long long b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    return b > (long long)max_blocks ? max_blocks : (unsigned)b;
}

static inline size_t vd_align_up(size_t n, size_t alignment)
{
    return (n + alignment - 1) / alignment * alignment;
}

/* The launch status: a launch error (bad configuration) or an earlier
 * asynchronous error, whichever CUDA reports first. */
static inline cudaError_t vd_launch_status(void)
{
    return cudaGetLastError();
}

/* Grid-stride loop over [0, n). */
#define VD_GRID_LOOP(i, n)                                                                         \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n);       \
         i += (long long)blockDim.x * gridDim.x)

#endif /* VD_KERNELS_COMMON_CUH */
