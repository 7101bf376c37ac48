/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU backend: its types (tensors, convolutions, plans, the
 * state), the backbone interface (cpu_backbone) and the helpers that
 * the backend's files (vd_cpu_backend.c, vd_cpu_plan.c, vd_cpu_fpn.c, vd_cpu_roi.c,
 * vd_cpu_rcnn.c) share with the backbones' and detectors' files, such as vd_cpu_resnet.c and
 * vd_cpu_mnv3.c (each documented where it is defined). */
#ifndef VD_CPU_PRIVATE_H
#define VD_CPU_PRIVATE_H

#include "vd_context_private.h"
#include "cpu/vd_cpu_half.h"
#include "cpu/vd_cpu_isa.h"
#include "cpu/vd_cpu_layers.h"
#include "cpu/vd_cpu_ops.h"
#include "cpu/vd_cpu_winograd.h"
#include "cpu/vd_cpu_xnnpack.h"

#include <string.h>

G_BEGIN_DECLS

typedef struct cpu_backbone cpu_backbone;

/* bfloat16 <-> float32: round to nearest even, NaN kept quiet (as torch's
 * c10::BFloat16 conversion). */
static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Element @i of a float32, bfloat16 or fp16 (dnnl_f16) array @p of type @dt, as
 * float32 (exact). */
static inline float load_f32(const void *p, dnnl_data_type_t dt, size_t i)
{
    return dt == dnnl_bf16  ? bf16_to_f32(((const uint16_t *)p)[i])
           : dt == dnnl_f16 ? vd_f16_to_f32(((const uint16_t *)p)[i])
                            : ((const float *)p)[i];
}

/* Stores @v as element @i of @p of type @dt (rounded to nearest even). */
static inline void store_f32(void *p, dnnl_data_type_t dt, size_t i, float v)
{
    if (dt == dnnl_bf16)
        ((uint16_t *)p)[i] = f32_to_bf16(v);
    else if (dt == dnnl_f16)
        ((uint16_t *)p)[i] = vd_f32_to_f16(v);
    else
        ((float *)p)[i] = v;
}

/* One activation of one image: a oneDNN memory object over a buffer that is
 * either its own or shared with other intermediates. Float32, bfloat16 or fp16,
 * blocked (nChw16c or nChw8c, channels padded to a multiple of the block), NHWC (the input) or
 * NCHW (the stem's copy of it). Owned by the plan. */
typedef struct {
    int h, w, c;
    dnnl_data_type_t dt;
    dnnl_format_tag_t tag; /* nChw16c, nChw8c, dnnl_nhwc or dnnl_nchw */
    int cb;                /* channel block: 16 or 8 when blocked (16 with AVX-512,
                            * 8 below), the channel count for NHWC (one block holding
                            * every channel of a pixel), 0 for NCHW */
    void *data;
    dnnl_memory_t mem;
} cpu_tensor;

typedef struct cpu_conv cpu_conv;
struct cpu_conv {
    dnnl_primitive_t prim;
    dnnl_memory_t weights;
    dnnl_memory_t bias;
    dnnl_memory_t src; /* borrowed from the tensors */
    dnnl_memory_t dst;
    /* Our Winograd F(4x4, 3x3) where oneDNN has none: then prim is
     * NULL and the convolution runs vd_wino_run() from src_t to dst_t. */
    vd_wino *wino;
    /* XNNPACK's (cpu_state.xnn): then prim is NULL too */
    vd_xnn_op *xnn;
    const cpu_tensor *src_t, *dst_t;
    gboolean sum, relu;
    vd_layer_scales scales; /* int8: what the primitive takes when it runs */
    double macs;            /* multiply-adds of one run (vd_stage_stats.gflop) */
};

/* How an int8 convolution's tensors are scaled (a stored value times its
 * tensor's scale is the real one): src, dst (1 for a float dst), and dst's
 * previous contents where the convolution adds onto them, stored as @sum_dt. */
typedef struct {
    float src_scale, dst_scale, sum_scale;
    dnnl_data_type_t sum_dt;
} cpu_quant;

typedef struct {
    cpu_conv conv1, conv2, conv3, downsample;
    gboolean has_downsample;
    char name[40]; /* "backbone.body.layer1.0": the activations' names */
} cpu_block;

/* One MobileNetV3 inverted residual block: expand (when present) into t1,
 * depthwise into t2, squeeze-and-excitation on t2 in place (plain C: global mean,
 * two small matrix-vector products, the channel scale), project into the output
 * with the residual add fused as a sum post-op. A residual block whose input must
 * survive (a returned feature) first copies it into its output. */
typedef struct {
    cpu_conv expand, depthwise, project;
    gboolean has_expand;
    const vd_mnv3_block *weights; /* the model's block (SE weights) */
} cpu_mnv3_block;

/* A ResNet plan's own part (cpu_plan.resnet, vd_cpu_resnet.c): the stem's output,
 * the max-pool, the blocks and the stages' outputs. */
typedef struct {
    cpu_tensor *stem_out;
    cpu_tensor *pool_out;
    cpu_tensor *stage_out[4]; /* C2..C5 (the stages computed) */
    dnnl_primitive_t maxpool;
    vd_xnn_op *maxpool_xnn; /* XNNPACK's instead (cpu_state.xnn) */
    /* int8: the max-pool's output quantised (the blocks' input) */
    cpu_tensor *pool_q;
    dnnl_primitive_t pool_quantize;
    vd_layer_scales pool_quantize_scales;
    vd_xnn_op *pool_quantize_xnn;    /* XNNPACK's instead (cpu_state.xnn) */
    float stage_scale[4];            /* int8: the scales of stage_out */
    cpu_block blocks[VD_MAX_BLOCKS]; /* as the model's (vd_resnet_weights) */
} cpu_resnet_plan;

/* A MobileNetV3 plan's own part (cpu_plan.mnv3, vd_cpu_mnv3.c), after the stem
 * (cpu_plan.stem): the blocks, the last 1x1 conv, squeeze-and-excitation's
 * work area. */
typedef struct {
    cpu_mnv3_block blocks[VD_MAX_BLOCKS];
    int n_blocks;
    cpu_conv last;
    gboolean has_last;
    float *se_work; /* [3][max expanded channels]: mean, hidden, scale */
} cpu_mnv3_plan;

/* int8: one quantisation step of a plan (plan_quantize()'s primitive and its
 * scales, or XNNPACK's conversion), the plan's to free (cpu_quantize_clear()). */
typedef struct {
    dnnl_primitive_t prim;
    vd_layer_scales scales;
    vd_xnn_op *xnn;
} cpu_quantize;

/* An SSD plan's own part (cpu_plan.ssd, vd_cpu_ssd.c): one convolution or max-pool
 * per layer of every layer list (backbone, extras, then the heads of every level),
 * in the lists' order; the heads' float32 outputs. */
typedef struct {
    cpu_conv *convs;         /* [n_ops] (unused by other layers) */
    dnnl_primitive_t *pools; /* [n_ops] */
    vd_xnn_op **pools_xnn;   /* [n_ops]: XNNPACK's max-pools instead (cpu_state.xnn) */
    /* a dilated convolution below AVX-512: reorders of its input into NHWC and of its
     * output back (oneDNN 2.6 has only reference kernels for it in nChw8c) */
    dnnl_primitive_t *to_nhwc, *from_nhwc; /* [n_ops] */
    int n_ops;
    float *se_work; /* squeeze-and-excitation's: 3 x the widest */
    /* int8 (SSD300): a layer's real output quantised to u8 for the next layer or
     * list (the first convolution's, every feature map's but the last) [n_ops] */
    cpu_quantize *quant;
    cpu_tensor *cls_out[VD_MAX_FPN_LEVELS]; /* [h][w][A * K], float32 */
    cpu_tensor *reg_out[VD_MAX_FPN_LEVELS]; /* [h][w][4A], float32 */
} cpu_ssd_plan;

/* The SSD heads' last convolutions, output channels padded with zeros to the
 * channel block (as cpu_one_stage_weights), prepared once per context. */
typedef struct {
    vd_conv cls[VD_MAX_FPN_LEVELS], reg[VD_MAX_FPN_LEVELS];
} cpu_ssd_weights;

typedef struct cpu_state cpu_state;
typedef struct cpu_step cpu_step;
typedef struct cpu_detector cpu_detector;

/* A one-stage detector's plan (cpu_plan.one_stage, vd_cpu_onestage.c): on every
 * level, each branch's 3x3 conv + ReLU layers over two hidden buffers shared by
 * the levels and branches (they run one after the other), then its last
 * convolution into float32 outputs (channels padded to the channel block:
 * cpu_one_stage_weights). */
typedef struct {
    cpu_conv cls_convs[VD_MAX_FPN_LEVELS][VD_MAX_HEAD_CONVS];
    cpu_conv reg_convs[VD_MAX_FPN_LEVELS][VD_MAX_HEAD_CONVS];
    cpu_conv cls_logits[VD_MAX_FPN_LEVELS];
    cpu_conv bbox_reg[VD_MAX_FPN_LEVELS];
    cpu_tensor *cls_out[VD_MAX_FPN_LEVELS]; /* [h][w][A * K], float32 */
    cpu_tensor *reg_out[VD_MAX_FPN_LEVELS]; /* [h][w][4A (FCOS: + A centerness)], float32 */
    /* int8 (one_stage_plan_int8()): each P level quantised to s8 for both branches'
     * first convolution; with GroupNorm, each tower layer's output (after its
     * GroupNorm and ReLU, in float) quantised to u8 for the next one */
    cpu_quantize level_q[VD_MAX_FPN_LEVELS];
    cpu_quantize cls_q[VD_MAX_FPN_LEVELS][VD_MAX_HEAD_CONVS];
    cpu_quantize reg_q[VD_MAX_FPN_LEVELS][VD_MAX_HEAD_CONVS];
    /* int8 LastLevelP6P7 (one_stage_plan_p6p7_int8()): P5 quantised to s8 for P6
     * (where P6 reads P5), relu(P6) quantised to u8 for P7 */
    cpu_quantize p6_q, p7_q;
} cpu_one_stage_plan;

/* A one-stage head's last convolutions with their output channels padded with
 * zeros to a multiple of the channel block (as the RPN head's: oneDNN's SSE4.1
 * kernels take no partial block), prepared once per context. */
typedef struct {
    vd_conv cls_logits; /* [A * K padded][C][3][3] */
    vd_conv bbox_reg;   /* [4A padded][C][3][3]; FCOS: bbox_reg and bbox_ctrness, [4A + A
                         * padded] */
} cpu_one_stage_weights;

/* What a step runs: step_conv(), step_primitive(), step_wait()
 * or a hand-written op over the step's operands (a backbone's own, such as
 * MobileNetV3's squeeze-and-excitation). */
typedef gboolean (*cpu_step_fn)(cpu_state *st, const cpu_step *step, GError **error);

/* One step of a plan's run (cpu_plan.steps): built once per input size by the
 * planners (plan_step() and its helpers), run per frame in order by
 * run_steps(). Each kind uses its own fields; after it runs, calibration keeps
 * the largest |value| of @record_t under @record (NULL unless the context
 * calibrates). */
struct cpu_step {
    cpu_step_fn run;
    const char *what; /* in errors */
    /* step_primitive(): @prim on @args (an int8 one's @scales appended) */
    dnnl_primitive_t prim;
    dnnl_exec_arg_t args[2];
    int n_args;
    const vd_layer_scales *scales;
    const cpu_conv *conv; /* step_conv() */
    /* a hand-written op's operands */
    const cpu_tensor *src;
    cpu_tensor *dst;
    const void *data;
    float *work;
    const char *record; /* calibration (in cpu_plan.names) */
    const cpu_tensor *record_t;
    /* multiply-adds of one run of a hand-written op that is a product (the
     * squeeze-and-excitation's); a convolution step counts @conv's */
    double macs;
};

typedef struct {
    int padded_h, padded_w;
    GPtrArray *tensors; /* cpu_tensor*, all of the plan's */
    GPtrArray *buffers; /* aligned activation buffers (free()), all of the plan's */

    cpu_tensor *input;   /* [Hp][Wp][3] float32 NHWC, written by pre-processing */
    cpu_tensor *stem_in; /* its NCHW copy (bfloat16 in bf16 mode, fp16 in fp16), the stem's input:
                          * oneDNN's fast kernels for 3 input channels want NCHW */
    dnnl_primitive_t input_convert;
    cpu_conv stem;
    /* the backbone's own part, by the model's backbone type: read and written
     * only by its file (plan->backbone's hooks); the other part shares its memory */
    union {
        cpu_resnet_plan resnet; /* VD_BACKBONE_RESNET */
        cpu_mnv3_plan mnv3;     /* VD_BACKBONE_MOBILENET_V3 */
    };

    cpu_tensor *returned_out[4]; /* the FPN's inputs (ResNet: stage outputs) */
    float returned_scale[4];     /* int8: their scales */

    int n_levels; /* FPN outputs, incl. the pool level */
    int n_returned;
    cpu_tensor *fpn_sum[4];                 /* lateral + upsampled ("last" chain) */
    cpu_tensor *fpn_out[VD_MAX_FPN_LEVELS]; /* P levels */
    cpu_conv fpn_inner[4];
    cpu_conv fpn_layer[4];
    /* LastLevelP6P7 (one-stage detectors): P6 and P7 are fpn_out[n_returned],
     * fpn_out[n_returned + 1]; P7's input is relu(P6), a copy */
    cpu_conv fpn_p6, fpn_p7;
    cpu_tensor *p6_relu;

    /* int8: the quantisation of the P levels for the RPN's first convolution */
    dnnl_primitive_t fpn_quantize[VD_MAX_FPN_LEVELS];
    vd_layer_scales fpn_quantize_scales[VD_MAX_FPN_LEVELS];
    vd_xnn_op *fpn_quantize_xnn[VD_MAX_FPN_LEVELS]; /* XNNPACK's instead (cpu_state.xnn) */

    cpu_tensor *rpn_hidden[VD_MAX_FPN_LEVELS];  /* views of one buffer: levels run in turn */
    cpu_tensor *rpn_hidden2[VD_MAX_FPN_LEVELS]; /* conv_depth > 1: the other of a pair */
    cpu_conv rpn_conv_more[VD_MAX_FPN_LEVELS][VD_MAX_RPN_CONVS - 1];
    cpu_tensor *rpn_out[VD_MAX_FPN_LEVELS]; /* [h][w][A + 4A], blocked */
    cpu_conv rpn_conv[VD_MAX_FPN_LEVELS];
    cpu_conv rpn_head[VD_MAX_FPN_LEVELS];

    /* Buffers shared by intermediates whose lifetimes do not overlap:
     * scratch: the stem output (dead after the max-pool), then the first stage's
     *   output C2 when that is a tensor of its own;
     * temps: the network input and its NCHW copy (dead after the stem), the
     *   max-pool output (unless it is a stage output) and the blocks' two
     *   intermediates; then the FPN's top-down sums; then the RPN's hidden layer;
     *   then the box head's RoI features.
     * The P levels reuse the backbone outputs C_i they are computed from (C_i is
     * dead once the FPN's lateral convolution has read it) where those are large
     * enough. */
    void *scratch;
    size_t scratch_bytes;
    void *temps;
    size_t temps_bytes;

    float *anchors; /* all levels, [n_anchors][4] */
    int n_anchors;
    int level_anchor_offset[VD_MAX_FPN_LEVELS + 1];

    cpu_one_stage_plan one_stage; /* one-stage detectors' heads */
    cpu_ssd_plan ssd;             /* SSD's and SSDlite's layers and heads */

    /* RoI pooler (spec §5.2), cached as torchvision does on its first forward */
    vd_pooler_levels pooler;
    vd_pooler_levels mask_pooler;     /* Mask R-CNN's second pooler (its own levels) */
    vd_pooler_levels keypoint_pooler; /* Keypoint R-CNN's (its own levels) */

    /* our Winograd weights by the model weights they transform: the RPN's 3x3
     * convolution runs on every level with one set */
    GHashTable *wino_weights;

    /* The run: the backbone's steps (to steps_backbone: from the input
     * conversion to the FPN's inputs), the FPN's (to steps_fpn), the
     * detector's heads' convolutions (to the end: the RPN's, a one-stage head's),
     * each part ending with the stream's wait. */
    GArray *steps; /* cpu_step */
    guint steps_backbone, steps_fpn;
    GStringChunk *names; /* the steps' calibration names */

    const cpu_backbone *backbone; /* the one that planned it (plan_free) */
    const cpu_detector *detector; /* idem */
} cpu_plan;

/* One linear layer of the box head as a matmul primitive for @rows RoIs over the
 * context's box-head buffers; bias (and ReLU) fused. */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t src, weights, dst; /* weights: the layer's packed copy (borrowed) */
    int rows;
    double macs;    /* rows x in x out */
    vd_xnn_op *xnn; /* XNNPACK's (cpu_packed_linear.xnn, borrowed) instead of prim */
} cpu_linear;

#define BOX_HEAD_CACHE 4

/* Row counts are rounded up to a multiple of this, so that a video's proposal
 * counts reuse a handful of primitives; the extra rows compute on stale RoI
 * features and are ignored. The box head's most frequent count, the post-NMS top-n,
 * runs exactly (150 rows, not 160: 6 % of the 320 MobileNet's box head). */
#define BOX_ROWS_QUANTUM 16

/* One layer of a convolution stack over RoIs: a convolution or transposed
 * convolution over all RoIs at once (a batch of rows maps), src and dst in the
 * layouts oneDNN picks; bias (a folded batch-norm's where the layer has one) and
 * ReLU fused. */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t src, weights, bias, dst;
    vd_xnn_op *xnn; /* XNNPACK's (cpu_state.xnn) instead of prim, NHWC */
    /* ours, F(2x2, 3x3) float32 (roi_winograd), instead of prim: src and dst in
     * the blocked layout (block_tag), which wino_in and wino_out (no data) describe;
     * maps of size x size, ReLU fused or not */
    vd_wino *wino;
    dnnl_memory_t wino_in, wino_out;
    int size;
    gboolean relu;
} cpu_roi_layer;

/* What a layer of a stack computes: @conv's weights, as a convolution or, with
 * @deconv, a transposed convolution (torch's [in][out][kh][kw] weights: oneDNN's
 * iohw); @relu fused or not. */
typedef struct {
    const vd_conv *conv;
    gboolean deconv;
    gboolean relu;
} cpu_roi_layer_spec;

#define CPU_MAX_ROI_LAYERS                                                                         \
    MAX(MAX(VD_MAX_BOX_CONVS, VD_MAX_MASK_CONVS + 2), VD_MAX_KEYPOINT_CONVS + 1)

/* A convolution stack over @rows RoIs (FastRCNNConvFCHead of v2's box head, the
 * mask branch): the RoI features (torch's NCHW per RoI) reordered into the first
 * layer's layout, the layers alternating between two buffers, the last output
 * reordered back to NCHW. */
typedef struct {
    cpu_roi_layer layers[CPU_MAX_ROI_LAYERS];
    int n_layers; /* 0: unused */
    /* a reorder before layer j where its src layout (oneDNN's choice for it) is
     * not the previous layer's dst layout (the deconvolution's, typically) */
    dnnl_primitive_t relayout[CPU_MAX_ROI_LAYERS];
    dnnl_memory_t relayout_from[CPU_MAX_ROI_LAYERS], relayout_to[CPU_MAX_ROI_LAYERS];
    dnnl_primitive_t to_blocked, to_plain;
    dnnl_memory_t plain_in, blocked_in, blocked_out, plain_out; /* plain: handles set per run */
    void *buffers[2];
    /* XNNPACK's layers (NHWC): no oneDNN primitive; the RoIs' NCHW <-> NHWC
     * transposes are loops (for fp16, which oneDNN reorders in reference loops on
     * aarch64): @rows of @in_c x @in_size^2 in, @out_c x @out_size^2 out, @es bytes
     * per element */
    int rows, in_c, in_size, out_c, out_size;
    size_t es;
    double macs; /* the layers' multiply-adds over @rows RoIs (vd_stage_stats.gflop) */
} cpu_roi_convs;

typedef struct {
    int rows;                       /* 0: unused */
    cpu_linear fc6, fc7, predictor; /* fc7 unused (prim NULL) with the conv head */
    /* the conv head (v2), its output written back over the RoI features for fc6 */
    cpu_roi_convs convs;
} cpu_box_head_plan;

/* A RoI head over the final detections (the mask branch, engine/MASKRCNN.md; the
 * keypoint branch, engine/KEYPOINTRCNN.md) for @rows detections, float32 whatever
 * the context's precision: its convolution stack (3x3 convolutions with bias and
 * ReLU fused, the transposed convolution, the mask's 1x1 logits convolution) from
 * the RoI features to its output [rows][out_c][out_size][out_size]. */
typedef struct {
    int rows; /* 0: unused */
    cpu_roi_convs convs;
    float *pooled; /* [rows][C][P][P] */
    float *out;    /* [rows][out_c][out_size][out_size] */
    int out_c, out_size;
} cpu_roi_head_plan;

#define ROI_HEAD_PLAN_CACHE 2

/* A few row counts' plans of one head (round robin) */
typedef struct {
    cpu_roi_head_plan plans[ROI_HEAD_PLAN_CACHE];
    int next;
} cpu_roi_head_plans;

/* A box-head layer's weights, packed once in the layout the matmul primitive
 * wants; the layout does not depend on the number of rows, so primitives for
 * other row counts are created with this layout. */
typedef struct {
    dnnl_memory_t weights;
    dnnl_memory_t bias;
    int in, out;
    vd_xnn_op *xnn; /* XNNPACK's, with its own packed weights (cpu_state.xnn) */
} cpu_packed_linear;

struct cpu_state {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int n_threads;
    gboolean bf16; /* the float layers in bfloat16 */
    gboolean fp16; /* the float layers in fp16 (XNNPACK's layers only) */
    /* int8: the ResNet body's convolutions (the stem aside) and the FPN's lateral
     * ones, on activations quantised with the model's calibrated ranges */
    gboolean int8;
    /* calibration (float32): activation name -> max |value| seen (float *), over
     * every frame run */
    GHashTable *ranges_seen;
    int frames_seen;
    gboolean winograd;      /* oneDNN's Winograd (2.x on AVX-512) */
    gboolean own_winograd;  /* ours (vd_cpu_winograd.c) where oneDNN has none */
    vd_wino_kind wino_kind; /* ours: which (vd_cpu_winograd.h) */
    /* ours F(2x2, 3x3) for the float32 3x3 convolutions of the RoI heads over the
     * detections (mask, keypoint: roi_convs_init), in every precision's context */
    gboolean roi_winograd;
    vd_cpu_caps caps;            /* oneDNN's effective ISA (ONEDNN_MAX_CPU_ISA caps it),
                                  * read per architecture */
    int cb;                      /* the ISA's channel block: 16 or 8 */
    dnnl_format_tag_t block_tag; /* dnnl_nChw16c or dnnl_nChw8c */
    dnnl_format_tag_t act_tag;   /* the activations' layout: block_tag or dnnl_nhwc
                                  * (choose_layout) */
    /* XNNPACK runs the convolutions, pooling and linear layers (float32 or fp16, NHWC)
     * where oneDNN has only reference kernels (vd_xnn_choose: @layers_why says
     * why, either way); NULL: oneDNN does */
    vd_xnn *xnn;
    const char *layers_why;
    const vd_model *model;
    const cpu_backbone *backbone; /* the model's (cpu_backbones[]) */

    /* size-independent, prepared once */
    /* cls and bbox 1x1 convs merged: [A + 4A][C], with zero output channels up to a
     * multiple of the channel block (rpn_head_out): oneDNN's SSE4.1 kernels take
     * no partial block and would run the reference loops */
    float *rpn_head_weight;
    float *rpn_head_bias;
    int rpn_head_out;
    cpu_packed_linear fc6, fc7, predictor; /* fc6 in our RoIAlign order [P*P][C] */

    /* box-head workspace for up to box_capacity RoIs (grown on demand) */
    int box_capacity;
    void *pooled;    /* [cap][P*P*C], f32, bf16 or fp16 */
    void *h6, *h7;   /* [cap][rep], f32, bf16 or fp16 */
    float *head_out; /* [cap][5K] */
    cpu_box_head_plan box_plans[BOX_HEAD_CACHE];
    int box_plan_next;
    cpu_roi_head_plans mask_plans;
    cpu_roi_head_plans keypoint_plans;

    /* One scratchpad for all convolutions and matmuls (they run one at a time),
     * sized for the largest: oneDNN's default allocates it at every execution,
     * which for the Winograd kernels means tens of MB of fresh pages per frame. */
    size_t scratch_needed;
    size_t scratch_size;
    void *scratch;
    dnnl_memory_t scratch_mem;
    /* the same for our Winograd convolutions (their per-thread tile matrices) */
    size_t wino_ws_needed;
    size_t wino_ws_size;
    void *wino_ws;

    const cpu_detector *detector;    /* the model's kind (cpu_detectors[]) */
    cpu_one_stage_weights one_stage; /* a one-stage detector's (vd_cpu_onestage.c) */
    cpu_ssd_weights ssd;             /* SSD's (vd_cpu_ssd.c) */

    cpu_plan *plan;
    cpu_plan *planning; /* the plan being built (plan_new) */
};

/* A backbone on the CPU, chosen by the model's backbone type (cpu_backbones[] in
 * vd_cpu_backend.c).
 * @plan: the network's input tensors (plan->input, plan->stem_in and the
 *   conversion between them: plan_input(), the first step), the backbone's
 *   tensors and convolutions (its own part of the plan, plan->resnet or
 *   plan->mnv3; plan->stem is every backbone's), the plan's two shared
 *   buffers (plan->scratch, plan->temps, sized for the FPN and RPN as well:
 *   see cpu_plan), the FPN's inputs (plan->returned_out[], and
 *   plan->returned_scale[] for int8) and the steps that compute them from
 *   plan->input, in order (plan_step_conv(), plan_step_primitive(),
 *   plan_step(), with their calibration records: step_record()); plan_new()
 *   ends them with the stream's wait, and plan_fpn() follows.
 * @clear: frees what @plan created beyond the plan's tensors, buffers and steps
 *   (also on a plan that failed half-way).
 * @kernels: appends its primitives (cpu_kernels()) under their layers' names.
 * @int8: whether it runs int8 (and calibrates). */
struct cpu_backbone {
    vd_backbone_type type;
    gboolean (*plan)(cpu_state *st, cpu_plan *plan, GError **error);
    void (*clear)(cpu_plan *plan);
    void (*kernels)(const cpu_state *st, const cpu_plan *plan, GArray *out, GStringChunk *strings);
    gboolean int8;
};

extern const cpu_backbone vd_cpu_resnet;
extern const cpu_backbone vd_cpu_mnv3;
/* SSD's and SSDlite's feature extractors (vd_cpu_ssd.c): the feature maps into
 * plan->fpn_out[] (plan->n_levels of them), no FPN after them */
extern const cpu_backbone vd_cpu_ssd_backbone;

/* MobileNetV3's squeeze-and-excitation on @t in place (vd_cpu_mnv3.c), @work 3 x
 * channels */
/* One squeeze-and-excitation's two layers, transposed once per plan ([in][out]) so
 * that their products run vectorised over the outputs (plan_squeeze_excite). */
typedef struct {
    const vd_linear *fc1, *fc2;
    float *w1t; /* [C][S] */
    float *w2t; /* [S][C] */
} cpu_se;
cpu_se *plan_squeeze_excite(cpu_plan *plan, const vd_linear *fc1, const vd_linear *fc2,
                            GError **error);
void cpu_squeeze_excite(cpu_tensor *t, const cpu_se *se, float *work);
/* int8 LastLevelP6P7 (vd_cpu_onestage.c): P6 and P7 as int8 convolutions writing
 * real P levels, into plan->fpn_out[n_returned], [n_returned + 1] */
gboolean one_stage_plan_p6p7_int8(cpu_state *st, cpu_plan *plan, GError **error);
/* int8: a step quantising @from into @to of scale @scale (plan_quantize()) into
 * @q; what it holds freed (vd_cpu_onestage.c) */
gboolean cpu_quantize_plan(cpu_state *st, cpu_plan *plan, const cpu_tensor *from, cpu_tensor *to,
                           float scale, cpu_quantize *q, GError **error);
void cpu_quantize_clear(cpu_quantize *q);
/* @w's weights followed by @w2's (NULL: none), output channels padded with zeros to
 * a multiple of @cb, into @out (its weight and bias newly allocated) */
gboolean one_stage_pad_conv(const vd_conv *w, const vd_conv *w2, int cb, vd_conv *out,
                            GError **error);

/* A kind of detector on the CPU (vd_detector_kind), over the backbone's and the
 * FPN's steps and the anchors, which every kind shares (cpu_detectors[] in
 * vd_cpu_backend.c: the two-stage one in vd_cpu_rcnn.c, the one-stage one in
 * vd_cpu_onestage.c, SSD's in vd_cpu_ssd.c).
 * @supports: what it refuses beyond cpu_supports()'s checks (precision, shapes).
 * @prepare: its size-independent weights, once per context (@clear frees them).
 * @plan: its steps after the FPN's (its heads' convolutions), its own part of
 *   the plan (@plan_clear frees what is not the plan's tensors and buffers).
 * @detect: after every step has run, the frame's detections into @result from
 *   the heads' outputs (@rh x @rw the resized size), observing its tensors when
 *   @observe, marking its stages.
 * @kernels: appends its primitives (cpu_kernels()). */
struct cpu_detector {
    vd_detector_kind kind;
    gboolean (*supports)(const vd_model *model, vd_precision precision,
                         const vd_context_params *params, GError **error);
    gboolean (*prepare)(cpu_state *st, GError **error);
    void (*clear)(cpu_state *st);
    gboolean (*plan)(cpu_state *st, cpu_plan *plan, GError **error);
    void (*plan_clear)(cpu_plan *plan);
    gboolean (*detect)(cpu_state *st, vd_context *ctx, cpu_plan *plan, int rh, int rw,
                       const vd_image *image, vd_result *result, gboolean observe, GError **error);
    void (*kernels)(const cpu_state *st, const cpu_plan *plan, GArray *out, GStringChunk *strings);
};

extern const cpu_detector vd_cpu_two_stage; /* vd_cpu_rcnn.c */
extern const cpu_detector vd_cpu_one_stage; /* vd_cpu_onestage.c, engine/RETINANET.md */
extern const cpu_detector vd_cpu_ssd;       /* vd_cpu_ssd.c, engine/SSD.md */

/* The final detections: @kept boxes of @boxes ([n][4] in the resized @rh x @rw
 * image), @scores and @labels at indices @keep, rescaled to @image's size, into
 * @result (its detections newly allocated). */
void write_detections(const vd_image *image, int rh, int rw, const float *boxes,
                      const float *scores, const int *labels, const int *keep, int kept,
                      vd_result *result);
/* Batched NMS over @m candidates (@boxes, @scores, @labels, in the resized @rh x @rw
 * image) at the context's threshold, at most its max_detections of them kept
 * (their indices into @keep, which holds @m), then write_detections(); returns how
 * many were kept. */
int write_nms_detections(vd_context *ctx, const vd_image *image, int rh, int rw, const float *boxes,
                         const float *scores, const int *labels, int m, int *keep,
                         vd_result *result);
/* Passes @c channels of tensor @t to the context's observer as float32 NCHW
 * (all of them when @c is 0). */
void observe_tensor_channels(vd_context *ctx, const char *name, const cpu_tensor *t, int c);
/* Infinite and NaN values among @n floats (vd_result.n_nonfinite). */
int count_nonfinite(const float *values, size_t n);

/* Memory and tensors */
void *try_alloc(size_t n_floats, const char *what, GError **error);
void *alloc_aligned(size_t bytes, const char *what, GError **error);
size_t round64(size_t n);
size_t tensor_bytes(int h, int w, int c, dnnl_data_type_t dt, int cb);
/* The float layers' activation type: dnnl_f16, dnnl_bf16 or dnnl_f32. */
dnnl_data_type_t act_dt(const cpu_state *st);
size_t act_bytes(const cpu_state *st, int h, int w, int c, dnnl_data_type_t dt);
size_t tensor_size(const cpu_tensor *t);
cpu_tensor *plan_tensor_tag(cpu_state *st, cpu_plan *plan, int h, int w, int c, dnnl_data_type_t dt,
                            dnnl_format_tag_t tag, void *data, GError **error);
cpu_tensor *plan_tensor(cpu_state *st, cpu_plan *plan, int h, int w, int c, dnnl_data_type_t dt,
                        gboolean act, void *data, GError **error);
void tensor_strides(const cpu_tensor *t, int *vb, size_t *block_stride, size_t *pixel_stride);

/* Convolutions */
int conv_out_size(int n, int kernel, int stride, int padding);
gboolean conv_init_model_q(cpu_state *st, cpu_conv *cv, const vd_conv *w, cpu_tensor *src,
                           cpu_tensor *dst, gboolean sum, vd_activation act, const cpu_quant *q,
                           GError **error);
gboolean conv_init_model(cpu_state *st, cpu_conv *cv, const vd_conv *w, cpu_tensor *src,
                         cpu_tensor *dst, gboolean sum, vd_activation act, GError **error);
gboolean conv_run(cpu_state *st, const cpu_conv *cv, GError **error);
void conv_clear(cpu_conv *cv);

/* The network input (plan->input: float32 NHWC, which pre-processing writes, at
 * @temps) and the stem's copy of it (plan->stem_in: @dt in the stem's layout, at
 * @temps + @in_bytes), with the conversion between them. */
gboolean plan_input(cpu_state *st, cpu_plan *plan, char *temps, size_t in_bytes,
                    dnnl_data_type_t dt, GError **error);

/* The run's steps: a new step of @run (zeroed but for @run and @what) at the
 * end of the plan's (valid until the next one is added); a convolution; a
 * oneDNN primitive on @src and @dst under @src_arg and @dst_arg (an int8
 * one's @scales appended, NULL for none); the calibration record of @step: @t's
 * largest |value| under the name @format gives (built only when the context
 * calibrates). */
cpu_step *plan_step(cpu_plan *plan, cpu_step_fn run, const char *what);
cpu_step *plan_step_conv(cpu_plan *plan, const cpu_conv *cv);
cpu_step *plan_step_primitive(cpu_plan *plan, dnnl_primitive_t prim, int src_arg,
                              const cpu_tensor *src, int dst_arg, const cpu_tensor *dst,
                              const vd_layer_scales *scales, const char *what);
/* XNNPACK's @op (cpu_state.xnn) from @src to @dst. */
cpu_step *plan_step_xnn(cpu_plan *plan, vd_xnn_op *op, const cpu_tensor *src, cpu_tensor *dst,
                        const char *what);
void step_record(const cpu_state *st, cpu_plan *plan, cpu_step *step, const cpu_tensor *t,
                 const char *format, ...) G_GNUC_PRINTF(5, 6);
gboolean step_wait(cpu_state *st, const cpu_step *step, GError **error);

/* int8: a step quantising the real values of @from into @to (u8 or s8) of scale
 * @scale: XNNPACK's conversion where the layers run XNNPACK (*@op), else oneDNN's
 * reorder (*@prim with its *@scales); the plan's to free. */
gboolean plan_quantize(cpu_state *st, cpu_plan *plan, const cpu_tensor *from, cpu_tensor *to,
                       float scale, dnnl_primitive_t *prim, vd_layer_scales *scales, vd_xnn_op **op,
                       GError **error);

/* int8: scales from the model's calibrated ranges; calibration's records */
gboolean range_scale(const cpu_state *st, const char *name, gboolean is_unsigned, float *scale,
                     GError **error);
gboolean range_record(cpu_state *st, const char *name, const cpu_tensor *t, GError **error);

/* RoI heads over the final detections (vd_cpu_roi.c): the plan of @plans for
 * @n detections (rows rounded up as the box head's; created on first use) of the
 * stack @specs (@n_specs layers) over @pool_size x @pool_size RoI features; the
 * RoIAlign of @n boxes @boxes (resized image) into @hp->pooled with @pooler over
 * the first @n_levels FPN levels; the stack's run into @hp->out; the kernels of
 * every plan of @plans, layer j named @names[j] (kind @kinds[j]) and the reorders
 * @head.in/.out/.relayout<j>. @what names the head in errors. */
cpu_roi_head_plan *roi_head_plan(cpu_state *st, cpu_roi_head_plans *plans,
                                 const cpu_roi_layer_spec *specs, int n_specs, int n, int pool_size,
                                 const char *what, GError **error);
gboolean roi_head_pool(cpu_plan *plan, vd_pooler_levels *pooler, int n_levels, const float *boxes,
                       int n, int resized_h, int pool_size, int sampling_ratio,
                       cpu_roi_head_plan *hp, const char *what, GError **error);
gboolean roi_head_run(cpu_state *st, cpu_roi_head_plan *hp, const char *what, GError **error);
void roi_head_plans_clear(cpu_roi_head_plans *plans);
void roi_head_kernels(GArray *out, GStringChunk *strings, const cpu_roi_head_plans *plans,
                      const char *head, const char *const *kinds, const char *const *names);

/* The keypoint branch (vd_cpu_keypoint.c, engine/KEYPOINTRCNN.md) for the @n
 * detections of @result, whose boxes in the resized image are @resized_boxes:
 * RoIAlign, the keypoint head, the heatmaps' upsampling and decoding, each
 * detection's keypoints in the frame; its kernels. */
gboolean run_keypoint_head(cpu_state *st, vd_context *ctx, cpu_plan *plan,
                           const float *resized_boxes, int resized_h, int resized_w,
                           gboolean observe, vd_result *result, GError **error);
void keypoint_kernels(const cpu_state *st, GArray *out, GStringChunk *strings);

/* cpu_kernels(): one vd_kernel_info for @prim (nothing when NULL); the same for
 * XNNPACK's @op where @prim is NULL; for a convolution (its primitive, our
 * Winograd or XNNPACK's) */
void kernel_add(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const char *kind,
                const char *layer_fmt, ...) G_GNUC_PRINTF(5, 6);
void kernel_add_op(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const vd_xnn_op *op,
                   const char *kind, const char *layer_fmt, ...) G_GNUC_PRINTF(6, 7);
void conv_kernels(GArray *out, GStringChunk *strings, const cpu_conv *cv, const char *layer);
/* Our Winograd's entry for @layer (of @kind): vd_wino_name(). */
void kernel_add_wino(GArray *out, GStringChunk *strings, const vd_wino *wino, const char *kind,
                     const char *layer);

/* The plan's machinery (vd_cpu_plan.c): a plan for a padded input size (the
 * backbone's, the FPN's and the detector's steps) and its release; running steps
 * [@from, @to) and their multiply-adds; the element size of @dt; the scratchpad
 * every primitive shares (sized by note_scratchpad() at planning, allocated by
 * ensure_scratchpad() before a run); a convolution from raw weights (@dilation 1
 * for none); one oneDNN primitive's run with its arguments; the ReLU step (its
 * operands @step->src, @step->dst); the observer's copy of a whole tensor. */
cpu_plan *plan_new(cpu_state *st, int padded_h, int padded_w, GError **error);
void plan_free(cpu_plan *plan);
gboolean run_steps(cpu_state *st, const cpu_plan *plan, guint from, guint to, GError **error);
double steps_macs(const cpu_plan *plan, guint from, guint to);
size_t dt_size(dnnl_data_type_t dt);
void note_scratchpad(cpu_state *st, const_dnnl_primitive_desc_t pd);
gboolean ensure_scratchpad(cpu_state *st, GError **error);
gboolean conv_init(cpu_state *st, cpu_conv *cv, const float *weight, const float *bias, int out_c,
                   int in_c, int kernel, int stride, int padding, int groups, int dilation,
                   cpu_tensor *src, cpu_tensor *dst, gboolean sum, vd_activation act,
                   const cpu_quant *q, GError **error);
gboolean layer_run(cpu_state *st, dnnl_primitive_t prim, dnnl_memory_t src, dnnl_memory_t weights,
                   dnnl_memory_t bias, dnnl_memory_t dst, const vd_layer_scales *scales,
                   const char *what, GError **error);
gboolean step_relu(cpu_state *st, const cpu_step *step, GError **error);
void observe_tensor(vd_context *ctx, const char *name, const cpu_tensor *t);

/* The FPN and the anchors (vd_cpu_fpn.c): planned after the backbone for the
 * detectors with an FPN. */
gboolean plan_fpn(cpu_state *st, cpu_plan *plan, GError **error);
gboolean plan_anchors(cpu_state *st, cpu_plan *plan, GError **error);

/* The RoI machinery (vd_cpu_roi.c): the box pooler's level scales for a resized
 * height; RoIAlign of @n_rois boxes (@roi_index: their rows in @out) on level @f;
 * the linear layers (weights packed once per context, a matmul per row count); the
 * convolution stacks over RoIs. */
void pooler_scales(cpu_state *st, cpu_plan *plan, int resized_h);
void roi_align_features(const cpu_tensor *f, const float *rois, const int *roi_index, int n_rois,
                        float spatial_scale, int pooled, int sampling_ratio, void *out,
                        dnnl_data_type_t out_dt, size_t out_roi_stride);
gboolean linear_pack(cpu_state *st, cpu_packed_linear *pl, const float *weight, const float *bias,
                     int in, int out, int rows, gboolean borrow, gboolean relu, GError **error);
void packed_linear_clear(cpu_packed_linear *pl);
gboolean linear_init(cpu_state *st, cpu_linear *l, const cpu_packed_linear *pl, int rows, void *src,
                     dnnl_data_type_t src_dt, void *dst, dnnl_data_type_t dst_dt, gboolean relu,
                     GError **error);
gboolean linear_run(cpu_state *st, const cpu_linear *l, const cpu_packed_linear *pl,
                    GError **error);
void linear_clear(cpu_linear *l);
gboolean roi_convs_init(cpu_state *st, cpu_roi_convs *rc, const cpu_roi_layer_spec *specs, int n,
                        int rows, int size, dnnl_data_type_t dt, gboolean follow_layouts,
                        gboolean winograd, const char *what, GError **error);
gboolean roi_convs_run(cpu_state *st, const cpu_roi_convs *rc, void *in, void *out,
                       const char *what, GError **error);
void roi_convs_clear(cpu_roi_convs *rc);

/* The two-stage detector's box-head plans (vd_cpu_rcnn.c), freed with the context. */
void box_plans_clear(cpu_state *st);

G_END_DECLS

#endif /* VD_CPU_PRIVATE_H */
