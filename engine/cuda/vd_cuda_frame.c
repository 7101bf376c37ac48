/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend's frames (vd_cuda_private.h): the whole of a frame or a batch
 * enqueued on the stream (pre-processing, backbone, FPN, RPN, box head,
 * postprocess, masks), captured once as a CUDA graph and replayed while the
 * sizes stay, the observer's copies, then the one host synchronisation and the
 * results' read-back (engine/cuda/BATCHING.md). */
#include "vd_config.h"
#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_debug.h"
#include "cuda/vd_cuda_backbone.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Packs the frame's rows into pinned memory at @base (bytes); returns the
 * device view of the uploaded copy (the copy itself is enqueued by
 * enqueue_frame). */
static vd_device_frame stage_frame(cuda_state *st, const vd_image *image, size_t base)
{
    size_t plane_bytes[3];
    int row_bytes[3], rows[3];
    frame_layout(image, plane_bytes, row_bytes, rows);
    vd_device_frame frame;
    memset(&frame, 0, sizeof(frame));
    frame.format = (int)image->format;
    frame.width = image->width;
    frame.height = image->height;
    frame.matrix = (int)image->matrix;
    frame.full_range = image->full_range ? 1 : 0;
    size_t offset = base;
    for (int p = 0; p < 3; p++) {
        if (row_bytes[p] == 0)
            continue;
        uint8_t *dst = st->staging + offset;
        if (image->strides[p] == row_bytes[p]) {
            memcpy(dst, image->planes[p], plane_bytes[p]);
        } else {
            for (int y = 0; y < rows[p]; y++)
                memcpy(dst + (size_t)y * row_bytes[p],
                       image->planes[p] + (size_t)y * image->strides[p], (size_t)row_bytes[p]);
        }
        frame.planes[p] = st->raw + offset;
        frame.strides[p] = row_bytes[p];
        offset += (plane_bytes[p] + 255) / 256 * 256;
    }
    return frame;
}

/* The event where @stage starts (and the one before it ends): event i opens
 * stage i. */
static gboolean record_stage(cuda_state *st, vd_stage stage, gboolean timing, GError **error)
{
    if (!timing)
        return TRUE;
    return vd_cuda_check(cudaEventRecord(st->stage_events[stage], st->layers.stream), "stage event",
                         error);
}

/* Image @i's slice of an activation, and of a per-image buffer of @per_image
 * elements of @esize bytes. */
static vd_kernel_result *result_slot(cuda_state *st, vd_kernel_result *base, int i)
{
    return (vd_kernel_result *)((char *)base + (size_t)i * st->result_stride);
}

/* The mask branch of image @i (engine/MASKRCNN.md §1-2) on the device, after
 * its detections: its final boxes (resized coordinates, the candidates NMS
 * kept, in the result's order) pooled 14x14 from its FPN maps, the head, and
 * the label's channel through the sigmoid into its result slot's
 * probabilities. The count stays on the device: every one of mask.rows rows
 * runs, those past the count on zeros. */
static gboolean enqueue_masks(cuda_state *st, cuda_plan *plan, int i, GError **error)
{
    const vd_config *cfg = &st->model->config;
    vd_cuda_layers *L = &st->layers;
    cuda_mask *mk = &st->mask;
    cudaStream_t s = L->stream;
    vd_dtype dt = st->dtype;
    size_t n_flat = (size_t)plan->proposal_capacity * (cfg->num_classes - 1);
    vd_kernel_result *result = result_slot(st, st->result_device, i);

    if (mk->rows < st->result_capacity) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "the mask branch is planned for %d rows of %d", mk->rows, st->result_capacity);
        return FALSE;
    }
    CUDA_TRY(vd_gather_proposals(plan->box_boxes + (size_t)i * n_flat * 4,
                                 plan->box_scores + (size_t)i * n_flat,
                                 st->box_keep + (size_t)i * st->result_capacity,
                                 plan->n_box_keep + i, mk->rows, mk->rois, mk->roi_scores, s),
             "the mask RoIs");
    vd_roi_levels lv;
    memset(&lv, 0, sizeof(lv));
    lv.n_levels = cfg->n_mask_roi_levels;
    for (int l = 0; l < cfg->n_mask_roi_levels; l++) {
        lv.features[l] = image_of(plan->fpn_out[l], i, dt);
        lv.height[l] = plan->fpn_out[l]->h;
        lv.width[l] = plan->fpn_out[l]->w;
        lv.scale[l] = plan->mask_pooler.scales[l];
    }
    lv.k_min = plan->mask_pooler.k_min;
    lv.k_max = plan->mask_pooler.k_max;
    lv.channels = cfg->fpn_channels;
    CUDA_TRY(vd_multiscale_roi_align(&lv, dt, mk->rois, plan->n_box_keep + i, mk->rows,
                                     cfg->mask_output_size, cfg->mask_sampling_ratio,
                                     mk->pooled.data, dt, s),
             "the mask RoIAlign");
    for (int j = 0; j < st->n_mask_convs; j++)
        if (!vd_cuda_conv_run(L, &mk->convs[j], error))
            return FALSE;
    if (!vd_cuda_conv_run(L, &mk->deconv, error) || !vd_cuda_conv_run(L, &mk->logits_conv, error))
        return FALSE;
    CUDA_TRY(vd_mask_probabilities(mk->logits.data, dt, mk->rows, cfg->mask_output_size,
                                   mk->logits.c, cfg->num_classes, result,
                                   (float *)((char *)result + st->result_probs_offset), s),
             "the mask probabilities");
    return TRUE;

out_fail:
    return FALSE;
}

/* Enqueues the device work of @n frames (n <= plan->n_images, alike in size and
 * format, staged one after another, @frame_bytes each), from the upload to
 * the readback of the results into pinned memory. No host synchronisation.
 * With a one-slot plan this is the single-image path: the same calls, in the
 * same order, as before batches existed. */
static gboolean enqueue_frame(cuda_state *st, vd_context *ctx, cuda_plan *plan,
                              const vd_device_frame *frames, int n, size_t frame_bytes, int rh,
                              int rw, gboolean timing, GError **error)
{
    const vd_config *cfg = &st->model->config;
    vd_cuda_layers *L = &st->layers;
    cudaStream_t s = L->stream;
    vd_dtype dt = st->dtype;
    size_t esize = vd_dtype_size(dt);
    int total = plan->n_anchors;
    int n_cand = plan->rpn.candidate_offset[plan->rpn.n_levels];
    int R = plan->proposal_capacity;

    if (n < 1 || n > plan->n_images) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "%d images on a plan of %d", n,
                    plan->n_images);
        return FALSE;
    }
    if (!record_stage(st, VD_STAGE_PREPROCESS, timing, error))
        return FALSE;
    /* preprocess */
    CUDA_TRY(cudaMemsetAsync(plan->n_nonfinite, 0, (size_t)n * sizeof(int), s),
             "the non-finite count");
    CUDA_TRY(
        cudaMemcpyAsync(st->raw, st->staging, (size_t)n * frame_bytes, cudaMemcpyHostToDevice, s),
        "uploading the frame");
    for (int i = 0; i < n; i++)
        CUDA_TRY(vd_preprocess(&frames[i], cfg->image_mean, cfg->image_std,
                               (int)cfg->resize_arithmetic, rh, rw, plan->padded_h, plan->padded_w,
                               st->input_channels, dt, image_of(plan->input, i, dt), s),
                 "pre-processing");
    if (!record_stage(st, VD_STAGE_BACKBONE, timing, error))
        return FALSE;

    /* backbone: every convolution over the plan's image slots at once */
    if (!st->backbone->enqueue(st, plan, n, error))
        return FALSE;
    if (!record_stage(st, VD_STAGE_FPN, timing, error))
        return FALSE;

    /* FPN: lateral, then the upsampled chain added, then the 3x3 */
    for (int l = plan->n_returned - 1; l >= 0; l--) {
        if (!vd_cuda_conv_run(L, &plan->fpn_inner[l], error))
            return FALSE;
        if (l + 1 < plan->n_returned) {
            vd_cuda_tensor *up = plan->fpn_sum[l + 1], *dst = plan->fpn_sum[l];
            for (int i = 0; i < n; i++)
                CUDA_TRY(vd_upsample_nearest_add(image_of(up, i, dt), up->h, up->w,
                                                 image_of(dst, i, dt), dst->h, dst->w, dst->c, dt,
                                                 s),
                         "FPN top-down sum");
        }
        if (!vd_cuda_conv_run(L, &plan->fpn_layer[l], error))
            return FALSE;
    }
    if (plan->n_levels > plan->n_returned) {
        vd_cuda_tensor *top = plan->fpn_out[plan->n_returned - 1];
        for (int i = 0; i < n; i++)
            CUDA_TRY(vd_subsample2(image_of(top, i, dt), top->h, top->w, top->c,
                                   image_of(plan->fpn_out[plan->n_returned], i, dt), dt, s),
                     "FPN pool level");
    }
    if (!record_stage(st, VD_STAGE_RPN, timing, error))
        return FALSE;

    /* RPN */
    for (int l = 0; l < plan->n_levels; l++) {
        vd_cuda_tensor *head = plan->rpn_out[l];
        if (!vd_cuda_conv_run(L, &plan->rpn_conv[l], error))
            return FALSE;
        for (int j = 1; j < cfg->rpn_conv_depth; j++)
            if (!vd_cuda_conv_run(L, &plan->rpn_conv_more[l][j - 1], error))
                return FALSE;
        if (!vd_cuda_conv_run(L, &plan->rpn_head[l], error))
            return FALSE;
        /* fp16 overflow shows here first: objectness and deltas, not the padding */
        for (int i = 0; i < n; i++)
            CUDA_TRY(vd_count_nonfinite(image_of(head, i, dt), dt, head->h * head->w,
                                        5 * cfg->anchors_per_location, head->c, NULL,
                                        plan->n_nonfinite + i, s),
                     "counting non-finite RPN outputs");
    }
    /* image i's view of the levels: its slices of the head outputs */
    vd_rpn_levels rpn_of[VD_MAX_BATCH_SLOTS];
    if (n > VD_MAX_BATCH_SLOTS) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "a batch of %d images", n);
        return FALSE;
    }
    for (int i = 0; i < n; i++) {
        rpn_of[i] = plan->rpn;
        for (int l = 0; l < plan->n_levels; l++)
            rpn_of[i].head[l] = image_of(plan->rpn_out[l], i, dt);
        CUDA_TRY(vd_rpn_gather_logits(&rpn_of[i], dt, plan->logit_keys + (size_t)i * total,
                                      plan->logit_index + (size_t)i * total, s),
                 "RPN logits");
    }
    if (plan->n_images == 1)
        CUDA_TRY(vd_rpn_topk(&plan->rpn, plan->logit_keys, plan->logit_index,
                             plan->logit_keys_sorted, plan->logit_index_sorted,
                             plan->sort_workspace, plan->sort_workspace_bytes, s),
                 "RPN top-k");
    else
        CUDA_TRY(vd_rpn_topk_batched(&plan->rpn, n, plan->logit_keys, plan->logit_index,
                                     plan->logit_keys_sorted, plan->logit_index_sorted,
                                     plan->sort_workspace, plan->sort_workspace_bytes, s),
                 "RPN top-k");
    for (int i = 0; i < n; i++)
        CUDA_TRY(vd_rpn_decode(&rpn_of[i], dt, plan->logit_keys_sorted + (size_t)i * total,
                               plan->logit_index_sorted + (size_t)i * total, plan->anchors,
                               (float)rh, (float)rw, cfg->rpn_min_size, cfg->rpn_score_thresh,
                               plan->candidate_boxes + (size_t)i * n_cand * 4,
                               plan->candidate_scores + (size_t)i * n_cand,
                               plan->candidate_levels + (size_t)i * n_cand, s),
                 "RPN decode");
    if (st->inject_sync && !vd_cuda_sync_stream(&st->sync_count, s, error))
        return FALSE;
    for (int i = 0; i < n; i++) {
        float *boxes = plan->candidate_boxes + (size_t)i * n_cand * 4;
        float *scores = plan->candidate_scores + (size_t)i * n_cand;
        int *keep = plan->rpn_keep + (size_t)i * R;
        /* one workspace for every image: the stream orders them */
        CUDA_TRY(vd_batched_nms_device(boxes, scores, VD_DTYPE_F32,
                                       plan->candidate_levels + (size_t)i * n_cand, &plan->rpn_nms,
                                       cfg->rpn_nms_thresh, keep, plan->n_proposals + i,
                                       plan->rpn_nms_workspace, plan->rpn_nms_workspace_bytes, s),
                 "RPN NMS");
        CUDA_TRY(vd_gather_proposals(boxes, scores, keep, plan->n_proposals + i, R,
                                     plan->proposals + (size_t)i * R * 4,
                                     plan->proposal_scores + (size_t)i * R, s),
                 "proposals");
    }
    if (!record_stage(st, VD_STAGE_ROI_ALIGN, timing, error))
        return FALSE;

    /* MultiScaleRoIAlign: image i's proposals from its maps into rows i * R.. */
    size_t pooled_row = (size_t)cfg->roi_output_size * cfg->roi_output_size * cfg->fpn_channels;
    for (int i = 0; i < n; i++) {
        vd_roi_levels lv;
        memset(&lv, 0, sizeof(lv));
        lv.n_levels = cfg->n_roi_levels;
        for (int l = 0; l < cfg->n_roi_levels; l++) {
            lv.features[l] = image_of(plan->fpn_out[l], i, dt);
            lv.height[l] = plan->fpn_out[l]->h;
            lv.width[l] = plan->fpn_out[l]->w;
            lv.scale[l] = plan->pooler.scales[l];
        }
        lv.k_min = plan->pooler.k_min;
        lv.k_max = plan->pooler.k_max;
        lv.channels = cfg->fpn_channels;
        CUDA_TRY(vd_multiscale_roi_align(
                     &lv, dt, plan->proposals + (size_t)i * R * 4, plan->n_proposals + i, R,
                     cfg->roi_output_size, cfg->roi_sampling_ratio,
                     (char *)plan->pooled + (size_t)i * R * pooled_row * esize, dt, s),
                 "RoIAlign");
    }
    if (!record_stage(st, VD_STAGE_BOX_HEAD, timing, error))
        return FALSE;

    /* box head: image by image on its R rows, with the single-image products
     * (the same cuBLASLt algorithm, so the same numbers as a single image) */
    for (int i = 0; i < n; i++) {
        float *head = plan->head + (size_t)i * R * st->predictor_stride;
        void *fc6_out = (char *)plan->fc6_out + (size_t)i * R * st->fc6.out_stride * esize;
        void *fc6_in = (char *)plan->pooled + (size_t)i * R * pooled_row * esize;
        if (plan->n_box_convs > 0) {
            /* v2's conv head on the image's R rows, then fc6 on its output
             * ([R][P][P][padded channels]) and the predictor on fc6's */
            plan->box_in.data = fc6_in;
            for (int j = 0; j < plan->n_box_convs; j++)
                if (!vd_cuda_conv_run(L, &plan->box_convs[j], error))
                    return FALSE;
            if (!vd_cuda_linear_run(L, &st->fc6, plan->box_out[plan->n_box_convs - 1].data, fc6_out,
                                    error) ||
                !vd_cuda_linear_run(L, &st->predictor, fc6_out, head, error))
                return FALSE;
        } else {
            void *fc7_out = (char *)plan->fc7_out + (size_t)i * R * st->fc7.out_stride * esize;
            if (!vd_cuda_linear_run(L, &st->fc6, fc6_in, fc6_out, error) ||
                !vd_cuda_linear_run(L, &st->fc7, fc6_out, fc7_out, error) ||
                !vd_cuda_linear_run(L, &st->predictor, fc7_out, head, error))
                return FALSE;
        }
        CUDA_TRY(vd_count_nonfinite(head, VD_DTYPE_F32, R, 5 * cfg->num_classes,
                                    st->predictor_stride, plan->n_proposals + i,
                                    plan->n_nonfinite + i, s),
                 "counting non-finite box head outputs");
    }
    if (!record_stage(st, VD_STAGE_POSTPROCESS, timing, error))
        return FALSE;

    /* post-processing and the readback */
    {
        const vd_context_params *p = &ctx->params;
        size_t n_flat = (size_t)R * (cfg->num_classes - 1);
        vd_box_shape shape;
        memset(&shape, 0, sizeof(shape));
        shape.capacity = R;
        shape.num_classes = cfg->num_classes;
        shape.head_stride = st->predictor_stride;
        memcpy(shape.weights, cfg->bbox_reg_weights, sizeof(shape.weights));
        shape.resized_h = (float)rh;
        shape.resized_w = (float)rw;
        shape.score_threshold = p->score_threshold;
        shape.min_size = cfg->box_min_size;
        vd_nms_shape nms = st->box_nms;
        nms.max_keep = p->max_detections;
        float ry = (float)frames[0].height / (float)rh;
        float rx = (float)frames[0].width / (float)rw;
        for (int i = 0; i < n; i++) {
            float *boxes = plan->box_boxes + (size_t)i * n_flat * 4;
            float *scores = plan->box_scores + (size_t)i * n_flat;
            int *labels = plan->box_labels + (size_t)i * n_flat;
            int *keep = st->box_keep + (size_t)i * st->result_capacity;
            CUDA_TRY(vd_box_candidates(&shape, plan->head + (size_t)i * R * st->predictor_stride,
                                       plan->proposals + (size_t)i * R * 4, plan->n_proposals + i,
                                       boxes, scores, labels, s),
                     "detection candidates");
            CUDA_TRY(vd_batched_nms_device(boxes, scores, VD_DTYPE_F32, labels, &nms,
                                           p->nms_threshold, keep, plan->n_box_keep + i,
                                           st->box_nms_workspace, st->box_nms_workspace_bytes, s),
                     "detection NMS");
            CUDA_TRY(vd_finalize_detections(boxes, scores, labels, keep, plan->n_box_keep + i,
                                            plan->n_proposals + i, plan->n_nonfinite + i,
                                            p->max_detections, rx, ry,
                                            result_slot(st, st->result_device, i), s),
                     "detections");
        }
        size_t bytes =
            sizeof(vd_kernel_result) + (size_t)p->max_detections * sizeof(vd_kernel_detection);
        if (st->has_masks) {
            if (!record_stage(st, VD_STAGE_MASK_HEAD, timing, error))
                return FALSE;
            for (int i = 0; i < n; i++)
                if (!enqueue_masks(st, plan, i, error))
                    return FALSE;
            /* the detections, then their probabilities */
            size_t m = 2 * (size_t)cfg->mask_output_size;
            bytes = st->result_probs_offset + (size_t)p->max_detections * m * m * sizeof(float);
        }
        /* one copy: each result's header and detections, at the slots' stride */
        if (n == 1)
            CUDA_TRY(cudaMemcpyAsync(st->result_host, st->result_device, bytes,
                                     cudaMemcpyDeviceToHost, s),
                     "reading back the detections");
        else
            CUDA_TRY(cudaMemcpy2DAsync(st->result_host, st->result_stride, st->result_device,
                                       st->result_stride, bytes, (size_t)n, cudaMemcpyDeviceToHost,
                                       s),
                     "reading back the detections");
    }
    /* the device's last stage ends where the next one (the host's paste, or none)
     * would start */
    if (!record_stage(st, st->has_masks ? VD_STAGE_PASTE_MASKS : VD_STAGE_MASK_HEAD, timing, error))
        return FALSE;
    return TRUE;

out_fail:
    return FALSE;
}

static gboolean graph_matches(const cuda_graph *g, const cuda_plan *plan, const vd_context *ctx,
                              const vd_device_frame *frame, int n, int rh, int rw)
{
    const vd_device_frame *f = &g->frame;
    return g->exec != NULL && g->plan == plan && g->n_images == n && f->format == frame->format &&
           f->width == frame->width && f->height == frame->height && f->matrix == frame->matrix &&
           f->full_range == frame->full_range &&
           memcmp(f->planes, frame->planes, sizeof(f->planes)) == 0 &&
           memcmp(f->strides, frame->strides, sizeof(f->strides)) == 0 && g->resized_h == rh &&
           g->resized_w == rw && g->score_threshold == ctx->params.score_threshold &&
           g->nms_threshold == ctx->params.nms_threshold &&
           g->max_detections == ctx->params.max_detections;
}

/* Captures the work of @n frames on @plan into @g. On failure (nothing
 * captured: the caller runs the frames eagerly) @reason (@reason_size bytes)
 * says which step failed and why. */
static gboolean capture_frame(cuda_state *st, vd_context *ctx, cuda_plan *plan, cuda_graph *g,
                              const vd_device_frame *frames, int n, size_t frame_bytes, int rh,
                              int rw, char *reason, size_t reason_size)
{
    cudaStream_t s = st->layers.stream;
    cudaGraph_t graph = NULL;
    GError *local = NULL;
    cudaError_t status;
    gboolean enqueued, ok = FALSE;
    forget_graph_slot(g);
    status = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (status != cudaSuccess) {
        g_snprintf(reason, reason_size, "beginning the capture: %s (%s)",
                   cudaGetErrorString(status), cudaGetErrorName(status));
        goto out_clear;
    }
    enqueued = enqueue_frame(st, ctx, plan, frames, n, frame_bytes, rh, rw, FALSE, &local);
    /* always ends the capture, which leaves the stream as it was */
    status = cudaStreamEndCapture(s, &graph);
    if (!enqueued) {
        g_snprintf(reason, reason_size, "capturing the frame: %s", local->message);
    } else if (status != cudaSuccess || graph == NULL) {
        g_snprintf(reason, reason_size, "ending the capture: %s (%s)", cudaGetErrorString(status),
                   cudaGetErrorName(status));
    } else if (st->fail_captures > 0) {
        st->fail_captures--;
        g_snprintf(reason, reason_size, "instantiating the graph: failure injected by a test");
    } else if ((status = cudaGraphInstantiate(&g->exec, graph, 0)) != cudaSuccess) {
        g->exec = NULL;
        g_snprintf(reason, reason_size, "instantiating the graph: %s (%s)",
                   cudaGetErrorString(status), cudaGetErrorName(status));
    } else {
        g->plan = plan;
        g->frame = frames[0];
        g->n_images = n;
        g->resized_h = rh;
        g->resized_w = rw;
        g->score_threshold = ctx->params.score_threshold;
        g->nms_threshold = ctx->params.nms_threshold;
        g->max_detections = ctx->params.max_detections;
        ok = TRUE;
    }
    if (graph != NULL)
        cudaGraphDestroy(graph);
out_clear:
    cudaGetLastError(); /* a refused capture leaves no sticky error */
    g_clear_error(&local);
    return ok;
}

/* After a failed capture: eager frames, then another try after twice as many
 * as the last time (1, 2, 4, ..., at most VD_GRAPH_RETRY_MAX_FRAMES). */
static void graph_capture_failed(cuda_state *st, cuda_plan *plan, cuda_graph *g, const char *reason)
{
    graph_backoff *b = &g->backoff;
    st->graph_failures++;
    int wait = 1 << MIN(b->failures_in_a_row, 30);
    b->failures_in_a_row++;
    b->retry_in = MIN(wait, VD_GRAPH_RETRY_MAX_FRAMES);
    g_strlcpy(b->reason, reason, sizeof(b->reason));
    /* this plan's first frame has been seen: the next try needs no warm-up */
    g->plan = plan;
    g->times_seen = 1;
}

static void graph_capture_succeeded(cuda_graph *g)
{
    memset(&g->backoff, 0, sizeof(g->backoff));
}

/* Every graph's back-off cleared (graphs turned on or off by the caller). */
void graph_backoff_reset(cuda_state *st)
{
    graph_capture_succeeded(&st->graph);
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++)
        graph_capture_succeeded(&st->batch_graphs[i]);
}

/* The graph of the last batch run, when it is backing off; else NULL. */
const cuda_graph *graph_retrying(const cuda_state *st)
{
    const cuda_graph *g = st->last_graph;
    return g != NULL && g->backoff.failures_in_a_row > 0 ? g : NULL;
}

/* ------------------------------------------------------------------------ */
/* Observer (debugging only: these downloads synchronise)                    */

static void observe_device(cuda_state *st, vd_context *ctx, const char *name, const void *data,
                           vd_dtype dtype, int h, int w, int c, int c_stride, gboolean nchw,
                           const int64_t *shape, int ndim)
{
    size_t n = (size_t)h * w * c, bytes = MAX(n, 1) * sizeof(float);
    float *dev = NULL, *host = g_try_malloc(bytes);
    cudaStream_t s = st->layers.stream;
    if (host == NULL)
        goto out_free;
    /* grown, not allocated per tensor: cudaFree waits for the whole device;
     * every use ends with the wait below */
    if (bytes > st->observe_scratch_bytes) {
        cudaFree(st->observe_scratch);
        st->observe_scratch = NULL;
        st->observe_scratch_bytes = 0;
        if (cudaMalloc((void **)&st->observe_scratch, bytes) != cudaSuccess) {
            st->observe_scratch = NULL;
            goto out_free;
        }
        st->observe_scratch_bytes = bytes;
    }
    dev = st->observe_scratch;
    if (nchw) {
        if (vd_nhwc_to_nchw_f32(data, h, w, c, c_stride, dtype, dev, s) != cudaSuccess)
            goto out_free;
    } else if (vd_convert_from_f32(data, n, VD_DTYPE_F32, dev, s) != cudaSuccess) {
        goto out_free;
    }
    if (cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
        !vd_cuda_sync_stream(&st->sync_count, s, NULL))
        goto out_free;
    vd_context_observe(ctx, name, host, shape, ndim);
out_free:
    cudaGetLastError();
    g_free(host);
}

static void observe_frame(cuda_state *st, vd_context *ctx, int rh, int rw, int n_props)
{
    cuda_plan *plan = st->plan;
    const vd_config *cfg = &st->model->config;
    float size[2] = {(float)rh, (float)rw};
    int64_t size_shape[1] = {2};
    vd_context_observe(ctx, "image_size", size, size_shape, 1);
    {
        int64_t shape[4] = {1, 3, plan->padded_h, plan->padded_w};
        observe_device(st, ctx, "input", plan->input->data, st->dtype, plan->padded_h,
                       plan->padded_w, 3, st->input_channels, TRUE, shape, 4);
    }
    for (int l = 0; l < plan->n_levels; l++) {
        char name[32];
        vd_cuda_tensor *t = plan->fpn_out[l];
        if (l < plan->n_returned)
            g_snprintf(name, sizeof(name), "fpn.%d", l);
        else
            g_snprintf(name, sizeof(name), "fpn.pool");
        int64_t shape[4] = {1, t->c, t->h, t->w};
        observe_device(st, ctx, name, t->data, st->dtype, t->h, t->w, t->c, t->c, TRUE, shape, 4);
    }
    {
        int64_t shape[2] = {plan->n_anchors, 4};
        observe_device(st, ctx, "anchors", plan->anchors, VD_DTYPE_F32, plan->n_anchors, 1, 4, 4,
                       FALSE, shape, 2);
    }
    {
        int64_t shape[2] = {n_props, 4};
        observe_device(st, ctx, "proposals", plan->proposals, VD_DTYPE_F32, n_props, 1, 4, 4, FALSE,
                       shape, 2);
        observe_device(st, ctx, "proposal_scores", plan->proposal_scores, VD_DTYPE_F32, n_props, 1,
                       1, 1, FALSE, shape, 1);
    }
    {
        int K = cfg->num_classes, stride = st->predictor_stride;
        size_t n = (size_t)n_props * stride;
        float *head = g_try_malloc(MAX(n, 1) * sizeof(float));
        float *split = g_try_malloc((size_t)MAX(n_props, 1) * 5 * K * sizeof(float));
        if (head != NULL && split != NULL &&
            cudaMemcpyAsync(head, plan->head, n * sizeof(float), cudaMemcpyDeviceToHost,
                            st->layers.stream) == cudaSuccess &&
            vd_cuda_sync_stream(&st->sync_count, st->layers.stream, NULL)) {
            for (int i = 0; i < n_props; i++) {
                memcpy(split + (size_t)i * K, head + (size_t)i * stride, K * sizeof(float));
                memcpy(split + (size_t)n_props * K + (size_t)i * 4 * K,
                       head + (size_t)i * stride + K, 4 * K * sizeof(float));
            }
            int64_t s1[2] = {n_props, K}, s2[2] = {n_props, 4 * K};
            vd_context_observe(ctx, "box_logits", split, s1, 2);
            vd_context_observe(ctx, "box_regression", split + (size_t)n_props * K, s2, 2);
        }
        cudaGetLastError();
        g_free(head);
        g_free(split);
    }
}

/* ------------------------------------------------------------------------ */
/* Detection                                                                 */

/* Validates @image and the context's parameters; the resized and padded size. */
static gboolean frame_sizes(cuda_state *st, vd_context *ctx, const vd_image *image, int *rh,
                            int *rw, int *ph, int *pw, GError **error)
{
    const vd_config *cfg = &st->model->config;
    if (!vd_image_validate(image, error))
        return FALSE;
    if (ctx->params.max_detections <= 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "max_detections must be positive");
        return FALSE;
    }
    vd_config_transform_sizes(cfg, image->height, image->width, rh, rw, ph, pw);
    if (*rh <= 0 || *rw <= 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "image %dx%d resizes to an empty image", image->width, image->height);
        return FALSE;
    }
    return TRUE;
}

/* Runs @n staged frames on @plan: @g replayed where it matches (captured on
 * the second batch of a layout, a failed capture retried after a back-off),
 * else eagerly with stage timings (*@timing). Ends with the one host wait. */
static gboolean run_frames(cuda_state *st, vd_context *ctx, cuda_plan *plan, cuda_graph *g,
                           const vd_device_frame *frames, int n, size_t frame_bytes, int rh, int rw,
                           gboolean *timing, GError **error)
{
    st->graph_replayed = FALSE;
    st->last_graph = g;
    if (st->use_graphs && !st->inject_sync) {
        if (!graph_matches(g, plan, ctx, &frames[0], n, rh, rw)) {
            char reason[VD_STATUS_REASON_MAX];
            /* the first frame of a layout runs eagerly; the second is captured */
            if (g->times_seen == 0 || g->plan != plan) {
                forget_graph_slot(g);
                g->plan = plan;
                g->times_seen = 1;
            } else if (g->backoff.retry_in > 0) {
                g->backoff.retry_in--; /* this graph backing off after a failure: eager */
            } else if (capture_frame(st, ctx, plan, g, frames, n, frame_bytes, rh, rw, reason,
                                     sizeof(reason))) {
                graph_capture_succeeded(g);
            } else {
                graph_capture_failed(st, plan, g, reason);
            }
        }
        if (graph_matches(g, plan, ctx, &frames[0], n, rh, rw)) {
            if (!vd_cuda_check(cudaGraphLaunch(g->exec, st->layers.stream),
                               "replaying the frame graph", error))
                return FALSE;
            st->graph_replayed = TRUE;
            st->graph_replays++;
        }
    }
    *timing = !st->graph_replayed;
    if (!st->graph_replayed) {
        if (!enqueue_frame(st, ctx, plan, frames, n, frame_bytes, rh, rw, *timing, error)) {
            /* leave nothing half done behind */
            vd_cuda_sync_stream(&st->sync_count, st->layers.stream, NULL);
            return FALSE;
        }
    }
    return vd_cuda_check(cudaEventRecord(st->frame_done, st->layers.stream), "frame event",
                         error) &&
           vd_cuda_sync_event(&st->sync_count, st->frame_done, error);
}

static void read_result(vd_context *ctx, const vd_image *image, const vd_kernel_result *r,
                        vd_result *result)
{
    int count = CLAMP(r->count, 0, ctx->params.max_detections);
    result->width = image->width;
    result->height = image->height;
    result->n_detections = count;
    result->n_nonfinite = MAX(r->n_nonfinite, 0);
    result->detections = g_new0(vd_detection, MAX(count, 1));
    for (int i = 0; i < count; i++) {
        const vd_kernel_detection *k = &r->detections[i];
        vd_detection *d = &result->detections[i];
        d->x1 = k->x1;
        d->y1 = k->y1;
        d->x2 = k->x2;
        d->y2 = k->y2;
        d->score = k->score;
        d->label = k->label;
    }
}

static void read_stage_times(cuda_state *st, vd_context *ctx, gboolean timing)
{
    ctx->n_stages = 0;
    if (!timing)
        return;
    int n_stages = N_DEVICE_STAGES + (st->has_masks ? 1 : 0);
    for (int i = 0; i < n_stages && i < VD_MAX_STAGES; i++) {
        float ms = 0.0f;
        /* stage i runs between events i and i + 1 */
        if (cudaEventElapsedTime(&ms, st->stage_events[i], st->stage_events[i + 1]) !=
            cudaSuccess) {
            cudaGetLastError();
            break;
        }
        ctx->stages[ctx->n_stages].name = vd_stage_name((vd_stage)i);
        ctx->stages[ctx->n_stages].ms = ms;
        ctx->stages[ctx->n_stages].gflop = 0.0; /* not counted on this backend */
        ctx->n_stages++;
    }
}

/* paste_masks_in_image (engine/MASKRCNN.md §3) on the host, with the CPU's
 * vd_paste_masks, for the detections of @result from the probabilities read
 * back with them (@r, a host result slot). */
static gboolean read_masks(cuda_state *st, const vd_kernel_result *r, vd_result *result,
                           GError **error)
{
    const float *probs = (const float *)((const char *)r + st->result_probs_offset);
    return vd_paste_masks(probs, 2 * st->model->config.mask_output_size, result, error);
}

/* The host's paste (since @t0, g_get_monotonic_time()) as the last stage. */
static void add_paste_stage(vd_context *ctx, gint64 t0)
{
    if (ctx->n_stages <= 0 || ctx->n_stages >= VD_MAX_STAGES)
        return;
    ctx->stages[ctx->n_stages].name = vd_stage_name(VD_STAGE_PASTE_MASKS);
    ctx->stages[ctx->n_stages].ms = (float)(g_get_monotonic_time() - t0) / 1000.0f;
    ctx->n_stages++;
}

static gboolean detect_one(cuda_state *st, vd_context *ctx, const vd_image *image,
                           vd_result *result, gboolean observe, GError **error)
{
    int rh, rw, ph, pw;
    gboolean timing;

    if (!frame_sizes(st, ctx, image, &rh, &rw, &ph, &pw, error))
        return FALSE;
    if (st->plan == NULL || st->plan->padded_h != ph || st->plan->padded_w != pw) {
        if (!drop_plan(st, &st->plan, &st->graph, 1, error))
            return FALSE;
        st->plan = cuda_plan_new(st, ph, pw, 1, error);
        if (st->plan == NULL)
            return FALSE;
    }
    size_t plane_bytes[3];
    int row_bytes[3], rows[3];
    size_t frame_bytes = frame_layout(image, plane_bytes, row_bytes, rows);
    if (!ensure_frame_buffers(st, frame_bytes, error) ||
        !ensure_result_capacity(st, ctx->params.max_detections, 1, error) ||
        !ensure_box_nms(st, st->plan->proposal_capacity, ctx->params.score_threshold, error) ||
        !ensure_mask(st, error))
        return FALSE;
    cuda_pooler_scales(st, st->plan, rh);

    vd_device_frame frame = stage_frame(st, image, 0);
    if (!run_frames(st, ctx, st->plan, &st->graph, &frame, 1, frame_bytes, rh, rw, &timing, error))
        return FALSE;
    const vd_kernel_result *r = st->result_host;
    read_result(ctx, image, r, result);
    read_stage_times(st, ctx, timing);
    if (observe)
        observe_frame(st, ctx, rh, rw, CLAMP(r->n_proposals, 0, st->plan->proposal_capacity));
    if (st->has_masks) {
        if (observe && result->n_detections > 0) {
            int m = 2 * st->model->config.mask_output_size;
            int64_t shape[3] = {result->n_detections, m, m};
            vd_context_observe(ctx, "mask_probs",
                               (const float *)((const char *)r + st->result_probs_offset), shape,
                               3);
        }
        gint64 t0 = g_get_monotonic_time();
        if (!read_masks(st, r, result, error))
            return FALSE;
        add_paste_stage(ctx, t0);
    }
    return TRUE;
}

/* The images of a batch that can run as one: same size, pixel format, colour
 * matrix and range. */
static gboolean images_alike(const vd_image *images, int n)
{
    for (int i = 1; i < n; i++)
        if (images[i].format != images[0].format || images[i].width != images[0].width ||
            images[i].height != images[0].height || images[i].matrix != images[0].matrix ||
            !images[i].full_range != !images[0].full_range)
            return FALSE;
    return TRUE;
}

/* @n (2 .. VD_MAX_BATCH_SLOTS) alike images as one: one upload, every stage
 * over the batch plan, one readback and one host wait. */
static gboolean detect_batch(cuda_state *st, vd_context *ctx, const vd_image *images, int n,
                             vd_result *results, GError **error)
{
    int rh = 0, rw = 0, ph = 0, pw = 0;
    gboolean timing;

    for (int i = 0; i < n; i++) {
        GError *local = NULL;
        if (!frame_sizes(st, ctx, &images[i], &rh, &rw, &ph, &pw, &local)) {
            g_propagate_prefixed_error(error, local, "image %d of a batch of %d: ", i, n);
            return FALSE;
        }
    }
    cuda_plan *plan = st->batch_plan;
    gboolean same_size = plan != NULL && plan->padded_h == ph && plan->padded_w == pw;
    int slots = same_size
                    ? vd_batch_plan_slots(&st->batch_shrink, plan->n_images, n, VD_MAX_BATCH_SLOTS)
                    : vd_batch_plan_slots(&st->batch_shrink, 0, n, VD_MAX_BATCH_SLOTS);
    if (!same_size || slots != plan->n_images) {
        if (!drop_plan(st, &st->batch_plan, st->batch_graphs, G_N_ELEMENTS(st->batch_graphs),
                       error))
            return FALSE;
        st->batch_plan = cuda_plan_new(st, ph, pw, slots, error);
        if (st->batch_plan == NULL)
            return FALSE;
        plan = st->batch_plan;
    }
    size_t plane_bytes[3];
    int row_bytes[3], rows[3];
    /* alike images: one layout, a multiple of 256 bytes; room for the plan's
     * every slot, so that a short first batch followed by a full one does not
     * grow the buffers (which drops every graph) */
    size_t frame_bytes = frame_layout(&images[0], plane_bytes, row_bytes, rows);
    if (!ensure_frame_buffers(st, (size_t)plan->n_images * frame_bytes, error) ||
        !ensure_result_capacity(st, ctx->params.max_detections, plan->n_images, error) ||
        !ensure_box_nms(st, plan->proposal_capacity, ctx->params.score_threshold, error) ||
        !ensure_mask(st, error))
        return FALSE;
    cuda_pooler_scales(st, plan, rh);

    vd_device_frame frames[VD_MAX_BATCH_SLOTS];
    for (int i = 0; i < n; i++)
        frames[i] = stage_frame(st, &images[i], (size_t)i * frame_bytes);
    if (!run_frames(st, ctx, plan, &st->batch_graphs[n], frames, n, frame_bytes, rh, rw, &timing,
                    error))
        return FALSE;
    for (int i = 0; i < n; i++)
        read_result(ctx, &images[i], result_slot(st, st->result_host, i), &results[i]);
    read_stage_times(st, ctx, timing);
    if (st->has_masks) {
        gint64 t0 = g_get_monotonic_time();
        for (int i = 0; i < n; i++)
            if (!read_masks(st, result_slot(st, st->result_host, i), &results[i], error))
                return FALSE;
        add_paste_stage(ctx, t0);
    }
    return TRUE;
}

gboolean cuda_detect(void *p, vd_context *ctx, const vd_image *images, int n_images,
                     vd_result *results, GError **error)
{
    cuda_state *st = p;
    /* the context may move between threads: the device is per thread */
    if (!vd_cuda_check(cudaSetDevice(st->device), "selecting the device", error))
        return FALSE;
    /* one at a time: a single image, images of different sizes or formats, and
     * the observer (which looks at one image's tensors) */
    if (n_images == 1 || vd_context_observing(ctx) || !images_alike(images, n_images)) {
        for (int i = 0; i < n_images; i++)
            if (!detect_one(st, ctx, &images[i], &results[i], i == 0 && vd_context_observing(ctx),
                            error))
                return FALSE;
        return TRUE;
    }
    for (int first = 0; first < n_images; first += VD_MAX_BATCH_SLOTS) {
        int n = MIN(VD_MAX_BATCH_SLOTS, n_images - first);
        gboolean ok = n == 1 ? detect_one(st, ctx, &images[first], &results[first], FALSE, error)
                             : detect_batch(st, ctx, images + first, n, results + first, error);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}
