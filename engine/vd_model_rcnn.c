/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The two-stage detectors' part of a model file (torchvision's GeneralizedRCNN:
 * Faster and Mask R-CNN; Keypoint R-CNN's own head in vd_model_keypoint.c): the
 * configuration's "rpn" and "roi_heads" sections, and the RPN's, box head's and
 * mask head's weights. */
#include "vd_config.h"
#include "vd_model_loader.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

gboolean parse_rpn(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {
        "pre_nms_top_n", "post_nms_top_n", "nms_thresh", "score_thresh",
        "min_size",      "conv_depth",     NULL};
    JsonObject *o = get_section(path, config, "rpn", error);

    c->rpn_conv_depth = 1;
    return o && check_keys(path, o, "rpn", keys, error) &&
           (!json_object_has_member(o, "conv_depth") ||
            get_int(path, o, "rpn", "conv_depth", 1, VD_MAX_RPN_CONVS, &c->rpn_conv_depth,
                    error)) &&
           get_int(path, o, "rpn", "pre_nms_top_n", 1, 1000000, &c->rpn_pre_nms_top_n, error) &&
           get_int(path, o, "rpn", "post_nms_top_n", 1, 1000000, &c->rpn_post_nms_top_n, error) &&
           get_float(path, o, "rpn", "nms_thresh", 0.0, 1.0, FALSE, &c->rpn_nms_thresh, error) &&
           get_float(path, o, "rpn", "score_thresh", 0.0, 1.0, FALSE, &c->rpn_score_thresh,
                     error) &&
           get_float(path, o, "rpn", "min_size", 0.0, 1e6, FALSE, &c->rpn_min_size, error);
}

/* roi_heads.box_head: absent for TwoMLPHead; {"type": "conv_fc", "conv_channels":
 * [...], "norm": "batch_norm"} for FastRCNNConvFCHead (fasterrcnn_resnet50_fpn_v2). */
static gboolean parse_box_head(const char *path, JsonObject *roi, vd_config *c, GError **error)
{
    static const char *const keys[] = {"type", "conv_channels", "norm", NULL};
    JsonObject *o = get_section(path, roi, "box_head", error);
    const char *type, *norm;

    if (!o || !check_keys(path, o, "roi_heads.box_head", keys, error) ||
        !(type = get_string(path, o, "roi_heads.box_head", "type", error)))
        return FALSE;
    if (strcmp(type, "two_mlp") == 0)
        return TRUE;
    if (strcmp(type, "conv_fc") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: box head type '%s' is not supported ('two_mlp' or 'conv_fc')", path, type);
        return FALSE;
    }
    if (!(norm = get_string(path, o, "roi_heads.box_head", "norm", error)))
        return FALSE;
    if (strcmp(norm, "batch_norm") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: conv box head with norm '%s' is not supported (only 'batch_norm')", path,
                    norm);
        return FALSE;
    }
    return get_conv_channels(path, o, "roi_heads.box_head", VD_MAX_BOX_CONVS, c->box_conv_channels,
                             &c->n_box_convs, error);
}

/* roi_heads.mask_head (architecture "maskrcnn"): MaskRCNNHeads and MaskRCNNPredictor
 * with their pooler; see engine/MASKRCNN.md. */
static gboolean parse_mask_head(const char *path, JsonObject *roi, vd_config *c, GError **error)
{
    static const char *const keys[] = {
        "output_size", "sampling_ratio", "featmap_names", "conv_channels",
        "dilation",    "norm",           "dim_reduced",   NULL};
    const char *section = "roi_heads.mask_head";
    JsonObject *o = get_section(path, roi, "mask_head", error);
    const char *norm;
    int dilation;

    if (!o || !check_keys(path, o, section, keys, error) ||
        !get_int(path, o, section, "output_size", 1, 64, &c->mask_output_size, error) ||
        !get_int(path, o, section, "sampling_ratio", 1, 64, &c->mask_sampling_ratio, error) ||
        !get_int(path, o, section, "dilation", 1, 64, &dilation, error) ||
        !get_int(path, o, section, "dim_reduced", 1, 65536, &c->mask_dim_reduced, error) ||
        !(norm = get_string(path, o, section, "norm", error)) ||
        !parse_featmap_names(path, o, section, c, &c->n_mask_roi_levels, error))
        return FALSE;
    if (dilation != 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: mask head dilation %d is not supported (only 1)", path, dilation);
        return FALSE;
    }
    if (strcmp(norm, "none") == 0) {
        c->mask_norm = FALSE;
    } else if (strcmp(norm, "batch_norm") == 0) {
        c->mask_norm = TRUE;
    } else {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: mask head norm '%s' is not supported ('none' or 'batch_norm')", path,
                    norm);
        return FALSE;
    }
    return get_conv_channels(path, o, section, VD_MAX_MASK_CONVS, c->mask_conv_channels,
                             &c->n_mask_convs, error);
}

gboolean parse_roi_heads(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"output_size",
                                       "sampling_ratio",
                                       "featmap_names",
                                       "representation_size",
                                       "score_thresh",
                                       "nms_thresh",
                                       "detections_per_img",
                                       "bbox_reg_weights",
                                       "min_size",
                                       "box_head",
                                       "mask_head",
                                       "keypoint_head",
                                       NULL};
    JsonObject *o = get_section(path, config, "roi_heads", error);
    JsonArray *weights;

    if (!o || !check_keys(path, o, "roi_heads", keys, error) ||
        !get_int(path, o, "roi_heads", "output_size", 1, 64, &c->roi_output_size, error) ||
        !get_int(path, o, "roi_heads", "sampling_ratio", -1, 64, &c->roi_sampling_ratio, error) ||
        !get_int(path, o, "roi_heads", "representation_size", 1, 1 << 20, &c->representation_size,
                 error) ||
        !get_float(path, o, "roi_heads", "score_thresh", 0.0, 1.0, FALSE, &c->box_score_thresh,
                   error) ||
        !get_float(path, o, "roi_heads", "nms_thresh", 0.0, 1.0, FALSE, &c->box_nms_thresh,
                   error) ||
        !get_int(path, o, "roi_heads", "detections_per_img", 1, 1000000, &c->detections_per_img,
                 error) ||
        !get_float(path, o, "roi_heads", "min_size", 0.0, 1e6, FALSE, &c->box_min_size, error))
        return FALSE;
    c->n_box_convs = 0;
    if (json_object_has_member(o, "box_head") && !parse_box_head(path, o, c, error))
        return FALSE;
    weights = get_array(path, o, "roi_heads", "bbox_reg_weights", 4, 4, error);
    if (!weights || !get_float_array(path, weights, "roi_heads.bbox_reg_weights", 0.0, 1e6, TRUE,
                                     c->bbox_reg_weights, error))
        return FALSE;

    if (!parse_featmap_names(path, o, "roi_heads", c, &c->n_roi_levels, error))
        return FALSE;
    if (json_object_has_member(o, "mask_head") != c->has_masks)
        return config_error(error, path,
                            c->has_masks ? "architecture 'maskrcnn' needs 'roi_heads.mask_head'"
                                         : "'roi_heads.mask_head' is only valid with "
                                           "architecture 'maskrcnn'");
    if (json_object_has_member(o, "keypoint_head") != c->has_keypoints)
        return config_error(error, path,
                            c->has_keypoints
                                ? "architecture 'keypointrcnn' needs 'roi_heads.keypoint_head'"
                                : "'roi_heads.keypoint_head' is only valid with "
                                  "architecture 'keypointrcnn'");
    return (!c->has_masks || parse_mask_head(path, o, c, error)) &&
           (!c->has_keypoints || parse_keypoint_head(path, o, c, error));
}

/* The RPN and the RoI heads' box branch (two-stage detectors). */
gboolean load_heads(loader *ld, vd_model *model, GError **error)
{
    const vd_config *c = &model->config;
    int C = c->fpn_channels, A = c->anchors_per_location;
    int P = c->roi_output_size;
    char name[64], alt[64];

    if (!load_conv_bias(ld, "rpn.head.conv.0.0", "rpn.head.conv", &model->rpn_conv, C, C, 3, 1, 1,
                        error))
        return FALSE;
    for (int j = 1; j < c->rpn_conv_depth; j++) {
        g_snprintf(name, sizeof name, "rpn.head.conv.%d.0", j);
        if (!load_conv_bias(ld, name, NULL, &model->rpn_conv_more[j - 1], C, C, 3, 1, 1, error))
            return FALSE;
    }
    int box_in = C;
    for (int j = 0; j < c->n_box_convs; j++) {
        g_snprintf(name, sizeof name, "roi_heads.box_head.%d.0", j);
        g_snprintf(alt, sizeof alt, "roi_heads.box_head.%d.1", j);
        if (!load_conv_bn(ld, name, alt, &model->box_convs[j], c->box_conv_channels[j], box_in, 3,
                          1, 1, error))
            return FALSE;
        box_in = c->box_conv_channels[j];
    }
    if (c->n_box_convs > 0) {
        /* Sequential: the blocks, Flatten (no weights), the Linear */
        g_snprintf(name, sizeof name, "roi_heads.box_head.%d", c->n_box_convs + 1);
        if (!load_linear(ld, name, &model->fc6, c->representation_size, box_in * P * P, error))
            return FALSE;
    } else if (!load_linear(ld, "roi_heads.box_head.fc6", &model->fc6, c->representation_size,
                            C * P * P, error) ||
               !load_linear(ld, "roi_heads.box_head.fc7", &model->fc7, c->representation_size,
                            c->representation_size, error)) {
        return FALSE;
    }
    return load_conv_bias(ld, "rpn.head.cls_logits", NULL, &model->rpn_cls, A, C, 1, 1, 0, error) &&
           load_conv_bias(ld, "rpn.head.bbox_pred", NULL, &model->rpn_bbox, 4 * A, C, 1, 1, 0,
                          error) &&
           load_linear(ld, "roi_heads.box_predictor.cls_score", &model->cls_score, c->num_classes,
                       c->representation_size, error) &&
           load_linear(ld, "roi_heads.box_predictor.bbox_pred", &model->bbox_pred,
                       4 * c->num_classes, c->representation_size, error);
}

/* roi_heads.mask_head and roi_heads.mask_predictor (engine/MASKRCNN.md). */
gboolean load_mask_head(loader *ld, vd_model *model, GError **error)
{
    const vd_config *c = &model->config;
    int in = c->fpn_channels, R = c->mask_dim_reduced;
    char name[80], alt[80];

    for (int j = 0; j < c->n_mask_convs; j++) {
        int out = c->mask_conv_channels[j];
        g_snprintf(name, sizeof name, "roi_heads.mask_head.%d.0", j);
        if (c->mask_norm) {
            g_snprintf(alt, sizeof alt, "roi_heads.mask_head.%d.1", j);
            if (!load_conv_bn(ld, name, alt, &model->mask_convs[j], out, in, 3, 1, 1, error))
                return FALSE;
        } else {
            /* checkpoints older than MaskRCNNHeads version 2 say mask_fcn<j + 1> */
            g_snprintf(alt, sizeof alt, "roi_heads.mask_head.mask_fcn%d", j + 1);
            if (!load_conv_bias(ld, name, alt, &model->mask_convs[j], out, in, 3, 1, 1, error))
                return FALSE;
        }
        in = out;
    }
    {
        /* ConvTranspose2d: weight [in][out][2][2] */
        const gint64 wshape[4] = {in, R, 2, 2}, bshape[1] = {R};
        vd_conv *d = &model->mask_deconv;
        d->out_channels = R;
        d->in_channels = in;
        d->kernel = 2;
        d->stride = 2;
        d->padding = 0;
        d->groups = 1;
        if (!(d->weight = read_tensor(ld, "roi_heads.mask_predictor.conv5_mask.weight", NULL, 4,
                                      wshape, error)) ||
            !(d->bias = read_tensor(ld, "roi_heads.mask_predictor.conv5_mask.bias", NULL, 1, bshape,
                                    error)))
            return FALSE;
    }
    return load_conv_bias(ld, "roi_heads.mask_predictor.mask_fcn_logits", NULL, &model->mask_logits,
                          c->num_classes, R, 1, 1, 0, error);
}
