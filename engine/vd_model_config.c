/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model file's configuration (its metadata's "config" JSON, schema:
 * tools/export_torchvision.py): the JSON helpers every family's parser uses
 * (vd_model_loader.h), and the parts every architecture shares: the transform,
 * the backbone (through its loader), the FPN, the anchors, the classes; then
 * parse_config(), which dispatches each kind of detector to its own parts
 * (vd_model_rcnn.c, vd_model_onestage.c, vd_model_ssd.c, vd_model_keypoint.c). All
 * of it is validated, keys and ranges, before anything is used; errors name the
 * file and the key. */
#include "vd_config.h"
#include "vd_model_loader.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VD_MAX_CLASSES 100000

/* ------------------------------------------------------------------------ */
/* JSON with duplicate-key detection                                         */

/* json-glib keeps the last of duplicated members silently; a duplicated tensor name
 * or config key would then be ignored, so the parser's member signal counts them. */
typedef struct {
    GHashTable *seen; /* "object pointer/name" */
    char *duplicate;  /* first duplicated key */
} duplicate_check;

static void on_object_member(JsonParser *parser, JsonObject *object, const char *name,
                             gpointer user_data)
{
    duplicate_check *dc = user_data;
    char *key;

    if (dc->duplicate)
        return;
    key = g_strdup_printf("%p/%s", (void *)object, name);
    if (!g_hash_table_add(dc->seen, key))
        dc->duplicate = g_strdup(name);
}

/* Parses @len bytes as a JSON object. Returns a new reference to the root node. */
JsonNode *parse_json_object(const char *path, const char *what, const char *text, gssize len,
                            GError **error)
{
    JsonParser *parser = json_parser_new();
    duplicate_check dc = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL), NULL};
    GError *json_error = NULL;
    JsonNode *root = NULL;

    g_signal_connect(parser, "object-member", G_CALLBACK(on_object_member), &dc);
    if (!json_parser_load_from_data(parser, text, len, &json_error)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: %s is not valid JSON: %s", path, what,
                    json_error->message);
        g_error_free(json_error);
        goto out_free_parser;
    }
    if (dc.duplicate) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: %s has the key '%s' more than once",
                    path, what, dc.duplicate);
        goto out_free_parser;
    }
    if (!json_parser_get_root(parser) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: %s is not a JSON object", path, what);
        goto out_free_parser;
    }
    root = json_node_ref(json_parser_get_root(parser));

out_free_parser:
    g_signal_handlers_disconnect_by_data(parser, &dc);
    g_object_unref(parser);
    g_free(dc.duplicate);
    g_hash_table_destroy(dc.seen);
    return root;
}

gboolean node_is_int(JsonNode *node)
{
    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64;
}

static gboolean node_is_number(JsonNode *node)
{
    return node && JSON_NODE_HOLDS_VALUE(node) &&
           (json_node_get_value_type(node) == G_TYPE_INT64 ||
            json_node_get_value_type(node) == G_TYPE_DOUBLE);
}

gboolean node_is_string(JsonNode *node)
{
    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING;
}

/* ------------------------------------------------------------------------ */
/* The configuration                                                         */

gboolean config_error(GError **error, const char *path, const char *format, ...)
{
    va_list args;
    char *message;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: invalid model config: %s", path, message);
    g_free(message);
    return FALSE;
}

/* Rejects keys outside @allowed (NULL-terminated), so that a misspelt key is an error
 * rather than a silently used default. */
gboolean check_keys(const char *path, JsonObject *object, const char *section,
                    const char *const *allowed, GError **error)
{
    GList *members = json_object_get_members(object);
    gboolean ok = TRUE;

    for (GList *l = members; l && ok; l = l->next) {
        if (!g_strv_contains(allowed, l->data))
            ok = config_error(error, path, "unknown key '%s%s%s'", section, *section ? "." : "",
                              (const char *)l->data);
    }
    g_list_free(members);
    return ok;
}

JsonObject *get_section(const char *path, JsonObject *config, const char *name, GError **error)
{
    JsonNode *node = json_object_get_member(config, name);

    if (!node) {
        config_error(error, path, "missing section '%s'", name);
        return NULL;
    }
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        config_error(error, path, "'%s' is not an object", name);
        return NULL;
    }
    return json_node_get_object(node);
}

gboolean get_int(const char *path, JsonObject *o, const char *section, const char *key, gint64 min,
                 gint64 max, int *out, GError **error)
{
    JsonNode *node = json_object_get_member(o, key);
    gint64 v;

    if (!node)
        return config_error(error, path, "missing '%s.%s'", section, key);
    if (!node_is_int(node))
        return config_error(error, path, "'%s.%s' is not an integer", section, key);
    v = json_node_get_int(node);
    if (v < min || v > max)
        return config_error(error, path,
                            "'%s.%s' is %" G_GINT64_FORMAT ", outside [%" G_GINT64_FORMAT
                            ", %" G_GINT64_FORMAT "]",
                            section, key, v, min, max);
    *out = (int)v;
    return TRUE;
}

/* A finite number in [min, max], stored as float32 (torchvision keeps these values as
 * Python floats and rounds them to float32 where they meet float32 tensors). */
static gboolean number_in_range(const char *path, JsonNode *node, const char *what, double min,
                                double max, gboolean min_exclusive, float *out, GError **error)
{
    double v;

    if (!node_is_number(node))
        return config_error(error, path, "'%s' is not a number", what);
    v = json_node_get_double(node);
    if (!isfinite(v) || v < min || v > max || (min_exclusive && v == min))
        return config_error(error, path, "'%s' is %g, outside %s%g, %g]", what, v,
                            min_exclusive ? "(" : "[", min, max);
    *out = (float)v;
    return TRUE;
}

gboolean get_float(const char *path, JsonObject *o, const char *section, const char *key,
                   double min, double max, gboolean min_exclusive, float *out, GError **error)
{
    JsonNode *node = json_object_get_member(o, key);
    char *what = g_strdup_printf("%s.%s", section, key);
    gboolean ok;

    if (!node)
        ok = config_error(error, path, "missing '%s'", what);
    else
        ok = number_in_range(path, node, what, min, max, min_exclusive, out, error);
    g_free(what);
    return ok;
}

JsonArray *get_array(const char *path, JsonObject *o, const char *section, const char *key,
                     guint min_len, guint max_len, GError **error)
{
    JsonNode *node = json_object_get_member(o, key);
    JsonArray *array;

    if (!node) {
        config_error(error, path, "missing '%s.%s'", section, key);
        return NULL;
    }
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        config_error(error, path, "'%s.%s' is not an array", section, key);
        return NULL;
    }
    array = json_node_get_array(node);
    if (json_array_get_length(array) < min_len || json_array_get_length(array) > max_len) {
        if (min_len == max_len)
            config_error(error, path, "'%s.%s' has %u entries, expected %u", section, key,
                         json_array_get_length(array), min_len);
        else
            config_error(error, path, "'%s.%s' has %u entries, expected %u to %u", section, key,
                         json_array_get_length(array), min_len, max_len);
        return NULL;
    }
    return array;
}

/* @section's "conv_channels": 1 to @max_len integers in [1, 65536], into @out and
 * @n_out */
gboolean get_conv_channels(const char *path, JsonObject *o, const char *section, guint max_len,
                           int *out, int *n_out, GError **error)
{
    JsonArray *channels = get_array(path, o, section, "conv_channels", 1, max_len, error);
    if (!channels)
        return FALSE;
    for (guint i = 0; i < json_array_get_length(channels); i++) {
        JsonNode *node = json_array_get_element(channels, i);
        if (!node_is_int(node) || json_node_get_int(node) < 1 || json_node_get_int(node) > 65536)
            return config_error(
                error, path, "'%s.conv_channels[%u]' must be an integer in [1, 65536]", section, i);
        out[i] = (int)json_node_get_int(node);
    }
    *n_out = (int)json_array_get_length(channels);
    return TRUE;
}

gboolean get_float_array(const char *path, JsonArray *array, const char *what, double min,
                         double max, gboolean min_exclusive, float *out, GError **error)
{
    for (guint i = 0; i < json_array_get_length(array); i++) {
        char *item = g_strdup_printf("%s[%u]", what, i);
        gboolean ok = number_in_range(path, json_array_get_element(array, i), item, min, max,
                                      min_exclusive, &out[i], error);
        g_free(item);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}

const char *get_string(const char *path, JsonObject *o, const char *section, const char *key,
                       GError **error)
{
    JsonNode *node = json_object_get_member(o, key);

    if (!node) {
        config_error(error, path, "missing '%s%s%s'", section, *section ? "." : "", key);
        return NULL;
    }
    if (!node_is_string(node)) {
        config_error(error, path, "'%s%s%s' is not a string", section, *section ? "." : "", key);
        return NULL;
    }
    return json_node_get_string(node);
}

typedef struct {
    const char *name;
    int value;
} config_choice;

/* An optional string member @key of @o that must name one of @choices (two or more,
 * ended by a NULL name): *@value its value; absent, *@value is left as it is. */
static gboolean get_choice(const char *path, JsonObject *o, const char *section, const char *key,
                           const config_choice *choices, int *value, GError **error)
{
    if (!json_object_has_member(o, key))
        return TRUE;
    const char *name = get_string(path, o, section, key, error);
    if (!name)
        return FALSE;
    for (int i = 0; choices[i].name != NULL; i++)
        if (strcmp(name, choices[i].name) == 0) {
            *value = choices[i].value;
            return TRUE;
        }
    GString *expected = g_string_new(NULL);
    for (int i = 0; choices[i].name != NULL; i++)
        g_string_append_printf(expected, "%s'%s'",
                               i == 0                ? ""
                               : choices[i + 1].name ? ", "
                                                     : " or ",
                               choices[i].name);
    config_error(error, path, "'%s.%s' is '%s'; expected %s", section, key, name, expected->str);
    g_string_free(expected, TRUE);
    return FALSE;
}

static gboolean parse_transform(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"min_size",          "max_size",       "image_mean",
                                       "image_std",         "size_divisible", "resize_scale",
                                       "resize_arithmetic", "fixed_size",     NULL};
    JsonObject *o = get_section(path, config, "transform", error);
    JsonArray *mean, *std, *fixed;

    if (!o || !check_keys(path, o, "transform", keys, error) ||
        !get_int(path, o, "transform", "min_size", 1, 100000, &c->min_size, error) ||
        !get_int(path, o, "transform", "max_size", 1, 100000, &c->max_size, error) ||
        !get_int(path, o, "transform", "size_divisible", 1, 4096, &c->size_divisible, error))
        return FALSE;
    /* files written before the exporter recorded these rules: double and torch
     * 1.13's arithmetic, as the engine always computed them */
    static const config_choice scales[] = {
        {"float32", VD_RESIZE_SCALE_FLOAT32}, {"double", VD_RESIZE_SCALE_DOUBLE}, {NULL, 0}};
    static const config_choice arithmetics[] = {{"torch1", VD_RESIZE_ARITHMETIC_TORCH1},
                                                {"torch2", VD_RESIZE_ARITHMETIC_TORCH2},
                                                {NULL, 0}};
    int scale = VD_RESIZE_SCALE_DOUBLE, arithmetic = VD_RESIZE_ARITHMETIC_TORCH1;
    if (!get_choice(path, o, "transform", "resize_scale", scales, &scale, error) ||
        !get_choice(path, o, "transform", "resize_arithmetic", arithmetics, &arithmetic, error))
        return FALSE;
    c->resize_scale = (vd_resize_scale)scale;
    c->resize_arithmetic = (vd_resize_arithmetic)arithmetic;
    /* SSD's fixed_size, torchvision's (width, height): every frame resized to it */
    if (json_object_has_member(o, "fixed_size")) {
        float size[2];
        if (c->detector != VD_DETECTOR_SSD)
            return config_error(error, path,
                                "'transform.fixed_size' is only valid with "
                                "architecture 'ssd' or 'ssdlite'");
        if (!(fixed = get_array(path, o, "transform", "fixed_size", 2, 2, error)) ||
            !get_float_array(path, fixed, "transform.fixed_size", 0.0, 100000.0, TRUE, size, error))
            return FALSE;
        if (size[0] != floorf(size[0]) || size[1] != floorf(size[1]))
            return config_error(error, path, "'transform.fixed_size' is not two integers");
        c->fixed_w = (int)size[0];
        c->fixed_h = (int)size[1];
    } else if (c->detector == VD_DETECTOR_SSD) {
        return config_error(error, path, "an SSD model needs 'transform.fixed_size'");
    }
    mean = get_array(path, o, "transform", "image_mean", 3, 3, error);
    if (!mean || !get_float_array(path, mean, "transform.image_mean", -1e6, 1e6, FALSE,
                                  c->image_mean, error))
        return FALSE;
    std = get_array(path, o, "transform", "image_std", 3, 3, error);
    return std &&
           get_float_array(path, std, "transform.image_std", 0.0, 1e6, TRUE, c->image_std, error);
}

/* The optional per-module batch-norm eps map, shared by both backbone types. */
gboolean parse_eps_per_module(const char *path, JsonObject *o, JsonObject **eps_per_module,
                              GError **error)
{
    JsonNode *eps_node = json_object_get_member(o, "norm_eps_per_module");
    GList *members;
    gboolean ok = TRUE;

    if (!eps_node)
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(eps_node))
        return config_error(error, path, "'backbone.norm_eps_per_module' is not an object");
    *eps_per_module = json_node_get_object(eps_node);
    members = json_object_get_members(*eps_per_module);
    for (GList *l = members; l && ok; l = l->next) {
        char *what = g_strdup_printf("backbone.norm_eps_per_module.%s", (const char *)l->data);
        float eps;
        ok = number_in_range(path, json_object_get_member(*eps_per_module, l->data), what, 0.0, 1.0,
                             FALSE, &eps, error);
        g_free(what);
    }
    g_list_free(members);
    return ok;
}

/* Ascending integers in [min, max], 1 to 4 of them, into c->returned_layers. */
gboolean parse_returned_layers(const char *path, JsonObject *o, vd_config *c, int min, int max,
                               const char *meaning, GError **error)
{
    JsonArray *returned = get_array(path, o, "backbone", "returned_layers", 1, 4, error);

    if (!returned)
        return FALSE;
    c->n_returned_layers = (int)json_array_get_length(returned);
    for (int i = 0; i < c->n_returned_layers; i++) {
        JsonNode *node = json_array_get_element(returned, i);
        gint64 v = node_is_int(node) ? json_node_get_int(node) : G_MININT64;
        if (v < min || v > max || (i > 0 && v <= c->returned_layers[i - 1]))
            return config_error(error, path,
                                "'backbone.returned_layers' must be ascending %s in "
                                "%d..%d",
                                meaning, min, max);
        c->returned_layers[i] = (int)v;
    }
    return TRUE;
}

/* The backbones' loaders (vd_model_loader.h), by their type in the file. */
static const vd_backbone_loader *const backbone_loaders[] = {&vd_resnet_loader, &vd_mnv3_loader,
                                                             &vd_ssd_backbone_loader};

const vd_backbone_loader *backbone_loader_of(vd_backbone_type type)
{
    for (size_t i = 0; i < G_N_ELEMENTS(backbone_loaders); i++)
        if (backbone_loaders[i]->backbone_type == type)
            return backbone_loaders[i];
    return NULL;
}

/* The backbone section: its type chooses the backbone's loader (backbone_loaders[]),
 * which parses the rest; *@n_computed is what that loader's load() takes (ResNet
 * stages, MobileNetV3 features). */
static gboolean parse_backbone(const char *path, JsonObject *config, vd_config *c,
                               JsonObject **eps_per_module, int *n_computed, GError **error)
{
    JsonObject *o = get_section(path, config, "backbone", error);
    const char *type;

    if (!o || !(type = get_string(path, o, "backbone", "type", error)))
        return FALSE;
    /* SSD's and SSDlite's feature extractors are their own, whatever the type */
    if (c->detector == VD_DETECTOR_SSD)
        return vd_ssd_backbone_loader.parse(path, o, c, eps_per_module, n_computed, error);
    for (size_t i = 0; i < G_N_ELEMENTS(backbone_loaders); i++)
        if (strcmp(type, backbone_loaders[i]->type) == 0)
            return backbone_loaders[i]->parse(path, o, c, eps_per_module, n_computed, error);
    g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                "%s: backbone type '%.64s' is not supported ('resnet' or 'mobilenet_v3')", path,
                type);
    return FALSE;
}

/* LastLevelP6P7 (one-stage detectors): P6 from P5 when its input has the FPN's
 * channels ("use_P5", torchvision's in_channels == out_channels), else from C5;
 * the head runs on P6 and P7 as on the other levels, so they have the FPN's
 * channels. Keys other than "extra_block" are checked by parse_fpn(). */
static gboolean parse_fpn_p6p7(const char *path, JsonObject *o, vd_config *c, GError **error)
{
    int in_c, out_c;
    JsonNode *use_p5 = json_object_get_member(o, "use_P5");

    if (!get_int(path, o, "fpn", "extra_in_channels", 1, 65536, &in_c, error) ||
        !get_int(path, o, "fpn", "extra_out_channels", 1, 65536, &out_c, error))
        return FALSE;
    if (use_p5 == NULL || !JSON_NODE_HOLDS_VALUE(use_p5) ||
        json_node_get_value_type(use_p5) != G_TYPE_BOOLEAN)
        return config_error(error, path, "'fpn.use_P5' is missing or not a boolean");
    c->fpn_p6p7 = TRUE;
    c->fpn_p6_from_p5 = json_node_get_boolean(use_p5);
    int expected =
        c->fpn_p6_from_p5 ? c->fpn_channels : c->fpn_in_channels[c->n_returned_layers - 1];
    if (in_c != expected)
        return config_error(error, path,
                            "'fpn.extra_in_channels' is %d; P6's input (%s) has %d channels", in_c,
                            c->fpn_p6_from_p5 ? "P5" : "C5", expected);
    if (out_c != c->fpn_channels)
        return config_error(error, path,
                            "'fpn.extra_out_channels' is %d; the head shared by every level takes "
                            "the FPN's %d",
                            out_c, c->fpn_channels);
    return TRUE;
}

static gboolean parse_fpn(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {
        "in_channels",       "out_channels",       "extra_block", "norm",
        "extra_in_channels", "extra_out_channels", "use_P5",      NULL};
    JsonObject *o = get_section(path, config, "fpn", error);
    JsonArray *in_channels;
    const char *extra;

    if (!o || !check_keys(path, o, "fpn", keys, error) ||
        !get_int(path, o, "fpn", "out_channels", 1, 65536, &c->fpn_channels, error))
        return FALSE;
    c->fpn_norm = FALSE;
    if (json_object_has_member(o, "norm")) {
        const char *norm = get_string(path, o, "fpn", "norm", error);
        if (!norm)
            return FALSE;
        if (strcmp(norm, "batch_norm") == 0)
            c->fpn_norm = TRUE;
        else if (strcmp(norm, "none") != 0)
            return config_error(error, path, "'fpn.norm' is '%s'; expected 'batch_norm' or 'none'",
                                norm);
    }
    if (!(extra = get_string(path, o, "fpn", "extra_block", error)))
        return FALSE;
    if (strcmp(extra, "maxpool") == 0) {
        c->fpn_pool_level = TRUE;
    } else if (strcmp(extra, "none") == 0) {
        c->fpn_pool_level = FALSE;
    } else if (strcmp(extra, "p6p7") == 0 && c->detector == VD_DETECTOR_ONE_STAGE) {
        if (!parse_fpn_p6p7(path, o, c, error))
            return FALSE;
    } else {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: FPN extra block '%s' is not supported ('maxpool' or 'none'%s)", path,
                    extra, c->detector == VD_DETECTOR_ONE_STAGE ? ", or 'p6p7'" : "");
        return FALSE;
    }
    c->n_fpn_levels = c->n_returned_layers + (c->fpn_pool_level ? 1 : 0) + (c->fpn_p6p7 ? 2 : 0);

    /* redundant with the backbone, but a mismatch means a broken writer */
    in_channels =
        get_array(path, o, "fpn", "in_channels", c->n_returned_layers, c->n_returned_layers, error);
    if (!in_channels)
        return FALSE;
    for (int i = 0; i < c->n_returned_layers; i++) {
        JsonNode *node = json_array_get_element(in_channels, i);
        int expected = c->fpn_in_channels[i];
        if (!node_is_int(node) || json_node_get_int(node) != expected)
            return config_error(error, path, "'fpn.in_channels[%d]' should be %d (output of %s %d)",
                                i, expected, backbone_loader_of(c->backbone_type)->returned,
                                c->returned_layers[i]);
    }
    return TRUE;
}

static gboolean parse_anchors(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"sizes", "aspect_ratios", NULL};
    JsonObject *o = get_section(path, config, "anchors", error);
    JsonArray *sizes, *ratios;

    if (!o || !check_keys(path, o, "anchors", keys, error))
        return FALSE;
    /* torchvision requires one entry per feature map */
    sizes = get_array(path, o, "anchors", "sizes", c->n_fpn_levels, c->n_fpn_levels, error);
    if (!sizes)
        return FALSE;
    ratios =
        get_array(path, o, "anchors", "aspect_ratios", c->n_fpn_levels, c->n_fpn_levels, error);
    if (!ratios)
        return FALSE;
    for (int l = 0; l < c->n_fpn_levels; l++) {
        JsonNode *sn = json_array_get_element(sizes, l), *rn = json_array_get_element(ratios, l);
        JsonArray *s, *r;
        char *what;
        gboolean ok;
        int per_location;

        if (!JSON_NODE_HOLDS_ARRAY(sn) || !JSON_NODE_HOLDS_ARRAY(rn))
            return config_error(error, path,
                                "anchors level %d: sizes and aspect_ratios must be "
                                "arrays of numbers",
                                l);
        s = json_node_get_array(sn);
        r = json_node_get_array(rn);
        c->n_anchor_sizes[l] = (int)json_array_get_length(s);
        c->n_aspect_ratios[l] = (int)json_array_get_length(r);
        per_location = c->n_anchor_sizes[l] * c->n_aspect_ratios[l];
        if (per_location < 1 || per_location > VD_MAX_ANCHORS_PER_LEVEL)
            return config_error(error, path,
                                "anchors level %d: %d sizes x %d ratios, expected 1 to "
                                "%d anchors per location",
                                l, c->n_anchor_sizes[l], c->n_aspect_ratios[l],
                                VD_MAX_ANCHORS_PER_LEVEL);
        if (l > 0 && per_location != c->anchors_per_location)
            return config_error(error, path,
                                "anchors level %d has %d anchors per location, level 0 "
                                "has %d (the RPN head is shared)",
                                l, per_location, c->anchors_per_location);
        c->anchors_per_location = per_location;
        what = g_strdup_printf("anchors.sizes[%d]", l);
        ok = get_float_array(path, s, what, 0.0, 1e6, TRUE, c->anchor_sizes[l], error);
        g_free(what);
        if (!ok)
            return FALSE;
        what = g_strdup_printf("anchors.aspect_ratios[%d]", l);
        ok = get_float_array(path, r, what, 0.0, 1e6, TRUE, c->aspect_ratios[l], error);
        g_free(what);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}

/* MultiScaleRoIAlign keeps the FPN maps whose name is in featmap_names, in the FPN's
 * order ('0', '1', ..., 'pool'); the engine needs them to be the first levels.
 * @section names the pooler's section in errors. */
gboolean parse_featmap_names(const char *path, JsonObject *o, const char *section,
                             const vd_config *c, int *n_levels, GError **error)
{
    JsonArray *names = get_array(path, o, section, "featmap_names", 1, 64, error);
    if (!names)
        return FALSE;
    *n_levels = 0;
    for (int l = 0; l < c->n_fpn_levels; l++) {
        char level_name[16];
        gboolean listed = FALSE;

        if (l < c->n_returned_layers)
            g_snprintf(level_name, sizeof level_name, "%d", l);
        else
            g_strlcpy(level_name, "pool", sizeof level_name);
        for (guint i = 0; i < json_array_get_length(names); i++) {
            JsonNode *node = json_array_get_element(names, i);
            if (!node_is_string(node))
                return config_error(error, path, "'%s.featmap_names' must hold strings", section);
            if (strcmp(json_node_get_string(node), level_name) == 0)
                listed = TRUE;
        }
        if (listed && *n_levels != l)
            return config_error(error, path,
                                "'%s.featmap_names' must select the first FPN "
                                "levels ('0', '1', ...); it skips level %d",
                                section, *n_levels);
        if (listed)
            (*n_levels)++;
    }
    if (*n_levels == 0)
        return config_error(error, path, "'%s.featmap_names' selects none of the FPN levels",
                            section);
    return TRUE;
}

gboolean vd_class_name_validate(const char *name, gssize length, GError **error)
{
    size_t n = length < 0 ? strlen(name) : (size_t)length;
    const char *end = NULL;
    if (n > VD_MAX_CLASS_NAME) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "it is %zu bytes long (at most %d)", n,
                    VD_MAX_CLASS_NAME);
        return FALSE;
    }
    if (memchr(name, '\0', n) != NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "it contains a NUL byte (at byte %zu)",
                    (size_t)((const char *)memchr(name, '\0', n) - name) + 1);
        return FALSE;
    }
    if (!g_utf8_validate(name, (gssize)n, &end)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "it is not valid UTF-8 (at byte %zu)",
                    (size_t)(end - name) + 1);
        return FALSE;
    }
    for (const char *p = name; p < name + n; p = g_utf8_next_char(p)) {
        gunichar ch = g_utf8_get_char(p);
        if (ch < 0x20 || (ch >= 0x7f && ch <= 0x9f)) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "it contains the control character U+%04X (at byte %zu)", ch,
                        (size_t)(p - name) + 1);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean parse_classes(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    JsonNode *node = json_object_get_member(config, "class_names");
    JsonArray *names;

    if (!get_int(path, config, "config", "num_classes", 2, VD_MAX_CLASSES, &c->num_classes, error))
        return FALSE;
    c->class_names = g_new0(char *, c->num_classes + 1);
    if (!node) {
        /* optional: the names tools/export_torchvision.py writes by default */
        c->class_names[0] = g_strdup("__background__");
        for (int i = 1; i < c->num_classes; i++)
            c->class_names[i] = g_strdup_printf("class%d", i);
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return config_error(error, path, "'class_names' is not an array");
    names = json_node_get_array(node);
    if ((int)json_array_get_length(names) != c->num_classes)
        return config_error(error, path, "%u class names for %d classes",
                            json_array_get_length(names), c->num_classes);
    for (int i = 0; i < c->num_classes; i++) {
        JsonNode *name = json_array_get_element(names, i);
        GError *invalid = NULL;
        if (!node_is_string(name))
            return config_error(error, path, "'class_names[%d]' is not a string", i);
        if (!vd_class_name_validate(json_node_get_string(name), -1, &invalid)) {
            gboolean ok = config_error(error, path, "'class_names[%d]' is not a usable name: %s", i,
                                       invalid->message);
            g_error_free(invalid);
            return ok;
        }
        c->class_names[i] = g_strdup(json_node_get_string(name));
    }
    return TRUE;
}

gboolean parse_config(const char *path, JsonObject *metadata, vd_config *c, JsonNode **config_root,
                      JsonObject **eps_per_module, int *n_computed, GError **error)
{
    static const char *const keys[] = {
        "architecture",  "transform",      "backbone",          "fpn",         "anchors",
        "rpn",           "roi_heads",      "num_classes",       "class_names", "builder",
        "num_keypoints", "keypoint_names", "keypoint_skeleton", NULL};
    static const char *const one_stage_keys[] = {
        "architecture", "builder", "transform",   "backbone",    "fpn",
        "anchors",      "head",    "num_classes", "class_names", NULL};
    static const char *const ssd_keys[] = {"architecture", "builder",     "transform",
                                           "backbone",     "anchors",     "head",
                                           "num_classes",  "class_names", NULL};
    JsonNode *node = json_object_get_member(metadata, "config");
    JsonObject *config;
    const char *architecture;

    if (!node_is_string(node)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: __metadata__ has no \"config\" string (the architecture)", path);
        return FALSE;
    }
    *config_root =
        parse_json_object(path, "the metadata config", json_node_get_string(node), -1, error);
    if (!*config_root)
        return FALSE;
    config = json_node_get_object(*config_root);

    if (!(architecture = get_string(path, config, "", "architecture", error)))
        return FALSE;
    if (!vd_model_check_family(path, config, architecture, error))
        return FALSE;
    if (strcmp(architecture, "maskrcnn") == 0) {
        c->has_masks = TRUE;
    } else if (strcmp(architecture, "keypointrcnn") == 0) {
        c->has_keypoints = TRUE;
    } else if (strcmp(architecture, "retinanet") == 0 || strcmp(architecture, "fcos") == 0) {
        c->detector = VD_DETECTOR_ONE_STAGE;
    } else if (strcmp(architecture, "ssd") == 0 || strcmp(architecture, "ssdlite") == 0) {
        c->detector = VD_DETECTOR_SSD;
    } else if (strcmp(architecture, "fasterrcnn") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: architecture '%.64s' is not supported ('fasterrcnn', 'maskrcnn', "
                    "'keypointrcnn', 'retinanet', 'fcos', 'ssd' or 'ssdlite')",
                    path, architecture);
        return FALSE;
    }
    if (!c->has_keypoints && (json_object_has_member(config, "num_keypoints") ||
                              json_object_has_member(config, "keypoint_names") ||
                              json_object_has_member(config, "keypoint_skeleton")))
        return config_error(error, path,
                            "'num_keypoints', 'keypoint_names' and 'keypoint_skeleton' are only "
                            "valid with architecture 'keypointrcnn'");
    gboolean one_stage = c->detector == VD_DETECTOR_ONE_STAGE;
    if (c->detector == VD_DETECTOR_SSD) {
        /* num_classes first: the SSDlite head's last convolutions have A * K outputs */
        return check_keys(path, config, "", ssd_keys, error) &&
               parse_transform(path, config, c, error) && parse_classes(path, config, c, error) &&
               parse_backbone(path, config, c, eps_per_module, n_computed, error) &&
               parse_ssd_anchors(path, config, c, error) && parse_ssd_head(path, config, c, error);
    }
    return check_keys(path, config, "", one_stage ? one_stage_keys : keys, error) &&
           parse_transform(path, config, c, error) &&
           parse_backbone(path, config, c, eps_per_module, n_computed, error) &&
           parse_fpn(path, config, c, error) && parse_anchors(path, config, c, error) &&
           (one_stage
                ? parse_one_stage_head(path, config, c, error)
                : parse_rpn(path, config, c, error) && parse_roi_heads(path, config, c, error)) &&
           parse_classes(path, config, c, error) &&
           (!c->has_keypoints || parse_keypoints(path, config, c, error));
}
