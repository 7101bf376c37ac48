/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: the loaded model (configuration and folded float32 weights), shared by
 * the loader and every backend. Not installed. */
#ifndef VD_MODEL_PRIVATE_H
#define VD_MODEL_PRIVATE_H

#include "visiondetect/vd.h"

G_BEGIN_DECLS

/* feature levels a head runs on: the returned backbone layers (at most 4) + the pool
 * level or P6/P7; SSD's and SSDlite's six feature maps */
#define VD_MAX_FPN_LEVELS 6
#define VD_MAX_ANCHORS_PER_LEVEL 16
#define VD_MAX_BLOCKS 64
#define VD_MAX_SE_CHANNELS 4096  /* squeeze width of a MobileNetV3 SE block */
#define VD_MAX_RPN_CONVS 4       /* RPNHead conv_depth (fasterrcnn_resnet50_fpn_v2: 2) */
#define VD_MAX_BOX_CONVS 8       /* FastRCNNConvFCHead conv layers (v2: 4) */
#define VD_MAX_MASK_CONVS 8      /* MaskRCNNHeads conv layers (4) */
#define VD_MAX_HEAD_CONVS 8      /* a one-stage head branch's 3x3 conv layers (4) */
#define VD_MAX_KEYPOINT_CONVS 16 /* KeypointRCNNHeads conv layers (8) */
#define VD_MAX_KEYPOINTS 256     /* KeypointRCNNPredictor's keypoints (COCO: 17) */

/* The two kinds of detector over the shared backbone, FPN and anchors: torchvision's
 * GeneralizedRCNN (RPN, RoI heads) and its one-stage detectors (a dense head on
 * every FPN level, decoded directly; engine/RETINANET.md). */
typedef enum {
    VD_DETECTOR_TWO_STAGE = 0, /* "fasterrcnn", "maskrcnn", "keypointrcnn" */
    VD_DETECTOR_ONE_STAGE,     /* "retinanet", "fcos" */
    VD_DETECTOR_SSD,           /* "ssd", "ssdlite": no FPN, default boxes, softmax
                                * classes (engine/SSD.md) */
} vd_detector_kind;

/* A one-stage detector's head (vd_config.head) */
typedef enum {
    VD_HEAD_RETINANET = 0, /* RetinaNetHead: sigmoid classes, BoxCoder deltas */
    VD_HEAD_FCOS,          /* FCOSHead: sigmoid classes and centerness, distances
                            * (BoxLinearCoder) after a ReLU */
} vd_head_type;

typedef struct {
    vd_head_type type;
    int n_cls_convs, n_reg_convs; /* 3x3 conv + ReLU layers of each branch (4) */
    int topk_candidates;          /* per level, after the score threshold (1000) */
    /* GroupNorm between each convolution (then without bias) and its ReLU
     * (retinanet_resnet50_fpn_v2): 0 groups when the head has none */
    int norm_groups;
    float norm_eps;
    gboolean normalize_by_size; /* FCOS's BoxLinearCoder */
} vd_head_config;

typedef enum {
    VD_BACKBONE_RESNET = 0,
    VD_BACKBONE_MOBILENET_V3, /* torchvision's MobileNetV3 features (engine/MOBILENETV3.md) */
    VD_BACKBONE_SSD,          /* SSD's VGG16 or SSDlite's MobileNetV3 feature extractor as the
                               * file's layer lists (vd_ssd_config, engine/SSD.md) */
} vd_backbone_type;

typedef enum {
    VD_ACT_NONE = 0,
    VD_ACT_RELU,
    VD_ACT_HARDSWISH,
    VD_ACT_RELU6, /* min(max(x, 0), 6) */
} vd_activation;

/* How the resize scale is rounded: the rule of the torchvision that exported the file
 * ("transform.resize_scale"; vd_math_transform_size). */
typedef enum {
    VD_RESIZE_SCALE_DOUBLE = 0, /* "double" or no field: torchvision >= 0.16 */
    VD_RESIZE_SCALE_FLOAT32,    /* "float32": torchvision 0.10-0.15 */
} vd_resize_scale;

/* The arithmetic of the bilinear resize: that of the torch that exported the file
 * ("transform.resize_arithmetic"; vd_math.h, vd_cpu_preprocess). */
typedef enum {
    VD_RESIZE_ARITHMETIC_TORCH1 = 0, /* "torch1" or no field: torch 1.13 */
    VD_RESIZE_ARITHMETIC_TORCH2,     /* "torch2": torch 2.x, x86 AVX2/AVX512 build */
} vd_resize_arithmetic;

typedef enum {
    VD_BLOCK_BASIC = 0,  /* resnet18/34 */
    VD_BLOCK_BOTTLENECK, /* resnet50/101/152 */
} vd_block_type;

/* A convolution with batch-norm folded in (or its own bias). Weights are float32,
 * torchvision's OIHW order; bias always present (zeros when the layer had none). */
typedef struct {
    int out_channels;
    int in_channels;
    int kernel; /* square kernels only */
    int stride;
    int padding;
    int groups;    /* 1, or in_channels == out_channels for a depthwise convolution */
    int dilation;  /* 0 or 1: none */
    float *weight; /* [out][in / groups][kernel][kernel] */
    float *bias;   /* [out] */
} vd_conv;

/* A GroupNorm's affine parameters: gamma [channels], beta [channels] (its groups and
 * eps are the configuration's). */
typedef struct {
    int channels;
    float *weight;
    float *bias;
} vd_norm;

/* A linear layer: weight [out][in] as torchvision stores it, bias [out]. */
typedef struct {
    int out_features;
    int in_features;
    float *weight;
    float *bias;
} vd_linear;

/* One ResNet block: relu(conv2(relu(conv1 x)) + shortcut) for BasicBlock,
 * relu(conv3(relu(conv2(relu(conv1 x)))) + shortcut) for Bottleneck. */
typedef struct {
    vd_conv conv1, conv2, conv3; /* conv3 unused (out_channels 0) for BasicBlock */
    gboolean has_downsample;
    vd_conv downsample; /* 1x1, stride of the block */
} vd_block;

/* One MobileNetV3 InvertedResidual block as torchvision's InvertedResidualConfig
 * describes it (input channels: the previous block's output). */
typedef struct {
    int kernel;            /* 3 or 5: the depthwise convolution's */
    int expanded_channels; /* == input channels: no expand 1x1 */
    int out_channels;
    int se_channels;          /* squeeze width, 0 without squeeze-and-excitation */
    vd_activation activation; /* VD_ACT_RELU ("RE") or VD_ACT_HARDSWISH ("HS") */
    int stride;               /* 1 or 2 */
} vd_mnv3_block_config;

/* Its weights: expand (1x1, BN folded, activation; out_channels 0 when absent),
 * depthwise (kxk, BN folded, activation), SE fc1 (1x1 + ReLU) and fc2 (1x1 +
 * hardsigmoid) as linears, project (1x1, BN folded, no activation), and the
 * residual add when stride is 1 and the channel count is kept. */
typedef struct {
    vd_conv expand, depthwise, project;
    vd_linear se_fc1, se_fc2; /* out_features 0 without SE */
    gboolean residual;
} vd_mnv3_block;

/* A ResNet backbone's weights (vd_model.resnet): the blocks of the stages computed. */
typedef struct {
    vd_block blocks[VD_MAX_BLOCKS]; /* stage after stage */
    int n_blocks;
    int stage_first_block[4]; /* index into blocks */
    int n_stages_used;        /* stages computed: up to the last returned one */
} vd_resnet_weights;

/* One past the last block of stage @s (< n_stages_used) of @w. */
static inline int vd_resnet_stage_end(const vd_resnet_weights *w, int s)
{
    return s + 1 < w->n_stages_used ? w->stage_first_block[s + 1] : w->n_blocks;
}

/* A MobileNetV3 backbone's weights (vd_model.mnv3), after the stem. */
typedef struct {
    vd_mnv3_block blocks[VD_MAX_BLOCKS]; /* features[1..n] */
    vd_conv last;                        /* features[n + 1] (out_channels 0 when not computed) */
    int n_computed;                      /* features computed: up to the last returned one */
} vd_mnv3_weights;

/* A ResNet backbone's configuration (vd_config.resnet). */
typedef struct {
    int depth; /* 18, 34, 50, 101, 152; informational (0: not named) */
    vd_block_type block;
    int layers[4];       /* blocks per stage */
    int width_per_group; /* 64 */
} vd_resnet_config;

/* A MobileNetV3 backbone's configuration (vd_config.mnv3). */
typedef struct {
    char arch[32]; /* "mobilenet_v3_large" or "mobilenet_v3_small" */
    int n_blocks;  /* inverted residual blocks: features[1..n] */
    vd_mnv3_block_config blocks[VD_MAX_BLOCKS];
    int last_channels; /* features[n + 1]: 1x1 conv + hardswish */
} vd_mnv3_config;

/* One layer of an SSD layer list (vd_ssd_config): what tools/export_torchvision.py
 * writes as an op, a convolution carrying the batch-norm and the activation that
 * follow it. */
typedef enum {
    VD_SSD_CONV = 0,       /* @conv (batch-norm folded, or its own bias), then @act */
    VD_SSD_MAXPOOL,        /* MaxPool2d(@kernel, @stride, @padding, @ceil_mode) */
    VD_SSD_SQUEEZE_EXCITE, /* SqueezeExcitation (@fc1 + ReLU, @fc2 + hardsigmoid) */
    VD_SSD_SAVE,           /* an InvertedResidual's input, which its last conv adds */
} vd_ssd_op_kind;

typedef struct {
    vd_ssd_op_kind kind;
    char *name;    /* the module's name (state_dict prefix; NULL for VD_SSD_SAVE) */
    char *bn_name; /* the batch-norm after the conv, or NULL */
    gboolean bias; /* the conv has its own bias */
    vd_conv conv;
    vd_activation act;
    gboolean add_saved; /* the conv adds the last VD_SSD_SAVE's tensor (no @act) */
    int kernel, stride, padding;
    gboolean ceil_mode;
    vd_linear fc1, fc2;
} vd_ssd_op;

typedef struct {
    vd_ssd_op *ops;
    int n_ops;
    int in_channels, out_channels;
} vd_ssd_layers;

#define VD_MAX_SSD_ASPECT_RATIOS 6

/* SSD and SSDlite (engine/SSD.md): the feature extractor as layer lists (VGG16:
 * one body list, L2-normalised for level 0, then the extras; MobileNetV3: two body
 * lists, each a level, then the extras), DefaultBoxGenerator, the heads. */
typedef struct {
    gboolean lite;
    int n_body;
    vd_ssd_layers body[2];
    int n_extra;
    vd_ssd_layers extra[VD_MAX_FPN_LEVELS];
    int n_levels;
    int l2_channels; /* VGG16's L2Norm on level 0 (0: none) */
    float l2_eps;
    float *l2_scale; /* [l2_channels]: backbone.scale_weight */
    /* DefaultBoxGenerator */
    int n_aspect_ratios[VD_MAX_FPN_LEVELS];
    double aspect_ratios[VD_MAX_FPN_LEVELS][VD_MAX_SSD_ASPECT_RATIOS];
    double scales[VD_MAX_FPN_LEVELS + 1];
    int steps[VD_MAX_FPN_LEVELS]; /* 0: none (the feature map's size) */
    gboolean clip;
    int anchors[VD_MAX_FPN_LEVELS]; /* 2 + 2 * aspect ratios */
    int level_channels[VD_MAX_FPN_LEVELS];
    /* the heads: SSD's one 3x3 conv per level (kernel), SSDlite's layer lists */
    int head_kernel;
    vd_ssd_layers cls[VD_MAX_FPN_LEVELS], reg[VD_MAX_FPN_LEVELS];
} vd_ssd_config;

/* The architecture, read from the file's __metadata__ (see tools/export_torchvision.py
 * for the writer and vd_model_config.c and the families' files for the accepted keys). Field
 * meanings and defaults follow torchvision's FasterRCNN constructor arguments. */
typedef struct {
    /* transform */
    int min_size; /* torchvision uses the last entry of its tuple */
    int max_size;
    float image_mean[3];
    float image_std[3];
    int size_divisible;
    vd_resize_scale resize_scale;
    vd_resize_arithmetic resize_arithmetic;
    int fixed_h, fixed_w; /* SSD's fixed_size (0: min/max size) */

    /* backbone: what both kinds have, then the backbone's own (by backbone_type) */
    vd_backbone_type backbone_type;
    int stem_channels;      /* ResNet: 64; MobileNetV3: features[0]'s */
    int returned_layers[4]; /* feeding the FPN, ascending: ResNet: 1-based stage
                             * numbers; MobileNetV3: indices into features
                             * (0 the stem, 1..n the blocks, n + 1 the last conv) */
    int n_returned_layers;
    int fpn_in_channels[4]; /* channels of each returned layer */
    float norm_eps;         /* batch-norm eps used when folding (0 for COCO_V1) */
    union {
        vd_resnet_config resnet; /* VD_BACKBONE_RESNET */
        vd_mnv3_config mnv3;     /* VD_BACKBONE_MOBILENET_V3 */
    };

    vd_detector_kind detector;

    /* FPN */
    int fpn_channels;        /* out_channels, 256 */
    gboolean fpn_pool_level; /* LastLevelMaxPool present ('pool' level) */
    /* LastLevelP6P7 (one-stage detectors: levels 'p6', 'p7'): P6 = conv3x3/2 of P5
     * (fpn_p6_from_p5) or of C5, P7 = conv3x3/2 of relu(P6) */
    gboolean fpn_p6p7;
    gboolean fpn_p6_from_p5;
    gboolean fpn_norm; /* batch-norm after every FPN conv (v2; folded, no bias) */
    int n_fpn_levels;  /* n_returned_layers + (pool ? 1 : 0) + (p6p7 ? 2 : 0) */

    /* anchors: per FPN level (same count of anchors per location on every level) */
    int n_anchor_sizes[VD_MAX_FPN_LEVELS];
    float anchor_sizes[VD_MAX_FPN_LEVELS][VD_MAX_ANCHORS_PER_LEVEL];
    int n_aspect_ratios[VD_MAX_FPN_LEVELS];
    float aspect_ratios[VD_MAX_FPN_LEVELS][VD_MAX_ANCHORS_PER_LEVEL];
    int anchors_per_location;

    /* RPN (test-time values) */
    int rpn_pre_nms_top_n;
    int rpn_post_nms_top_n;
    float rpn_nms_thresh;
    float rpn_score_thresh;
    float rpn_min_size; /* torchvision hard-codes 1e-3 */
    int rpn_conv_depth; /* 3x3 conv + ReLU layers of the RPN head: 1, v2 2 */

    /* RoI heads */
    int roi_output_size;     /* 7 */
    int roi_sampling_ratio;  /* 2 */
    int n_roi_levels;        /* how many of the FPN levels '0','1',.. the pooler uses */
    int representation_size; /* 1024 (TwoMLPHead's fc7, or the conv head's one Linear) */
    /* box head: TwoMLPHead (n_box_convs 0) or FastRCNNConvFCHead (v2): n_box_convs
     * 3x3 conv + batch-norm + ReLU on the pooled features, flatten, one Linear + ReLU */
    int n_box_convs;
    int box_conv_channels[VD_MAX_BOX_CONVS];
    /* the final detections' (both kinds; a one-stage head's own values) */
    float box_score_thresh;    /* 0.05, strict */
    float box_nms_thresh;      /* 0.5 */
    int detections_per_img;    /* 100 */
    float bbox_reg_weights[4]; /* 10, 10, 5, 5 (RetinaNet: 1, 1, 1, 1) */
    float box_min_size;        /* torchvision hard-codes 1e-2 */

    /* Mask R-CNN (architecture "maskrcnn", engine/MASKRCNN.md): a second
     * MultiScaleRoIAlign on the final boxes, n_mask_convs 3x3 conv (+ batch-norm,
     * folded, with mask_norm) + ReLU, ConvTranspose2d 2x2 stride 2 + ReLU to
     * mask_dim_reduced channels, a 1x1 conv to num_classes */
    gboolean has_masks;
    int mask_output_size;    /* 14 */
    int mask_sampling_ratio; /* 2 */
    int n_mask_roi_levels;   /* the first FPN levels the mask pooler uses */
    int n_mask_convs;
    int mask_conv_channels[VD_MAX_MASK_CONVS];
    gboolean mask_norm;   /* v2: batch-norm after each conv (no bias) */
    int mask_dim_reduced; /* the transposed convolution's output channels */

    /* Keypoint R-CNN (architecture "keypointrcnn", engine/KEYPOINTRCNN.md): a
     * MultiScaleRoIAlign on the final boxes, n_kp_convs 3x3 conv + ReLU,
     * ConvTranspose2d (kp_deconv_*) to num_keypoints heatmaps, bilinear
     * upsampling by kp_up_scale, heatmaps_to_keypoints */
    gboolean has_keypoints;
    int kp_output_size;    /* 14 */
    int kp_sampling_ratio; /* 2 */
    int n_kp_roi_levels;   /* the first FPN levels the keypoint pooler uses */
    int n_kp_convs;
    int kp_conv_channels[VD_MAX_KEYPOINT_CONVS];
    int kp_deconv_kernel, kp_deconv_stride, kp_deconv_padding; /* 4, 2, 1 */
    int kp_up_scale;                                           /* 2 */
    int num_keypoints;                                         /* 17 */
    char **keypoint_names; /* num_keypoints names, or NULL when the file has none */
    int n_skeleton;        /* pairs in skeleton */
    int *skeleton;         /* [n_skeleton][2] 0-based keypoint indices, or NULL */
    /* one-stage detectors (detector VD_DETECTOR_ONE_STAGE; SSD: topk_candidates) */
    vd_head_config head;
    vd_ssd_config ssd; /* detector VD_DETECTOR_SSD (its weights live in its layers) */

    int num_classes;    /* including background */
    char **class_names; /* num_classes entries */
} vd_config;

struct vd_model {
    gint ref_count;
    vd_config config;
    char *description;
    char backbone_name[40]; /* "resnet50", "mobilenet_v3_large" (vd_backbone_loader) */

    vd_conv stem; /* ResNet: conv1 + bn1, 7x7 stride 2;
                   * MobileNetV3: features[0], 3x3 stride 2 + hardswish */
    union {
        vd_resnet_weights resnet; /* VD_BACKBONE_RESNET */
        vd_mnv3_weights mnv3;     /* VD_BACKBONE_MOBILENET_V3 */
    };

    vd_conv fpn_inner[4]; /* 1x1 lateral, per returned layer */
    vd_conv fpn_layer[4]; /* 3x3 output, per returned layer */

    vd_conv rpn_conv;                            /* 3x3 + ReLU */
    vd_conv rpn_conv_more[VD_MAX_RPN_CONVS - 1]; /* conv_depth > 1: the next ones */
    vd_conv box_convs[VD_MAX_BOX_CONVS];         /* FastRCNNConvFCHead (BN folded) */
    vd_conv rpn_cls;                             /* 1x1 -> A */
    vd_conv rpn_bbox;                            /* 1x1 -> 4A */

    vd_linear fc6;       /* C*P*P -> representation, input order c*P*P + y*P + x
                          * (conv head: its Linear, C the last conv's width) */
    vd_linear fc7;       /* out_features 0 with the conv head */
    vd_linear cls_score; /* -> num_classes */
    vd_linear bbox_pred; /* -> 4 * num_classes, index c*4 + k */

    vd_conv mask_convs[VD_MAX_MASK_CONVS]; /* 3x3 pad 1 (v2: BN folded) */
    vd_conv mask_deconv;                   /* ConvTranspose2d 2x2 stride 2: weight in torch's
                                            * [in_channels][out_channels][2][2] order */
    vd_conv mask_logits;                   /* 1x1 -> num_classes */

    vd_conv kp_convs[VD_MAX_KEYPOINT_CONVS]; /* 3x3 pad 1, bias, ReLU */
    vd_conv kp_deconv;                       /* ConvTranspose2d -> num_keypoints: weight in torch's
                                              * [in_channels][out_channels][k][k] order */
    /* one-stage detectors: LastLevelP6P7's convolutions; the head's branches
     * (3x3 conv + ReLU each, shared by every level) and their last convolutions */
    vd_conv fpn_p6, fpn_p7;
    vd_conv head_cls_convs[VD_MAX_HEAD_CONVS];
    vd_conv head_reg_convs[VD_MAX_HEAD_CONVS];
    vd_norm head_cls_norms[VD_MAX_HEAD_CONVS]; /* with config.head.norm_groups */
    vd_norm head_reg_norms[VD_MAX_HEAD_CONVS];
    vd_conv head_cls_logits;   /* 3x3 -> A * num_classes, channel a * K + k */
    vd_conv head_bbox_reg;     /* 3x3 -> 4A, channel a * 4 + q */
    vd_conv head_bbox_ctrness; /* FCOS: 3x3 -> A (out_channels 0 otherwise) */

    /* int8 calibration (the file's "int8_calibration", vd_calibration.c): activation
     * name -> largest |value| (float *); NULL when the file has none */
    GHashTable *int8_ranges;
    int int8_frames;
};

/* The calibration record of @ranges (name -> float *) over @frames frames, as the
 * JSON text a model file's metadata holds (newly allocated). */
char *vd_calibration_to_json(GHashTable *ranges, int frames);
/* Reads calibration record @text (from file @path, for errors): a new table of
 * name -> float * and *@frames, or NULL with @error set (VD_ERROR_FORMAT). */
GHashTable *vd_calibration_parse(const char *path, const char *text, int *frames, GError **error);

/* vd_model_load() of a file's @size bytes at @contents (named @path in errors),
 * which the model does not keep: weights are copied (folded) as they are read.
 * The loader fuzzer's entry point. */
vd_model *vd_model_load_bytes(const char *path, const guint8 *contents, guint64 size,
                              GError **error);

/* The fasterrcnn_resnet50_fpn_v2 parts of @config that a backend without them must
 * refuse (VD_ERROR_UNSUPPORTED naming them), or NULL when it has none: the FPN's
 * batch-norm is folded at load and needs nothing, the RPN's extra convolutions and
 * the conv box head do. */
static inline const char *vd_config_v2_parts(const vd_config *config)
{
    if (config->n_box_convs > 0 && config->rpn_conv_depth > 1)
        return "the RPN head's conv_depth > 1 and the FastRCNNConvFCHead box head "
               "(fasterrcnn_resnet50_fpn_v2)";
    if (config->n_box_convs > 0)
        return "the FastRCNNConvFCHead box head (fasterrcnn_resnet50_fpn_v2)";
    if (config->rpn_conv_depth > 1)
        return "the RPN head's conv_depth > 1 (fasterrcnn_resnet50_fpn_v2)";
    return NULL;
}

/* What a backend without the mask branch must refuse, or NULL. */
static inline const char *vd_config_mask_parts(const vd_config *config)
{
    return config->has_masks ? "the Mask R-CNN mask head (maskrcnn)" : NULL;
}

/* What a backend without the keypoint branch must refuse, or NULL. */
static inline const char *vd_config_keypoint_parts(const vd_config *config)
{
    return config->has_keypoints
               ? "the Keypoint R-CNN keypoint head and its heatmap decoding (keypointrcnn)"
               : NULL;
}

/* The size of the keypoint heatmaps: the transposed convolution's output times
 * kp_up_scale (56 for torchvision's 14x14 pooler). */
static inline int vd_config_heatmap_size(const vd_config *c)
{
    int deconv = (c->kp_output_size - 1) * c->kp_deconv_stride - 2 * c->kp_deconv_padding +
                 c->kp_deconv_kernel;
    return deconv * c->kp_up_scale;
}

/* Number of channels of ResNet stage @stage (1..4) output. */
int vd_config_stage_channels(const vd_config *config, int stage);

G_END_DECLS

#endif /* VD_MODEL_PRIVATE_H */
