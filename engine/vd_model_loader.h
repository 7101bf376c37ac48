/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the model loader: the backbone interface (vd_backbone_loader) and
 * the parts of vd_model.c and vd_model_config.c that the backbones' and the
 * families' files (vd_model_resnet.c, vd_model_mnv3.c, vd_model_rcnn.c, ...) share, each documented
 * where it is defined. Not installed. */
#ifndef VD_MODEL_LOADER_H
#define VD_MODEL_LOADER_H

#include "vd_model_private.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* A file being loaded: its tensors, which of them have been read, the batch-norm
 * eps (vd_model.c). */
typedef struct loader loader;

/* A backbone's part of the loader, chosen by the configuration's
 * "backbone"."type" (backbone_loaders[] in vd_model_config.c).
 * @returned: what its returned layers index, in errors ("ResNet stage").
 * @parse: the backbone section @o (its type read) into @c: every key checked
 *   (check_keys()), every value range-checked, the returned layers and their
 *   channels (c->fpn_in_channels), the optional per-module eps, and its own
 *   part of @c (c->resnet, c->mnv3); *@n_computed is how much of the backbone
 *   the file holds (ResNet: stages up to the last returned one; MobileNetV3:
 *   features), which @load takes.
 * @load: the stem and its own weights (model->resnet, model->mnv3) of the
 *   @n_computed stages or features, by name and shape, batch norms folded.
 * @clear: frees its own weights (also those of a load that failed half-way;
 *   the model is zeroed before parsing).
 * @name: its name in vd_model_description() ("resnet50", "mobilenet_v3_large"),
 *   written into @out of @size bytes. */
typedef struct {
    const char *type;
    vd_backbone_type backbone_type;
    gboolean (*parse)(const char *path, JsonObject *o, vd_config *c, JsonObject **eps_per_module,
                      int *n_computed, GError **error);
    gboolean (*load)(loader *ld, vd_model *model, int n_computed, GError **error);
    void (*clear)(vd_model *model);
    void (*name)(const vd_config *c, char *out, size_t size);
    const char *returned;
} vd_backbone_loader;

extern const vd_backbone_loader vd_resnet_loader;
extern const vd_backbone_loader vd_mnv3_loader;
/* SSD's VGG16 and SSDlite's MobileNetV3 feature extractors (vd_model_ssd.c), chosen by
 * the architecture rather than the backbone's type */
extern const vd_backbone_loader vd_ssd_backbone_loader;

/* The configuration: errors (VD_ERROR_FORMAT naming the file) and checked reads */
gboolean config_error(GError **error, const char *path, const char *format, ...)
    G_GNUC_PRINTF(3, 4);
gboolean node_is_int(JsonNode *node);
gboolean check_keys(const char *path, JsonObject *object, const char *section,
                    const char *const *allowed, GError **error);
gboolean get_int(const char *path, JsonObject *o, const char *section, const char *key, gint64 min,
                 gint64 max, int *out, GError **error);
gboolean get_float(const char *path, JsonObject *o, const char *section, const char *key,
                   double min, double max, gboolean min_exclusive, float *out, GError **error);
JsonArray *get_array(const char *path, JsonObject *o, const char *section, const char *key,
                     guint min_len, guint max_len, GError **error);
gboolean get_conv_channels(const char *path, JsonObject *o, const char *section, guint max_len,
                           int *out, int *n_out, GError **error);
gboolean get_float_array(const char *path, JsonArray *array, const char *what, double min,
                         double max, gboolean min_exclusive, float *out, GError **error);
const char *get_string(const char *path, JsonObject *o, const char *section, const char *key,
                       GError **error);
gboolean parse_eps_per_module(const char *path, JsonObject *o, JsonObject **eps_per_module,
                              GError **error);
/* FALSE with VD_ERROR_UNSUPPORTED for a family the exporter writes and this engine
 * does not run yet (vd_model_families.c), naming the config's "builder" */
gboolean vd_model_check_family(const char *path, JsonObject *config, const char *architecture,
                               GError **error);
gboolean parse_returned_layers(const char *path, JsonObject *o, vd_config *c, int min, int max,
                               const char *meaning, GError **error);

/* The weights */
void vd_conv_free(vd_conv *conv);
void vd_linear_free(vd_linear *linear);
float *read_tensor(loader *ld, const char *name, const char *alt_name, int ndim,
                   const gint64 *shape, GError **error);
gboolean load_conv_bn_groups(loader *ld, const char *conv_prefix, const char *bn_prefix,
                             vd_conv *conv, int out, int in, int kernel, int stride, int padding,
                             int groups, GError **error);
gboolean load_conv_bn(loader *ld, const char *conv_prefix, const char *bn_prefix, vd_conv *conv,
                      int out, int in, int kernel, int stride, int padding, GError **error);
/* A convolution with its own bias; @alt_prefix (or NULL) is an older torchvision name. */
gboolean load_conv_bias(loader *ld, const char *prefix, const char *alt_prefix, vd_conv *conv,
                        int out, int in, int kernel, int stride, int padding, GError **error);

/* One-stage detectors (vd_model_onestage.c): the "head" section into @c (its
 * final thresholds into c->box_score_thresh, box_nms_thresh, detections_per_img,
 * bbox_reg_weights); the weights of LastLevelP6P7 and of the head; freeing them;
 * the architecture's name in the model's description. */
gboolean parse_one_stage_head(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean load_one_stage(loader *ld, vd_model *model, GError **error);
void vd_one_stage_clear(vd_model *model);
const char *vd_one_stage_name(const vd_config *c);
/* The dense heads' shared reads of their "head" object @o (vd_model_onestage.c):
 * BoxCoder's "bbox_reg_weights" and "bbox_xform_clip" (torchvision's clip only)
 * into c->bbox_reg_weights; "score_thresh", "nms_thresh", "detections_per_img" and
 * "topk_candidates" into c->box_score_thresh, box_nms_thresh, detections_per_img and
 * head.topk_candidates. */
gboolean parse_box_coder(const char *path, JsonObject *o, vd_config *c, GError **error);
gboolean parse_head_thresholds(const char *path, JsonObject *o, vd_config *c, GError **error);
/* SSD and SSDlite (vd_model_ssd.c, engine/SSD.md): the "anchors" (DefaultBoxGenerator)
 * and "head" sections, after the backbone's; the heads' weights; freeing the layer
 * lists and their weights (safe on a model without them, and twice). */
gboolean parse_ssd_anchors(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean parse_ssd_head(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean load_ssd_head(loader *ld, vd_model *model, GError **error);
void vd_ssd_clear(vd_model *model);

/* More of vd_model_config.c's configuration reads: a string value, a section (an object
 * member, VD_ERROR_FORMAT naming it when missing or not an object), a pooler's
 * "featmap_names" (the first FPN levels, their count in *@n_levels) */
gboolean node_is_string(JsonNode *node);
JsonObject *get_section(const char *path, JsonObject *config, const char *name, GError **error);
gboolean parse_featmap_names(const char *path, JsonObject *o, const char *section,
                             const vd_config *c, int *n_levels, GError **error);
/* A convolution with its own bias (@alt_prefix: an older name, or NULL). */
gboolean load_conv_bias(loader *ld, const char *prefix, const char *alt_prefix, vd_conv *conv,
                        int out, int in, int kernel, int stride, int padding, GError **error);

/* Keypoint R-CNN (vd_model_keypoint.c): "roi_heads.keypoint_head" of @roi; the
 * configuration's "num_keypoints", "keypoint_names", "keypoint_skeleton"; the
 * keypoint head's weights; what they allocated. */
gboolean parse_keypoint_head(const char *path, JsonObject *roi, vd_config *c, GError **error);
gboolean parse_keypoints(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean load_keypoint_head(loader *ld, vd_model *model, GError **error);
void keypoint_head_free(vd_model *model);

/* The loader's parts across its files. vd_model_config.c: a JSON object parsed
 * from @text (@len bytes, -1 for NUL-terminated), VD_ERROR_FORMAT naming @what when
 * it is not one; the whole configuration of @metadata's "config" into @c (its JSON
 * in *@config_root, the batch norms' eps per module, the backbone's computed
 * layers); a backbone type's loader. vd_model_rcnn.c: the two-stage detectors'
 * "rpn" and "roi_heads" sections, their RPN and box head weights, Mask R-CNN's mask
 * head. vd_model.c: a linear layer's weights. */
JsonNode *parse_json_object(const char *path, const char *what, const char *text, gssize len,
                            GError **error);
gboolean parse_config(const char *path, JsonObject *metadata, vd_config *c, JsonNode **config_root,
                      JsonObject **eps_per_module, int *n_computed, GError **error);
const vd_backbone_loader *backbone_loader_of(vd_backbone_type type);
gboolean parse_rpn(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean parse_roi_heads(const char *path, JsonObject *config, vd_config *c, GError **error);
gboolean load_heads(loader *ld, vd_model *model, GError **error);
gboolean load_mask_head(loader *ld, vd_model *model, GError **error);
gboolean load_linear(loader *ld, const char *prefix, vd_linear *linear, int out, int in,
                     GError **error);

G_END_DECLS

#endif /* VD_MODEL_LOADER_H */
