/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model loader's part for torchvision's one-stage detectors (the second kind of
 * detector, engine/RETINANET.md): the configuration's "head" section and the
 * weights of LastLevelP6P7 and of the head. The backbone, the FPN and the anchors
 * are the two-stage detectors' (vd_model_config.c, vd_model.c). */
#include "vd_model_loader.h"

#include <math.h>
#include <string.h>

/* torchvision's BoxCoder clip, log(1000 / 16), which vd_decode_boxes() applies */
#define VD_BBOX_XFORM_CLIP 4.135166556742356

/* RetinaNet's and SSD's BoxCoder: its weights and clip (the clip vd_decode_boxes()
 * applies) */
gboolean parse_box_coder(const char *path, JsonObject *o, vd_config *c, GError **error)
{
    float clip;
    JsonArray *weights;
    if (!get_float(path, o, "head", "bbox_xform_clip", 0.0, 1e6, FALSE, &clip, error))
        return FALSE;
    if (fabs(clip - VD_BBOX_XFORM_CLIP) > 1e-6) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: 'head.bbox_xform_clip' %g is not supported (torchvision's log(1000/16))",
                    path, clip);
        return FALSE;
    }
    weights = get_array(path, o, "head", "bbox_reg_weights", 4, 4, error);
    return weights != NULL && get_float_array(path, weights, "head.bbox_reg_weights", 0.0, 1e6,
                                              TRUE, c->bbox_reg_weights, error);
}

/* A boolean member @key of section "head" into *@out (FALSE when absent and
 * @optional) */
static gboolean get_bool(const char *path, JsonObject *o, const char *key, gboolean optional,
                         gboolean *out, GError **error)
{
    JsonNode *node = json_object_get_member(o, key);
    if (node == NULL && optional) {
        *out = FALSE;
        return TRUE;
    }
    if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return config_error(error, path, "'head.%s' is missing or not a boolean", key);
    *out = json_node_get_boolean(node);
    return TRUE;
}

/* A dense head's postprocess: its score and NMS thresholds, its cap on the
 * detections and the candidates it keeps per level */
gboolean parse_head_thresholds(const char *path, JsonObject *o, vd_config *c, GError **error)
{
    return get_float(path, o, "head", "score_thresh", 0.0, 1.0, FALSE, &c->box_score_thresh,
                     error) &&
           get_float(path, o, "head", "nms_thresh", 0.0, 1.0, FALSE, &c->box_nms_thresh, error) &&
           get_int(path, o, "head", "detections_per_img", 1, 1000000, &c->detections_per_img,
                   error) &&
           get_int(path, o, "head", "topk_candidates", 1, 1000000, &c->head.topk_candidates, error);
}

/* FCOS's BoxLinearCoder and centerness */
static gboolean parse_linear_coder(const char *path, JsonObject *o, vd_config *c, GError **error)
{
    gboolean centerness;
    const char *coder;
    if (!get_bool(path, o, "centerness", FALSE, &centerness, error) ||
        !get_bool(path, o, "normalize_by_size", FALSE, &c->head.normalize_by_size, error) ||
        !(coder = get_string(path, o, "head", "box_coder", error)))
        return FALSE;
    if (!centerness || strcmp(coder, "linear") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: an FCOS head without centerness or with box coder '%.64s' is not "
                    "supported (FCOSHead's: centerness and 'linear')",
                    path, coder);
        return FALSE;
    }
    return TRUE;
}

gboolean parse_one_stage_head(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"type",
                                       "in_channels",
                                       "num_anchors",
                                       "classification_convs",
                                       "regression_convs",
                                       "norm",
                                       "num_groups",
                                       "norm_eps",
                                       "bbox_reg_weights",
                                       "bbox_xform_clip",
                                       "centerness",
                                       "box_coder",
                                       "normalize_by_size",
                                       "score_thresh",
                                       "nms_thresh",
                                       "detections_per_img",
                                       "topk_candidates",
                                       NULL};
    JsonNode *node = json_object_get_member(config, "head");
    JsonObject *o;
    const char *type, *norm = "none";
    int in_channels, num_anchors;

    if (node == NULL || !JSON_NODE_HOLDS_OBJECT(node))
        return config_error(error, path, "the one-stage model has no 'head' object");
    o = json_node_get_object(node);
    if (!check_keys(path, o, "head", keys, error) ||
        !(type = get_string(path, o, "head", "type", error)))
        return FALSE;
    JsonNode *arch = json_object_get_member(config, "architecture");
    if (g_strcmp0(type, json_node_get_string(arch)) != 0)
        return config_error(error, path, "'head.type' '%.64s' is not the architecture '%.64s'",
                            type, json_node_get_string(arch));
    if (strcmp(type, "retinanet") == 0) {
        c->head.type = VD_HEAD_RETINANET;
    } else if (strcmp(type, "fcos") == 0) {
        c->head.type = VD_HEAD_FCOS;
    } else {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: one-stage head type '%.64s' is not supported ('retinanet' or 'fcos')",
                    path, type);
        return FALSE;
    }
    if (json_object_has_member(o, "norm") && !(norm = get_string(path, o, "head", "norm", error)))
        return FALSE;
    c->head.norm_groups = 0;
    if (strcmp(norm, "group_norm") == 0) {
        /* retinanet_resnet50_fpn_v2, FCOS: GroupNorm(num_groups, C) after each convolution */
        if (!get_int(path, o, "head", "num_groups", 1, 65536, &c->head.norm_groups, error) ||
            !get_float(path, o, "head", "norm_eps", 0.0, 1.0, FALSE, &c->head.norm_eps, error))
            return FALSE;
        if (c->fpn_channels % c->head.norm_groups != 0)
            return config_error(error, path,
                                "'head.num_groups' %d does not divide the head's %d channels",
                                c->head.norm_groups, c->fpn_channels);
    } else if (strcmp(norm, "none") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: a one-stage head with norm '%.64s' is not supported ('none' or "
                    "'group_norm')",
                    path, norm);
        return FALSE;
    }
    if (!get_int(path, o, "head", "in_channels", 1, 65536, &in_channels, error) ||
        !get_int(path, o, "head", "num_anchors", 1, VD_MAX_ANCHORS_PER_LEVEL, &num_anchors,
                 error) ||
        !get_int(path, o, "head", "classification_convs", 0, VD_MAX_HEAD_CONVS,
                 &c->head.n_cls_convs, error) ||
        !get_int(path, o, "head", "regression_convs", 0, VD_MAX_HEAD_CONVS, &c->head.n_reg_convs,
                 error) ||
        !parse_head_thresholds(path, o, c, error))
        return FALSE;
    if (in_channels != c->fpn_channels)
        return config_error(error, path, "'head.in_channels' is %d; the FPN gives %d", in_channels,
                            c->fpn_channels);
    if (num_anchors != c->anchors_per_location)
        return config_error(error, path,
                            "'head.num_anchors' is %d; the anchors give %d per location",
                            num_anchors, c->anchors_per_location);
    return c->head.type == VD_HEAD_FCOS ? parse_linear_coder(path, o, c, error)
                                        : parse_box_coder(path, o, c, error);
}

/* A convolution without bias (its bias zeros: the GroupNorm after it subtracts the
 * mean anyway, and torchvision's has none) */
static gboolean load_conv_no_bias(loader *ld, const char *prefix, vd_conv *conv, int C,
                                  GError **error)
{
    const gint64 wshape[4] = {C, C, 3, 3};
    char *name = g_strdup_printf("%s.weight", prefix);
    *conv = (vd_conv){
        .out_channels = C, .in_channels = C, .kernel = 3, .stride = 1, .padding = 1, .groups = 1};
    conv->weight = read_tensor(ld, name, NULL, 4, wshape, error);
    g_free(name);
    if (conv->weight == NULL)
        return FALSE;
    conv->bias = g_try_new0(float, C);
    if (conv->bias == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory");
        return FALSE;
    }
    return TRUE;
}

/* A GroupNorm's affine parameters '<prefix>.weight', '<prefix>.bias' */
static gboolean load_norm(loader *ld, const char *prefix, vd_norm *norm, int C, GError **error)
{
    const gint64 shape[1] = {C};
    char *name = g_strdup_printf("%s.weight", prefix);
    norm->channels = C;
    norm->weight = read_tensor(ld, name, NULL, 1, shape, error);
    g_free(name);
    if (norm->weight == NULL)
        return FALSE;
    name = g_strdup_printf("%s.bias", prefix);
    norm->bias = read_tensor(ld, name, NULL, 1, shape, error);
    g_free(name);
    return norm->bias != NULL;
}

/* One branch of the head: @n 3x3 conv layers, then ReLU. RetinaNet: torchvision's
 * Conv2dNormActivation ('<prefix>.conv.<j>'), without a norm the convolution with
 * bias ('.0'), with GroupNorm (@norms non-NULL: v2) the convolution without bias
 * ('.0') and the norm ('.1'). FCOS: a flat Sequential of Conv2d with bias
 * ('<prefix>.conv.<3j>'), GroupNorm ('.<3j + 1>') and ReLU. */
static gboolean load_branch(loader *ld, const vd_config *c, const char *prefix, int n,
                            vd_conv *convs, vd_norm *norms, GError **error)
{
    int C = c->fpn_channels;
    gboolean fcos = c->head.type == VD_HEAD_FCOS;
    char name[96], norm_name[96];
    for (int j = 0; j < n; j++) {
        if (fcos) {
            g_snprintf(name, sizeof name, "%s.conv.%d", prefix, 3 * j);
            g_snprintf(norm_name, sizeof norm_name, "%s.conv.%d", prefix, 3 * j + 1);
        } else {
            g_snprintf(name, sizeof name, "%s.conv.%d.0", prefix, j);
            g_snprintf(norm_name, sizeof norm_name, "%s.conv.%d.1", prefix, j);
        }
        if (norms == NULL || fcos ? !load_conv_bias(ld, name, NULL, &convs[j], C, C, 3, 1, 1, error)
                                  : !load_conv_no_bias(ld, name, &convs[j], C, error))
            return FALSE;
        if (norms != NULL && !load_norm(ld, norm_name, &norms[j], C, error))
            return FALSE;
    }
    return TRUE;
}

gboolean load_one_stage(loader *ld, vd_model *model, GError **error)
{
    const vd_config *c = &model->config;
    int C = c->fpn_channels, A = c->anchors_per_location, K = c->num_classes;
    int p6_in = c->fpn_p6_from_p5 ? C : c->fpn_in_channels[c->n_returned_layers - 1];
    gboolean gn = c->head.norm_groups > 0;

    return load_conv_bias(ld, "backbone.fpn.extra_blocks.p6", NULL, &model->fpn_p6, C, p6_in, 3, 2,
                          1, error) &&
           load_conv_bias(ld, "backbone.fpn.extra_blocks.p7", NULL, &model->fpn_p7, C, C, 3, 2, 1,
                          error) &&
           load_branch(ld, c, "head.classification_head", c->head.n_cls_convs,
                       model->head_cls_convs, gn ? model->head_cls_norms : NULL, error) &&
           load_branch(ld, c, "head.regression_head", c->head.n_reg_convs, model->head_reg_convs,
                       gn ? model->head_reg_norms : NULL, error) &&
           load_conv_bias(ld, "head.classification_head.cls_logits", NULL, &model->head_cls_logits,
                          A * K, C, 3, 1, 1, error) &&
           load_conv_bias(ld, "head.regression_head.bbox_reg", NULL, &model->head_bbox_reg, 4 * A,
                          C, 3, 1, 1, error) &&
           (c->head.type != VD_HEAD_FCOS ||
            load_conv_bias(ld, "head.regression_head.bbox_ctrness", NULL, &model->head_bbox_ctrness,
                           A, C, 3, 1, 1, error));
}

void vd_one_stage_clear(vd_model *model)
{
    vd_conv_free(&model->fpn_p6);
    vd_conv_free(&model->fpn_p7);
    for (int j = 0; j < VD_MAX_HEAD_CONVS; j++) {
        vd_conv_free(&model->head_cls_convs[j]);
        vd_conv_free(&model->head_reg_convs[j]);
        vd_norm *norms[2] = {&model->head_cls_norms[j], &model->head_reg_norms[j]};
        for (int i = 0; i < 2; i++) {
            g_free(norms[i]->weight);
            g_free(norms[i]->bias);
        }
    }
    vd_conv_free(&model->head_cls_logits);
    vd_conv_free(&model->head_bbox_reg);
    vd_conv_free(&model->head_bbox_ctrness);
}

const char *vd_one_stage_name(const vd_config *c)
{
    return c->head.type == VD_HEAD_FCOS ? "fcos" : "retinanet";
}
