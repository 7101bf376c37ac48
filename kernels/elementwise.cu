/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small layout kernels of the backbone and the FPN: the stem's max pooling, the
 * FPN's nearest upsampling + lateral sum, LastLevelMaxPool, and the NHWC -> NCHW
 * float32 conversion of the debugging observer, and the count of non-finite
 * values of a frame. Max and copies are exact in any dtype; the lateral sum is
 * one rounding, as in torch. */
#include "vd_kernels_common.cuh"

#include <cub/block/block_reduce.cuh>

template <typename T>
__global__ void __launch_bounds__(256)
    max_pool_kernel(const T *in, int h, int w, int c, T *out, int out_h, int out_w)
{
    long long n = (long long)out_h * out_w * c;
    VD_GRID_LOOP(idx, n)
    {
        int ch = (int)(idx % c);
        long long p = idx / c;
        int ox = (int)(p % out_w), oy = (int)(p / out_w);
        float best = -INFINITY;
        T best_raw = in[0];
        bool any = false;
        for (int ky = 0; ky < 3; ky++) {
            int y = 2 * oy - 1 + ky;
            if (y < 0 || y >= h)
                continue;
            for (int kx = 0; kx < 3; kx++) {
                int x = 2 * ox - 1 + kx;
                if (x < 0 || x >= w)
                    continue;
                T raw = in[((size_t)y * w + x) * c + ch];
                float v = vd_load(&raw);
                /* torch's max pooling propagates NaN */
                if (!any || v > best || v != v) {
                    best = v;
                    best_raw = raw;
                    any = true;
                    if (v != v)
                        goto done;
                }
            }
        }
    done:
        out[idx] = best_raw;
    }
}

extern "C" cudaError_t vd_max_pool_3x3s2(const void *in, int h, int w, int c, void *out, int out_h,
                                         int out_w, vd_dtype dtype, cudaStream_t stream)
{
    long long n = (long long)out_h * out_w * c;
    unsigned blocks = vd_blocks_for(n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        max_pool_kernel<<<blocks, 256, 0, stream>>>((const __half *)in, h, w, c, (__half *)out,
                                                    out_h, out_w);
    else
        max_pool_kernel<<<blocks, 256, 0, stream>>>((const float *)in, h, w, c, (float *)out, out_h,
                                                    out_w);
    return vd_launch_status();
}

/* spec §2.3: src = min(floor(dst * f32(in / out)), in - 1), the CPU backend's rule */
template <typename T>
__global__ void __launch_bounds__(256)
    upsample_add_kernel(const T *src, int src_h, int src_w, T *dst, int dst_h, int dst_w, int c,
                        float sy, float sx)
{
    long long n = (long long)dst_h * dst_w * c;
    VD_GRID_LOOP(idx, n)
    {
        int ch = (int)(idx % c);
        long long p = idx / c;
        int x = (int)(p % dst_w), y = (int)(p / dst_w);
        int iy = min((int)floorf(vd_math_fmul((float)y, sy)), src_h - 1);
        int ix = min((int)floorf(vd_math_fmul((float)x, sx)), src_w - 1);
        float v =
            vd_math_fadd(vd_load(dst + idx), vd_load(src + ((size_t)iy * src_w + ix) * c + ch));
        vd_store(dst + idx, v);
    }
}

extern "C" cudaError_t vd_upsample_nearest_add(const void *src, int src_h, int src_w, void *dst,
                                               int dst_h, int dst_w, int c, vd_dtype dtype,
                                               cudaStream_t stream)
{
    float sy = (float)src_h / (float)dst_h;
    float sx = (float)src_w / (float)dst_w;
    long long n = (long long)dst_h * dst_w * c;
    unsigned blocks = vd_blocks_for(n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        upsample_add_kernel<<<blocks, 256, 0, stream>>>((const __half *)src, src_h, src_w,
                                                        (__half *)dst, dst_h, dst_w, c, sy, sx);
    else
        upsample_add_kernel<<<blocks, 256, 0, stream>>>((const float *)src, src_h, src_w,
                                                        (float *)dst, dst_h, dst_w, c, sy, sx);
    return vd_launch_status();
}

template <typename T>
__global__ void __launch_bounds__(256)
    subsample2_kernel(const T *in, int h, int w, int c, T *out, int out_h, int out_w)
{
    long long n = (long long)out_h * out_w * c;
    VD_GRID_LOOP(idx, n)
    {
        int ch = (int)(idx % c);
        long long p = idx / c;
        int x = (int)(p % out_w), y = (int)(p / out_w);
        out[idx] = in[((size_t)(2 * y) * w + 2 * x) * c + ch];
    }
}

extern "C" cudaError_t vd_subsample2(const void *in, int h, int w, int c, void *out, vd_dtype dtype,
                                     cudaStream_t stream)
{
    int out_h = (h + 1) / 2, out_w = (w + 1) / 2;
    long long n = (long long)out_h * out_w * c;
    unsigned blocks = vd_blocks_for(n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        subsample2_kernel<<<blocks, 256, 0, stream>>>((const __half *)in, h, w, c, (__half *)out,
                                                      out_h, out_w);
    else
        subsample2_kernel<<<blocks, 256, 0, stream>>>((const float *)in, h, w, c, (float *)out,
                                                      out_h, out_w);
    return vd_launch_status();
}

template <typename T>
__global__ void __launch_bounds__(256)
    nhwc_to_nchw_kernel(const T *in, int h, int w, int c, int c_stride, float *out)
{
    long long n = (long long)h * w * c;
    VD_GRID_LOOP(idx, n)
    {
        long long p = idx % ((long long)h * w);
        int ch = (int)(idx / ((long long)h * w));
        out[idx] = vd_load(in + p * c_stride + ch);
    }
}

extern "C" cudaError_t vd_nhwc_to_nchw_f32(const void *in, int h, int w, int c, int c_stride,
                                           vd_dtype dtype, float *out, cudaStream_t stream)
{
    long long n = (long long)h * w * c;
    unsigned blocks = vd_blocks_for(n, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        nhwc_to_nchw_kernel<<<blocks, 256, 0, stream>>>((const __half *)in, h, w, c, c_stride, out);
    else
        nhwc_to_nchw_kernel<<<blocks, 256, 0, stream>>>((const float *)in, h, w, c, c_stride, out);
    return vd_launch_status();
}

__global__ void __launch_bounds__(256) f32_to_f16_kernel(const float *in, long long n, __half *out)
{
    VD_GRID_LOOP(i, n)
    out[i] = __float2half_rn(in[i]);
}

extern "C" cudaError_t vd_convert_from_f32(const float *in, size_t n, vd_dtype dtype, void *out,
                                           cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    if (dtype == VD_DTYPE_F32)
        return cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    f32_to_f16_kernel<<<vd_blocks_for((long long)n, 256, 65535), 256, 0, stream>>>(in, (long long)n,
                                                                                   (__half *)out);
    return vd_launch_status();
}

#define COUNT_THREADS 256

template <typename T>
__global__ void __launch_bounds__(COUNT_THREADS)
    count_nonfinite_kernel(const T *data, int capacity, int cols, int stride, const int *n_rows,
                           int *count)
{
    int rows = n_rows != NULL ? max(0, min(*n_rows, capacity)) : capacity;
    long long n = (long long)rows * cols;
    int local = 0;
    VD_GRID_LOOP(i, n)
    {
        long long r = i / cols;
        int c = (int)(i % cols);
        local += isfinite(vd_load(data + r * stride + c)) ? 0 : 1;
    }
    typedef cub::BlockReduce<int, COUNT_THREADS> block_sum;
    __shared__ typename block_sum::TempStorage temp;
    int total = block_sum(temp).Sum(local);
    if (threadIdx.x == 0 && total > 0)
        atomicAdd(count, total);
}

extern "C" cudaError_t vd_count_nonfinite(const void *data, vd_dtype dtype, int capacity, int cols,
                                          int stride, const int *n_rows, int *count,
                                          cudaStream_t stream)
{
    unsigned blocks = vd_blocks_for((long long)capacity * cols, COUNT_THREADS, 1024);
    if (dtype == VD_DTYPE_F16)
        count_nonfinite_kernel<__half><<<blocks, COUNT_THREADS, 0, stream>>>(
            (const __half *)data, capacity, cols, stride, n_rows, count);
    else
        count_nonfinite_kernel<float><<<blocks, COUNT_THREADS, 0, stream>>>(
            (const float *)data, capacity, cols, stride, n_rows, count);
    return vd_launch_status();
}
