/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* MultiScaleRoIAlign (spec §5): each RoI goes to its FPN level by the
 * LevelMapper, then roi_align with aligned=False on that level. Features are NHWC
 * and read in their storage dtype (fp16 or fp32); sample coordinates, bilinear
 * weights, the blend and the accumulation are fp32 (vd_math.h, the arithmetic of
 * vd_roi_align_nhwc), so fp16 features lose nothing beyond their own rounding
 * (torchvision's native half kernel accumulates in half).
 *
 * Threads: one per (RoI, bin, group of V channels), V = 8 for fp16 (16-byte
 * loads) and 4 for fp32, so the threads of one bin read whole pixel rows of
 * channels contiguously. Output [capacity][pooled][pooled][channels], the
 * order fc6's permuted weights expect.
 *
 * Below it, torchvision.ops.roi_align as an op of its own (any batch, [K][5]
 * RoIs, aligned on or off), forward and backward, mirroring
 * vd_roi_align_forward and vd_roi_align_backward of the CPU: the backward by
 * fp32 atomics into an fp32 accumulator (grad_input itself, or a workspace
 * rounded to fp16 at the end). */
#include "vd_kernels_common.cuh"

#include <limits.h>

template <typename T, int V> struct vec_io;

template <> struct vec_io<__half, 8> {
    static __device__ __forceinline__ void load(const __half *p, float *v)
    {
        uint4 raw = *(const uint4 *)p;
        const __half2 *h = (const __half2 *)&raw;
        for (int k = 0; k < 4; k++) {
            float2 f = __half22float2(h[k]);
            v[2 * k] = f.x;
            v[2 * k + 1] = f.y;
        }
    }
};

template <> struct vec_io<float, 4> {
    static __device__ __forceinline__ void load(const float *p, float *v)
    {
        float4 raw = *(const float4 *)p;
        v[0] = raw.x;
        v[1] = raw.y;
        v[2] = raw.z;
        v[3] = raw.w;
    }
};

template <typename T> struct vec_io<T, 1> {
    static __device__ __forceinline__ void load(const T *p, float *v) { v[0] = vd_load(p); }
};

template <typename T, int V, typename O>
__global__ void __launch_bounds__(256)
    roi_align_kernel(vd_roi_levels lv, const float *rois, const int *n_rois, int capacity,
                     int pooled, int sampling_ratio, O *out)
{
    int n = n_rois != NULL ? *n_rois : capacity;
    int groups = lv.channels / V;
    long long total = (long long)capacity * pooled * pooled * groups;
    VD_GRID_LOOP(idx, total)
    {
        int g = (int)(idx % groups);
        long long rest = idx / groups;
        int pw = (int)(rest % pooled);
        rest /= pooled;
        int ph = (int)(rest % pooled);
        int r = (int)(rest / pooled);
        O *dst = out + (((size_t)r * pooled + ph) * pooled + pw) * lv.channels + g * V;
        if (r >= n) {
            for (int k = 0; k < V; k++)
                vd_store(dst + k, 0.0f);
            continue;
        }
        float box[4] = {rois[4 * r], rois[4 * r + 1], rois[4 * r + 2], rois[4 * r + 3]};
        int level = lv.n_levels > 1 ? vd_math_roi_level(box, lv.k_min, lv.k_max) : 0;
        level = min(level, lv.n_levels - 1); /* k_max - k_min + 1 levels, by construction */
        const T *feat = (const T *)lv.features[level];
        int H = lv.height[level], W = lv.width[level];
        vd_math_roi_geometry geo =
            vd_math_roi_geometry_of(box, lv.scale[level], pooled, pooled, sampling_ratio);

        float acc[V];
        for (int k = 0; k < V; k++)
            acc[k] = 0.0f;
        for (int iy = 0; iy < geo.grid_h; iy++) {
            float y = vd_math_roi_sample_coord(geo.start_y, ph, geo.bin_h, iy, geo.grid_h);
            for (int ix = 0; ix < geo.grid_w; ix++) {
                float x = vd_math_roi_sample_coord(geo.start_x, pw, geo.bin_w, ix, geo.grid_w);
                vd_math_roi_sample s = vd_math_roi_bilinear(y, x, H, W);
                float v[4][V];
                for (int q = 0; q < 4; q++)
                    vec_io<T, V>::load(feat + (size_t)s.pos[q] * lv.channels + g * V, v[q]);
                for (int k = 0; k < V; k++)
                    acc[k] = vd_math_fadd(
                        acc[k], vd_math_roi_blend(&s, v[0][k], v[1][k], v[2][k], v[3][k]));
            }
        }
        for (int k = 0; k < V; k++)
            vd_store(dst + k, vd_math_fdiv(acc[k], geo.count));
    }
}

template <typename T, int V>
static cudaError_t launch_typed(const vd_roi_levels *lv, const float *rois, const int *n_rois,
                                int capacity, int pooled, int sampling_ratio, void *out,
                                vd_dtype out_dtype, cudaStream_t stream)
{
    long long total = (long long)capacity * pooled * pooled * (lv->channels / V);
    unsigned blocks = vd_blocks_for(total, 256, 65535);
    if (out_dtype == VD_DTYPE_F16)
        roi_align_kernel<T, V, __half><<<blocks, 256, 0, stream>>>(
            *lv, rois, n_rois, capacity, pooled, sampling_ratio, (__half *)out);
    else
        roi_align_kernel<T, V, float><<<blocks, 256, 0, stream>>>(
            *lv, rois, n_rois, capacity, pooled, sampling_ratio, (float *)out);
    return vd_launch_status();
}

extern "C" cudaError_t vd_multiscale_roi_align(const vd_roi_levels *levels, vd_dtype feature_dtype,
                                               const float *rois, const int *n_rois, int capacity,
                                               int pooled, int sampling_ratio, void *out,
                                               vd_dtype out_dtype, cudaStream_t stream)
{
    if (levels->n_levels < 1 || levels->n_levels > VD_KERNEL_MAX_LEVELS || capacity < 0 ||
        pooled < 1 || levels->channels < 1)
        return cudaErrorInvalidValue;
    if (capacity == 0)
        return cudaSuccess;
    /* vector loads need aligned channel groups: every level pointer is a
     * cudaMalloc'ed buffer (256-byte aligned) and channels a multiple of V */
    bool aligned = true;
    for (int l = 0; l < levels->n_levels; l++)
        aligned = aligned && ((uintptr_t)levels->features[l] % 16) == 0;
    if (feature_dtype == VD_DTYPE_F16) {
        if (aligned && levels->channels % 8 == 0)
            return launch_typed<__half, 8>(levels, rois, n_rois, capacity, pooled, sampling_ratio,
                                           out, out_dtype, stream);
        return launch_typed<__half, 1>(levels, rois, n_rois, capacity, pooled, sampling_ratio, out,
                                       out_dtype, stream);
    }
    if (aligned && levels->channels % 4 == 0)
        return launch_typed<float, 4>(levels, rois, n_rois, capacity, pooled, sampling_ratio, out,
                                      out_dtype, stream);
    return launch_typed<float, 1>(levels, rois, n_rois, capacity, pooled, sampling_ratio, out,
                                  out_dtype, stream);
}

/* ------------------------------------------------------------------------ */
/* torchvision.ops.roi_align: its gradient, then the forward               */

/* Element @idx of a pooled tensor [n_rois][pooled_h][pooled_w][channels]
 * (channel fastest): its RoI k, bin (ph, pw) and channel c, and the RoI's
 * row of @rois ([n_rois][5]: batch index, box). */
typedef struct {
    int k, ph, pw, c;
    const float *roi;
    int batch; /* the truncated batch index, when valid */
} roi_align_element;

/* Decomposes @idx as above; FALSE when the RoI's batch index is not in
 * [0, n_images) after truncation (or NaN): the RoI then pools zeros and adds
 * no gradient (the CPU op reports it). */
static __device__ __forceinline__ bool roi_align_element_of(const vd_roi_align_shape &shape,
                                                            const float *rois, long long idx,
                                                            roi_align_element *e)
{
    e->c = (int)(idx % shape.channels);
    long long rest = idx / shape.channels;
    e->pw = (int)(rest % shape.pooled_w);
    rest /= shape.pooled_w;
    e->ph = (int)(rest % shape.pooled_h);
    e->k = (int)(rest / shape.pooled_h);
    e->roi = rois + 5 * (size_t)e->k;
    float batch = e->roi[0];
    if (!(batch > -1.0f && batch < (float)shape.n_images))
        return false;
    e->batch = (int)batch;
    return true;
}

/* One thread per (RoI, bin, channel), channel fastest, like grad_output's
 * NHWC order: consecutive threads read consecutive grad_output elements and
 * add to consecutive channels of the same pixels. Geometry, sample
 * coordinates, weights, the outside rule and the shares (grad * w) / count
 * are vd_math.h's, the CPU backward's; atomicAdd makes the order of the sums
 * the only difference. */
template <typename G>
__global__ void __launch_bounds__(256)
    roi_align_backward_kernel(vd_roi_align_shape shape, const G *grad_output, const float *rois,
                              int n_rois, float *grad_acc)
{
    int C = shape.channels, PH = shape.pooled_h, PW = shape.pooled_w;
    int H = shape.height, W = shape.width;
    long long total = (long long)n_rois * PH * PW * C;
    VD_GRID_LOOP(idx, total)
    {
        roi_align_element e;
        if (!roi_align_element_of(shape, rois, idx, &e))
            continue;
        int ph = e.ph, pw = e.pw;
        vd_math_roi_geometry geo = vd_math_roi_geometry_aligned(
            e.roi + 1, shape.spatial_scale, PH, PW, shape.sampling_ratio, shape.aligned);
        float grad = vd_load(grad_output + idx); /* ((k * PH + ph) * PW + pw) * C + c */
        float *dst = grad_acc + (size_t)e.batch * H * W * C + e.c;
        for (int iy = 0; iy < geo.grid_h; iy++) {
            float y = vd_math_roi_sample_coord(geo.start_y, ph, geo.bin_h, iy, geo.grid_h);
            for (int ix = 0; ix < geo.grid_w; ix++) {
                float x = vd_math_roi_sample_coord(geo.start_x, pw, geo.bin_w, ix, geo.grid_w);
                if (!vd_math_roi_sample_inside(y, x, H, W))
                    continue;
                vd_math_roi_sample s = vd_math_roi_bilinear(y, x, H, W);
                for (int q = 0; q < 4; q++)
                    atomicAdd(dst + (size_t)s.pos[q] * C,
                              vd_math_roi_grad_share(grad, s.w[q], geo.count));
            }
        }
    }
}

/* The forward of the same op, one thread per output element ((RoI, bin,
 * channel), channel fastest), in vd_roi_align_forward's arithmetic: each
 * sample's blend added in fp32 in the CPU's order, then divided by the count. */
template <typename T>
__global__ void __launch_bounds__(256)
    roi_align_forward_kernel(vd_roi_align_shape shape, const T *features, const float *rois,
                             int n_rois, T *out)
{
    int C = shape.channels, PH = shape.pooled_h, PW = shape.pooled_w;
    int H = shape.height, W = shape.width;
    long long total = (long long)n_rois * PH * PW * C;
    VD_GRID_LOOP(idx, total)
    {
        roi_align_element e;
        if (!roi_align_element_of(shape, rois, idx, &e)) {
            vd_store(out + idx, 0.0f);
            continue;
        }
        int ph = e.ph, pw = e.pw;
        vd_math_roi_geometry geo = vd_math_roi_geometry_aligned(
            e.roi + 1, shape.spatial_scale, PH, PW, shape.sampling_ratio, shape.aligned);
        const T *map = features + (size_t)e.batch * H * W * C + e.c;
        float acc = 0.0f;
        for (int iy = 0; iy < geo.grid_h; iy++) {
            float y = vd_math_roi_sample_coord(geo.start_y, ph, geo.bin_h, iy, geo.grid_h);
            for (int ix = 0; ix < geo.grid_w; ix++) {
                float x = vd_math_roi_sample_coord(geo.start_x, pw, geo.bin_w, ix, geo.grid_w);
                vd_math_roi_sample s = vd_math_roi_bilinear(y, x, H, W);
                acc = vd_math_fadd(acc, vd_math_roi_blend(&s, vd_load(map + (size_t)s.pos[0] * C),
                                                          vd_load(map + (size_t)s.pos[1] * C),
                                                          vd_load(map + (size_t)s.pos[2] * C),
                                                          vd_load(map + (size_t)s.pos[3] * C)));
            }
        }
        vd_store(out + idx, vd_math_fdiv(acc, geo.count));
    }
}

static bool roi_align_shape_valid(const vd_roi_align_shape *s)
{
    return s != NULL && s->n_images >= 1 && s->height >= 1 && s->width >= 1 && s->channels >= 1 &&
           s->pooled_h >= 1 && s->pooled_w >= 1 && (long long)s->height * s->width <= INT_MAX;
}

static size_t roi_align_grad_elements(const vd_roi_align_shape *s)
{
    return (size_t)s->n_images * s->height * s->width * s->channels;
}

extern "C" cudaError_t vd_roi_align_forward_device(const vd_roi_align_shape *shape, vd_dtype dtype,
                                                   const void *features, const float *rois,
                                                   int n_rois, void *out, cudaStream_t stream)
{
    if (!roi_align_shape_valid(shape) || n_rois < 0 || features == NULL ||
        (n_rois > 0 && (rois == NULL || out == NULL)) ||
        (dtype != VD_DTYPE_F32 && dtype != VD_DTYPE_F16))
        return cudaErrorInvalidValue;
    long long total = (long long)n_rois * shape->pooled_h * shape->pooled_w * shape->channels;
    if (total == 0)
        return cudaSuccess;
    unsigned blocks = vd_blocks_for(total, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        roi_align_forward_kernel<__half><<<blocks, 256, 0, stream>>>(
            *shape, (const __half *)features, rois, n_rois, (__half *)out);
    else
        roi_align_forward_kernel<float><<<blocks, 256, 0, stream>>>(*shape, (const float *)features,
                                                                    rois, n_rois, (float *)out);
    return vd_launch_status();
}

extern "C" size_t vd_roi_align_backward_workspace_size(const vd_roi_align_shape *shape,
                                                       vd_dtype dtype)
{
    if (dtype != VD_DTYPE_F16 || !roi_align_shape_valid(shape))
        return 0;
    return roi_align_grad_elements(shape) * sizeof(float);
}

extern "C" cudaError_t vd_roi_align_backward_device(const vd_roi_align_shape *shape, vd_dtype dtype,
                                                    const void *grad_output, const float *rois,
                                                    int n_rois, void *grad_input, void *workspace,
                                                    size_t workspace_size, cudaStream_t stream)
{
    if (!roi_align_shape_valid(shape) || n_rois < 0 || grad_input == NULL ||
        (n_rois > 0 && (grad_output == NULL || rois == NULL)) ||
        (dtype != VD_DTYPE_F32 && dtype != VD_DTYPE_F16))
        return cudaErrorInvalidValue;
    size_t n = roi_align_grad_elements(shape);
    float *acc = (float *)grad_input;
    if (dtype == VD_DTYPE_F16) {
        if (workspace == NULL || workspace_size < n * sizeof(float) ||
            (uintptr_t)workspace % sizeof(float) != 0)
            return cudaErrorInvalidValue;
        acc = (float *)workspace;
    }
    cudaError_t err = cudaMemsetAsync(acc, 0, n * sizeof(float), stream);
    if (err != cudaSuccess)
        return err;
    long long total = (long long)n_rois * shape->pooled_h * shape->pooled_w * shape->channels;
    if (total > 0) {
        unsigned blocks = vd_blocks_for(total, 256, 65535);
        if (dtype == VD_DTYPE_F16)
            roi_align_backward_kernel<__half><<<blocks, 256, 0, stream>>>(
                *shape, (const __half *)grad_output, rois, n_rois, acc);
        else
            roi_align_backward_kernel<float>
                <<<blocks, 256, 0, stream>>>(*shape, (const float *)grad_output, rois, n_rois, acc);
        err = vd_launch_status();
        if (err != cudaSuccess)
            return err;
    }
    if (dtype == VD_DTYPE_F16)
        return vd_convert_from_f32(acc, n, VD_DTYPE_F16, grad_input, stream);
    return cudaSuccess;
}
