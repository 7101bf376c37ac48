/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* MobileNetV3's kernels (engine/MOBILENETV3.md §2): hardswish after the
 * convolutions that have it (cuDNN has no such activation), and
 * SqueezeExcitation: channel means, the two small products with ReLU and
 * hardsigmoid, the per-channel scale. Arithmetic in float32 (the means summed
 * in double), activations from vd_math.h. */
#include "vd_kernels_common.cuh"

template <typename T> __global__ void __launch_bounds__(256) hardswish_kernel(T *data, long long n)
{
    VD_GRID_LOOP(i, n)
    {
        vd_store(&data[i], vd_math_hardswish(vd_load(&data[i])));
    }
}

extern "C" cudaError_t vd_hardswish(void *data, size_t n, vd_dtype dtype, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    unsigned blocks = vd_blocks_for((long long)n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        hardswish_kernel<<<blocks, 256, 0, stream>>>((__half *)data, (long long)n);
    else
        hardswish_kernel<<<blocks, 256, 0, stream>>>((float *)data, (long long)n);
    return vd_launch_status();
}

#define SE_CH 32  /* channels per block of the means */
#define SE_ROWS 8 /* pixel strides per block of the means */
#define SE_THREADS 256

/* grid (ceil(c / SE_CH), n_images), block (SE_CH, SE_ROWS) */
template <typename T>
__global__ void __launch_bounds__(SE_CH *SE_ROWS)
    se_means_kernel(const T *data, int hw, int c, float *means)
{
    __shared__ double partial[SE_ROWS][SE_CH];
    int ch = blockIdx.x * SE_CH + threadIdx.x;
    int img = blockIdx.y;
    double acc = 0.0;
    if (ch < c) {
        const T *x = data + (size_t)img * hw * c;
        for (int p = threadIdx.y; p < hw; p += SE_ROWS)
            acc += (double)vd_load(&x[(size_t)p * c + ch]);
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && ch < c) {
        double sum = 0.0;
        for (int r = 0; r < SE_ROWS; r++)
            sum += partial[r][threadIdx.x];
        means[(size_t)img * c + ch] = (float)(sum / (double)hw);
    }
}

/* grid n_images, block SE_THREADS, dynamic shared (c + s) floats */
__global__ void __launch_bounds__(SE_THREADS)
    se_excite_kernel(const float *means, int c, int s, const float *fc1_w, const float *fc1_b,
                     const float *fc2_w, const float *fc2_b, float *scales)
{
    extern __shared__ float se_shared[];
    float *mean = se_shared, *hidden = se_shared + c;
    int img = blockIdx.x;
    for (int k = threadIdx.x; k < c; k += blockDim.x)
        mean[k] = means[(size_t)img * c + k];
    __syncthreads();
    for (int j = threadIdx.x; j < s; j += blockDim.x) {
        const float *row = fc1_w + (size_t)j * c;
        float v = 0.0f;
        for (int k = 0; k < c; k++)
            v = vd_math_fadd(v, vd_math_fmul(row[k], mean[k]));
        v = vd_math_fadd(v, fc1_b[j]);
        hidden[j] = v > 0.0f ? v : 0.0f;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < c; k += blockDim.x) {
        const float *row = fc2_w + (size_t)k * s;
        float v = 0.0f;
        for (int j = 0; j < s; j++)
            v = vd_math_fadd(v, vd_math_fmul(row[j], hidden[j]));
        v = vd_math_fadd(v, fc2_b[k]);
        scales[(size_t)img * c + k] = vd_math_hardsigmoid(v);
    }
}

template <typename T>
__global__ void __launch_bounds__(256)
    se_scale_kernel(T *data, long long n, long long image_elements, int c, const float *scales)
{
    VD_GRID_LOOP(i, n)
    {
        long long img = i / image_elements;
        int ch = (int)(i % c);
        vd_store(&data[i], vd_math_fmul(vd_load(&data[i]), scales[img * c + ch]));
    }
}

extern "C" cudaError_t vd_squeeze_excite(void *data, int n_images, int hw, int c, int s,
                                         const float *fc1_w, const float *fc1_b, const float *fc2_w,
                                         const float *fc2_b, float *means, float *scales,
                                         vd_dtype dtype, cudaStream_t stream)
{
    if (n_images < 1 || hw < 1 || c < 1 || s < 1 || n_images > 65535)
        return cudaErrorInvalidValue;
    size_t shared = (size_t)(c + s) * sizeof(float);
    if (shared > 48 * 1024)
        return cudaErrorInvalidValue;
    dim3 mgrid((unsigned)((c + SE_CH - 1) / SE_CH), (unsigned)n_images);
    dim3 mblock(SE_CH, SE_ROWS);
    long long image_elements = (long long)hw * c;
    long long n = image_elements * n_images;
    unsigned blocks = vd_blocks_for(n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        se_means_kernel<<<mgrid, mblock, 0, stream>>>((const __half *)data, hw, c, means);
    else
        se_means_kernel<<<mgrid, mblock, 0, stream>>>((const float *)data, hw, c, means);
    se_excite_kernel<<<n_images, SE_THREADS, shared, stream>>>(means, c, s, fc1_w, fc1_b, fc2_w,
                                                               fc2_b, scales);
    if (dtype == VD_DTYPE_F16)
        se_scale_kernel<<<blocks, 256, 0, stream>>>((__half *)data, n, image_elements, c, scales);
    else
        se_scale_kernel<<<blocks, 256, 0, stream>>>((float *)data, n, image_elements, c, scales);
    return vd_launch_status();
}
