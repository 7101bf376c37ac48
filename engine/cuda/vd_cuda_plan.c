/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend's plans (vd_cuda_private.h): per padded input size and batch
 * slot count, the device tensors, the cuDNN convolutions of the FPN and the RPN,
 * the box head's convolutions and cuBLASLt matrix products, the workspace, the
 * frame buffers, the box NMS's and the results' buffers, and Mask R-CNN's mask
 * branch; a captured CUDA graph is dropped with the plan it ran. */
#include "vd_config.h"
#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_debug.h"
#include "cuda/vd_cuda_backbone.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void cuda_plan_free(cuda_plan *plan)
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
void forget_graph_slot(cuda_graph *g)
{
    graph_backoff backoff = g->backoff;
    if (g->exec != NULL)
        cudaGraphExecDestroy(g->exec);
    memset(g, 0, sizeof(*g));
    g->backoff = backoff;
}

/* Drops every graph (the frame buffers they read or write are about to change). */
void forget_graph(cuda_state *st)
{
    forget_graph_slot(&st->graph);
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++)
        forget_graph_slot(&st->batch_graphs[i]);
}

/* Frees the plan of @slot and its @n_graphs graphs @graphs after the device is
 * done with it (a size change). */
gboolean drop_plan(cuda_state *st, cuda_plan **slot, cuda_graph *graphs, int n_graphs,
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
    cuda_plan_free(*slot);
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

cuda_plan *cuda_plan_new(cuda_state *st, int padded_h, int padded_w, int n_images, GError **error)
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
    cuda_plan_free(plan);
    return NULL;
}

/* spec §5.2, as the CPU backend computes it */
void cuda_pooler_scales(cuda_state *st, cuda_plan *plan, int resized_h)
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
size_t frame_layout(const vd_image *image, size_t plane_bytes[3], int row_bytes[3],
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
gboolean ensure_frame_buffers(cuda_state *st, size_t bytes, GError **error)
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
gboolean ensure_box_nms(cuda_state *st, int rows, float score_threshold, GError **error)
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

gboolean ensure_result_capacity(cuda_state *st, int capacity, int slots, GError **error)
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

void mask_free(cuda_mask *mk)
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
gboolean ensure_mask(cuda_state *st, GError **error)
{
    if (!st->has_masks || st->mask.rows >= st->result_capacity)
        return TRUE;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        return FALSE;
    forget_graph(st);
    return mask_init(st, st->result_capacity, error);
}
