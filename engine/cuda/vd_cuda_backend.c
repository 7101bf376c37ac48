/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend: torchvision's Faster R-CNN inference (docs/torchvision-inference.md,
 * "spec" below)
 * with cuDNN convolutions, cuBLASLt linear layers and the kernels of kernels/,
 * in the stage structure of the CPU backend (preprocess, backbone, FPN, RPN,
 * RoIAlign, box head, postprocess) and with its observer tensor names, so that
 * the two can be compared tensor by tensor. Each backbone has its own file
 * (vd_cuda_resnet.c, vd_cuda_mnv3.c: what it supports, its weights, its plan,
 * its enqueueing), registered in cuda_backbones[] by the model's backbone type;
 * this file runs the rest and holds what they share (vd_cuda_backbone.h).
 *
 * One stream per context. Everything that depends on the padded input size
 * (activations, convolution algorithms, anchors, NMS workspaces) lives in a plan
 * built on the first frame of a size. A frame then is: its pixels copied into
 * pinned memory and uploaded once, every stage enqueued with device-side counts
 * between them (proposals kept by NMS, detections), one asynchronous copy of the
 * result (count + detections) into pinned memory, and one event wait: exactly
 * one host synchronisation per frame, through the counted wrapper of
 * vd_cuda_util.c. From the second frame of a size (and set of thresholds) on,
 * the device work of a frame is captured once into a CUDA graph and replayed
 * (VD_CUDA_GRAPHS=0 in the environment keeps every frame eager). A capture or
 * instantiation that fails (a transient out-of-memory, say) is tried again
 * after 1, 2, 4, ... eager frames, at most VD_GRAPH_RETRY_MAX_FRAMES, each
 * graph (single image, each batch size) backing off on its own; the context's
 * run status says so for the graph of the last batch, and why
 * (vd_context_run_status()).
 *
 * Precision: fp16 (default) stores activations and weights in half with fp32
 * accumulation in cuDNN and cuBLASLt, RoIAlign interpolates and accumulates in
 * fp32, and the box head's last layer, softmax, box decoding and NMS are fp32.
 * fp32 mode is fp32 throughout (no TF32), to compare with the CPU backend.
 *
 * Batches: a batch of images of one size and format runs as one unit through
 * a plan of several image slots (every activation and cuDNN descriptor with
 * N > 1, per-image offsets everywhere else), with its own graph, one readback
 * and one host synchronisation per batch; engine/cuda/BATCHING.md. A single
 * image, a batch mixing sizes or formats, and any batch while an observer is
 * attached run image by image through the one-slot plan.
 *
 * Mask R-CNN: the mask branch runs on the device after the postprocess, image
 * by image, over a fixed number of rows (the result capacity), and its 28x28
 * probabilities come back in the same one copy; the host pastes them with the
 * CPU's vd_paste_mask (engine/MASKRCNN.md §4). */
#include "vd_config.h"
#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_debug.h"
#include "cuda/vd_cuda_backbone.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VD_CUDA_LT_WORKSPACE ((size_t)32 << 20)

/* The stages the device runs (vd_stages.h): up to VD_STAGE_POSTPROCESS, and
 * VD_STAGE_MASK_HEAD for models with masks; the host pastes the masks. */
#define N_DEVICE_STAGES (VD_STAGE_POSTPROCESS + 1)

/* ------------------------------------------------------------------------ */
/* Device availability                                                       */

static gboolean device_usable(int device_index, GError **error)
{
    int count = 0, major = 0, minor = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "no usable CUDA device: %s",
                    cudaGetErrorString(status));
        return FALSE;
    }
    if (device_index < 0 || device_index >= count) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE,
                    "CUDA device %d requested but %d device%s found", device_index, count,
                    count == 1 ? " was" : "s were");
        return FALSE;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index) !=
            cudaSuccess) {
        cudaGetLastError();
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "cannot query CUDA device %d", device_index);
        return FALSE;
    }
    if (major * 10 + minor < VD_CUDA_MIN_ARCH) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE,
                    "CUDA device %d has compute capability %d.%d; this build needs %d.%d or "
                    "newer (meson option gpu_arch)",
                    device_index, major, minor, VD_CUDA_MIN_ARCH / 10, VD_CUDA_MIN_ARCH % 10);
        return FALSE;
    }
    return TRUE;
}

gboolean vd_cuda_available(int device_index, GError **error)
{
    return device_usable(device_index, error);
}

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */

vd_cuda_tensor *cuda_plan_tensor(cuda_state *st, cuda_plan *plan, int h, int w, int c, void *data,
                                 GError **error)
{
    vd_cuda_tensor *t = g_new0(vd_cuda_tensor, 1);
    g_ptr_array_add(plan->tensors, t);
    t->h = h;
    t->w = w;
    t->c = c;
    t->n = plan->n_images;
    t->data = data != NULL
                  ? data
                  : vd_cuda_pool_alloc(
                        &plan->pool, (size_t)plan->n_images * h * w * c * vd_dtype_size(st->dtype),
                        st->layers.stream, "an activation", error);
    return t->data != NULL ? t : NULL;
}

static void plan_free(cuda_plan *plan)
{
    if (plan == NULL)
        return;
    vd_cuda_conv_clear(&plan->stem);
    if (plan->backbone != NULL)
        plan->backbone->clear(plan);
    for (int i = 0; i < 4; i++) {
        vd_cuda_conv_clear(&plan->fpn_inner[i]);
        vd_cuda_conv_clear(&plan->fpn_layer[i]);
    }
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        vd_cuda_conv_clear(&plan->rpn_conv[l]);
        vd_cuda_conv_clear(&plan->rpn_head[l]);
        for (int j = 0; j < VD_MAX_RPN_CONVS - 1; j++)
            vd_cuda_conv_clear(&plan->rpn_conv_more[l][j]);
    }
    for (int j = 0; j < VD_MAX_BOX_CONVS; j++)
        vd_cuda_conv_clear(&plan->box_convs[j]);
    vd_cuda_pool_free(&plan->pool);
    if (plan->tensors != NULL)
        g_ptr_array_unref(plan->tensors);
    g_free(plan);
}

static gboolean plan_fpn_rpn(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error)
{
    const vd_model *model = st->model;
    const vd_config *cfg = &model->config;
    vd_cuda_layers *L = &st->layers;
    int n_ret = cfg->n_returned_layers;
    int fc = cfg->fpn_channels;
    int A = cfg->anchors_per_location;

    plan->n_returned = n_ret;
    plan->n_levels = cfg->n_fpn_levels;
    for (int i = 0; i < n_ret; i++) {
        vd_cuda_tensor *c = plan->fpn_in[i];
        plan->fpn_sum[i] = cuda_plan_tensor(st, plan, c->h, c->w, fc, NULL, error);
        plan->fpn_out[i] = cuda_plan_tensor(st, plan, c->h, c->w, fc, NULL, error);
        if (plan->fpn_sum[i] == NULL || plan->fpn_out[i] == NULL ||
            !vd_cuda_conv_init(L, &plan->fpn_inner[i], &st->fpn_inner[i], c, plan->fpn_sum[i], NULL,
                               FALSE, ws, error) ||
            !vd_cuda_conv_init(L, &plan->fpn_layer[i], &st->fpn_layer[i], plan->fpn_sum[i],
                               plan->fpn_out[i], NULL, FALSE, ws, error))
            return FALSE;
    }
    if (cfg->fpn_pool_level) {
        vd_cuda_tensor *top = plan->fpn_out[n_ret - 1];
        plan->fpn_out[n_ret] =
            cuda_plan_tensor(st, plan, (top->h + 1) / 2, (top->w + 1) / 2, fc, NULL, error);
        if (plan->fpn_out[n_ret] == NULL)
            return FALSE;
    }

    /* the RPN head's hidden activation is consumed level by level: one buffer */
    void *hidden = vd_cuda_pool_alloc(&plan->pool,
                                      (size_t)plan->n_images * plan->fpn_out[0]->h *
                                          plan->fpn_out[0]->w * fc * vd_dtype_size(st->dtype),
                                      L->stream, "RPN head", error);
    if (hidden == NULL)
        return FALSE;
    /* conv_depth > 1 (v2): a second one, the further convolutions alternate */
    void *hidden2 = NULL;
    if (cfg->rpn_conv_depth > 1) {
        hidden2 = vd_cuda_pool_alloc(&plan->pool,
                                     (size_t)plan->n_images * plan->fpn_out[0]->h *
                                         plan->fpn_out[0]->w * fc * vd_dtype_size(st->dtype),
                                     L->stream, "RPN head", error);
        if (hidden2 == NULL)
            return FALSE;
    }
    for (int l = 0; l < plan->n_levels; l++) {
        vd_cuda_tensor *p = plan->fpn_out[l];
        plan->rpn_hidden[l] = cuda_plan_tensor(st, plan, p->h, p->w, fc, hidden, error);
        plan->rpn_out[l] = cuda_plan_tensor(st, plan, p->h, p->w, st->head_stride, NULL, error);
        if (plan->rpn_hidden[l] == NULL || plan->rpn_out[l] == NULL ||
            !vd_cuda_conv_init(L, &plan->rpn_conv[l], &st->rpn_conv, p, plan->rpn_hidden[l], NULL,
                               TRUE, ws, error))
            return FALSE;
        vd_cuda_tensor *last = plan->rpn_hidden[l];
        if (cfg->rpn_conv_depth > 1) {
            plan->rpn_hidden2[l] = cuda_plan_tensor(st, plan, p->h, p->w, fc, hidden2, error);
            if (plan->rpn_hidden2[l] == NULL)
                return FALSE;
        }
        for (int j = 1; j < cfg->rpn_conv_depth; j++) {
            vd_cuda_tensor *next = j % 2 ? plan->rpn_hidden2[l] : plan->rpn_hidden[l];
            if (!vd_cuda_conv_init(L, &plan->rpn_conv_more[l][j - 1], &st->rpn_conv_more[j - 1],
                                   last, next, NULL, TRUE, ws, error))
                return FALSE;
            last = next;
        }
        if (!vd_cuda_conv_init(L, &plan->rpn_head[l], &st->rpn_head, last, plan->rpn_out[l], NULL,
                               FALSE, ws, error))
            return FALSE;
    }

    /* anchors, once per size, on the device (spec §3) */
    vd_rpn_levels *rpn = &plan->rpn;
    memset(rpn, 0, sizeof(*rpn));
    rpn->n_levels = plan->n_levels;
    rpn->anchors_per_location = A;
    rpn->head_stride = st->head_stride;
    int total = 0, candidates = 0, max_level = 0;
    for (int l = 0; l < plan->n_levels; l++) {
        int n_l = plan->fpn_out[l]->h * plan->fpn_out[l]->w * A;
        rpn->head[l] = plan->rpn_out[l]->data;
        rpn->n_anchors[l] = n_l;
        rpn->anchor_offset[l] = total;
        rpn->top_n[l] = MIN(cfg->rpn_pre_nms_top_n, n_l);
        rpn->candidate_offset[l] = candidates;
        total += n_l;
        candidates += rpn->top_n[l];
        max_level = MAX(max_level, n_l);
    }
    rpn->anchor_offset[plan->n_levels] = total;
    rpn->candidate_offset[plan->n_levels] = candidates;
    plan->n_anchors = total;
    plan->anchors = vd_cuda_pool_alloc(&plan->pool, (size_t)total * 4 * sizeof(float), L->stream,
                                       "anchors", error);
    if (plan->anchors == NULL)
        return FALSE;
    for (int l = 0; l < plan->n_levels; l++) {
        float cell[VD_MAX_ANCHORS_PER_LEVEL * VD_MAX_ANCHORS_PER_LEVEL * 4];
        if (A > VD_KERNEL_MAX_CELL_ANCHORS) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "%d anchors per location; the CUDA backend takes at most %d", A,
                        VD_KERNEL_MAX_CELL_ANCHORS);
            return FALSE;
        }
        vd_cell_anchors(cfg->anchor_sizes[l], cfg->n_anchor_sizes[l], cfg->aspect_ratios[l],
                        cfg->n_aspect_ratios[l], cell);
        if (!vd_cuda_check(vd_grid_anchors_device(cell, A, plan->padded_h, plan->padded_w,
                                                  plan->fpn_out[l]->h, plan->fpn_out[l]->w,
                                                  plan->anchors + (size_t)rpn->anchor_offset[l] * 4,
                                                  L->stream),
                           "anchors", error))
            return FALSE;
    }

    /* RPN top-k, candidates, NMS and proposals: [n_images][...] */
    size_t n_img = (size_t)plan->n_images;
    plan->logit_keys = vd_cuda_pool_alloc(&plan->pool, n_img * total * sizeof(unsigned int),
                                          L->stream, "RPN logits", error);
    plan->logit_keys_sorted = vd_cuda_pool_alloc(&plan->pool, n_img * total * sizeof(unsigned int),
                                                 L->stream, "RPN logits", error);
    plan->logit_index = vd_cuda_pool_alloc(&plan->pool, n_img * total * sizeof(int), L->stream,
                                           "RPN logits", error);
    plan->logit_index_sorted = vd_cuda_pool_alloc(&plan->pool, n_img * total * sizeof(int),
                                                  L->stream, "RPN logits", error);
    plan->sort_workspace_bytes = plan->n_images == 1
                                     ? vd_rpn_topk_workspace_size(max_level)
                                     : vd_rpn_topk_batched_workspace_size(rpn, plan->n_images);
    plan->sort_workspace =
        vd_cuda_pool_alloc(&plan->pool, plan->sort_workspace_bytes, L->stream, "RPN top-k", error);
    if (plan->logit_keys == NULL || plan->logit_keys_sorted == NULL || plan->logit_index == NULL ||
        plan->logit_index_sorted == NULL || plan->sort_workspace == NULL)
        return FALSE;
    if (plan->sort_workspace_bytes == 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "CUB could not size the RPN top-k");
        return FALSE;
    }

    plan->candidate_boxes = vd_cuda_pool_alloc(&plan->pool, n_img * candidates * 4 * sizeof(float),
                                               L->stream, "RPN candidates", error);
    plan->candidate_scores = vd_cuda_pool_alloc(&plan->pool, n_img * candidates * sizeof(float),
                                                L->stream, "RPN candidates", error);
    plan->candidate_levels = vd_cuda_pool_alloc(&plan->pool, n_img * candidates * sizeof(int),
                                                L->stream, "RPN candidates", error);
    plan->rpn_nms.capacity = candidates;
    plan->rpn_nms.max_candidates = candidates;
    plan->rpn_nms.max_keep = MIN(cfg->rpn_post_nms_top_n, candidates);
    plan->rpn_nms_workspace_bytes = vd_nms_workspace_size(&plan->rpn_nms);
    plan->rpn_nms_workspace =
        vd_cuda_pool_alloc(&plan->pool, plan->rpn_nms_workspace_bytes, L->stream, "RPN NMS", error);
    plan->proposal_capacity = MAX(cfg->rpn_post_nms_top_n, 1);
    plan->rpn_keep = vd_cuda_pool_alloc(&plan->pool, n_img * plan->proposal_capacity * sizeof(int),
                                        L->stream, "RPN NMS", error);
    plan->n_proposals =
        vd_cuda_pool_alloc(&plan->pool, n_img * sizeof(int), L->stream, "RPN NMS", error);
    plan->proposals =
        vd_cuda_pool_alloc(&plan->pool, n_img * plan->proposal_capacity * 4 * sizeof(float),
                           L->stream, "proposals", error);
    plan->proposal_scores =
        vd_cuda_pool_alloc(&plan->pool, n_img * plan->proposal_capacity * sizeof(float), L->stream,
                           "proposals", error);
    return plan->candidate_boxes != NULL && plan->candidate_scores != NULL &&
           plan->candidate_levels != NULL && plan->rpn_nms_workspace != NULL &&
           plan->rpn_keep != NULL && plan->n_proposals != NULL && plan->proposals != NULL &&
           plan->proposal_scores != NULL;
}

/* The conv box head (v2) of @plan: N = R rows of one image (the images of a
 * batch run one after another on the one stream, as fc6 does), the first
 * convolution reading box_in, a view of the image's pooled rows. */
static gboolean plan_box_convs(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error)
{
    const vd_config *cfg = &st->model->config;
    vd_cuda_layers *L = &st->layers;
    int R = plan->proposal_capacity;
    int P = cfg->roi_output_size;
    size_t esize = vd_dtype_size(st->dtype);

    plan->n_box_convs = st->n_box_convs;
    plan->box_in.h = P;
    plan->box_in.w = P;
    plan->box_in.c = cfg->fpn_channels;
    plan->box_in.n = R;
    plan->box_in.data = plan->pooled;
    int widest = 0;
    for (int j = 0; j < st->n_box_convs; j++)
        widest = MAX(widest, st->box_convs[j].out_c);
    size_t bytes = (size_t)R * P * P * widest * esize;
    void *ping = vd_cuda_pool_alloc(&plan->pool, bytes, L->stream, "box head convolutions", error);
    void *pong = ping == NULL ? NULL
                              : vd_cuda_pool_alloc(&plan->pool, bytes, L->stream,
                                                   "box head convolutions", error);
    if (pong == NULL)
        return FALSE;
    vd_cuda_tensor *x = &plan->box_in;
    for (int j = 0; j < st->n_box_convs; j++) {
        vd_cuda_tensor *y = &plan->box_out[j];
        y->h = P;
        y->w = P;
        y->c = st->box_convs[j].out_c;
        y->n = R;
        y->data = j % 2 == 0 ? ping : pong;
        if (!vd_cuda_conv_init(L, &plan->box_convs[j], &st->box_convs[j], x, y, NULL, TRUE, ws,
                               error))
            return FALSE;
        x = y;
    }
    return TRUE;
}

static gboolean linear_planned(vd_cuda_layers *L, vd_cuda_linear *lin, int rows, GError **error)
{
    return (lin->has_algo && lin->rows == rows) || vd_cuda_linear_plan(L, lin, rows, error);
}

static gboolean plan_box_head(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error)
{
    const vd_config *cfg = &st->model->config;
    vd_cuda_layers *L = &st->layers;
    int R = plan->proposal_capacity;
    int P = cfg->roi_output_size;
    int K = cfg->num_classes;
    int rep = cfg->representation_size;
    size_t esize = vd_dtype_size(st->dtype);
    size_t n_flat = (size_t)R * (K - 1);
    size_t n_img = (size_t)plan->n_images;

    /* [n_images][R] rows: image i's RoIs are rows i * R .. i * R + R - 1 */
    plan->pooled = vd_cuda_pool_alloc(&plan->pool, n_img * R * P * P * cfg->fpn_channels * esize,
                                      L->stream, "RoI features", error);
    plan->fc6_out = vd_cuda_pool_alloc(&plan->pool, n_img * R * st->fc6.out_stride * esize,
                                       L->stream, "box head", error);
    /* TwoMLPHead only: the conv head's fc6 feeds the predictor */
    plan->fc7_out = st->has_fc7
                        ? vd_cuda_pool_alloc(&plan->pool, n_img * R * st->fc7.out_stride * esize,
                                             L->stream, "box head", error)
                        : plan->fc6_out;
    plan->head = vd_cuda_pool_alloc(&plan->pool, n_img * R * st->predictor_stride * sizeof(float),
                                    L->stream, "box head", error);
    plan->box_boxes = vd_cuda_pool_alloc(&plan->pool, n_img * n_flat * 4 * sizeof(float), L->stream,
                                         "detection candidates", error);
    plan->box_scores = vd_cuda_pool_alloc(&plan->pool, n_img * n_flat * sizeof(float), L->stream,
                                          "detection candidates", error);
    plan->box_labels = vd_cuda_pool_alloc(&plan->pool, n_img * n_flat * sizeof(int), L->stream,
                                          "detection candidates", error);
    if (plan->pooled == NULL || plan->fc6_out == NULL || plan->fc7_out == NULL ||
        plan->head == NULL || plan->box_boxes == NULL || plan->box_scores == NULL ||
        plan->box_labels == NULL)
        return FALSE;
    (void)rep;
    plan->n_box_keep =
        vd_cuda_pool_alloc(&plan->pool, n_img * sizeof(int), L->stream, "detection NMS", error);
    plan->n_nonfinite = vd_cuda_pool_alloc(&plan->pool, n_img * sizeof(int), L->stream,
                                           "the non-finite count", error);
    if (plan->n_box_keep == NULL || plan->n_nonfinite == NULL)
        return FALSE;
    if (st->n_box_convs > 0 && !plan_box_convs(st, plan, ws, error))
        return FALSE;
    /* the linear layers' algorithms for R rows: the context's, shared by its
     * plans (R is the same for all), so planned once; re-planning them for a
     * new plan would leave the others without them if it failed */
    return linear_planned(L, &st->fc6, R, error) &&
           (!st->has_fc7 || linear_planned(L, &st->fc7, R, error)) &&
           linear_planned(L, &st->predictor, R, error);
}

/* Drops a captured graph (its buffers or plan are about to change). */
static void forget_graph_slot(cuda_graph *g)
{
    graph_backoff backoff = g->backoff;
    if (g->exec != NULL)
        cudaGraphExecDestroy(g->exec);
    memset(g, 0, sizeof(*g));
    g->backoff = backoff;
}

/* Drops every graph (the frame buffers they read or write are about to change). */
static void forget_graph(cuda_state *st)
{
    forget_graph_slot(&st->graph);
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++)
        forget_graph_slot(&st->batch_graphs[i]);
}

/* Frees the plan of @slot and its @n_graphs graphs @graphs after the device is
 * done with it (a size change). */
static gboolean drop_plan(cuda_state *st, cuda_plan **slot, cuda_graph *graphs, int n_graphs,
                          GError **error)
{
    if (*slot == NULL)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    /* a new plan starts without the old one's back-off */
    for (int i = 0; i < n_graphs; i++) {
        forget_graph_slot(&graphs[i]);
        memset(&graphs[i].backoff, 0, sizeof(graphs[i].backoff));
    }
    plan_free(*slot);
    *slot = NULL;
    return TRUE;
}

/* The convolutions' shared workspace grows to the largest need (@ws bytes);
 * the graphs captured the old one. */
static gboolean ensure_workspace(cuda_state *st, size_t ws, GError **error)
{
    vd_cuda_layers *L = &st->layers;
    size_t old_bytes = L->workspace_bytes;
    if (ws <= L->workspace_bytes)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, L->stream, error))
        return FALSE;
    forget_graph(st);
    cudaFree(L->workspace);
    L->workspace = NULL;
    L->workspace_bytes = 0;
    if (!vd_cuda_check(cudaMalloc(&L->workspace, ws), "the convolution workspace", error)) {
        cudaGetLastError();
        /* the plans made for the old size keep it: without a workspace,
         * vd_cuda_conv_run would move their convolutions to other algorithms
         * for good */
        if (old_bytes > 0 && cudaMalloc(&L->workspace, old_bytes) == cudaSuccess)
            L->workspace_bytes = old_bytes;
        else
            L->workspace = NULL;
        cudaGetLastError();
        return FALSE;
    }
    L->workspace_bytes = ws;
    return TRUE;
}

static cuda_plan *plan_new(cuda_state *st, int padded_h, int padded_w, int n_images, GError **error)
{
    vd_cuda_layers *L = &st->layers;
    cuda_plan *plan = g_new0(cuda_plan, 1);
    size_t ws = 0;
    plan->padded_h = padded_h;
    plan->padded_w = padded_w;
    plan->n_images = n_images;
    plan->backbone = st->backbone;
    plan->pooler.resized_h = -1;
    plan->mask_pooler.resized_h = -1;
    /* a size change frees one plan and allocates the next without making every
     * context of the device wait (cudaFree would) */
    vd_cuda_pool_init_stream_ordered(&plan->pool, L->stream, st->device);
    plan->tensors = g_ptr_array_new_with_free_func(g_free);

    plan->input = cuda_plan_tensor(st, plan, padded_h, padded_w, st->input_channels, NULL, error);
    if (plan->input == NULL || !st->backbone->plan(st, plan, &ws, error) ||
        !plan_fpn_rpn(st, plan, &ws, error) || !plan_box_head(st, plan, &ws, error))
        goto out_fail;

    if (!ensure_workspace(st, ws, error))
        goto out_fail;
    return plan;

out_fail:
    /* nothing of the failed plan may be in use: wait before freeing */
    vd_cuda_sync_stream(&st->sync_count, L->stream, NULL);
    plan_free(plan);
    return NULL;
}

/* spec §5.2, as the CPU backend computes it */
static void pooler_scales(cuda_state *st, cuda_plan *plan, int resized_h)
{
    const vd_config *cfg = &st->model->config;
    int heights[VD_MAX_FPN_LEVELS];
    for (int l = 0; l < cfg->n_roi_levels; l++)
        heights[l] = plan->fpn_out[l]->h;
    vd_pooler_levels_update(&plan->pooler, heights, cfg->n_roi_levels, resized_h);
    if (st->has_masks) {
        for (int l = 0; l < cfg->n_mask_roi_levels; l++)
            heights[l] = plan->fpn_out[l]->h;
        vd_pooler_levels_update(&plan->mask_pooler, heights, cfg->n_mask_roi_levels, resized_h);
    }
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                    */

/* Bytes of each plane of @image once rows are packed, and their total with
 * each plane starting at a multiple of 256 bytes. */
static size_t frame_layout(const vd_image *image, size_t plane_bytes[3], int row_bytes[3],
                           int plane_rows[3])
{
    vd_image_plane_layout(image, row_bytes, plane_rows);
    size_t total = 0;
    for (int p = 0; p < 3; p++) {
        plane_bytes[p] = (size_t)row_bytes[p] * plane_rows[p];
        total += (plane_bytes[p] + 255) / 256 * 256;
    }
    return total;
}

/* Makes room for a frame of @bytes in the pinned staging buffer and its device
 * copy; growing them waits for the device (a new, larger frame size only). */
static gboolean ensure_frame_buffers(cuda_state *st, size_t bytes, GError **error)
{
    if (bytes <= st->raw_bytes)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    forget_graph(st);
    cudaFreeHost(st->staging);
    cudaFree(st->raw);
    st->staging = NULL;
    st->raw = NULL;
    st->raw_bytes = 0;
    if (!vd_cuda_check(cudaMallocHost((void **)&st->staging, bytes), "pinned frame staging",
                       error) ||
        !vd_cuda_check(cudaMalloc((void **)&st->raw, bytes), "the device frame buffer", error)) {
        cudaGetLastError();
        cudaFreeHost(st->staging);
        st->staging = NULL;
        return FALSE;
    }
    st->raw_bytes = bytes;
    return TRUE;
}

/* Room for @slots results of @capacity detections each (and the detection
 * NMS's keep lists); growing waits for the device. */
/* The detection candidates that can pass @score_threshold out of @rows
 * proposals of @num_classes classes (background included): every foreground
 * class of every proposal when t <= 0 (or NaN), else at most floor(1/t) per
 * proposal, since a proposal's softmax probabilities sum to 1 and a candidate
 * needs p > t (one more for the rounding of the sum). The NMS runs over all of
 * them, as the CPU's does: no candidate is dropped for room. */
static size_t box_nms_candidates(int rows, int num_classes, float score_threshold)
{
    size_t per_row = (size_t)MAX(num_classes - 1, 1);
    if (score_threshold > 0.0f) {
        double bound = floor((1.0 + 1e-3) / (double)score_threshold) + 1.0;
        if (bound < (double)per_row)
            per_row = (size_t)bound;
    }
    return (size_t)MAX(rows, 1) * per_row;
}

/* Sizes the shared detection NMS for @rows proposals at @score_threshold:
 * capacity every candidate slot (rows x foreground classes), max_candidates
 * box_nms_candidates(). Grows only (a higher threshold keeps the larger
 * workspace), waiting for the device and dropping the graphs when it does: a
 * frame at a lower score threshold than before, not a steady stream. The
 * suppression bitmask is max_candidates^2 / 8 bytes: 1000 proposals x 90
 * classes at threshold 0 (or 0.001, as mAP evaluation runs) is 90000
 * candidates, about 1 GB; the default 0.05 bounds them to 21000, 55 MB. */
static gboolean ensure_box_nms(cuda_state *st, int rows, float score_threshold, GError **error)
{
    const vd_config *cfg = &st->model->config;
    size_t capacity = (size_t)MAX(rows, 1) * MAX(cfg->num_classes - 1, 1);
    size_t needed = MIN(box_nms_candidates(rows, cfg->num_classes, score_threshold), capacity);
    if (capacity > (size_t)G_MAXINT) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%d proposals x %d classes is too many detection candidates", rows,
                    cfg->num_classes - 1);
        return FALSE;
    }
    if (st->box_nms_workspace != NULL && (size_t)st->box_nms.capacity == capacity &&
        (size_t)st->box_nms.max_candidates >= needed)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    forget_graph(st);
    cudaFree(st->box_nms_workspace);
    st->box_nms_workspace = NULL;
    st->box_nms_workspace_bytes = 0;
    memset(&st->box_nms, 0, sizeof(st->box_nms));
    vd_nms_shape shape = {(int)capacity, (int)needed, 1};
    size_t bytes = vd_nms_workspace_size(&shape);
    if (bytes == 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "CUB could not size the detection NMS");
        return FALSE;
    }
    cudaError_t status = cudaMalloc(&st->box_nms_workspace, bytes);
    if (status != cudaSuccess) {
        cudaGetLastError();
        st->box_nms_workspace = NULL;
        g_set_error(error, VD_ERROR,
                    status == cudaErrorMemoryAllocation ? VD_ERROR_OUT_OF_MEMORY : VD_ERROR_DEVICE,
                    "the detection NMS over %zu candidates (score threshold %g) needs %.1f MiB of "
                    "device memory: %s",
                    needed, (double)score_threshold, bytes / 1048576.0, cudaGetErrorString(status));
        return FALSE;
    }
    shape.max_keep = 0; /* per frame: the context's max_detections */
    st->box_nms = shape;
    st->box_nms_workspace_bytes = bytes;
    return TRUE;
}

static gboolean ensure_result_capacity(cuda_state *st, int capacity, int slots, GError **error)
{
    if (capacity <= st->result_capacity && slots <= st->result_slots)
        return TRUE;
    capacity = MAX(capacity, st->result_capacity);
    slots = MAX(slots, MAX(st->result_slots, 1));
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    forget_graph(st);
    cudaFree(st->result_device);
    cudaFreeHost(st->result_host);
    cudaFree(st->box_keep);
    cudaFree(st->box_nms_workspace);
    st->result_device = NULL;
    st->result_host = NULL;
    st->box_keep = NULL;
    st->result_capacity = 0;
    st->result_slots = 0;
    size_t stride = sizeof(vd_kernel_result) + (size_t)capacity * sizeof(vd_kernel_detection);
    size_t probs_offset = 0;
    if (st->has_masks) {
        size_t m = 2 * (size_t)st->model->config.mask_output_size;
        probs_offset = (stride + 255) / 256 * 256;
        stride = (probs_offset + (size_t)capacity * m * m * sizeof(float) + 255) / 256 * 256;
    }
    size_t bytes = stride * slots;
    if (!vd_cuda_check(cudaMalloc((void **)&st->result_device, bytes), "the result buffer",
                       error) ||
        !vd_cuda_check(cudaMalloc((void **)&st->box_keep, (size_t)slots * capacity * sizeof(int)),
                       "the detection NMS", error) ||
        !vd_cuda_check(cudaMallocHost((void **)&st->result_host, bytes), "the pinned result",
                       error)) {
        cudaGetLastError();
        return FALSE;
    }
    st->result_capacity = capacity;
    st->result_slots = slots;
    st->result_stride = stride;
    st->result_probs_offset = probs_offset;
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* The mask branch's plan                                                    */

static void mask_free(cuda_mask *mk)
{
    for (int j = 0; j < VD_MAX_MASK_CONVS; j++)
        vd_cuda_conv_clear(&mk->convs[j]);
    vd_cuda_conv_clear(&mk->deconv);
    vd_cuda_conv_clear(&mk->logits_conv);
    vd_cuda_pool_free(&mk->pool);
    memset(mk, 0, sizeof(*mk));
}

static gboolean mask_tensor(cuda_state *st, cuda_mask *mk, vd_cuda_tensor *t, int h, int w, int c,
                            void *data, GError **error)
{
    t->h = h;
    t->w = w;
    t->c = c;
    t->n = mk->rows;
    t->data =
        data != NULL
            ? data
            : vd_cuda_pool_alloc(&mk->pool, (size_t)mk->rows * h * w * c * vd_dtype_size(st->dtype),
                                 st->layers.stream, "the mask head", error);
    return t->data != NULL;
}

/* Plans the mask branch for @rows RoIs: its buffers and every convolution's
 * cuDNN descriptors and algorithms (N = @rows). The device must be idle. */
static gboolean mask_init(cuda_state *st, int rows, GError **error)
{
    const vd_config *cfg = &st->model->config;
    cuda_mask *mk = &st->mask;
    vd_cuda_layers *L = &st->layers;
    int P = cfg->mask_output_size, C = cfg->fpn_channels;
    size_t ws = 0;

    mask_free(mk);
    mk->rows = rows;
    vd_cuda_pool_init_stream_ordered(&mk->pool, L->stream, st->device);
    mk->rois = vd_cuda_pool_alloc(&mk->pool, (size_t)rows * 4 * sizeof(float), L->stream,
                                  "the mask RoIs", error);
    mk->roi_scores = mk->rois == NULL ? NULL
                                      : vd_cuda_pool_alloc(&mk->pool, (size_t)rows * sizeof(float),
                                                           L->stream, "the mask RoIs", error);
    if (mk->roi_scores == NULL || !mask_tensor(st, mk, &mk->pooled, P, P, C, NULL, error))
        goto out_fail;
    /* the 3x3 convolutions alternate between two buffers of the widest */
    int widest = 0;
    for (int j = 0; j < st->n_mask_convs; j++)
        widest = MAX(widest, st->mask_convs[j].out_c);
    void *ping = NULL, *pong = NULL;
    if (widest > 0) {
        size_t bytes = (size_t)rows * P * P * widest * vd_dtype_size(st->dtype);
        ping = vd_cuda_pool_alloc(&mk->pool, bytes, L->stream, "the mask head", error);
        pong = ping == NULL
                   ? NULL
                   : vd_cuda_pool_alloc(&mk->pool, bytes, L->stream, "the mask head", error);
        if (pong == NULL)
            goto out_fail;
    }
    vd_cuda_tensor *x = &mk->pooled;
    for (int j = 0; j < st->n_mask_convs; j++) {
        vd_cuda_tensor *y = &mk->conv_out[j];
        if (!mask_tensor(st, mk, y, P, P, st->mask_convs[j].out_c, j % 2 == 0 ? ping : pong,
                         error) ||
            !vd_cuda_conv_init(L, &mk->convs[j], &st->mask_convs[j], x, y, NULL, TRUE, &ws, error))
            goto out_fail;
        x = y;
    }
    /* ConvTranspose2d + ReLU as a 1x1 convolution to the four taps' channels;
     * the logits convolution reads its output as 4P columns of one tap each */
    if (!mask_tensor(st, mk, &mk->up, P, P, st->mask_deconv.out_c, NULL, error) ||
        !vd_cuda_conv_init(L, &mk->deconv, &st->mask_deconv, x, &mk->up, NULL, TRUE, &ws, error) ||
        !mask_tensor(st, mk, &mk->up_taps, P, 4 * P, st->deconv_channels, mk->up.data, error) ||
        !mask_tensor(st, mk, &mk->logits, P, 4 * P, st->mask_logits.out_c, NULL, error) ||
        !vd_cuda_conv_init(L, &mk->logits_conv, &st->mask_logits, &mk->up_taps, &mk->logits, NULL,
                           FALSE, &ws, error) ||
        !ensure_workspace(st, ws, error))
        goto out_fail;
    return TRUE;

out_fail:
    /* nothing of it may be in use: wait before freeing */
    vd_cuda_sync_stream(&st->sync_count, L->stream, NULL);
    mask_free(mk);
    return FALSE;
}

/* The mask branch planned for the result capacity (models with masks);
 * growing waits for the device. */
static gboolean ensure_mask(cuda_state *st, GError **error)
{
    if (!st->has_masks || st->mask.rows >= st->result_capacity)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    forget_graph(st);
    return mask_init(st, st->result_capacity, error);
}

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
static void graph_backoff_reset(cuda_state *st)
{
    graph_capture_succeeded(&st->graph);
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++)
        graph_capture_succeeded(&st->batch_graphs[i]);
}

/* The graph of the last batch run, when it is backing off; else NULL. */
static const cuda_graph *graph_retrying(const cuda_state *st)
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
        st->plan = plan_new(st, ph, pw, 1, error);
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
    pooler_scales(st, st->plan, rh);

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
        st->batch_plan = plan_new(st, ph, pw, slots, error);
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
    pooler_scales(st, plan, rh);

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

static gboolean cuda_detect(void *p, vd_context *ctx, const vd_image *images, int n_images,
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

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void cuda_destroy(void *p)
{
    cuda_state *st = p;
    if (st == NULL)
        return;
    cudaSetDevice(st->device);
    if (st->layers.stream != NULL)
        cudaStreamSynchronize(st->layers.stream);
    forget_graph(st);
    plan_free(st->plan);
    plan_free(st->batch_plan);
    mask_free(&st->mask);
    vd_cuda_linear_clear(&st->fc6);
    vd_cuda_linear_clear(&st->fc7);
    vd_cuda_linear_clear(&st->predictor);
    vd_cuda_pool_free(&st->weights_pool);
    vd_cuda_upload_done(&st->layers);
    cudaFree(st->observe_scratch);
    cudaFree(st->layers.workspace);
    cudaFree(st->layers.lt_workspace);
    cudaFree(st->raw);
    cudaFreeHost(st->staging);
    cudaFree(st->result_device);
    cudaFreeHost(st->result_host);
    cudaFree(st->box_keep);
    if (st->frame_done != NULL)
        cudaEventDestroy(st->frame_done);
    for (int i = 0; i <= VD_MAX_STAGES; i++)
        if (st->stage_events[i] != NULL)
            cudaEventDestroy(st->stage_events[i]);
    if (st->layers.relu != NULL)
        cudnnDestroyActivationDescriptor(st->layers.relu);
    if (st->layers.identity != NULL)
        cudnnDestroyActivationDescriptor(st->layers.identity);
    if (st->layers.cudnn != NULL)
        cudnnDestroy(st->layers.cudnn);
    if (st->layers.cublaslt != NULL)
        cublasLtDestroy(st->layers.cublaslt);
    if (st->layers.stream != NULL)
        cudaStreamDestroy(st->layers.stream);
    cudaGetLastError();
    g_free(st);
}

gboolean cuda_upload_conv(cuda_state *st, vd_cuda_conv_weights *dst, const vd_conv *c,
                          int padded_in, int padded_out, GError **error)
{
    return vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, dst, c->weight, c->bias,
                                       c->out_channels, c->in_channels, c->kernel, c->stride,
                                       c->padding, padded_out, padded_in, error);
}

/* The mask head's weights (engine/MASKRCNN.md §2): the 3x3 convolutions (v2's
 * batch-norm folded at load), the ConvTranspose2d (torch's [in][out][2][2],
 * no kernel flip) as a 1x1 convolution whose output channel
 * (2 ky + kx) * deconv_channels + o is tap (ky, kx) of output channel o, with
 * o's bias, and the 1x1 logits convolution. Output channels padded to
 * multiples of 8 with zeros (fp16 tensor cores; the padding stays zero
 * through the ReLUs and meets zero weights). */
static gboolean upload_mask_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int in_p = cfg->fpn_channels;
    st->n_mask_convs = cfg->n_mask_convs;
    for (int j = 0; j < cfg->n_mask_convs; j++) {
        int out_p = round_up(m->mask_convs[j].out_channels, 8);
        if (!cuda_upload_conv(st, &st->mask_convs[j], &m->mask_convs[j], in_p, out_p, error))
            return FALSE;
        in_p = out_p;
    }
    const vd_conv *d = &m->mask_deconv;
    int R = d->out_channels, Rp = round_up(R, 8), in = d->in_channels;
    st->deconv_channels = Rp;
    float *w = g_try_malloc((size_t)4 * Rp * in * sizeof(float));
    float *b = g_try_malloc((size_t)4 * Rp * sizeof(float));
    gboolean ok = FALSE;
    if (w == NULL || b == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory preparing weights");
        goto out_free;
    }
    vd_deconv2x2_as_conv1x1(d->weight, d->bias, in, R, Rp, w, b);
    ok = vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, &st->mask_deconv, w, b, 4 * Rp,
                                     in, 1, 1, 0, 4 * Rp, in_p, error) &&
         cuda_upload_conv(st, &st->mask_logits, &m->mask_logits, Rp,
                          round_up(m->mask_logits.out_channels, 8), error);
out_free:
    g_free(w);
    g_free(b);
    return ok;
}

/* Names every convolution's weights after torchvision's module, for errors and
 * vd_context_kernels(). */
static void name_conv_weights(cuda_state *st)
{
    st->backbone->name(st);
#define NAME(w, ...) g_snprintf((w).name, sizeof((w).name), __VA_ARGS__)
    for (int i = 0; i < 4; i++) {
        NAME(st->fpn_inner[i], "backbone.fpn.inner_blocks.%d", i);
        NAME(st->fpn_layer[i], "backbone.fpn.layer_blocks.%d", i);
    }
    NAME(st->rpn_conv, "rpn.head.conv.0");
    for (int j = 1; j < VD_MAX_RPN_CONVS; j++)
        NAME(st->rpn_conv_more[j - 1], "rpn.head.conv.%d", j);
    NAME(st->rpn_head, "rpn.head.cls_logits+bbox_pred");
    for (int j = 0; j < VD_MAX_BOX_CONVS; j++)
        NAME(st->box_convs[j], "roi_heads.box_head.%d", j);
    for (int j = 0; j < VD_MAX_MASK_CONVS; j++)
        NAME(st->mask_convs[j], "roi_heads.mask_head.%d", j);
    NAME(st->mask_deconv, "roi_heads.mask_predictor.conv5_mask");
    NAME(st->mask_logits, "roi_heads.mask_predictor.mask_fcn_logits");
#undef NAME
}

/* Size-independent weights: every convolution as NHWC filters in the context's
 * dtype, the RPN head's two 1x1 convolutions merged (as the CPU does), fc6
 * permuted to the NHWC flatten order of our RoIAlign output, the box predictor
 * merged into one product with fp32 output. */
static gboolean upload_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int A = cfg->anchors_per_location, C = cfg->fpn_channels;
    int P = cfg->roi_output_size, K = cfg->num_classes, rep = cfg->representation_size;
    gboolean ok = FALSE;
    float *rpn_w = NULL, *rpn_b = NULL, *fc6_w = NULL, *pred_w = NULL, *pred_b = NULL;

    if (!cuda_upload_conv(st, &st->stem, &m->stem, st->input_channels, m->stem.out_channels, error))
        return FALSE;
    if (!st->backbone->upload(st, error))
        return FALSE;
    for (int i = 0; i < cfg->n_returned_layers; i++)
        if (!cuda_upload_conv(st, &st->fpn_inner[i], &m->fpn_inner[i], m->fpn_inner[i].in_channels,
                              m->fpn_inner[i].out_channels, error) ||
            !cuda_upload_conv(st, &st->fpn_layer[i], &m->fpn_layer[i], m->fpn_layer[i].in_channels,
                              m->fpn_layer[i].out_channels, error))
            return FALSE;
    if (!cuda_upload_conv(st, &st->rpn_conv, &m->rpn_conv, C, C, error))
        return FALSE;
    /* v2: the RPN head's further 3x3 convolutions (C -> C, with their biases) */
    for (int j = 1; j < cfg->rpn_conv_depth; j++)
        if (!cuda_upload_conv(st, &st->rpn_conv_more[j - 1], &m->rpn_conv_more[j - 1], C, C, error))
            return FALSE;
    /* v2's conv box head: batch-norm folded at load (weight and bias), output
     * channels padded to multiples of 8 with zeros as the mask head's are */
    int head_c = C, head_cp = C; /* fc6's input channels, and as laid out */
    st->n_box_convs = cfg->n_box_convs;
    st->has_fc7 = cfg->n_box_convs == 0;
    for (int j = 0; j < cfg->n_box_convs; j++) {
        int out_p = round_up(m->box_convs[j].out_channels, 8);
        if (!cuda_upload_conv(st, &st->box_convs[j], &m->box_convs[j], head_cp, out_p, error))
            return FALSE;
        head_c = m->box_convs[j].out_channels;
        head_cp = out_p;
    }
    size_t fc6_in = (size_t)P * P * head_cp;

    rpn_w = g_try_malloc((size_t)5 * A * C * sizeof(float));
    rpn_b = g_try_malloc((size_t)5 * A * sizeof(float));
    fc6_w = g_try_malloc0((size_t)m->fc6.out_features * fc6_in * sizeof(float));
    pred_w = g_try_malloc((size_t)5 * K * rep * sizeof(float));
    pred_b = g_try_malloc((size_t)5 * K * sizeof(float));
    if (rpn_w == NULL || rpn_b == NULL || fc6_w == NULL || pred_w == NULL || pred_b == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory preparing weights");
        goto out_free;
    }
    memcpy(rpn_w, m->rpn_cls.weight, sizeof(float) * A * C);
    memcpy(rpn_w + (size_t)A * C, m->rpn_bbox.weight, sizeof(float) * 4 * A * C);
    memcpy(rpn_b, m->rpn_cls.bias, sizeof(float) * A);
    memcpy(rpn_b + A, m->rpn_bbox.bias, sizeof(float) * 4 * A);
    if (!vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, &st->rpn_head, rpn_w, rpn_b,
                                     5 * A, C, 1, 1, 0, st->head_stride, C, error))
        goto out_free;

    vd_fc6_weight_to_nhwc(m->fc6.weight, m->fc6.out_features, head_c, P * P, head_cp, fc6_w);
    memcpy(pred_w, m->cls_score.weight, sizeof(float) * K * rep);
    memcpy(pred_w + (size_t)K * rep, m->bbox_pred.weight, sizeof(float) * 4 * K * rep);
    memcpy(pred_b, m->cls_score.bias, sizeof(float) * K);
    memcpy(pred_b + K, m->bbox_pred.bias, sizeof(float) * 4 * K);
    ok = vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->fc6, fc6_w, m->fc6.bias,
                               m->fc6.out_features, (int)fc6_in, round_up(m->fc6.out_features, 8),
                               st->dtype, TRUE, error) &&
         (!st->has_fc7 ||
          vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->fc7, m->fc7.weight,
                                m->fc7.bias, m->fc7.out_features, m->fc7.in_features,
                                round_up(m->fc7.out_features, 8), st->dtype, TRUE, error)) &&
         vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->predictor, pred_w, pred_b,
                               5 * K, rep, st->predictor_stride, VD_DTYPE_F32, FALSE, error);
    ok = ok && (!st->has_masks || upload_mask_weights(st, error));
out_free:
    g_free(rpn_w);
    g_free(rpn_b);
    g_free(fc6_w);
    g_free(pred_w);
    g_free(pred_b);
    return ok;
}

/* The mask head's shapes as the CUDA branch runs them (the loader checks
 * each tensor; this, that they chain). */
static gboolean mask_head_chains(const vd_model *m, GError **error)
{
    const vd_config *cfg = &m->config;
    int in = cfg->fpn_channels;
    gboolean ok = cfg->n_mask_roi_levels >= 1 && cfg->n_mask_roi_levels <= cfg->n_fpn_levels &&
                  cfg->n_mask_roi_levels <= VD_KERNEL_MAX_LEVELS && cfg->mask_output_size >= 1 &&
                  cfg->n_mask_convs >= 0 && cfg->n_mask_convs <= VD_MAX_MASK_CONVS;
    for (int j = 0; ok && j < cfg->n_mask_convs; j++) {
        const vd_conv *c = &m->mask_convs[j];
        ok = c->in_channels == in && c->kernel == 3 && c->stride == 1 && c->padding == 1 &&
             c->groups == 1;
        in = c->out_channels;
    }
    ok = ok && m->mask_deconv.in_channels == in && m->mask_deconv.kernel == 2 &&
         m->mask_deconv.stride == 2 && m->mask_deconv.padding == 0 &&
         m->mask_logits.in_channels == m->mask_deconv.out_channels && m->mask_logits.kernel == 1 &&
         m->mask_logits.out_channels == cfg->num_classes;
    if (!ok)
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the mask head's shapes do not chain (%d convolutions from %d channels, "
                    "transposed convolution %d->%d, logits %d->%d)",
                    cfg->n_mask_convs, cfg->fpn_channels, m->mask_deconv.in_channels,
                    m->mask_deconv.out_channels, m->mask_logits.in_channels,
                    m->mask_logits.out_channels);
    return ok;
}

/* v2's FastRCNNConvFCHead and RPN head as the CUDA backend runs them (the
 * loader checks each tensor; this, that they chain): 3x3 pad 1 convolutions
 * from the pooler's channels, fc6 on the last one's P x P map, the predictor on
 * fc6; the RPN's further convolutions C -> C. */
static gboolean box_convs_chain(const vd_model *m, GError **error)
{
    const vd_config *cfg = &m->config;
    int in = cfg->fpn_channels;
    int P = cfg->roi_output_size;
    gboolean ok = cfg->n_box_convs >= 1 && cfg->n_box_convs <= VD_MAX_BOX_CONVS &&
                  cfg->rpn_conv_depth >= 1 && cfg->rpn_conv_depth <= VD_MAX_RPN_CONVS;
    for (int j = 0; ok && j < cfg->n_box_convs; j++) {
        const vd_conv *c = &m->box_convs[j];
        ok = c->in_channels == in && c->kernel == 3 && c->stride == 1 && c->padding == 1 &&
             c->groups == 1 && c->bias != NULL;
        in = c->out_channels;
    }
    ok = ok && m->fc6.in_features == in * P * P && m->fc7.out_features == 0 &&
         cfg->representation_size == m->fc6.out_features;
    if (!ok)
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the conv box head's shapes do not chain (%d convolutions from %d channels "
                    "to %d, fc6 %d->%d, representation %d, RPN conv_depth %d)",
                    cfg->n_box_convs, cfg->fpn_channels, in, m->fc6.in_features,
                    m->fc6.out_features, cfg->representation_size, cfg->rpn_conv_depth);
    return ok;
}

/* The backbones (vd_cuda_backbone.h), by the model's backbone type. */
static const cuda_backbone *const cuda_backbones[] = {&vd_cuda_resnet, &vd_cuda_mnv3};

static const cuda_backbone *backbone_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cuda_backbones); i++)
        if (cuda_backbones[i]->type == model->config.backbone_type)
            return cuda_backbones[i];
    return NULL;
}

/* What the CUDA backend runs: ResNet bodies and MobileNetV3-Large whose shapes
 * chain as its kernels take them, fp16 or fp32, no calibration, heads that chain,
 * at most VD_KERNEL_MAX_LEVELS FPN levels; either resize arithmetic (the
 * pre-processing kernel takes the model file's rule, torch 1.13's or torch 2.x's,
 * from vd_math.h as the CPU does). The architecture comes before the device:
 * device=auto falls back to the CPU with this reason. */
static gboolean cuda_supports(const vd_model *model, const vd_context_params *params,
                              GError **error)
{
    const vd_config *cfg = &model->config;
    const cuda_backbone *backbone = backbone_of(model);
    /* no new CUDA features before the backend has run on a GPU */
    if (cfg->detector != VD_DETECTOR_TWO_STAGE) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not run the one-stage detectors (%s): use the CPU "
                    "backend",
                    vd_model_description(model));
        return FALSE;
    }
    if (vd_config_keypoint_parts(cfg) != NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not run keypointrcnn (Keypoint R-CNN) models: %s is "
                    "not on the GPU (%s): use the CPU backend",
                    vd_config_keypoint_parts(cfg), vd_model_description(model));
        return FALSE;
    }
    if (backbone != NULL && !backbone->supports(model, error))
        return FALSE;
    if (backbone == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not support the %s backbone of this model (%s): use "
                    "the CPU backend",
                    model->backbone_name, vd_model_description(model));
        return FALSE;
    }
    /* AUTO: fp16 (cuda_create) */
    vd_precision precision =
        params->precision == VD_PRECISION_AUTO ? VD_PRECISION_FP16 : params->precision;
    if (precision != VD_PRECISION_FP16 && precision != VD_PRECISION_FP32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s is not supported on the CUDA backend (fp16 or fp32)",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (params->calibrate) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "int8 calibration runs on the CPU backend only");
        return FALSE;
    }
    if (cfg->n_box_convs > 0) {
        if (!box_convs_chain(model, error))
            return FALSE;
    } else if (cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size !=
                   model->fc6.in_features ||
               model->fc7.in_features != model->fc6.out_features ||
               cfg->representation_size != model->fc7.out_features) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the box head's shapes do not chain (fc6 %d->%d, fc7 %d->%d, pooler %d)",
                    model->fc6.in_features, model->fc6.out_features, model->fc7.in_features,
                    model->fc7.out_features,
                    cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size);
        return FALSE;
    }
    if (cfg->has_masks && !mask_head_chains(model, error))
        return FALSE;
    if (cfg->n_fpn_levels > VD_KERNEL_MAX_LEVELS || cfg->n_roi_levels > cfg->n_fpn_levels ||
        cfg->n_roi_levels < 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%d FPN levels (%d pooled) are not supported by the CUDA backend",
                    cfg->n_fpn_levels, cfg->n_roi_levels);
        return FALSE;
    }
    return TRUE;
}

/* After cuda_supports(). */
static void *cuda_create(vd_context *ctx, GError **error)
{
    const vd_config *cfg = &ctx->model->config;
    if (ctx->params.precision == VD_PRECISION_AUTO)
        ctx->params.precision = VD_PRECISION_FP16;
    if (!device_usable(ctx->params.device_index, error))
        return NULL;

    cuda_state *st = g_new0(cuda_state, 1);
    st->model = ctx->model;
    st->backbone = backbone_of(ctx->model);
    st->device = ctx->params.device_index;
    st->dtype = ctx->params.precision == VD_PRECISION_FP16 ? VD_DTYPE_F16 : VD_DTYPE_F32;
    st->has_masks = cfg->has_masks;
    st->layers.dtype = st->dtype;
    st->layers.sync_count = &st->sync_count;
    /* fp16 tensor-core convolutions want channel counts in multiples of 8 */
    st->input_channels = st->dtype == VD_DTYPE_F16 ? 8 : 3;
    st->head_stride = round_up(5 * cfg->anchors_per_location, 8);
    st->predictor_stride = round_up(5 * cfg->num_classes, 8);
    vd_cuda_pool_init(&st->weights_pool);
    /* replay by default: an eager frame is bound by the host cost of cuDNN's legacy
     * calls, several times a replayed one (tools/bench/README.md) */
    const char *graphs = g_getenv("VD_CUDA_GRAPHS");
    st->use_graphs = graphs == NULL || g_strcmp0(graphs, "0") != 0;
    st->graphs_off_reason = "VD_CUDA_GRAPHS=0 in the environment";
    /* test hook (tests/gpu/element-check.sh): the first N captures fail, as
     * vd_cuda_context_fail_captures() makes them */
    const char *fail_captures = g_getenv("VD_CUDA_FAIL_CAPTURES");
    if (fail_captures != NULL)
        st->fail_captures = (int)CLAMP(g_ascii_strtoll(fail_captures, NULL, 10), 0, 1000);

    if (!vd_cuda_check(cudaSetDevice(st->device), "selecting the device", error) ||
        !vd_cuda_check(cudaStreamCreateWithFlags(&st->layers.stream, cudaStreamNonBlocking),
                       "creating a stream", error) ||
        /* the one wait of a frame blocks the thread instead of spinning a core
         * for the whole frame (the other pipelines, the decoder and the CPU
         * backend want it). Per event, not cudaSetDeviceFlags(), which is
         * process-wide (every library sharing the device) and refused once the
         * device is in use. Waking costs some tens of microseconds a frame. */
        !vd_cuda_check(cudaEventCreateWithFlags(&st->frame_done,
                                                cudaEventDisableTiming | cudaEventBlockingSync),
                       "creating an event", error))
        goto out_fail;
    for (int i = 0; i <= VD_MAX_STAGES; i++)
        if (!vd_cuda_check(cudaEventCreate(&st->stage_events[i]), "creating an event", error))
            goto out_fail;
    CUDNN_TRY(cudnnCreate(&st->layers.cudnn), "creating a handle");
    CUDNN_TRY(cudnnSetStream(st->layers.cudnn, st->layers.stream), "setting the stream");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&st->layers.relu), "activation descriptor");
    CUDNN_TRY(cudnnSetActivationDescriptor(st->layers.relu, CUDNN_ACTIVATION_RELU,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              "activation descriptor");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&st->layers.identity), "activation descriptor");
    CUDNN_TRY(cudnnSetActivationDescriptor(st->layers.identity, CUDNN_ACTIVATION_IDENTITY,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              "activation descriptor");
    if (!vd_cublas_check(cublasLtCreate(&st->layers.cublaslt), "creating a cuBLASLt handle", error))
        goto out_fail;
    st->layers.lt_workspace_bytes = VD_CUDA_LT_WORKSPACE;
    if (!vd_cuda_check(cudaMalloc(&st->layers.lt_workspace, st->layers.lt_workspace_bytes),
                       "the cuBLASLt workspace", error)) {
        cudaGetLastError();
        st->layers.lt_workspace = NULL;
        goto out_fail;
    }
    name_conv_weights(st);
    if (!upload_weights(st, error))
        goto out_fail;
    vd_cuda_upload_done(&st->layers);
    if (!ensure_result_capacity(st, MAX(ctx->params.max_detections, cfg->detections_per_img), 1,
                                error) ||
        !ensure_mask(st, error))
        goto out_fail;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        goto out_fail;
    return st;

out_fail:
    cuda_destroy(st);
    return NULL;
}

/* Every convolution of @plan (the ones it initialised), in running order. */
static GPtrArray *plan_convolutions(const cuda_state *st, cuda_plan *plan)
{
    GPtrArray *out = g_ptr_array_new();
    g_ptr_array_add(out, &plan->stem);
    st->backbone->convolutions(plan, out);
    for (int i = 0; i < plan->n_returned; i++) {
        g_ptr_array_add(out, &plan->fpn_inner[i]);
        g_ptr_array_add(out, &plan->fpn_layer[i]);
    }
    for (int l = 0; l < plan->n_levels; l++) {
        g_ptr_array_add(out, &plan->rpn_conv[l]);
        for (int j = 1; j < st->model->config.rpn_conv_depth; j++)
            g_ptr_array_add(out, &plan->rpn_conv_more[l][j - 1]);
        g_ptr_array_add(out, &plan->rpn_head[l]);
    }
    for (int j = 0; j < plan->n_box_convs; j++)
        g_ptr_array_add(out, &plan->box_convs[j]);
    return out;
}

static void add_conv_kernels(const cuda_state *st, cuda_plan *plan, const char *suffix, GArray *out,
                             GStringChunk *strings)
{
    GPtrArray *convs = plan_convolutions(st, plan);
    for (guint i = 0; i < convs->len; i++) {
        const vd_cuda_conv *conv = g_ptr_array_index(convs, i);
        char *layer =
            g_strdup_printf("%s%s", conv->weights != NULL ? conv->weights->name : "", suffix);
        char *impl = vd_cuda_conv_describe(conv);
        vd_kernel_info k = {g_string_chunk_insert_const(strings, layer), "convolution",
                            g_string_chunk_insert_const(strings, impl)};
        g_array_append_val(out, k);
        g_free(layer);
        g_free(impl);
    }
    g_ptr_array_unref(convs);
}

/* The convolutions of the plans held now, with the cuDNN algorithm each runs
 * and its demotions (candidates cuDNN refused at run time): the engine's
 * record of them (vd_context_kernels()); the mask head's, when built. */
static void cuda_kernels(void *p, GArray *out, GStringChunk *strings)
{
    cuda_state *st = p;
    if (st->plan != NULL)
        add_conv_kernels(st, st->plan, "", out, strings);
    if (st->batch_plan != NULL) {
        char suffix[32];
        g_snprintf(suffix, sizeof(suffix), " (batch of %d)", st->batch_plan->n_images);
        add_conv_kernels(st, st->batch_plan, suffix, out, strings);
    }
    if (st->has_masks && st->mask.rows > 0) {
        vd_cuda_conv *mask_convs[VD_MAX_MASK_CONVS + 2];
        int n = 0;
        for (int j = 0; j < st->n_mask_convs; j++)
            mask_convs[n++] = &st->mask.convs[j];
        mask_convs[n++] = &st->mask.deconv;
        mask_convs[n++] = &st->mask.logits_conv;
        for (int j = 0; j < n; j++) {
            char *impl = vd_cuda_conv_describe(mask_convs[j]);
            vd_kernel_info k = {mask_convs[j]->weights != NULL ? mask_convs[j]->weights->name : "",
                                "convolution", g_string_chunk_insert_const(strings, impl)};
            k.layer = g_string_chunk_insert_const(strings, k.layer);
            g_array_append_val(out, k);
            g_free(impl);
        }
    }
}

static void cuda_status(void *p, vd_run_status *status)
{
    cuda_state *st = p;
    const cuda_graph *retrying = graph_retrying(st);
    status->graph_failures = st->graph_failures;
    if (!st->use_graphs) {
        status->graphs = VD_GRAPHS_OFF;
        g_strlcpy(status->graphs_reason, st->graphs_off_reason, sizeof(status->graphs_reason));
    } else if (retrying != NULL) {
        /* the last batch's graph: its reason and its eager frames left */
        status->graphs = VD_GRAPHS_RETRYING;
        g_strlcpy(status->graphs_reason, retrying->backoff.reason, sizeof(status->graphs_reason));
        status->graph_retry_frames = retrying->backoff.retry_in;
    } else {
        status->graphs = VD_GRAPHS_ACTIVE;
    }
}

const vd_backend vd_cuda_backend = {
    .name = "cuda",
    .supports = cuda_supports,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .detect = cuda_detect,
    .kernels = cuda_kernels,
    .status = cuda_status,
};

/* ------------------------------------------------------------------------ */
/* Debugging hooks (vd_cuda_debug.h)                                         */

static cuda_state *state_of(const vd_context *ctx)
{
    return ctx != NULL && ctx->backend == &vd_cuda_backend ? ctx->state : NULL;
}

guint64 vd_cuda_context_sync_count(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->sync_count : 0;
}

gboolean vd_cuda_context_set_graphs(vd_context *ctx, gboolean enable)
{
    cuda_state *st = state_of(ctx);
    if (st == NULL)
        return FALSE;
    st->use_graphs = enable;
    st->graphs_off_reason = "turned off by vd_cuda_context_set_graphs()";
    /* a fresh start: no back-off left from earlier failures */
    graph_backoff_reset(st);
    return TRUE;
}

gboolean vd_cuda_context_graph_replayed(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL && st->graph_replayed;
}

guint64 vd_cuda_context_graph_replays(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->graph_replays : 0;
}

void vd_cuda_context_fail_captures(vd_context *ctx, int n)
{
    cuda_state *st = state_of(ctx);
    if (st == NULL)
        return;
    st->fail_captures = MAX(n, 0);
    /* the next frame of this plan captures (and fails), without a warm-up */
    forget_graph(st);
    st->graph.plan = st->plan;
    st->graph.times_seen = 1;
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++) {
        st->batch_graphs[i].plan = st->batch_plan;
        st->batch_graphs[i].times_seen = 1;
    }
}

void vd_cuda_context_inject_sync(vd_context *ctx, gboolean enable)
{
    cuda_state *st = state_of(ctx);
    if (st != NULL)
        st->inject_sync = enable;
}

int vd_cuda_context_unfused_convolutions(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    int n = 0;
    if (st == NULL || st->plan == NULL)
        return 0;
    GPtrArray *convs = plan_convolutions(st, st->plan);
    for (guint i = 0; i < convs->len; i++)
        n += ((const vd_cuda_conv *)g_ptr_array_index(convs, i))->mode == VD_CUDA_CONV_UNFUSED;
    g_ptr_array_unref(convs);
    return n;
}

guint64 vd_cuda_context_demotions(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->layers.n_demotions : 0;
}

int vd_cuda_context_batch_slots(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL && st->batch_plan != NULL ? st->batch_plan->n_images : 0;
}

vd_cuda_memory vd_cuda_context_memory(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    vd_cuda_memory m = {0, 0, 0, 0};
    if (st == NULL)
        return m;
    m.conv_workspace = st->layers.workspace_bytes;
    m.weights = st->weights_pool.bytes;
    m.box_nms_workspace = st->box_nms_workspace_bytes;
    if (st->plan != NULL)
        m.plan = st->plan->pool.bytes;
    return m;
}
