/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pre-processing in one kernel (spec §1): the raw frame, uploaded once, to the
 * padded NHWC network input. Per output pixel of the resized area: the source
 * indices and lambdas of both axes under the model file's resize rule, torch 1.13's
 * or torch 2.x's (vd_math_resize_taps_at: vd_math_resize_source_rule, as the CPU's
 * axis tables), the four neighbours converted to RGB (vd_math_yuv_to_rgb for 4:2:0
 * formats), each normalised as (v / 255 - mean) / std with separate roundings
 * (vd_math_normalise) and blended with the rule's blend (vd_math_resize_pixel:
 * vd_math_resize_blend_rule); the same functions as vd_cpu_preprocess, host/device
 * from vd_math.h, whose __f*_rn intrinsics and explicit fmaf() nvcc never
 * contracts: bit for bit the CPU's. tests/engine/test_preprocess.c runs this
 * per-pixel arithmetic on the host against the CPU. Outside the resized area:
 * zeros (the mean colour). */
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
    preprocess_kernel(vd_device_frame frame, norm_params norm, vd_math_resize_plan resize,
                      int padded_h, int padded_w, int channels, T *out)
{
    /* (v / 255 - mean[c]) / std[c] for every byte value, per channel */
    __shared__ float lut[3 * 256];
    for (int i = threadIdx.x; i < 3 * 256; i += blockDim.x) {
        int c = i / 256, v = i % 256;
        lut[i] = vd_math_normalise(v, norm.mean[c], norm.std[c]);
    }
    __syncthreads();

    vd_math_yuv_coeffs yuv = vd_math_yuv_coeffs_for(frame.matrix, frame.full_range);
    long long n = (long long)padded_h * padded_w;
    VD_GRID_LOOP(p, n)
    {
        int x = (int)(p % padded_w), y = (int)(p / padded_w);
        float value[3] = {0.0f, 0.0f, 0.0f};
        if (y < resize.out_h && x < resize.out_w) {
            vd_math_resize_taps t = vd_math_resize_taps_at(&resize, y, x);
            unsigned char a00[3], a01[3], a10[3], a11[3];
            fetch_rgb(frame, yuv, t.x0, t.y0, a00);
            fetch_rgb(frame, yuv, t.x1, t.y0, a01);
            fetch_rgb(frame, yuv, t.x0, t.y1, a10);
            fetch_rgb(frame, yuv, t.x1, t.y1, a11);
            vd_math_resize_pixel(&resize, &t, lut, a00, a01, a10, a11, value);
        }
        T *dst = out + p * channels;
        for (int c = 0; c < channels; c++)
            vd_store(dst + c, c < 3 ? value[c] : 0.0f);
    }
}

extern "C" cudaError_t vd_preprocess(const vd_device_frame *frame, const float mean[3],
                                     const float std[3], int arithmetic, int resized_h,
                                     int resized_w, int padded_h, int padded_w, int channels,
                                     vd_dtype dtype, void *out, cudaStream_t stream)
{
    if (channels < 3 || frame->format < FMT_RGB || frame->format > FMT_I420 ||
        resized_h > padded_h || resized_w > padded_w || resized_h <= 0 || resized_w <= 0 ||
        (arithmetic != VD_MATH_RESIZE_TORCH1 && arithmetic != VD_MATH_RESIZE_TORCH2))
        return cudaErrorInvalidValue;
    /* the ratios and the blend once, as the CPU computes them (the same function) */
    vd_math_resize_plan resize =
        vd_math_resize_plan_for(arithmetic, frame->height, frame->width, resized_h, resized_w);
    norm_params norm;
    for (int c = 0; c < 3; c++) {
        norm.mean[c] = mean[c];
        norm.std[c] = std[c];
    }
    long long n = (long long)padded_h * padded_w;
    unsigned blocks = vd_blocks_for(n, 256, 4096);
    if (dtype == VD_DTYPE_F16)
        preprocess_kernel<<<blocks, 256, 0, stream>>>(*frame, norm, resize, padded_h, padded_w,
                                                      channels, (__half *)out);
    else
        preprocess_kernel<<<blocks, 256, 0, stream>>>(*frame, norm, resize, padded_h, padded_w,
                                                      channels, (float *)out);
    return vd_launch_status();
}
