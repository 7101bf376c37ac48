/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sorting (CUB) and greedy NMS with a suppression bitmask reduced on the device.
 *
 * Pipeline of vd_batched_nms_device, all on one stream, no host round trip:
 *   1. keys = score as float32 (NaN -> -inf), values = input index;
 *   2. CUB radix sort by key, descending; radix sort is stable, so equal scores
 *      keep ascending input order (torchvision's stable sort, spec §7.1);
 *   3. the first max_candidates boxes and groups gathered in that order, and the
 *      number of real candidates (finite scores) found on the device;
 *   4. the bitmask: bit j of mask[i][j / 64] set when j > i, same group and
 *      IoU(i, j) > threshold (torchvision's kernel structure, spec §7.3), with the
 *      IoU of vd_math.h in fp32 whatever the input dtype;
 *   5. one block walks the 64-box column blocks in order: the diagonal word
 *      resolves which boxes of the block survive, then the kept rows' words are
 *      OR-ed into the removal words of the later blocks. It stops as soon as
 *      max_keep boxes are kept.
 * Groups make the suppression exact per group (the per-class loop of
 * batched_nms), rather than torchvision's coordinate-offset trick, whose large
 * offsets round the coordinates. */
#include "vd_kernels_common.cuh"

#include <cub/device/device_radix_sort.cuh>

#define NMS_BLOCK 64
#define NMS_REDUCE_THREADS 1024

typedef unsigned long long mask_word;

/* ------------------------------------------------------------------------ */
/* Sorting                                                                   */

extern "C" size_t vd_sort_workspace_size(int capacity)
{
    size_t bytes = 0;
    if (capacity <= 0)
        return 0;
    cudaError_t err = cub::DeviceRadixSort::SortPairsDescending(
        (void *)NULL, bytes, (const float *)NULL, (float *)NULL, (const int *)NULL, (int *)NULL,
        capacity);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bytes;
}

extern "C" cudaError_t vd_sort_descending(const float *keys_in, const int *values_in,
                                          float *keys_out, int *values_out, int n, void *workspace,
                                          size_t workspace_size, cudaStream_t stream)
{
    if (n <= 0)
        return cudaSuccess;
    size_t bytes = workspace_size;
    return cub::DeviceRadixSort::SortPairsDescending(workspace, bytes, keys_in, keys_out, values_in,
                                                     values_out, n, 0, (int)(sizeof(float) * 8),
                                                     stream);
}

/* ------------------------------------------------------------------------ */
/* Workspace layout                                                          */

typedef struct {
    float *keys;
    int *values;
    float *keys_sorted;
    int *order;
    float *boxes_sorted; /* [max_candidates][4] */
    int *groups_sorted;  /* [max_candidates] */
    int *n_valid;
    mask_word *mask; /* [max_candidates][col_blocks] */
    void *sort_temp;
    size_t sort_bytes;
    size_t total;
} nms_layout;

static __host__ __device__ int col_blocks_of(int n)
{
    return (n + NMS_BLOCK - 1) / NMS_BLOCK;
}

static nms_layout nms_layout_of(const vd_nms_shape *shape, void *base)
{
    nms_layout l;
    char *p = (char *)base;
    size_t off = 0;
    int cap = shape->capacity, mc = shape->max_candidates;
    int cb = col_blocks_of(mc);
#define TAKE(field, type, count)                                                                   \
    do {                                                                                           \
        l.field = (type *)(p + off);                                                               \
        off = vd_align_up(off + sizeof(type) * (size_t)(count), 256);                              \
    } while (0)
    TAKE(keys, float, cap);
    TAKE(values, int, cap);
    TAKE(keys_sorted, float, cap);
    TAKE(order, int, cap);
    TAKE(boxes_sorted, float, (size_t)mc * 4);
    TAKE(groups_sorted, int, mc);
    TAKE(n_valid, int, 1);
    TAKE(mask, mask_word, (size_t)mc * cb);
#undef TAKE
    l.sort_bytes = vd_sort_workspace_size(cap);
    l.sort_temp = p + off;
    l.total = off + l.sort_bytes;
    return l;
}

extern "C" size_t vd_nms_workspace_size(const vd_nms_shape *shape)
{
    if (shape->capacity <= 0)
        return 0;
    return nms_layout_of(shape, NULL).total;
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

template <typename T>
__global__ void __launch_bounds__(256)
    nms_keys_kernel(const T *scores, int n, float *keys, int *values)
{
    VD_GRID_LOOP(i, n)
    {
        float s = vd_load(scores + i);
        keys[i] = s == s ? s : -INFINITY;
        values[i] = (int)i;
    }
}

template <typename T>
__global__ void __launch_bounds__(256)
    nms_gather_kernel(const T *boxes, const int *groups, const float *keys_sorted, const int *order,
                      int max_candidates, float *boxes_sorted, int *groups_sorted, int *n_valid)
{
    VD_GRID_LOOP(i, max_candidates)
    {
        int src = order[i];
        for (int k = 0; k < 4; k++)
            boxes_sorted[4 * i + k] = vd_load(boxes + 4 * (size_t)src + k);
        groups_sorted[i] = groups != NULL ? groups[src] : 0;
        /* the one thread at the boundary between real candidates and -inf
         * (or at the end) publishes the count */
        bool valid = keys_sorted[i] > -INFINITY;
        bool next_valid = i + 1 < max_candidates && keys_sorted[i + 1] > -INFINITY;
        if (valid && !next_valid)
            *n_valid = (int)i + 1;
        if (i == 0 && !valid)
            *n_valid = 0;
    }
}

__global__ void __launch_bounds__(NMS_BLOCK)
    nms_mask_kernel(const float *boxes, const int *groups, const int *n_valid, int col_blocks_cap,
                    float threshold, mask_word *mask)
{
    __shared__ float col_box[NMS_BLOCK][4];
    __shared__ float col_area[NMS_BLOCK];
    __shared__ int col_group[NMS_BLOCK];

    int n = *n_valid;
    int cb = col_blocks_of(n);
    long long tiles = (long long)cb * cb;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        int row = (int)(t / cb), col = (int)(t % cb);
        if (row > col)
            continue; /* uniform across the block */
        int row_size = min(n - row * NMS_BLOCK, NMS_BLOCK);
        int col_size = min(n - col * NMS_BLOCK, NMS_BLOCK);

        __syncthreads(); /* the previous tile's readers are done */
        if ((int)threadIdx.x < col_size) {
            int j = col * NMS_BLOCK + threadIdx.x;
            for (int k = 0; k < 4; k++)
                col_box[threadIdx.x][k] = boxes[4 * j + k];
            col_area[threadIdx.x] = vd_math_box_area(col_box[threadIdx.x]);
            col_group[threadIdx.x] = groups[j];
        }
        __syncthreads();

        if ((int)threadIdx.x < row_size) {
            int i = row * NMS_BLOCK + threadIdx.x;
            float box[4] = {boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3]};
            float area = vd_math_box_area(box);
            int group = groups[i];
            mask_word bits = 0;
            int start = row == col ? threadIdx.x + 1 : 0;
            for (int j = start; j < col_size; j++) {
                if (col_group[j] == group &&
                    vd_math_box_iou_areas(box, area, col_box[j], col_area[j]) > threshold)
                    bits |= 1ULL << j;
            }
            mask[(size_t)i * col_blocks_cap + col] = bits;
        }
    }
}

__global__ void __launch_bounds__(NMS_REDUCE_THREADS)
    nms_reduce_kernel(const mask_word *mask, const int *order, const int *n_valid,
                      int col_blocks_cap, int max_keep, int *keep, int *n_keep)
{
    extern __shared__ mask_word removed[]; /* [col_blocks_cap] */
    __shared__ mask_word diag[NMS_BLOCK];
    __shared__ int kept_rows[NMS_BLOCK];
    __shared__ int n_kept_rows;
    __shared__ int n_kept_total;

    int n = *n_valid;
    int cb = col_blocks_of(n);
    for (int t = threadIdx.x; t < cb; t += blockDim.x)
        removed[t] = 0;
    if (threadIdx.x == 0)
        n_kept_total = 0;
    __syncthreads();

    for (int blk = 0; blk < cb; blk++) {
        int base = blk * NMS_BLOCK;
        int rows = min(n - base, NMS_BLOCK);
        if ((int)threadIdx.x < NMS_BLOCK)
            diag[threadIdx.x] = (int)threadIdx.x < rows
                                    ? mask[(size_t)(base + threadIdx.x) * col_blocks_cap + blk]
                                    : 0;
        __syncthreads();

        if (threadIdx.x == 0) {
            mask_word valid = rows == NMS_BLOCK ? ~0ULL : ((1ULL << rows) - 1);
            mask_word r = removed[blk];
            int total = n_kept_total, nk = 0;
            mask_word avail = ~r & valid;
            while (avail != 0 && total < max_keep) {
                int i = __ffsll((long long)avail) - 1;
                keep[total++] = order[base + i];
                kept_rows[nk++] = i;
                r |= diag[i]; /* only later boxes of this block: the diagonal tests j > i */
                mask_word above = i == 63 ? 0ULL : ~((2ULL << i) - 1);
                avail = ~r & valid & above;
            }
            n_kept_rows = nk;
            n_kept_total = total;
        }
        __syncthreads();
        if (n_kept_total >= max_keep)
            break; /* uniform: read after the barrier */

        int later = cb - blk - 1;
        int nk = n_kept_rows;
        for (int t = threadIdx.x; t < later * nk; t += blockDim.x) {
            int col = blk + 1 + t % later;
            int i = kept_rows[t / later];
            mask_word m = mask[(size_t)(base + i) * col_blocks_cap + col];
            if (m != 0)
                atomicOr(&removed[col], m);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *n_keep = n_kept_total;
}

/* ------------------------------------------------------------------------ */
/* Launcher                                                                  */

template <typename T>
static cudaError_t batched_nms(const T *boxes, const T *scores, const int *groups,
                               const vd_nms_shape *shape, float threshold, int *keep, int *n_keep,
                               void *workspace, size_t workspace_size, cudaStream_t stream)
{
    int cap = shape->capacity;
    int mc = shape->max_candidates < cap ? shape->max_candidates : cap;
    vd_nms_shape s = *shape;
    s.max_candidates = mc;
    if (cap <= 0 || mc <= 0 || shape->max_keep <= 0)
        return cudaMemsetAsync(n_keep, 0, sizeof(int), stream);
    nms_layout l = nms_layout_of(&s, workspace);
    if (workspace_size < l.total)
        return cudaErrorInvalidValue;
    int cb_cap = col_blocks_of(mc);
    cudaError_t err;

    nms_keys_kernel<T>
        <<<vd_blocks_for(cap, 256, 4096), 256, 0, stream>>>(scores, cap, l.keys, l.values);
    if ((err = vd_launch_status()) != cudaSuccess)
        return err;
    if ((err = vd_sort_descending(l.keys, l.values, l.keys_sorted, l.order, cap, l.sort_temp,
                                  l.sort_bytes, stream)) != cudaSuccess)
        return err;
    nms_gather_kernel<T><<<vd_blocks_for(mc, 256, 4096), 256, 0, stream>>>(
        boxes, groups, l.keys_sorted, l.order, mc, l.boxes_sorted, l.groups_sorted, l.n_valid);
    if ((err = vd_launch_status()) != cudaSuccess)
        return err;
    long long tiles = (long long)cb_cap * cb_cap;
    nms_mask_kernel<<<vd_blocks_for(tiles, 1, 8192), NMS_BLOCK, 0, stream>>>(
        l.boxes_sorted, l.groups_sorted, l.n_valid, cb_cap, threshold, l.mask);
    if ((err = vd_launch_status()) != cudaSuccess)
        return err;
    size_t shared = sizeof(mask_word) * (size_t)cb_cap;
    if (shared > 48 * 1024) {
        err = cudaFuncSetAttribute(nms_reduce_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)shared);
        if (err != cudaSuccess)
            return err;
    }
    nms_reduce_kernel<<<1, NMS_REDUCE_THREADS, shared, stream>>>(l.mask, l.order, l.n_valid, cb_cap,
                                                                 shape->max_keep, keep, n_keep);
    return vd_launch_status();
}

extern "C" cudaError_t vd_batched_nms_device(const void *boxes, const void *scores, vd_dtype dtype,
                                             const int *groups, const vd_nms_shape *shape,
                                             float iou_threshold, int *keep, int *n_keep,
                                             void *workspace, size_t workspace_size,
                                             cudaStream_t stream)
{
    if (dtype == VD_DTYPE_F16)
        return batched_nms((const __half *)boxes, (const __half *)scores, groups, shape,
                           iou_threshold, keep, n_keep, workspace, workspace_size, stream);
    return batched_nms((const float *)boxes, (const float *)scores, groups, shape, iou_threshold,
                       keep, n_keep, workspace, workspace_size, stream);
}
