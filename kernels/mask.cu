/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Mask R-CNN's maskrcnn_inference on the device (engine/MASKRCNN.md §2.4): for
 * each final detection, its label's channel of the mask logits and the
 * sigmoid, as the [rows][M][M] float32 probabilities the host reads back with
 * the detections and pastes (vd_paste_mask).
 *
 * The logits come from the 1x1 logits convolution applied to the transposed
 * convolution computed as a 1x1 convolution to 4 x channels (a 2x2 stride-2
 * ConvTranspose2d writes each output pixel from exactly one input pixel and
 * one kernel tap): NHWC [rows][P][4P][stride], where column 4x + 2ky + kx of
 * row y is output pixel (2y + ky, 2x + kx). */
#include "vd_kernels_common.cuh"

template <typename T>
__global__ void __launch_bounds__(256)
    mask_probabilities_kernel(const T *logits, int rows, int pooled, int stride, int num_classes,
                              const vd_kernel_result *result, float *probs)
{
    int m = 2 * pooled;
    int n = min(result->count, rows);
    long long total = (long long)rows * m * m;
    VD_GRID_LOOP(idx, total)
    {
        int px = (int)(idx % m);
        long long rest = idx / m;
        int py = (int)(rest % m);
        int j = (int)(rest / m);
        int label = j < n ? result->detections[j].label : -1;
        if (label < 0 || label >= num_classes) {
            probs[idx] = 0.0f; /* a row without a detection: never read */
            continue;
        }
        size_t at = (size_t)vd_math_mask_tap_pixel(j, py, px, pooled) * stride + label;
        probs[idx] = vd_math_sigmoid(vd_load(logits + at));
    }
}

extern "C" cudaError_t vd_mask_probabilities(const void *logits, vd_dtype dtype, int rows,
                                             int pooled, int stride, int num_classes,
                                             const vd_kernel_result *result, float *probs,
                                             cudaStream_t stream)
{
    if (rows < 0 || pooled < 1 || num_classes < 1 || stride < num_classes || result == NULL ||
        (rows > 0 && (logits == NULL || probs == NULL)) ||
        (dtype != VD_DTYPE_F32 && dtype != VD_DTYPE_F16))
        return cudaErrorInvalidValue;
    long long total = (long long)rows * 4 * pooled * pooled;
    if (total == 0)
        return cudaSuccess;
    unsigned blocks = vd_blocks_for(total, 256, 65535);
    if (dtype == VD_DTYPE_F16)
        mask_probabilities_kernel<__half><<<blocks, 256, 0, stream>>>(
            (const __half *)logits, rows, pooled, stride, num_classes, result, probs);
    else
        mask_probabilities_kernel<float><<<blocks, 256, 0, stream>>>(
            (const float *)logits, rows, pooled, stride, num_classes, result, probs);
    return vd_launch_status();
}
