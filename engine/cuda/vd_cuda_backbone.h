/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CUDA backend: its state and plans (cuda_state, cuda_plan), the
 * backbone interface (cuda_backbone) and the helpers that the backend's files
 * share with the backbones' files, vd_cuda_resnet.c and vd_cuda_mnv3.c (each
 * documented where it is defined). Not installed. */
#ifndef VD_CUDA_BACKBONE_H
#define VD_CUDA_BACKBONE_H

#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_private.h"

G_BEGIN_DECLS

/* The most image slots of a batch plan; larger batches run in parts. */
#define VD_MAX_BATCH_SLOTS 32

typedef struct cuda_backbone cuda_backbone;

typedef struct {
    vd_cuda_conv conv1, conv2, conv3, downsample;
    vd_cuda_tensor *shortcut; /* the downsample output, or the block input */
    gboolean has_downsample;
} cuda_block;

/* One MobileNetV3 InvertedResidual block of a plan (engine/MOBILENETV3.md §2):
 * expand (when the width changes) and depthwise with the block's activation
 * (ReLU fused into cuDNN's call, hardswish a kernel in place after it), SE in
 * place on the depthwise output, project with the residual sum fused. */
typedef struct {
    vd_cuda_conv expand, depthwise, project;
    vd_cuda_tensor *expanded, *dw_out;
    gboolean has_expand, hardswish;
    int se_channels; /* 0 without SE */
} cuda_mnv3_block;

/* A ResNet plan's own part (cuda_plan.resnet, vd_cuda_resnet.c): the max-pool's
 * output, the blocks, the stages' outputs. */
typedef struct {
    vd_cuda_tensor *pool_out;
    vd_cuda_tensor *stage_out[4];
    cuda_block blocks[VD_MAX_BLOCKS];
    int n_blocks;
} cuda_resnet_plan;

/* A MobileNetV3 plan's own part (cuda_plan.mnv3, vd_cuda_mnv3.c), after the stem
 * (hardswish after it): the blocks, the last 1x1 conv (hardswish), and SE's
 * per-image channel means and scales. */
typedef struct {
    cuda_mnv3_block blocks[VD_MAX_BLOCKS];
    int n_blocks;
    vd_cuda_conv last;
    vd_cuda_tensor *last_out;
    gboolean has_last;
    float *se_means, *se_scales;
} cuda_mnv3_plan;

/* A ResNet backbone's weights (cuda_state.resnet): conv1..3, downsample per
 * block. */
typedef struct {
    vd_cuda_conv_weights blocks[VD_MAX_BLOCKS][4];
} cuda_resnet_weights;

/* A MobileNetV3 backbone's weights (cuda_state.mnv3), after the stem: expand,
 * depthwise (groups), project per block; the last conv; SE's fc1 weight, fc1
 * bias, fc2 weight, fc2 bias (float32). */
typedef struct {
    vd_cuda_conv_weights blocks[VD_MAX_BLOCKS][3];
    vd_cuda_conv_weights last;
    float *se[VD_MAX_BLOCKS][4];
} cuda_mnv3_weights;

/* Everything that depends on the padded input size, for n_images image slots:
 * activations [n_images][h][w][c], every per-image buffer below [n_images] of
 * what one image needs (the anchors, workspaces and pooler are shared). */
typedef struct {
    int padded_h, padded_w;
    int n_images;
    vd_cuda_pool pool;
    GPtrArray *tensors;

    vd_cuda_tensor *input; /* [Hp][Wp][input_channels] */
    vd_cuda_tensor *stem_out;
    vd_cuda_conv stem;
    const cuda_backbone *backbone; /* the one that planned it (cuda_plan_free) */
    /* the backbone's own part, by the model's backbone type: read and written
     * only by its file (backbone's hooks); the other part shares its memory */
    union {
        cuda_resnet_plan resnet; /* VD_BACKBONE_RESNET */
        cuda_mnv3_plan mnv3;     /* VD_BACKBONE_MOBILENET_V3 */
    };
    /* the backbone's returned features, the FPN's inputs */
    vd_cuda_tensor *fpn_in[4];

    int n_levels, n_returned;
    vd_cuda_tensor *fpn_sum[4];
    vd_cuda_tensor *fpn_out[VD_MAX_FPN_LEVELS];
    vd_cuda_conv fpn_inner[4], fpn_layer[4];
    vd_cuda_tensor *rpn_hidden[VD_MAX_FPN_LEVELS];
    vd_cuda_tensor *rpn_out[VD_MAX_FPN_LEVELS];
    vd_cuda_conv rpn_conv[VD_MAX_FPN_LEVELS], rpn_head[VD_MAX_FPN_LEVELS];
    /* conv_depth > 1 (v2): the further 3x3 conv + ReLU layers, alternating
     * between rpn_hidden and rpn_hidden2 (a second level-by-level buffer) */
    vd_cuda_tensor *rpn_hidden2[VD_MAX_FPN_LEVELS];
    vd_cuda_conv rpn_conv_more[VD_MAX_FPN_LEVELS][VD_MAX_RPN_CONVS - 1];

    /* RPN */
    float *anchors; /* [n_anchors][4], generated on the device at plan time */
    int n_anchors;
    vd_rpn_levels rpn;
    unsigned int *logit_keys, *logit_keys_sorted; /* vd_math_rank_key of the logits */
    int *logit_index, *logit_index_sorted;
    void *sort_workspace; /* vd_rpn_topk's, or vd_rpn_topk_batched's (n_images > 1) */
    size_t sort_workspace_bytes;
    float *candidate_boxes, *candidate_scores;
    int *candidate_levels;
    vd_nms_shape rpn_nms;
    void *rpn_nms_workspace;
    size_t rpn_nms_workspace_bytes;
    int *rpn_keep;
    int *n_proposals; /* device count, one per image */
    float *proposals, *proposal_scores;
    int proposal_capacity;

    /* RoI pooler (spec §5.2), cached per resized height as the CPU does */
    vd_pooler_levels pooler;
    /* Mask R-CNN's second pooler (the first n_mask_roi_levels levels) */
    vd_pooler_levels mask_pooler;

    /* box head */
    void *pooled;
    /* the conv head (v2, n_box_convs > 0): one image's R rows at a time, N = R,
     * box_in a view of that image's pooled rows (its data set as each image is
     * enqueued), the outputs alternating between two buffers of the widest */
    vd_cuda_tensor box_in;
    vd_cuda_tensor box_out[VD_MAX_BOX_CONVS];
    vd_cuda_conv box_convs[VD_MAX_BOX_CONVS];
    int n_box_convs;
    void *fc6_out, *fc7_out;
    float *head; /* [proposal_capacity][predictor_stride] float32 */
    float *box_boxes, *box_scores;
    int *box_labels;
    int *n_box_keep;

    int *n_nonfinite; /* device count of the frame (vd_result.n_nonfinite) */
} cuda_plan;

/* The mask branch (engine/MASKRCNN.md) for @rows RoIs, one image at a time
 * (the stream orders the images of a batch): the final boxes of the image in
 * resized coordinates, RoIAlign 14x14 into @pooled, the 3x3 convolutions, the
 * transposed convolution as a 1x1 convolution to 4 x channels (@up, read by
 * the logits convolution as [rows][P][4P][channels]: vd_mask_probabilities
 * maps it back to output pixels), the 1x1 logits. Independent of the input
 * size; rows is the result capacity. */
typedef struct {
    int rows;
    vd_cuda_pool pool;
    float *rois;       /* [rows][4] */
    float *roi_scores; /* [rows], vd_gather_proposals' (unused) */
    vd_cuda_tensor pooled;
    vd_cuda_tensor conv_out[VD_MAX_MASK_CONVS];
    vd_cuda_tensor up, up_taps, logits;
    vd_cuda_conv convs[VD_MAX_MASK_CONVS], deconv, logits_conv;
} cuda_mask;

/* A graph's capture back-off: a failed capture or instantiation (a transient
 * out-of-memory, say) is tried again after 1, 2, 4, ...
 * VD_GRAPH_RETRY_MAX_FRAMES frames that would have been captured, run eagerly
 * meanwhile. Each graph has its own (the single-image graph and every batch
 * size's), so that the failures of one do not delay or reset another's. */
typedef struct {
    int failures_in_a_row;
    int retry_in;
    char reason[VD_STATUS_REASON_MAX];
} graph_backoff;

/* A captured frame, valid for one plan, frame (every field the pre-processing
 * kernel takes by value: format, size, planes, strides, colour matrix and
 * range) and set of thresholds. */
typedef struct {
    graph_backoff backoff; /* kept when the graph is forgotten, cleared with its plan */
    cudaGraphExec_t exec;
    cuda_plan *plan;
    vd_device_frame frame; /* the first image's (a batch's images are alike) */
    int n_images;
    int resized_h, resized_w;
    float score_threshold, nms_threshold;
    int max_detections;
    int times_seen;
} cuda_graph;

typedef struct {
    const vd_model *model;
    const cuda_backbone *backbone; /* the model's (cuda_backbones[]) */
    int device;
    vd_dtype dtype;
    vd_cuda_layers layers;
    vd_cuda_pool weights_pool;
    int input_channels;   /* the first convolution's input channels (padded) */
    int head_stride;      /* RPN head output channels (5A, padded) */
    int predictor_stride; /* box predictor outputs (5K, padded) */

    vd_cuda_conv_weights stem;
    /* the backbone's own weights (in weights_pool), by the model's backbone
     * type: read and written only by its file; the other part shares its memory */
    union {
        cuda_resnet_weights resnet; /* VD_BACKBONE_RESNET */
        cuda_mnv3_weights mnv3;     /* VD_BACKBONE_MOBILENET_V3 */
    };
    vd_cuda_conv_weights fpn_inner[4], fpn_layer[4];
    vd_cuda_conv_weights rpn_conv, rpn_head;
    /* v2: the RPN head's further convolutions, the conv box head (output
     * channels padded to multiples of 8; fc6 then reads [P][P][padded]) */
    vd_cuda_conv_weights rpn_conv_more[VD_MAX_RPN_CONVS - 1];
    vd_cuda_conv_weights box_convs[VD_MAX_BOX_CONVS];
    int n_box_convs;
    gboolean has_fc7; /* TwoMLPHead; the conv head has fc6 only */
    vd_cuda_linear fc6, fc7, predictor;

    /* Mask R-CNN: the head's weights (channels padded to multiples of 8), the
     * transposed convolution as a 1x1 convolution to 4 x deconv_channels
     * (output channel (2 ky + kx) * deconv_channels + o), and its plan */
    gboolean has_masks;
    int n_mask_convs;
    vd_cuda_conv_weights mask_convs[VD_MAX_MASK_CONVS], mask_deconv, mask_logits;
    int deconv_channels;
    cuda_mask mask;

    cuda_plan *plan;              /* one image slot: single images */
    cuda_plan *batch_plan;        /* batches of two images or more (NULL before the first) */
    vd_batch_shrink batch_shrink; /* when batch_plan shrinks (vd_batch_plan_slots) */

    /* the frame upload: pinned staging and its device copy (a batch's frames
     * one after another) */
    uint8_t *staging;
    uint8_t *raw;
    size_t raw_bytes;

    /* The box head's NMS, shared by the plans (one image at a time on the
     * stream): sized for every candidate the frame's score threshold lets
     * through (box_nms_candidates), so that it runs over all of them as the
     * CPU does; grown when a lower threshold needs more (ensure_box_nms). */
    vd_nms_shape box_nms;
    void *box_nms_workspace;
    size_t box_nms_workspace_bytes;

    /* the one readback of a frame, or of a batch: result_slots results of
     * result_stride bytes */
    vd_kernel_result *result_device;
    vd_kernel_result *result_host; /* pinned */
    int *box_keep;                 /* [result_slots][result_capacity] */
    int result_capacity;
    int result_slots;
    size_t result_stride;
    /* models with masks: each result's [result_capacity][M][M] float32 mask
     * probabilities at this offset from it, read back with the detections */
    size_t result_probs_offset;

    cudaEvent_t frame_done;
    cudaEvent_t stage_events[VD_MAX_STAGES + 1];

    /* the observer's device scratch (float32), grown as needed */
    float *observe_scratch;
    size_t observe_scratch_bytes;
    guint64 sync_count;

    gboolean use_graphs;
    const char *graphs_off_reason; /* why use_graphs is FALSE */
    cuda_graph graph;              /* of plan */
    /* of batch_plan, one per batch size (2 .. VD_MAX_BATCH_SLOTS): a partial
     * batch (a stream's end, a latency deadline) keeps the full batch's graph */
    cuda_graph batch_graphs[VD_MAX_BATCH_SLOTS + 1];
    gboolean graph_replayed;
    guint64 graph_replays;
    guint64 graph_failures;       /* every graph's, since creation (each backs off on its own) */
    const cuda_graph *last_graph; /* the last batch's: the run status reports its back-off */
    int fail_captures;            /* test hook: captures still to fail on purpose */
    gboolean inject_sync;
} cuda_state;

/* A backbone on the CUDA backend, chosen by the model's backbone type
 * (cuda_backbones[] in vd_cuda_backend.c).
 * @supports: refuses (VD_ERROR_UNSUPPORTED or VD_ERROR_FORMAT, with the reason)
 *   a model whose backbone this backend cannot run (cuda_supports()).
 * @upload: its weights (the stem's aside) into its own part of the state,
 *   st->resnet or st->mnv3 (upload_weights()).
 * @name: names its convolutions' weights, the stem's included, after
 *   torchvision's modules (name_conv_weights()).
 * @plan: its tensors and convolutions from plan->input to the FPN's inputs
 *   (plan->fpn_in[]), growing the cuDNN workspace *@ws (cuda_plan_new()).
 * @clear: destroys the convolutions @plan initialised in its own part of the
 *   plan, every block's (a plan that failed half way has not set their count)
 *   (cuda_plan_free()).
 * @enqueue: its layers on the stream over @n image slots of @plan
 *   (enqueue_frame()).
 * @convolutions: appends those @plan initialised after the stem, in running
 *   order (plan_convolutions()). */
struct cuda_backbone {
    vd_backbone_type type;
    gboolean (*supports)(const vd_model *model, GError **error);
    gboolean (*upload)(cuda_state *st, GError **error);
    void (*name)(cuda_state *st);
    gboolean (*plan)(cuda_state *st, cuda_plan *plan, size_t *ws, GError **error);
    void (*clear)(cuda_plan *plan);
    gboolean (*enqueue)(cuda_state *st, cuda_plan *plan, int n, GError **error);
    void (*convolutions)(cuda_plan *plan, GPtrArray *out);
};

extern const cuda_backbone vd_cuda_resnet;
extern const cuda_backbone vd_cuda_mnv3;

/* A CUDA or cuDNN call whose failure sets @error and jumps to the caller's
 * out_fail label. */
#define CUDA_TRY(call, what)                                                                       \
    do {                                                                                           \
        if (!vd_cuda_check((call), (what), error))                                                 \
            goto out_fail;                                                                         \
    } while (0)

#define CUDNN_TRY(call, what)                                                                      \
    do {                                                                                           \
        if (!vd_cudnn_check((call), (what), error))                                                \
            goto out_fail;                                                                         \
    } while (0)

/* Sizes: @n up to a multiple of @multiple; a convolution's output */
static inline int round_up(int n, int multiple)
{
    return (n + multiple - 1) / multiple * multiple;
}

static inline int conv_out_size(int n, int kernel, int stride, int padding)
{
    return (n + 2 * padding - kernel) / stride + 1;
}

/* A tensor of @plan, [n_images][h][w][c] in the context's dtype, over @data or
 * (NULL) the plan's pool; the weights of @c, input and output channels padded
 * to @padded_in and @padded_out, into @dst. */
vd_cuda_tensor *cuda_plan_tensor(cuda_state *st, cuda_plan *plan, int h, int w, int c, void *data,
                                 GError **error);
gboolean cuda_upload_conv(cuda_state *st, vd_cuda_conv_weights *dst, const vd_conv *c,
                          int padded_in, int padded_out, GError **error);

/* Image slot @i of @t's data. */
static inline void *image_of(const vd_cuda_tensor *t, int i, vd_dtype dt)
{
    return (char *)t->data + (size_t)i * vd_cuda_tensor_image_elements(t) * vd_dtype_size(dt);
}

/* The stages the device runs (vd_stages.h): up to VD_STAGE_POSTPROCESS, and
 * VD_STAGE_MASK_HEAD for models with masks; the host pastes the masks. */
#define N_DEVICE_STAGES (VD_STAGE_POSTPROCESS + 1)

/* The backend's parts across its files. vd_cuda_plan.c: a plan for a padded
 * input size and @n_images batch slots, and its release; a plan slot dropped with
 * its captured graphs; a graph forgotten (one slot's, or every one of the
 * context); the pooler's level scales for a resized height; the buffers grown to
 * what a frame needs (the frame's planes, @frame_layout's sizes for @image; the box
 * NMS's rows; the results' capacity per slot; the mask branch); a mask branch's
 * release. vd_cuda_frame.c: the backend's detect (vd_backend.detect); the graph
 * capture's back-off reset, and the graph it is retrying, if any. */
cuda_plan *cuda_plan_new(cuda_state *st, int padded_h, int padded_w, int n_images, GError **error);
void cuda_plan_free(cuda_plan *plan);
gboolean drop_plan(cuda_state *st, cuda_plan **slot, cuda_graph *graphs, int n_graphs,
                   GError **error);
void forget_graph_slot(cuda_graph *g);
void forget_graph(cuda_state *st);
void cuda_pooler_scales(cuda_state *st, cuda_plan *plan, int resized_h);
size_t frame_layout(const vd_image *image, size_t plane_bytes[3], int row_bytes[3],
                    int plane_rows[3]);
gboolean ensure_frame_buffers(cuda_state *st, size_t bytes, GError **error);
gboolean ensure_box_nms(cuda_state *st, int rows, float score_threshold, GError **error);
gboolean ensure_result_capacity(cuda_state *st, int capacity, int slots, GError **error);
gboolean ensure_mask(cuda_state *st, GError **error);
void mask_free(cuda_mask *mk);
gboolean cuda_detect(void *p, vd_context *ctx, const vd_image *images, int n_images,
                     vd_result *results, GError **error);
void graph_backoff_reset(cuda_state *st);
const cuda_graph *graph_retrying(const cuda_state *st);

G_END_DECLS

#endif /* VD_CUDA_BACKBONE_H */
