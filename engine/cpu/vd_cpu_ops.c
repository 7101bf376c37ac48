/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The small operations of the CPU backend. The per-element arithmetic is in
 * common/vd_math.h (shared with CUDA); this file adds the loops, the
 * orderings and the memory layout. Compiled with -ffp-contract=off: see
 * vd_math.h for why. */
#include "vd_cpu_ops.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "vd_math.h"

void vd_config_transform_sizes(const vd_config *config, int height, int width, int *resized_h,
                               int *resized_w, int *padded_h, int *padded_w)
{
    if (config->fixed_h > 0) {
        /* SSD: torchvision's fixed_size, no aspect kept, padded as any */
        int d = MAX(config->size_divisible, 1);
        *resized_h = config->fixed_h;
        *resized_w = config->fixed_w;
        *padded_h = (config->fixed_h + d - 1) / d * d;
        *padded_w = (config->fixed_w + d - 1) / d * d;
        return;
    }
    vd_math_transform_size(height, width, config->min_size, config->max_size,
                           config->size_divisible, config->resize_scale == VD_RESIZE_SCALE_FLOAT32,
                           resized_h, resized_w, padded_h, padded_w);
}

/* ------------------------------------------------------------------------ */
/* Anchors                                                                    */

void vd_cell_anchors(const float *sizes, int n_sizes, const float *ratios, int n_ratios, float *out)
{
    for (int ri = 0; ri < n_ratios; ri++)
        for (int si = 0; si < n_sizes; si++)
            vd_math_cell_anchor(sizes[si], ratios[ri], out + 4 * (ri * n_sizes + si));
}

void vd_grid_anchors(const float *cell, int n_cell, int padded_h, int padded_w, int grid_h,
                     int grid_w, float *out)
{
    if (grid_h <= 0 || grid_w <= 0 || n_cell <= 0)
        return;
    /* floor division: the pool level of an 800-row input has 13 rows, stride 61 */
    int stride_h = padded_h / grid_h;
    int stride_w = padded_w / grid_w;
    for (int y = 0; y < grid_h; y++) {
        float sy = (float)(y * stride_h);
        for (int x = 0; x < grid_w; x++) {
            float sx = (float)(x * stride_w);
            float *dst = out + ((size_t)y * grid_w + x) * n_cell * 4;
            for (int a = 0; a < n_cell; a++) {
                dst[4 * a + 0] = vd_math_fadd(sx, cell[4 * a + 0]);
                dst[4 * a + 1] = vd_math_fadd(sy, cell[4 * a + 1]);
                dst[4 * a + 2] = vd_math_fadd(sx, cell[4 * a + 2]);
                dst[4 * a + 3] = vd_math_fadd(sy, cell[4 * a + 3]);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Ranking: score descending, ties by ascending index, NaN first (torch sorts */
/* NaN as the largest value); optionally grouped (group id ascending first).  */

typedef struct {
    const float *scores;
    const int *groups; /* NULL: no grouping */
} rank_order;

/* TRUE when @a comes after @b in the output order. */
static inline gboolean rank_after(const rank_order *order, int a, int b)
{
    if (order->groups && order->groups[a] != order->groups[b])
        return order->groups[a] > order->groups[b];
    float sa = order->scores[a];
    float sb = order->scores[b];
    if (sa < sb)
        return TRUE;
    if (sa > sb)
        return FALSE;
    gboolean nan_a = isnan(sa), nan_b = isnan(sb);
    if (nan_a != nan_b)
        return nan_b;
    return a > b; /* equal scores (+0 == -0 included) */
}

/* Heap of indices whose root is the element that comes last in the order. */
static void heap_sift_down(const rank_order *order, int *heap, int root, int size)
{
    int value = heap[root];
    for (;;) {
        int child = 2 * root + 1;
        if (child >= size)
            break;
        if (child + 1 < size && rank_after(order, heap[child + 1], heap[child]))
            child++;
        if (!rank_after(order, heap[child], value))
            break;
        heap[root] = heap[child];
        root = child;
    }
    heap[root] = value;
}

static void heap_build(const rank_order *order, int *heap, int size)
{
    for (int i = size / 2 - 1; i >= 0; i--)
        heap_sift_down(order, heap, i, size);
}

/* Sorts @idx[0..n) in place into the order (first = highest score). The order
 * is total, so an unstable sort gives a deterministic result. */
static void rank_sort(const rank_order *order, int *idx, int n)
{
    heap_build(order, idx, n);
    for (int end = n - 1; end > 0; end--) {
        int last = idx[0];
        idx[0] = idx[end];
        idx[end] = last;
        heap_sift_down(order, idx, 0, end);
    }
}

float vd_score_logit_floor(float thr, gboolean sqrt_score)
{
    double t = sqrt_score ? (double)thr * thr : (double)thr;
    if (!(t > 0.0))
        return -INFINITY;
    if (t >= 1.0)
        return INFINITY;
    return (float)(log(t / (1.0 - t)) - 0.01 - 1e-5 / (1.0 - t));
}

int vd_topk(const float *values, int n, int k, int *indices)
{
    if (k > n)
        k = n;
    if (k <= 0)
        return 0;
    rank_order order = {values, NULL};
    for (int i = 0; i < k; i++)
        indices[i] = i;
    /* keep the k best in a heap whose root is the worst of them: O(n log k) */
    heap_build(&order, indices, k);
    for (int i = k; i < n; i++) {
        if (rank_after(&order, indices[0], i)) {
            indices[0] = i;
            heap_sift_down(&order, indices, 0, k);
        }
    }
    rank_sort(&order, indices, k);
    return k;
}

/* ------------------------------------------------------------------------ */
/* Boxes                                                                      */

VD_CPU_HOT static void decode_range(const float *refs, const float *deltas, int begin, int end,
                                    const float weights[4], float *out)
{
    float wx = weights[0], wy = weights[1], ww = weights[2], wh = weights[3];
    for (int i = begin; i < end; i++)
        vd_math_box_decode(refs + 4 * (size_t)i, deltas + 4 * (size_t)i, wx, wy, ww, wh,
                           VD_MATH_BBOX_XFORM_CLIP, out + 4 * (size_t)i);
}

void vd_decode_boxes(const float *refs, const float *deltas, int n, const float weights[4],
                     float *out)
{
    const int chunk = 4096;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
    for (int begin = 0; begin < n; begin += chunk)
        decode_range(refs, deltas, begin, MIN(begin + chunk, n), weights, out);
}

void vd_decode_linear_boxes(const float *refs, const float *codes, int n,
                            gboolean normalize_by_size, float *out)
{
    for (int i = 0; i < n; i++) {
        const float *b = refs + 4 * (size_t)i, *r = codes + 4 * (size_t)i;
        /* torch's float32 tensor operations, one rounding each (no FMA) */
        float ctr_x = 0.5f * (b[0] + b[2]), ctr_y = 0.5f * (b[1] + b[3]);
        float w = normalize_by_size ? b[2] - b[0] : 1.0f;
        float h = normalize_by_size ? b[3] - b[1] : 1.0f;
        float l = r[0] * w, t = r[1] * h, rr = r[2] * w, bb = r[3] * h;
        float *o = out + 4 * (size_t)i;
        o[0] = ctr_x - l;
        o[1] = ctr_y - t;
        o[2] = ctr_x + rr;
        o[3] = ctr_y + bb;
    }
}

void vd_clip_boxes(float *boxes, int n, float height, float width)
{
    for (int i = 0; i < n; i++)
        vd_math_box_clip(boxes + 4 * (size_t)i, height, width);
}

int vd_roi_level(const float *box, int k_min, int k_max)
{
    return vd_math_roi_level(box, k_min, k_max);
}

/* ------------------------------------------------------------------------ */
/* NMS                                                                        */

/* The boxes in processing order as a structure of arrays with their areas
 * (torchvision precomputes the areas too), so that the IoUs of one kept box
 * against all later boxes form a contiguous loop the compiler vectorises; the
 * per-pair arithmetic is vd_math_box_iou_areas either way. */
typedef struct {
    float *x1, *y1, *x2, *y2, *area;
    unsigned char *removed;
} nms_boxes;

static gboolean nms_boxes_gather(nms_boxes *sorted, const float *boxes, const int *order, int n)
{
    float *coords = g_try_new(float, 5 * (size_t)n);
    unsigned char *removed = g_try_new0(unsigned char, n);
    if (!coords || !removed) {
        g_free(coords);
        g_free(removed);
        return FALSE;
    }
    sorted->x1 = coords;
    sorted->y1 = coords + n;
    sorted->x2 = coords + 2 * (size_t)n;
    sorted->y2 = coords + 3 * (size_t)n;
    sorted->area = coords + 4 * (size_t)n;
    sorted->removed = removed;
    for (int i = 0; i < n; i++) {
        const float *box = boxes + 4 * (size_t)order[i];
        sorted->x1[i] = box[0];
        sorted->y1[i] = box[1];
        sorted->x2[i] = box[2];
        sorted->y2[i] = box[3];
        sorted->area[i] = vd_math_box_area(box);
    }
    return TRUE;
}

static void nms_boxes_clear(nms_boxes *sorted)
{
    g_free(sorted->x1);
    g_free(sorted->removed);
}

/* Marks every box in (i, end) whose IoU with box i exceeds @threshold (strict:
 * an IoU equal to the threshold is kept). Re-marking an already removed box is
 * harmless, which keeps the loop branch-free. */
VD_CPU_HOT static void nms_suppress_after(const nms_boxes *sorted, int i, int end, float threshold)
{
    const float box_i[4] = {sorted->x1[i], sorted->y1[i], sorted->x2[i], sorted->y2[i]};
    float area_i = sorted->area[i];
    unsigned char *restrict removed = sorted->removed;
    for (int j = i + 1; j < end; j++) {
        const float box_j[4] = {sorted->x1[j], sorted->y1[j], sorted->x2[j], sorted->y2[j]};
        removed[j] |= vd_math_box_iou_areas(box_i, area_i, box_j, sorted->area[j]) > threshold;
    }
}

/* Greedy NMS over positions [begin, end) of @order (already sorted, @sorted
 * gathered in the same order). Kept indices are compacted to
 * order[*n_kept..], which never passes the position being read because
 * *n_kept <= begin on entry. */
static void nms_run(nms_boxes *sorted, int *order, int begin, int end, float threshold, int *n_kept)
{
    for (int i = begin; i < end; i++) {
        if (sorted->removed[i])
            continue;
        order[(*n_kept)++] = order[i];
        nms_suppress_after(sorted, i, end, threshold);
    }
}

/* The same without memory: suppressed entries of @order are overwritten with
 * -1 and areas are recomputed per pair (identical results, slower). */
static void nms_run_unbuffered(const float *boxes, int *order, int begin, int end, float threshold,
                               int *n_kept)
{
    for (int oi = begin; oi < end; oi++) {
        int i = order[oi];
        if (i < 0)
            continue;
        order[(*n_kept)++] = i;
        const float *box_i = boxes + 4 * (size_t)i;
        float area_i = vd_math_box_area(box_i);
        for (int oj = oi + 1; oj < end; oj++) {
            int j = order[oj];
            if (j < 0)
                continue;
            const float *box_j = boxes + 4 * (size_t)j;
            if (vd_math_box_iou_areas(box_i, area_i, box_j, vd_math_box_area(box_j)) > threshold)
                order[oj] = -1;
        }
    }
}

int vd_nms(const float *boxes, const float *scores, int n, float threshold, int *keep)
{
    if (n <= 0)
        return 0;
    rank_order order = {scores, NULL};
    for (int i = 0; i < n; i++)
        keep[i] = i;
    rank_sort(&order, keep, n);
    int n_kept = 0;
    nms_boxes sorted;
    if (nms_boxes_gather(&sorted, boxes, keep, n)) {
        nms_run(&sorted, keep, 0, n, threshold, &n_kept);
        nms_boxes_clear(&sorted);
    } else {
        nms_run_unbuffered(boxes, keep, 0, n, threshold, &n_kept);
    }
    return n_kept;
}

int vd_batched_nms(const float *boxes, const float *scores, const int *groups, int n,
                   float threshold, int *keep)
{
    if (n <= 0)
        return 0;
    /* group-major sort, so each group is a contiguous run in its own score
     * order, then exact NMS per run, then one merge by score */
    rank_order grouped = {scores, groups};
    for (int i = 0; i < n; i++)
        keep[i] = i;
    rank_sort(&grouped, keep, n);
    nms_boxes sorted;
    gboolean buffered = nms_boxes_gather(&sorted, boxes, keep, n);
    int n_kept = 0;
    int begin = 0;
    while (begin < n) {
        int group = groups[keep[begin]];
        int end = begin + 1;
        while (end < n && groups[keep[end]] == group)
            end++;
        if (buffered)
            nms_run(&sorted, keep, begin, end, threshold, &n_kept);
        else
            nms_run_unbuffered(boxes, keep, begin, end, threshold, &n_kept);
        begin = end;
    }
    if (buffered)
        nms_boxes_clear(&sorted);
    rank_order by_score = {scores, NULL};
    rank_sort(&by_score, keep, n_kept);
    return n_kept;
}

/* ------------------------------------------------------------------------ */
/* roi_align                                                                  */

/* acc[c] += ((w1*v1[c] + w2*v2[c]) + w3*v3[c]) + w4*v4[c]: the four-term sum is
 * formed first and then added, as torchvision's CPU kernel does. */
VD_CPU_HOT static void roi_accumulate(float *restrict acc, const float *restrict v1,
                                      const float *restrict v2, const float *restrict v3,
                                      const float *restrict v4, const vd_math_roi_sample *s,
                                      int channels)
{
    float w1 = s->w[0], w2 = s->w[1], w3 = s->w[2], w4 = s->w[3];
#pragma omp simd
    for (int c = 0; c < channels; c++)
        acc[c] += ((w1 * v1[c] + w2 * v2[c]) + w3 * v3[c]) + w4 * v4[c];
}

/* The pooled_h x pooled_w bins of one RoI of geometry @g over one NHWC map,
 * written at @dst [pooled_h][pooled_w][channels]. */
static void roi_align_bins(const float *features, int height, int width, int channels,
                           const vd_math_roi_geometry *g, int pooled_h, int pooled_w, float *dst)
{
    size_t pixel_stride = (size_t)channels;
    for (int ph = 0; ph < pooled_h; ph++) {
        for (int pw = 0; pw < pooled_w; pw++) {
            float *acc = dst + ((size_t)ph * pooled_w + pw) * pixel_stride;
            memset(acc, 0, pixel_stride * sizeof(float));
            /* the indices and weights of a sample are computed once and
             * shared by all channels (contiguous in NHWC) */
            for (int iy = 0; iy < g->grid_h; iy++) {
                float y = vd_math_roi_sample_coord(g->start_y, ph, g->bin_h, iy, g->grid_h);
                for (int ix = 0; ix < g->grid_w; ix++) {
                    float x = vd_math_roi_sample_coord(g->start_x, pw, g->bin_w, ix, g->grid_w);
                    vd_math_roi_sample s = vd_math_roi_bilinear(y, x, height, width);
                    roi_accumulate(acc, features + s.pos[0] * pixel_stride,
                                   features + s.pos[1] * pixel_stride,
                                   features + s.pos[2] * pixel_stride,
                                   features + s.pos[3] * pixel_stride, &s, channels);
                }
            }
            float count = g->count;
#pragma omp simd
            for (int c = 0; c < channels; c++)
                acc[c] = acc[c] / count; /* a division, not a reciprocal product */
        }
    }
}

void vd_roi_align_nhwc(const float *features, int height, int width, int channels,
                       const float *rois, const int *roi_index, int n_rois, float spatial_scale,
                       int pooled, int sampling_ratio, float *out, int64_t out_roi_stride)
{
    if (n_rois <= 0 || channels <= 0 || pooled <= 0 || height <= 0 || width <= 0)
        return;
#pragma omp parallel for schedule(dynamic, 8)
    for (int r = 0; r < n_rois; r++) {
        int row = roi_index ? roi_index[r] : r;
        vd_math_roi_geometry g = vd_math_roi_geometry_of(rois + 4 * (size_t)r, spatial_scale,
                                                         pooled, pooled, sampling_ratio);
        roi_align_bins(features, height, width, channels, &g, pooled, pooled,
                       out + (int64_t)row * out_roi_stride);
    }
}

vd_roi_align_params vd_roi_align_default_params(void)
{
    vd_roi_align_params p;
    memset(&p, 0, sizeof(p));
    p.n_images = 1;
    p.pooled_h = 7;
    p.pooled_w = 7;
    p.spatial_scale = 1.0f;
    p.sampling_ratio = 0;
    p.aligned = FALSE;
    return p;
}

/* The arguments both directions share: sizes, pointers, every RoI's batch index
 * (truncated as torchvision's int conversion does: valid when -1 < b < n). */
static gboolean roi_align_check(const char *op, const vd_roi_align_params *p, const float *map,
                                const float *pooled, const float *rois, int n_rois, GError **error)
{
    if (p == NULL || p->n_images < 1 || p->height < 1 || p->width < 1 || p->channels < 1 ||
        p->pooled_h < 1 || p->pooled_w < 1 || n_rois < 0) {
        if (p == NULL)
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "%s: no parameters", op);
        else
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                        "%s: sizes out of range (%d images of %dx%d pixels, %d channels, "
                        "%dx%d bins, %d RoIs): every size must be positive, the RoI count "
                        "not negative",
                        op, p->n_images, p->height, p->width, p->channels, p->pooled_h, p->pooled_w,
                        n_rois);
        return FALSE;
    }
    /* pixel indices are int (vd_math_roi_sample), offsets size_t */
    if ((int64_t)p->height * p->width > INT_MAX ||
        (int64_t)p->pooled_h * p->pooled_w > INT_MAX / p->channels) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "%s: a %dx%d map or %dx%d bins of %d channels is too large", op, p->height,
                    p->width, p->pooled_h, p->pooled_w, p->channels);
        return FALSE;
    }
    if (map == NULL || (n_rois > 0 && (pooled == NULL || rois == NULL))) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "%s: NULL %s", op,
                    map == NULL    ? "feature map"
                    : rois == NULL ? "RoIs"
                                   : "pooled tensor");
        return FALSE;
    }
    for (int k = 0; k < n_rois; k++) {
        float b = rois[5 * (size_t)k];
        if (!(b > -1.0f && b < (float)p->n_images)) {
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                        "%s: RoI %d has batch index %g, not one of the %d images", op, k, (double)b,
                        p->n_images);
            return FALSE;
        }
    }
    return TRUE;
}

/* Below this many pooled elements (RoIs x bins x channels) the op runs on the
 * calling thread: a parallel region costs more than the work, and much more on
 * oversubscribed cores, where waking the team can take milliseconds. */
#define ROI_ALIGN_PARALLEL_MIN 16384

gboolean vd_roi_align_forward(const vd_roi_align_params *params, const float *features,
                              const float *rois, int n_rois, float *out, GError **error)
{
    if (!roi_align_check("roi_align", params, features, out, rois, n_rois, error))
        return FALSE;
    const vd_roi_align_params p = *params;
    size_t image_stride = (size_t)p.height * p.width * p.channels;
    size_t roi_stride = (size_t)p.pooled_h * p.pooled_w * p.channels;
    gboolean parallel = (double)n_rois * (double)roi_stride >= ROI_ALIGN_PARALLEL_MIN;
#pragma omp parallel for schedule(dynamic, 8) if (parallel)
    for (int k = 0; k < n_rois; k++) {
        const float *roi = rois + 5 * (size_t)k;
        int image = (int)roi[0];
        vd_math_roi_geometry g = vd_math_roi_geometry_aligned(
            roi + 1, p.spatial_scale, p.pooled_h, p.pooled_w, p.sampling_ratio, p.aligned);
        roi_align_bins(features + (size_t)image * image_stride, p.height, p.width, p.channels, &g,
                       p.pooled_h, p.pooled_w, out + (size_t)k * roi_stride);
    }
    return TRUE;
}

/* dst[c] += (grad[c] * w) / count for the @n channels of one neighbour. */
VD_CPU_HOT static void roi_grad_add(float *restrict dst, const float *restrict grad, float w,
                                    float count, int n)
{
#pragma omp simd
    for (int c = 0; c < n; c++)
        dst[c] += vd_math_roi_grad_share(grad[c], w, count);
}

/* Channels [c0, c0 + n) of the gradient of every RoI, in torchvision's order. */
static void roi_align_backward_channels(const vd_roi_align_params *p, const float *grad_output,
                                        const float *rois, int n_rois, float *grad_input, int c0,
                                        int n)
{
    size_t C = (size_t)p->channels;
    size_t image_stride = (size_t)p->height * p->width * C;
    for (int k = 0; k < n_rois; k++) {
        const float *roi = rois + 5 * (size_t)k;
        float *gi = grad_input + (size_t)(int)roi[0] * image_stride + c0;
        vd_math_roi_geometry g = vd_math_roi_geometry_aligned(
            roi + 1, p->spatial_scale, p->pooled_h, p->pooled_w, p->sampling_ratio, p->aligned);
        for (int ph = 0; ph < p->pooled_h; ph++) {
            for (int pw = 0; pw < p->pooled_w; pw++) {
                const float *go =
                    grad_output + (((size_t)k * p->pooled_h + ph) * p->pooled_w + pw) * C + c0;
                for (int iy = 0; iy < g.grid_h; iy++) {
                    float y = vd_math_roi_sample_coord(g.start_y, ph, g.bin_h, iy, g.grid_h);
                    for (int ix = 0; ix < g.grid_w; ix++) {
                        float x = vd_math_roi_sample_coord(g.start_x, pw, g.bin_w, ix, g.grid_w);
                        if (!vd_math_roi_sample_inside(y, x, p->height, p->width))
                            continue;
                        vd_math_roi_sample s = vd_math_roi_bilinear(y, x, p->height, p->width);
                        /* neighbour by neighbour: a clamped sample's coinciding
                         * neighbours still add in torchvision's order */
                        for (int q = 0; q < 4; q++)
                            roi_grad_add(gi + (size_t)s.pos[q] * C, go, s.w[q], g.count, n);
                    }
                }
            }
        }
    }
}

/* Channels per thread block of the backward: a multiple of 16 (whole cache
 * lines, a full AVX-512 vector); the split never changes a result, since each
 * element's additions stay in one thread in a fixed order. */
#define ROI_GRAD_CHANNEL_QUANTUM 16

gboolean vd_roi_align_backward(const vd_roi_align_params *params, const float *grad_output,
                               const float *rois, int n_rois, float *grad_input, GError **error)
{
    if (!roi_align_check("roi_align backward", params, grad_input, grad_output, rois, n_rois,
                         error))
        return FALSE;
    const vd_roi_align_params p = *params;
    size_t total = (size_t)p.n_images * p.height * p.width * p.channels;
    memset(grad_input, 0, total * sizeof(float));
    if (n_rois == 0)
        return TRUE;
    int quanta = (p.channels + ROI_GRAD_CHANNEL_QUANTUM - 1) / ROI_GRAD_CHANNEL_QUANTUM;
    gboolean parallel = quanta > 1 && (double)n_rois * p.pooled_h * p.pooled_w * p.channels >=
                                          ROI_ALIGN_PARALLEL_MIN;
#pragma omp parallel if (parallel)
    {
        int n_threads = omp_get_num_threads(), t = omp_get_thread_num();
        int per_thread = (quanta + n_threads - 1) / n_threads;
        int c0 = t * per_thread * ROI_GRAD_CHANNEL_QUANTUM;
        int c1 = (t + 1) * per_thread * ROI_GRAD_CHANNEL_QUANTUM;
        if (c1 > p.channels)
            c1 = p.channels;
        if (c0 < c1)
            roi_align_backward_channels(&p, grad_output, rois, n_rois, grad_input, c0, c1 - c0);
    }
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                    */

/* One row in the order of torch 1.13's vectorised CPU softmax (AVX2, 8 float
 * lanes), which makes the result bit-exact: exp(x - max) with SLEEF's exp; the
 * sum accumulated lane-wise (lane l takes elements l, l+8, ...; the tail of
 * n % 8 elements goes to the first lanes) and reduced as a tree ((l0+l4) +
 * (l2+l6)) + ((l1+l5) + (l3+l7)); rows shorter than 8 summed left to right;
 * then a multiplication by 1/sum. A NaN anywhere makes the row NaN, as in
 * torch. */
VD_CPU_HOT static void softmax_row(float *row, int n)
{
    float max = row[0];
    gboolean has_nan = FALSE;
    for (int c = 0; c < n; c++) {
        if (isnan(row[c]))
            has_nan = TRUE;
        else if (row[c] > max)
            max = row[c];
    }
    if (has_nan)
        max = NAN;
    for (int c = 0; c < n; c++)
        row[c] = vd_math_expf(row[c] - max);
    float sum;
    if (n < 8) {
        sum = row[0];
        for (int c = 1; c < n; c++)
            sum += row[c];
    } else {
        float lane[8];
        memcpy(lane, row, sizeof(lane));
        int d = 8;
        for (; d < n - n % 8; d += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += row[d + l];
        for (int l = 0; d + l < n; l++)
            lane[l] += row[d + l];
        sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
              ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    }
    float inverse = 1.0f / sum;
    for (int c = 0; c < n; c++)
        row[c] = row[c] * inverse;
}

void vd_softmax_rows(float *logits, int n, int n_classes)
{
    if (n_classes <= 0)
        return;
#pragma omp parallel for schedule(static) if (n > 256)
    for (int r = 0; r < n; r++)
        softmax_row(logits + (size_t)r * n_classes, n_classes);
}

void vd_pooler_scales(const int *feature_heights, int n_levels, int image_height, float *scales,
                      int *k_min, int *k_max)
{
    for (int l = 0; l < n_levels; l++) {
        double approx = (double)feature_heights[l] / (double)image_height;
        scales[l] = exp2f(nearbyintf(log2f((float)approx)));
    }
    *k_min = (int)(-log2f(scales[0]));
    *k_max = (int)(-log2f(scales[n_levels - 1]));
}

void vd_pooler_levels_update(vd_pooler_levels *p, const int *feature_heights, int n_levels,
                             int resized_h)
{
    if (p->resized_h == resized_h)
        return;
    vd_pooler_scales(feature_heights, n_levels, resized_h, p->scales, &p->k_min, &p->k_max);
    p->resized_h = resized_h;
}

void vd_sigmoid(float *values, int n)
{
    for (int i = 0; i < n; i++)
        values[i] = vd_math_sigmoid(values[i]);
}

/* The integer box of expand_boxes(box, (m + 2) / m).to(int64): float32 arithmetic
 * (the Python scale cast to float32 for the products), truncation toward zero. */
static void expanded_box(const float box[4], int m, int64_t out[4])
{
    float scale = (float)((double)(m + 2) / (double)m);
    float w_half = vd_math_fmul(vd_math_fsub(box[2], box[0]), 0.5f);
    float h_half = vd_math_fmul(vd_math_fsub(box[3], box[1]), 0.5f);
    float x_c = vd_math_fmul(vd_math_fadd(box[2], box[0]), 0.5f);
    float y_c = vd_math_fmul(vd_math_fadd(box[3], box[1]), 0.5f);
    w_half = vd_math_fmul(w_half, scale);
    h_half = vd_math_fmul(h_half, scale);
    out[0] = (int64_t)vd_math_fsub(x_c, w_half);
    out[1] = (int64_t)vd_math_fsub(y_c, h_half);
    out[2] = (int64_t)vd_math_fadd(x_c, w_half);
    out[3] = (int64_t)vd_math_fadd(y_c, h_half);
}

void vd_paste_mask(const float *mask, int m, const float box[4], int frame_width, int frame_height,
                   int rect[4], uint8_t *out)
{
    int64_t b[4];
    expanded_box(box, m, b);
    /* the resized mask's size: max(int(x2 - x1 + 1), 1) */
    int64_t w = MAX(b[2] - b[0] + 1, 1), h = MAX(b[3] - b[1] + 1, 1);
    int64_t x0 = MAX(b[0], 0), x1 = MIN(b[2] + 1, (int64_t)frame_width);
    int64_t y0 = MAX(b[1], 0), y1 = MIN(b[3] + 1, (int64_t)frame_height);
    if (x1 <= x0 || y1 <= y0) {
        rect[0] = (int)CLAMP(x0, 0, frame_width);
        rect[1] = (int)CLAMP(y0, 0, frame_height);
        rect[2] = rect[3] = 0;
        return;
    }
    rect[0] = (int)x0;
    rect[1] = (int)y0;
    rect[2] = (int)(x1 - x0);
    rect[3] = (int)(y1 - y0);
    if (out == NULL)
        return;

    /* the padded mask (m + 2 square, zero border), resized to h x w; row r of the
     * rectangle is row y0 - b[1] + r of the resized mask */
    int padded = m + 2;
    float ratio_h = vd_math_resize_ratio(padded, (int)h),
          ratio_w = vd_math_resize_ratio(padded, (int)w);
#define PADDED_AT(r, c)                                                                            \
    (((r) >= 1 && (r) <= m && (c) >= 1 && (c) <= m) ? mask[((r)-1) * m + (c)-1] : 0.0f)
    for (int r = 0; r < rect[3]; r++) {
        int i0h, i1h;
        float l0h, l1h;
        vd_math_resize_source(ratio_h, (int)(y0 - b[1]) + r, padded, (int)h, &i0h, &i1h, &l0h,
                              &l1h);
        uint8_t *row = out + (size_t)r * rect[2];
        for (int c = 0; c < rect[2]; c++) {
            int i0w, i1w;
            float l0w, l1w;
            vd_math_resize_source(ratio_w, (int)(x0 - b[0]) + c, padded, (int)w, &i0w, &i1w, &l0w,
                                  &l1w);
            float p =
                vd_math_resize_blend(l0h, l1h, l0w, l1w, PADDED_AT(i0h, i0w), PADDED_AT(i0h, i1w),
                                     PADDED_AT(i1h, i0w), PADDED_AT(i1h, i1w));
            /* in double: 255 * p is exact, so byte >= 128 exactly when p >= 0.5 */
            double v = floor(255.0 * (double)p + 0.5);
            row[c] = (uint8_t)CLAMP(v, 0.0, 255.0);
        }
    }
#undef PADDED_AT
}

gboolean vd_paste_masks(const float *probs, int m, vd_result *result, GError **error)
{
    for (int i = 0; i < result->n_detections; i++) {
        vd_detection *d = &result->detections[i];
        const float *p = probs + (size_t)i * m * m;
        float box[4] = {d->x1, d->y1, d->x2, d->y2};
        int rect[4];
        vd_paste_mask(p, m, box, result->width, result->height, rect, NULL);
        if (rect[2] == 0 || rect[3] == 0)
            continue;
        d->mask = g_try_malloc((size_t)rect[2] * rect[3]);
        if (d->mask == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                        "out of memory for a %dx%d instance mask", rect[2], rect[3]);
            return FALSE;
        }
        vd_paste_mask(p, m, box, result->width, result->height, rect, d->mask);
        d->mask_x = rect[0];
        d->mask_y = rect[1];
        d->mask_width = rect[2];
        d->mask_height = rect[3];
    }
    return TRUE;
}

void vd_deconv2x2_as_conv1x1(const float *weight, const float *bias, int in, int out,
                             int out_stride, float *w1, float *b1)
{
    memset(w1, 0, (size_t)4 * out_stride * in * sizeof(float));
    memset(b1, 0, (size_t)4 * out_stride * sizeof(float));
    for (int tap = 0; tap < 4; tap++) /* tap = 2 ky + kx */
        for (int o = 0; o < out; o++) {
            float *row = w1 + ((size_t)tap * out_stride + o) * in;
            for (int i = 0; i < in; i++)
                row[i] = weight[((size_t)i * out + o) * 4 + tap];
            b1[(size_t)tap * out_stride + o] = bias[o];
        }
}

void vd_fc6_weight_to_nhwc(const float *weight, int out, int channels, int positions,
                           int padded_channels, float *dst)
{
    size_t in = (size_t)channels * positions, in_nhwc = (size_t)padded_channels * positions;
    memset(dst, 0, (size_t)out * in_nhwc * sizeof(float));
    for (int o = 0; o < out; o++) {
        const float *src = weight + (size_t)o * in;
        float *row = dst + (size_t)o * in_nhwc;
        for (int c = 0; c < channels; c++)
            for (int p = 0; p < positions; p++)
                row[(size_t)p * padded_channels + c] = src[(size_t)c * positions + p];
    }
}

void vd_upsample_bilinear(const float *in, int planes, int size, int scale, float *out)
{
    int os = size * scale;
    float ratio = vd_math_resize_ratio(size, os);
#pragma omp parallel for
    for (int p = 0; p < planes; p++) {
        const float *m = in + (size_t)p * size * size;
        float *o = out + (size_t)p * os * os;
        for (int y = 0; y < os; y++) {
            int i0h, i1h;
            float l0h, l1h;
            vd_math_resize_source(ratio, y, size, os, &i0h, &i1h, &l0h, &l1h);
            for (int x = 0; x < os; x++) {
                int i0w, i1w;
                float l0w, l1w;
                vd_math_resize_source(ratio, x, size, os, &i0w, &i1w, &l0w, &l1w);
                o[(size_t)y * os + x] = vd_math_resize_blend(
                    l0h, l1h, l0w, l1w, m[i0h * size + i0w], m[i0h * size + i1w],
                    m[i1h * size + i0w], m[i1h * size + i1w]);
            }
        }
    }
}

/* torch's cubic convolution coefficients (A = -0.75) of fraction @t, float32,
 * evaluated left to right as upsample_bicubic2d's get_cubic_upsample_coefficients
 * writes them (the engine is built without FMA contraction) */
static float cubic1(float x)
{
    const float A = -0.75f;
    return ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
}

static float cubic2(float x)
{
    const float A = -0.75f;
    return ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A;
}

/* Output index @d's four source indices (clamped to [0, @in - 1]) and weights
 * along an axis of @in resized to @out (align_corners=False): src = scale * (d +
 * 0.5) - 0.5 with scale = f32(in / out), not clamped at 0, i = floor(src), t =
 * src - i. */
static void cubic_axis(int in, int out, int d, int idx[4], float w[4])
{
    float scale = vd_math_resize_ratio(in, out);
    float src = (float)((double)scale * ((double)d + 0.5) - 0.5);
    int i = (int)floorf(src);
    float t = src - (float)i;
    float t2 = (float)(1.0 - (double)t);
    w[0] = cubic2((float)((double)t + 1.0));
    w[1] = cubic1(t);
    w[2] = cubic1(t2);
    w[3] = cubic2((float)((double)t2 + 1.0));
    for (int j = 0; j < 4; j++)
        idx[j] = CLAMP(i - 1 + j, 0, in - 1);
}

gboolean vd_heatmaps_to_keypoints(const float *maps, int k, int s, const float box[4], float *out,
                                  GError **error)
{
    float width = MAX(box[2] - box[0], 1.0f), height = MAX(box[3] - box[1], 1.0f);
    int w = (int)ceilf(width), h = (int)ceilf(height);
    float width_correction = width / (float)w, height_correction = height / (float)h;
    /* the horizontal pass's rows [s][w], the per-column and per-row taps */
    float *rows = g_try_malloc(((size_t)s * w + 4 * (size_t)(w + h)) * sizeof(float));
    int *idx = g_try_malloc(4 * (size_t)(w + h) * sizeof(int));
    if (rows == NULL || idx == NULL) {
        g_free(rows);
        g_free(idx);
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory for a %dx%d keypoint heatmap", w, h);
        return FALSE;
    }
    float *wx = rows + (size_t)s * w, *wy = wx + 4 * (size_t)w;
    int *ix = idx, *iy = idx + 4 * (size_t)w;
    for (int x = 0; x < w; x++)
        cubic_axis(s, w, x, ix + 4 * x, wx + 4 * x);
    for (int y = 0; y < h; y++)
        cubic_axis(s, h, y, iy + 4 * y, wy + 4 * y);
    for (int c = 0; c < k; c++) {
        const float *m = maps + (size_t)c * s * s;
        /* each source row interpolated along x: sum_i wx[i] m[r][ix[i]], then each
         * output pixel along y over four of those: the separable order of torch's
         * kernel (x innermost) */
        for (int r = 0; r < s; r++)
            for (int x = 0; x < w; x++) {
                const int *xi = ix + 4 * x;
                const float *xw = wx + 4 * x;
                float v = m[r * s + xi[0]] * xw[0];
                for (int j = 1; j < 4; j++)
                    v = fmaf(m[r * s + xi[j]], xw[j], v);
                rows[(size_t)r * w + x] = v;
            }
        float best = -INFINITY;
        int best_x = 0, best_y = 0;
        gboolean found = FALSE;
        for (int y = 0; y < h; y++) {
            const int *yi = iy + 4 * y;
            const float *yw = wy + 4 * y;
            for (int x = 0; x < w; x++) {
                float v = rows[(size_t)yi[0] * w + x] * yw[0];
                for (int j = 1; j < 4; j++)
                    v = fmaf(rows[(size_t)yi[j] * w + x], yw[j], v);
                /* torch's argmax: the first maximum; a NaN is the maximum */
                if (!found || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    best_x = x;
                    best_y = y;
                    found = TRUE;
                }
            }
        }
        out[3 * c + 0] = ((float)best_x + 0.5f) * width_correction + box[0];
        out[3 * c + 1] = ((float)best_y + 0.5f) * height_correction + box[1];
        out[3 * c + 2] = best;
    }
    g_free(rows);
    g_free(idx);
    return TRUE;
}
