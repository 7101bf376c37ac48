/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The families tools/export_torchvision.py exports that this engine does not run yet:
 * the loader refuses them with VD_ERROR_UNSUPPORTED, naming the builder the file
 * records and what is missing. Today it runs every family the exporter writes, so
 * the table holds none; an architecture nobody knows is refused by the loader
 * (parse_config() in vd_model_config.c). */
#include "vd_model_loader.h"

#include <string.h>

/* The longest builder name quoted in a message; longer ones are not quoted */
#define VD_MAX_BUILDER_NAME 64

static const struct {
    const char *architecture;
    const char *missing;
} unsupported_families[] = {
    /* {"architecture", "what this engine does not run of it"}, then the end */
    {NULL, NULL},
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
    for (gsize i = 0; unsupported_families[i].architecture != NULL; i++) {
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
