/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The families tools/export_torchvision.py exports that this engine does not run yet
 * (torchvision's one-stage detectors but retinanet_resnet50_fpn, and Keypoint R-CNN):
 * the loader refuses them with VD_ERROR_UNSUPPORTED, naming the builder the file
 * records and what is missing. */
#include "vd_model_loader.h"

#include <string.h>

/* The longest builder name quoted in a message; longer ones are not quoted */
#define VD_MAX_BUILDER_NAME 64

/* A family matches by its "architecture" and, where @head_norm is set, the "norm"
 * of its "head" section (RetinaNet v2's GroupNorm heads, v1's run). */
static const struct {
    const char *architecture;
    const char *head_norm;
    const char *missing;
} unsupported_families[] = {
    {"retinanet", "group_norm",
     "this engine does not run RetinaNet's GroupNorm heads yet (retinanet_resnet50_fpn_v2's; "
     "retinanet_resnet50_fpn's heads without normalisation run)"},
    {"fcos", NULL,
     "this engine does not run FCOS yet (its classification, regression and centerness heads "
     "with GroupNorm, and its point-based box decoding)"},
    {"ssd", NULL,
     "this engine does not run SSD yet (its VGG16 backbone with its L2 norm and extra layers, "
     "its default boxes, its classification and regression heads and their decoding)"},
    {"ssdlite", NULL,
     "this engine does not run SSDlite yet (its MobileNetV3 feature extractor with its extra "
     "layers, its default boxes, its depthwise-separable heads and their decoding)"},
    {"keypointrcnn", NULL,
     "this engine does not run Keypoint R-CNN yet (the keypoint head and its heatmap-to-point "
     "decoding)"},
};

/* Whether @config's "head" section has the "norm" @norm */
static gboolean head_norm_is(JsonObject *config, const char *norm)
{
    JsonNode *head = json_object_get_member(config, "head"), *node;
    if (head == NULL || !JSON_NODE_HOLDS_OBJECT(head))
        return FALSE;
    node = json_object_get_member(json_node_get_object(head), "norm");
    return node != NULL && JSON_NODE_HOLDS_VALUE(node) &&
           json_node_get_value_type(node) == G_TYPE_STRING &&
           g_strcmp0(json_node_get_string(node), norm) == 0;
}

/* The config's "builder" when it is a short printable string, else NULL */
static const char *builder_name(JsonObject *config)
{
    JsonNode *node = json_object_get_member(config, "builder");
    const char *name;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    name = json_node_get_string(node);
    if (!name || !*name || strlen(name) > VD_MAX_BUILDER_NAME ||
        !vd_class_name_validate(name, -1, NULL))
        return NULL;
    return name;
}

gboolean vd_model_check_family(const char *path, JsonObject *config, const char *architecture,
                               GError **error)
{
    for (gsize i = 0; i < G_N_ELEMENTS(unsupported_families); i++) {
        const char *builder;
        if (strcmp(architecture, unsupported_families[i].architecture) != 0 ||
            (unsupported_families[i].head_norm != NULL &&
             !head_norm_is(config, unsupported_families[i].head_norm)))
            continue;
        builder = builder_name(config);
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "%s: %s (architecture \"%s\"): %s", path,
                    builder ? builder : "a model without a usable \"builder\"",
                    unsupported_families[i].architecture, unsupported_families[i].missing);
        return FALSE;
    }
    return TRUE;
}
