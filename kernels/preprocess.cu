/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pre-processing in one kernel (spec §1): the raw frame, uploaded once, to the
 * padded NHWC network input. Per output pixel of the resized area: the source
 * indices and lambdas of both axes (vd_math_resize_source, the CPU's double
 * precision rule), the four neighbours converted to RGB (vd_math_yuv_to_rgb for
 * 4:2:0 formats), each normalised as (v / 255 - mean) / std with separate
 * roundings, and blended with vd_math_resize_blend; the same arithmetic as
 * vd_cpu_preprocess. Outside the resized area: zeros (the mean colour). */
#include "vd_kernels_common.cuh"

/* values of vd_pixel_format (vd.h) */
enum {
    FMT_RGB = 0,
    FMT_BGR,
    FMT_RGBA,
    FMT_BGRA,
    FMT_RGBX,
    FMT_BGRX,
    FMT_NV12,
    FMT_I420,
};

typedef struct {
    float mean[3];
    float std[3];
} norm_params;

/* 8-bit R, G, B of pixel (x, y) of the frame. 4:2:0 chroma of pixel (x, y) is
 * the sample at (x / 2, y / 2). */
static __device__ __forceinline__ void fetch_rgb(const vd_device_frame &f,
                                                 const vd_math_yuv_coeffs &yuv, int x, int y,
                                                 unsigned char rgb[3])
{
    const uint8_t *row = f.planes[0] + (size_t)y * f.strides[0];
    switch (f.format) {
    case FMT_RGB:
        rgb[0] = row[3 * x];
        rgb[1] = row[3 * x + 1];
        rgb[2] = row[3 * x + 2];
        break;
    case FMT_BGR:
        rgb[0] = row[3 * x + 2];
        rgb[1] = row[3 * x + 1];
        rgb[2] = row[3 * x];
        break;
    case FMT_RGBA:
    case FMT_RGBX:
        rgb[0] = row[4 * x];
        rgb[1] = row[4 * x + 1];
        rgb[2] = row[4 * x + 2];
        break;
    case FMT_BGRA:
    case FMT_BGRX:
        rgb[0] = row[4 * x + 2];
        rgb[1] = row[4 * x + 1];
        rgb[2] = row[4 * x];
        break;
    case FMT_NV12: {
        const uint8_t *uv = f.planes[1] + (size_t)(y / 2) * f.strides[1] + 2 * (x / 2);
        vd_math_yuv_to_rgb(&yuv, row[x], uv[0], uv[1], rgb);
        break;
    }
    default: { /* I420 */
        int u = f.planes[1][(size_t)(y / 2) * f.strides[1] + x / 2];
        int v = f.planes[2][(size_t)(y / 2) * f.strides[2] + x / 2];
        vd_math_yuv_to_rgb(&yuv, row[x], u, v, rgb);
        break;
    }
    }
}

template <typename T>
__global__ void __launch_bounds__(256)
    preprocess_kernel(vd_device_frame frame, norm_params norm, int resized_h, int resized_w,
                      int padded_h, int padded_w, int channels, T *out)
{
    /* (v / 255 - mean[c]) / std[c] for every byte value, per channel */
    __shared__ float lut[3][256];
    for (int i = threadIdx.x; i < 3 * 256; i += blockDim.x) {
        int c = i / 256, v = i % 256;
        lut[c][v] =
            vd_math_fdiv(vd_math_fsub(vd_math_fdiv((float)v, 255.0f), norm.mean[c]), norm.std[c]);
    }
    __syncthreads();

    vd_math_yuv_coeffs yuv = vd_math_yuv_coeffs_for(frame.matrix, frame.full_range);
    float ratio_h = vd_math_resize_ratio(frame.height, resized_h);
    float ratio_w = vd_math_resize_ratio(frame.width, resized_w);
    long long n = (long long)padded_h * padded_w;
    VD_GRID_LOOP(p, n)
    {
        int x = (int)(p % padded_w), y = (int)(p / padded_w);
        float value[3] = {0.0f, 0.0f, 0.0f};
        if (y < resized_h && x < resized_w) {
            int h0, h1, w0, w1;
            float l0h, l1h, l0w, l1w;
            vd_math_resize_source(ratio_h, y, frame.height, resized_h, &h0, &h1, &l0h, &l1h);
            vd_math_resize_source(ratio_w, x, frame.width, resized_w, &w0, &w1, &l0w, &l1w);
            unsigned char a00[3], a01[3], a10[3], a11[3];
            fetch_rgb(frame, yuv, w0, h0, a00);
            fetch_rgb(frame, yuv, w1, h0, a01);
            fetch_rgb(frame, yuv, w0, h1, a10);
            fetch_rgb(frame, yuv, w1, h1, a11);
            for (int c = 0; c < 3; c++)
                value[c] = vd_math_resize_blend(l0h, l1h, l0w, l1w, lut[c][a00[c]], lut[c][a01[c]],
                                                lut[c][a10[c]], lut[c][a11[c]]);
        }
        T *dst = out + p * channels;
        for (int c = 0; c < channels; c++)
            vd_store(dst + c, c < 3 ? value[c] : 0.0f);
    }
}

extern "C" cudaError_t vd_preprocess(const vd_device_frame *frame, const float mean[3],
                                     const float std[3], int resized_h, int resized_w, int padded_h,
                                     int padded_w, int channels, vd_dtype dtype, void *out,
                                     cudaStream_t stream)
{
    if (channels < 3 || frame->format < FMT_RGB || frame->format > FMT_I420 ||
        resized_h > padded_h || resized_w > padded_w || resized_h <= 0 || resized_w <= 0)
        return cudaErrorInvalidValue;
    norm_params norm;
    for (int c = 0; c < 3; c++) {
        norm.mean[c] = mean[c];
        norm.std[c] = std[c];
    }
    long long n = (long long)padded_h * padded_w;
    unsigned blocks = vd_blocks_for(n, 256, 4096);
    if (dtype == VD_DTYPE_F16)
        preprocess_kernel<<<blocks, 256, 0, stream>>>(*frame, norm, resized_h, resized_w, padded_h,
                                                      padded_w, channels, (__half *)out);
    else
        preprocess_kernel<<<blocks, 256, 0, stream>>>(*frame, norm, resized_h, resized_w, padded_h,
                                                      padded_w, channels, (float *)out);
    return vd_launch_status();
}
