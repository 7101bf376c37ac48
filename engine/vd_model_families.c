/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The families tools/export_torchvision.py exports that this engine does not run yet
 * (SSD and SSDlite): the loader refuses them with VD_ERROR_UNSUPPORTED, naming the
 * builder the file records and what is missing. */
#include "vd_model_loader.h"

#include <string.h>

/* The longest builder name quoted in a message; longer ones are not quoted */
#define VD_MAX_BUILDER_NAME 64

static const struct {
    const char *architecture;
    const char *missing;
} unsupported_families[] = {
    {"ssd",
     "this engine does not run SSD yet (its VGG16 backbone with its L2 norm and extra layers, "
     "its default boxes, its classification and regression heads and their decoding)"},
    {"ssdlite",
     "this engine does not run SSDlite yet (its MobileNetV3 feature extractor with its extra "
     "layers, its default boxes, its depthwise-separable heads and their decoding)"},
};

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
        if (strcmp(architecture, unsupported_families[i].architecture) != 0)
            continue;
        builder = builder_name(config);
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "%s: %s (architecture \"%s\"): %s", path,
                    builder ? builder : "a model without a usable \"builder\"",
                    unsupported_families[i].architecture, unsupported_families[i].missing);
        return FALSE;
    }
    return TRUE;
}
