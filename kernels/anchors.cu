/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Grid anchors of one FPN level (spec §3.2), generated on the device once per
 * input size: integer shifts, exact in float32, the same values as
 * vd_grid_anchors on the CPU. */
#include "vd_kernels_common.cuh"

typedef struct {
    float v[VD_KERNEL_MAX_CELL_ANCHORS * 4];
} cell_anchors;

__global__ void __launch_bounds__(256)
    grid_anchors_kernel(cell_anchors cell, int n_cell, int stride_h, int stride_w, int grid_h,
                        int grid_w, float *out)
{
    long long n = (long long)grid_h * grid_w * n_cell;
    VD_GRID_LOOP(idx, n)
    {
        int a = (int)(idx % n_cell);
        long long p = idx / n_cell;
        int x = (int)(p % grid_w), y = (int)(p / grid_w);
        /* int32 shifts, converted to float: torch's arange(int32) * int64 stride */
        float sx = (float)(x * stride_w), sy = (float)(y * stride_h);
        out[4 * idx + 0] = vd_math_fadd(sx, cell.v[4 * a + 0]);
        out[4 * idx + 1] = vd_math_fadd(sy, cell.v[4 * a + 1]);
        out[4 * idx + 2] = vd_math_fadd(sx, cell.v[4 * a + 2]);
        out[4 * idx + 3] = vd_math_fadd(sy, cell.v[4 * a + 3]);
    }
}

extern "C" cudaError_t vd_grid_anchors_device(const float *cell, int n_cell, int padded_h,
                                              int padded_w, int grid_h, int grid_w, float *out,
                                              cudaStream_t stream)
{
    if (n_cell <= 0 || n_cell > VD_KERNEL_MAX_CELL_ANCHORS || grid_h <= 0 || grid_w <= 0)
        return cudaErrorInvalidValue;
    cell_anchors c;
    for (int i = 0; i < 4 * n_cell; i++)
        c.v[i] = cell[i];
    long long n = (long long)grid_h * grid_w * n_cell;
    grid_anchors_kernel<<<vd_blocks_for(n, 256, 65535), 256, 0, stream>>>(
        c, n_cell, padded_h / grid_h, padded_w / grid_w, grid_h, grid_w, out);
    return vd_launch_status();
}
