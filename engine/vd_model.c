/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model loader: a .safetensors file written by tools/export_torchvision.py.
 *
 * File layout (safetensors): an 8-byte little-endian header length N, N bytes of JSON
 * header, then the tensor data. The header maps each tensor name (torchvision's
 * state_dict() key) to {"dtype", "shape", "data_offsets": [begin, end]} with offsets
 * relative to the first data byte, and holds "__metadata__", a string->string map:
 *
 *   "format": "visiondetect", "format_version": "1",
 *   "config": the architecture as a JSON string (schema: tools/export_torchvision.py)
 *
 * Everything is validated before anything is used: the header's structure, every
 * tensor's dtype, shape and byte range, the configuration's keys and ranges, then the
 * exact set of tensors the configuration implies, each with its exact shape. Weights
 * are converted to float32 (F16 and BF16 exactly) and batch-norm is folded into the
 * preceding convolution; the model owns copies, the mapping is released before
 * returning. Errors name the file, the cause and, where there is one, the tensor.
 */
#include "vd_config.h"
#include "vd_model_loader.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VD_FORMAT_NAME "visiondetect"
#define VD_FORMAT_VERSION 1
#define VD_MAX_DIMS 8
#define VD_MAX_CLASSES 100000

typedef enum {
    DTYPE_F32,
    DTYPE_F16,
    DTYPE_BF16,
    DTYPE_OTHER, /* a valid safetensors dtype that the engine does not read */
} tensor_dtype;

/* One entry of the header. Strings point into the parsed JSON, which outlives it. */
typedef struct {
    const char *name;
    const char *dtype_name;
    tensor_dtype dtype;
    int ndim;
    gint64 shape[VD_MAX_DIMS];
    guint64 begin, end;
    gboolean used;
} tensor_entry;

struct loader {
    const char *path;
    const guint8 *data; /* first byte after the header */
    guint64 data_size;
    tensor_entry *entries; /* header order */
    int n_entries;
    GHashTable *by_name;        /* name -> tensor_entry* */
    JsonObject *eps_per_module; /* optional: batch-norm module prefix -> eps */
    int n_eps_used;
    float norm_eps;
};

/* ------------------------------------------------------------------------ */
/* Number conversion                                                         */

static float float_from_bits(guint32 bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE binary16 to binary32: exact for every value, NaN payloads kept (as torch does). */
static float half_to_float(guint16 h)
{
    guint32 sign = (guint32)(h & 0x8000u) << 16;
    guint32 exponent = (h >> 10) & 0x1fu;
    guint32 mantissa = h & 0x3ffu;
    guint32 bits;

    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        /* subnormal half: mantissa * 2^-24, a normal float once the leading 1 is found */
        guint32 e = 127 - 15 + 1;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
    }
    return float_from_bits(bits);
}

static float bf16_to_float(guint16 b)
{
    return float_from_bits((guint32)b << 16);
}

static void convert_to_float(const tensor_entry *t, const guint8 *src, gsize n, float *dst)
{
    for (gsize i = 0; i < n; i++) {
        if (t->dtype == DTYPE_F32) {
            guint32 v;
            memcpy(&v, src + 4 * i, 4);
            dst[i] = float_from_bits(GUINT32_FROM_LE(v));
        } else {
            guint16 v;
            memcpy(&v, src + 2 * i, 2);
            v = GUINT16_FROM_LE(v);
            dst[i] = t->dtype == DTYPE_F16 ? half_to_float(v) : bf16_to_float(v);
        }
    }
}

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
static JsonNode *parse_json_object(const char *path, const char *what, const char *text, gssize len,
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

static const vd_backbone_loader *backbone_loader_of(vd_backbone_type type)
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

static gboolean parse_rpn(const char *path, JsonObject *config, vd_config *c, GError **error)
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

static gboolean parse_roi_heads(const char *path, JsonObject *config, vd_config *c, GError **error)
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

static gboolean parse_config(const char *path, JsonObject *metadata, vd_config *c,
                             JsonNode **config_root, JsonObject **eps_per_module, int *n_computed,
                             GError **error)
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

static gboolean parse_metadata(const char *path, JsonObject *header, JsonObject **metadata,
                               GError **error)
{
    JsonNode *node = json_object_get_member(header, "__metadata__");
    JsonNode *format, *version;
    GList *members;
    gboolean ok = TRUE;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: %s: not a visiondetect model (export one with "
                    "tools/export_torchvision.py)",
                    path,
                    node ? "__metadata__ is not an object" : "the header has no __metadata__");
        return FALSE;
    }
    *metadata = json_node_get_object(node);
    members = json_object_get_members(*metadata);
    for (GList *l = members; l && ok; l = l->next) {
        if (!node_is_string(json_object_get_member(*metadata, l->data))) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "%s: __metadata__ value '%s' is not a string", path, (const char *)l->data);
            ok = FALSE;
        }
    }
    g_list_free(members);
    if (!ok)
        return FALSE;

    format = json_object_get_member(*metadata, "format");
    if (!format) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: __metadata__ has no \"format\": not a visiondetect model (export one with "
                    "tools/export_torchvision.py)",
                    path);
        return FALSE;
    }
    if (strcmp(json_node_get_string(format), VD_FORMAT_NAME) != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: model format '%s' is not supported (expected '%s')", path,
                    json_node_get_string(format), VD_FORMAT_NAME);
        return FALSE;
    }
    version = json_object_get_member(*metadata, "format_version");
    if (!version) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: __metadata__ has no \"format_version\"",
                    path);
        return FALSE;
    }
    if (strcmp(json_node_get_string(version), G_STRINGIFY(VD_FORMAT_VERSION)) != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: format_version '%s' is not supported (this build reads version %d)", path,
                    json_node_get_string(version), VD_FORMAT_VERSION);
        return FALSE;
    }
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Tensor directory                                                          */

static gboolean is_num_batches_tracked(const char *name)
{
    return g_str_has_suffix(name, "num_batches_tracked");
}

static gboolean dtype_from_name(const char *name, tensor_dtype *dtype, guint *size)
{
    static const struct {
        const char *name;
        tensor_dtype dtype;
        guint size;
    } table[] = {
        {"F32", DTYPE_F32, 4},    {"F16", DTYPE_F16, 2},       {"BF16", DTYPE_BF16, 2},
        {"F64", DTYPE_OTHER, 8},  {"I64", DTYPE_OTHER, 8},     {"U64", DTYPE_OTHER, 8},
        {"I32", DTYPE_OTHER, 4},  {"U32", DTYPE_OTHER, 4},     {"I16", DTYPE_OTHER, 2},
        {"U16", DTYPE_OTHER, 2},  {"I8", DTYPE_OTHER, 1},      {"U8", DTYPE_OTHER, 1},
        {"BOOL", DTYPE_OTHER, 1}, {"F8_E4M3", DTYPE_OTHER, 1}, {"F8_E5M2", DTYPE_OTHER, 1},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(table); i++) {
        if (strcmp(name, table[i].name) == 0) {
            *dtype = table[i].dtype;
            *size = table[i].size;
            return TRUE;
        }
    }
    return FALSE;
}

static char *shape_string(const gint64 *shape, int ndim)
{
    GString *s = g_string_new("[");
    for (int i = 0; i < ndim; i++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i ? ", " : "", shape[i]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

static gboolean parse_entry(loader *ld, const char *name, JsonNode *node, tensor_entry *t,
                            GError **error)
{
    JsonObject *o;
    JsonNode *dtype, *shape, *offsets;
    JsonArray *shape_array, *offset_array;
    guint element_size;
    guint64 n_bytes;

    t->name = name;
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: header entry of tensor '%s' is not an "
                    "object",
                    ld->path, name);
        return FALSE;
    }
    o = json_node_get_object(node);
    dtype = json_object_get_member(o, "dtype");
    shape = json_object_get_member(o, "shape");
    offsets = json_object_get_member(o, "data_offsets");
    if (!node_is_string(dtype) || !shape || !JSON_NODE_HOLDS_ARRAY(shape) || !offsets ||
        !JSON_NODE_HOLDS_ARRAY(offsets) || json_object_get_size(o) != 3) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s': the header entry needs exactly \"dtype\" (string), \"shape\" "
                    "and \"data_offsets\" (arrays)",
                    ld->path, name);
        return FALSE;
    }
    t->dtype_name = json_node_get_string(dtype);
    if (!dtype_from_name(t->dtype_name, &t->dtype, &element_size)) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "%s: tensor '%s' has unknown dtype '%s'",
                    ld->path, name, t->dtype_name);
        return FALSE;
    }
    if (t->dtype == DTYPE_OTHER && !is_num_batches_tracked(name)) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported", ld->path,
                    name, t->dtype_name);
        return FALSE;
    }

    shape_array = json_node_get_array(shape);
    if (json_array_get_length(shape_array) > VD_MAX_DIMS) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s' has %u dimensions (at most %d)", ld->path, name,
                    json_array_get_length(shape_array), VD_MAX_DIMS);
        return FALSE;
    }
    t->ndim = (int)json_array_get_length(shape_array);
    n_bytes = element_size;
    for (int i = 0; i < t->ndim; i++) {
        JsonNode *dim = json_array_get_element(shape_array, i);
        if (!node_is_int(dim) || json_node_get_int(dim) < 0) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "%s: tensor '%s': shape entries must be non-negative integers", ld->path,
                        name);
            return FALSE;
        }
        t->shape[i] = json_node_get_int(dim);
        /* a size that does not fit the file cannot be right; stop before overflowing */
        if (t->shape[i] != 0 && n_bytes > G_MAXUINT64 / (guint64)t->shape[i]) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: tensor '%s': shape too large",
                        ld->path, name);
            return FALSE;
        }
        n_bytes *= (guint64)t->shape[i];
    }

    offset_array = json_node_get_array(offsets);
    if (json_array_get_length(offset_array) != 2 ||
        !node_is_int(json_array_get_element(offset_array, 0)) ||
        !node_is_int(json_array_get_element(offset_array, 1)) ||
        json_array_get_int_element(offset_array, 0) < 0 ||
        json_array_get_int_element(offset_array, 1) < 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s': data_offsets must be two non-negative integers", ld->path,
                    name);
        return FALSE;
    }
    t->begin = (guint64)json_array_get_int_element(offset_array, 0);
    t->end = (guint64)json_array_get_int_element(offset_array, 1);
    if (t->begin > t->end) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s': data_offsets begin %" G_GUINT64_FORMAT
                    " > end %" G_GUINT64_FORMAT,
                    ld->path, name, t->begin, t->end);
        return FALSE;
    }
    if (t->end > ld->data_size) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s': data_offsets [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                    "] out of range: the data section has %" G_GUINT64_FORMAT " bytes (truncated "
                    "file?)",
                    ld->path, name, t->begin, t->end, ld->data_size);
        return FALSE;
    }
    if (t->end - t->begin != n_bytes) {
        char *s = shape_string(t->shape, t->ndim);
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s': %" G_GUINT64_FORMAT
                    " bytes of data for shape %s of %s (%" G_GUINT64_FORMAT " bytes)",
                    ld->path, name, t->end - t->begin, s, t->dtype_name, n_bytes);
        g_free(s);
        return FALSE;
    }
    return TRUE;
}

static int compare_begin(const void *a, const void *b)
{
    const tensor_entry *ta = *(tensor_entry *const *)a, *tb = *(tensor_entry *const *)b;
    if (ta->begin != tb->begin)
        return ta->begin < tb->begin ? -1 : 1;
    return ta->end < tb->end ? -1 : ta->end > tb->end;
}

static gboolean check_overlaps(loader *ld, GError **error)
{
    tensor_entry **sorted = g_new(tensor_entry *, ld->n_entries > 0 ? ld->n_entries : 1);
    const tensor_entry *reach = NULL; /* the entry ending furthest so far */
    gboolean ok = TRUE;

    for (int i = 0; i < ld->n_entries; i++)
        sorted[i] = &ld->entries[i];
    qsort(sorted, (size_t)ld->n_entries, sizeof *sorted, compare_begin);
    for (int i = 0; i < ld->n_entries && ok; i++) {
        const tensor_entry *t = sorted[i];
        if (t->begin == t->end)
            continue;
        if (reach && t->begin < reach->end) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "%s: tensors '%s' and '%s' overlap in the data section", ld->path,
                        reach->name, t->name);
            ok = FALSE;
        }
        if (!reach || t->end > reach->end)
            reach = t;
    }
    g_free(sorted);
    return ok;
}

static gboolean parse_entries(loader *ld, JsonObject *header, GError **error)
{
    GList *members = json_object_get_members(header);
    gboolean ok = TRUE;

    ld->entries = g_new0(tensor_entry, g_list_length(members) + 1);
    for (GList *l = members; l && ok; l = l->next) {
        const char *name = l->data;
        if (strcmp(name, "__metadata__") == 0)
            continue;
        ok = parse_entry(ld, name, json_object_get_member(header, name),
                         &ld->entries[ld->n_entries], error);
        if (ok) {
            g_hash_table_insert(ld->by_name, (gpointer)name, &ld->entries[ld->n_entries]);
            ld->n_entries++;
        }
    }
    g_list_free(members);
    return ok && check_overlaps(ld, error);
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                   */

/* The entry named @name (or @alt_name, the older torchvision key of the same tensor),
 * checked against the expected shape. */
static tensor_entry *find_tensor(loader *ld, const char *name, const char *alt_name, int ndim,
                                 const gint64 *shape, GError **error)
{
    tensor_entry *t = g_hash_table_lookup(ld->by_name, name);
    tensor_entry *alt = alt_name ? g_hash_table_lookup(ld->by_name, alt_name) : NULL;
    gboolean same = TRUE;

    if (t && alt) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: both '%s' and '%s' are present (the same tensor in two torchvision "
                    "naming schemes)",
                    ld->path, name, alt_name);
        return NULL;
    }
    if (!t)
        t = alt;
    if (!t) {
        char *s = shape_string(shape, ndim);
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: missing tensor '%s' (expected shape %s)",
                    ld->path, name, s);
        g_free(s);
        return NULL;
    }
    same = t->ndim == ndim;
    for (int i = 0; i < ndim && same; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char *expected = shape_string(shape, ndim), *actual = shape_string(t->shape, t->ndim);
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: tensor '%s' has shape %s, the model config implies %s", ld->path, t->name,
                    actual, expected);
        g_free(expected);
        g_free(actual);
        return NULL;
    }
    t->used = TRUE;
    return t;
}

/* A float32 copy of a checked tensor (NULL with @error set on failure). */
float *read_tensor(loader *ld, const char *name, const char *alt_name, int ndim,
                   const gint64 *shape, GError **error)
{
    tensor_entry *t = find_tensor(ld, name, alt_name, ndim, shape, error);
    gsize n = 1;
    float *values;

    if (!t)
        return NULL;
    for (int i = 0; i < ndim; i++)
        n *= (gsize)shape[i];
    values = g_try_malloc_n(n ? n : 1, sizeof(float));
    if (!values) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "%s: out of memory reading tensor '%s' (%" G_GSIZE_FORMAT " floats)", ld->path,
                    t->name, n);
        return NULL;
    }
    convert_to_float(t, ld->data + t->begin, n, values);
    return values;
}

static float norm_eps_of(loader *ld, const char *bn_prefix)
{
    JsonNode *node =
        ld->eps_per_module ? json_object_get_member(ld->eps_per_module, bn_prefix) : NULL;
    if (!node)
        return ld->norm_eps;
    ld->n_eps_used++;
    return (float)json_node_get_double(node);
}

/* A bias-free convolution followed by batch-norm @bn_prefix, folded as torchvision's
 * FrozenBatchNorm2d computes it in float32: scale = w * rsqrt(rv + eps),
 * shift = b - rm * scale; then weight[o] *= scale[o], bias[o] = shift[o]. */
gboolean load_conv_bn_groups(loader *ld, const char *conv_prefix, const char *bn_prefix,
                             vd_conv *conv, int out, int in, int kernel, int stride, int padding,
                             int groups, GError **error)
{
    const gint64 wshape[4] = {out, in / groups, kernel, kernel}, vshape[1] = {out};
    char *name = g_strdup_printf("%s.weight", conv_prefix);
    float *gamma = NULL, *beta = NULL, *mean = NULL, *var = NULL;
    gsize per_output = (gsize)(in / groups) * kernel * kernel;
    float eps = norm_eps_of(ld, bn_prefix);
    gboolean ok = FALSE;

    conv->out_channels = out;
    conv->in_channels = in;
    conv->kernel = kernel;
    conv->stride = stride;
    conv->padding = padding;
    conv->groups = groups;
    conv->weight = read_tensor(ld, name, NULL, 4, wshape, error);
    if (!conv->weight)
        goto out_free_name;

#define READ_BN(var_, field)                                                                       \
    g_free(name);                                                                                  \
    name = g_strdup_printf("%s." field, bn_prefix);                                                \
    if (!(var_ = read_tensor(ld, name, NULL, 1, vshape, error)))                                   \
        goto out_free_bn;
    READ_BN(gamma, "weight")
    READ_BN(beta, "bias")
    READ_BN(mean, "running_mean")
    READ_BN(var, "running_var")
#undef READ_BN

    conv->bias = g_try_new(float, out);
    if (!conv->bias) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "%s: out of memory", ld->path);
        goto out_free_bn;
    }
    for (int o = 0; o < out; o++) {
        float scale = gamma[o] * (1.0f / sqrtf(var[o] + eps));
        /* two roundings as in torch (no FMA contraction of b - rm * scale) */
        volatile float mean_scale = mean[o] * scale;
        conv->bias[o] = beta[o] - mean_scale;
        for (gsize i = 0; i < per_output; i++)
            conv->weight[o * per_output + i] *= scale;
    }
    ok = TRUE;

out_free_bn:
    g_free(gamma);
    g_free(beta);
    g_free(mean);
    g_free(var);
out_free_name:
    g_free(name);
    return ok;
}

gboolean load_conv_bn(loader *ld, const char *conv_prefix, const char *bn_prefix, vd_conv *conv,
                      int out, int in, int kernel, int stride, int padding, GError **error)
{
    return load_conv_bn_groups(ld, conv_prefix, bn_prefix, conv, out, in, kernel, stride, padding,
                               1, error);
}

/* A convolution with its own bias; @alt_prefix is the older torchvision name. */
gboolean load_conv_bias(loader *ld, const char *prefix, const char *alt_prefix, vd_conv *conv,
                        int out, int in, int kernel, int stride, int padding, GError **error)
{
    const gint64 wshape[4] = {out, in, kernel, kernel}, bshape[1] = {out};
    char *name = g_strdup_printf("%s.weight", prefix);
    char *alt = g_strdup_printf("%s.weight", alt_prefix);
    gboolean ok;

    conv->out_channels = out;
    conv->in_channels = in;
    conv->kernel = kernel;
    conv->stride = stride;
    conv->padding = padding;
    conv->groups = 1;
    conv->weight = read_tensor(ld, name, alt, 4, wshape, error);
    g_free(name);
    g_free(alt);
    name = g_strdup_printf("%s.bias", prefix);
    alt = g_strdup_printf("%s.bias", alt_prefix);
    ok = conv->weight && (conv->bias = read_tensor(ld, name, alt, 1, bshape, error)) != NULL;
    g_free(name);
    g_free(alt);
    return ok;
}

static gboolean load_linear(loader *ld, const char *prefix, vd_linear *linear, int out, int in,
                            GError **error)
{
    const gint64 wshape[2] = {out, in}, bshape[1] = {out};
    char *name = g_strdup_printf("%s.weight", prefix);
    gboolean ok;

    linear->out_features = out;
    linear->in_features = in;
    linear->weight = read_tensor(ld, name, NULL, 2, wshape, error);
    g_free(name);
    name = g_strdup_printf("%s.bias", prefix);
    ok = linear->weight && (linear->bias = read_tensor(ld, name, NULL, 1, bshape, error)) != NULL;
    g_free(name);
    return ok;
}

/* The FPN's convolutions (both kinds of detector; LastLevelP6P7's are the one-stage
 * loader's). */
static gboolean load_fpn(loader *ld, vd_model *model, GError **error)
{
    const vd_config *c = &model->config;
    int C = c->fpn_channels;
    char name[64], alt[64];

    for (int i = 0; i < c->n_returned_layers; i++) {
        int in = c->fpn_in_channels[i];
        /* torchvision >= 0.13 wraps the FPN convs in Conv2dNormActivation ('.0') */
        g_snprintf(name, sizeof name, "backbone.fpn.inner_blocks.%d.0", i);
        g_snprintf(alt, sizeof alt, "backbone.fpn.inner_blocks.%d", i);
        if (c->fpn_norm) {
            /* v2: Conv2dNormActivation(norm_layer=BatchNorm2d): '.0' conv, '.1' norm */
            g_snprintf(alt, sizeof alt, "backbone.fpn.inner_blocks.%d.1", i);
            if (!load_conv_bn(ld, name, alt, &model->fpn_inner[i], C, in, 1, 1, 0, error))
                return FALSE;
        } else if (!load_conv_bias(ld, name, alt, &model->fpn_inner[i], C, in, 1, 1, 0, error)) {
            return FALSE;
        }
        g_snprintf(name, sizeof name, "backbone.fpn.layer_blocks.%d.0", i);
        g_snprintf(alt, sizeof alt, "backbone.fpn.layer_blocks.%d", i);
        if (c->fpn_norm) {
            g_snprintf(alt, sizeof alt, "backbone.fpn.layer_blocks.%d.1", i);
            if (!load_conv_bn(ld, name, alt, &model->fpn_layer[i], C, C, 3, 1, 1, error))
                return FALSE;
        } else if (!load_conv_bias(ld, name, alt, &model->fpn_layer[i], C, C, 3, 1, 1, error)) {
            return FALSE;
        }
    }
    return TRUE;
}

/* The RPN and the RoI heads' box branch (two-stage detectors). */
static gboolean load_heads(loader *ld, vd_model *model, GError **error)
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
static gboolean load_mask_head(loader *ld, vd_model *model, GError **error)
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

static gboolean check_leftovers(loader *ld, GError **error)
{
    for (int i = 0; i < ld->n_entries; i++) {
        const tensor_entry *t = &ld->entries[i];
        if (!t->used && !is_num_batches_tracked(t->name)) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "%s: unexpected tensor '%s': not part of the architecture in the model "
                        "config (unsupported head or layer, or a config that does not match the "
                        "weights)",
                        ld->path, t->name);
            return FALSE;
        }
    }
    if (ld->eps_per_module && ld->n_eps_used != (int)json_object_get_size(ld->eps_per_module)) {
        GList *members = json_object_get_members(ld->eps_per_module);
        const char *unknown = NULL;
        for (GList *l = members; l && !unknown; l = l->next) {
            char *gamma = g_strdup_printf("%s.weight", (const char *)l->data);
            tensor_entry *t = g_hash_table_lookup(ld->by_name, gamma);
            if (!t || !t->used)
                unknown = l->data;
            g_free(gamma);
        }
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: invalid model config: 'backbone.norm_eps_per_module' names '%s', which is "
                    "not a batch-norm module of the model",
                    ld->path, unknown ? unknown : "?");
        g_list_free(members);
        return FALSE;
    }
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* The model object                                                          */

void vd_conv_free(vd_conv *conv)
{
    g_free(conv->weight);
    g_free(conv->bias);
}

void vd_linear_free(vd_linear *linear)
{
    g_free(linear->weight);
    g_free(linear->bias);
}

static void model_free(vd_model *model)
{
    vd_conv_free(&model->stem);
    backbone_loader_of(model->config.backbone_type)->clear(model);
    for (int i = 0; i < 4; i++) {
        vd_conv_free(&model->fpn_inner[i]);
        vd_conv_free(&model->fpn_layer[i]);
    }
    vd_conv_free(&model->rpn_conv);
    for (int j = 0; j < VD_MAX_RPN_CONVS - 1; j++)
        vd_conv_free(&model->rpn_conv_more[j]);
    for (int j = 0; j < VD_MAX_BOX_CONVS; j++)
        vd_conv_free(&model->box_convs[j]);
    vd_conv_free(&model->rpn_cls);
    vd_conv_free(&model->rpn_bbox);
    vd_linear_free(&model->fc6);
    vd_linear_free(&model->fc7);
    vd_linear_free(&model->cls_score);
    vd_linear_free(&model->bbox_pred);
    for (int j = 0; j < VD_MAX_MASK_CONVS; j++)
        vd_conv_free(&model->mask_convs[j]);
    vd_conv_free(&model->mask_deconv);
    vd_conv_free(&model->mask_logits);
    keypoint_head_free(model);
    vd_one_stage_clear(model);
    vd_ssd_clear(model);
    g_strfreev(model->config.class_names);
    g_free(model->description);
    if (model->int8_ranges != NULL)
        g_hash_table_unref(model->int8_ranges);
    g_free(model);
}

vd_model *vd_model_load_bytes(const char *path, const guint8 *contents, guint64 size,
                              GError **error)
{
    guint64 header_len;
    JsonNode *header_root = NULL, *config_root = NULL;
    JsonObject *metadata = NULL;
    vd_model *model = NULL;
    loader ld = {0};
    int n_computed = 0;
    gboolean ok = FALSE;

    ld.path = path;
    if (size < 8) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: file too short (%" G_GUINT64_FORMAT " bytes) for the 8-byte safetensors "
                    "header length",
                    path, size);
        return NULL;
    }
    memcpy(&header_len, contents, 8);
    header_len = GUINT64_FROM_LE(header_len);
    if (header_len > size - 8 || header_len > G_MAXSSIZE) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: header length %" G_GUINT64_FORMAT
                    " goes beyond the end of the file (%" G_GUINT64_FORMAT
                    " bytes): truncated or not a safetensors file",
                    path, header_len, size);
        return NULL;
    }
    header_root = parse_json_object(path, "the safetensors header", (const char *)contents + 8,
                                    (gssize)header_len, error);
    if (!header_root)
        return NULL;

    model = g_new0(vd_model, 1);
    model->ref_count = 1;
    ld.data = contents + 8 + header_len;
    ld.data_size = size - 8 - header_len;
    ld.by_name = g_hash_table_new(g_str_hash, g_str_equal);

    if (!parse_metadata(path, json_node_get_object(header_root), &metadata, error) ||
        !parse_config(path, metadata, &model->config, &config_root, &ld.eps_per_module, &n_computed,
                      error) ||
        !parse_entries(&ld, json_node_get_object(header_root), error))
        goto out_free_loader;
    JsonNode *calibration = json_object_get_member(metadata, "int8_calibration");
    if (calibration != NULL &&
        (model->int8_ranges = vd_calibration_parse(path, json_node_get_string(calibration),
                                                   &model->int8_frames, error)) == NULL)
        goto out_free_loader;
    ld.norm_eps = model->config.norm_eps;
    const vd_backbone_loader *backbone = backbone_loader_of(model->config.backbone_type);
    gboolean one_stage = model->config.detector == VD_DETECTOR_ONE_STAGE;
    gboolean ssd = model->config.detector == VD_DETECTOR_SSD;
    if (!backbone->load(&ld, model, n_computed, error) ||
        !(ssd ? load_ssd_head(&ld, model, error)
              : load_fpn(&ld, model, error) && (one_stage ? load_one_stage(&ld, model, error)
                                                          : load_heads(&ld, model, error))) ||
        (model->config.has_masks && !load_mask_head(&ld, model, error)) ||
        (model->config.has_keypoints && !load_keypoint_head(&ld, model, error)) ||
        !check_leftovers(&ld, error))
        goto out_free_loader;

    {
        const char *arch = ssd                       ? (model->config.ssd.lite ? "ssdlite" : "ssd")
                           : one_stage               ? vd_one_stage_name(&model->config)
                           : model->config.has_masks ? "maskrcnn"
                           : model->config.has_keypoints ? "keypointrcnn"
                                                         : "fasterrcnn";
        backbone->name(&model->config, model->backbone_name, sizeof model->backbone_name);
        model->description = g_strdup_printf("%s %s%s, %d classes", arch, model->backbone_name,
                                             ssd ? "" : "-fpn", model->config.num_classes);
    }
    ok = TRUE;

out_free_loader:
    g_hash_table_destroy(ld.by_name);
    g_free(ld.entries);
    if (config_root)
        json_node_unref(config_root);
    json_node_unref(header_root);
    if (!ok) {
        model_free(model);
        model = NULL;
    }
    return model;
}

vd_model *vd_model_load(const char *path, GError **error)
{
    GError *map_error = NULL;
    GMappedFile *file;
    vd_model *model;

    if (!path) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "no model file given");
        return NULL;
    }
    file = g_mapped_file_new(path, FALSE, &map_error);
    if (!file) {
        g_set_error(error, VD_ERROR, VD_ERROR_FILE, "cannot open model file %s: %s", path,
                    map_error->message);
        g_error_free(map_error);
        return NULL;
    }
    model = vd_model_load_bytes(path, (const guint8 *)g_mapped_file_get_contents(file),
                                g_mapped_file_get_length(file), error);
    g_mapped_file_unref(file);
    return model;
}

vd_model *vd_model_ref(vd_model *model)
{
    if (model)
        g_atomic_int_inc(&model->ref_count);
    return model;
}

void vd_model_unref(vd_model *model)
{
    if (model && g_atomic_int_dec_and_test(&model->ref_count))
        model_free(model);
}

int vd_model_num_classes(const vd_model *model)
{
    return model ? model->config.num_classes : 0;
}

const char *vd_model_class_name(const vd_model *model, int label)
{
    if (!model || label < 0 || label >= model->config.num_classes)
        return NULL;
    return model->config.class_names[label];
}

const char *vd_model_description(const vd_model *model)
{
    return model ? model->description : NULL;
}

gboolean vd_model_has_masks(const vd_model *model)
{
    return model != NULL && model->config.has_masks;
}

float vd_model_score_threshold(const vd_model *model)
{
    return model ? model->config.box_score_thresh : 0.0f;
}
