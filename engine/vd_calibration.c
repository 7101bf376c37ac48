/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* int8 calibration records: the JSON text a calibrating context gives
 * (vd_context_calibration()), its place in a model file's metadata
 * ("int8_calibration") and the loader's reading of it.
 *
 *   {"method": "max", "frames": N,
 *    "ranges": {"backbone.body.maxpool": 4.25, "backbone.body.layer1.0.conv1": 3.5, ...}}
 *
 * A range is the largest |value| the activation took over the calibration frames
 * (float32 inference); int8 scales it to 255 (after a ReLU) or 127 (signed). */
#include "vd_config.h"
#include "vd_model_private.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define CALIBRATION_KEY "int8_calibration"

char *vd_calibration_to_json(GHashTable *ranges, int frames)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "method");
    json_builder_add_string_value(b, "max");
    json_builder_set_member_name(b, "frames");
    json_builder_add_int_value(b, frames);
    json_builder_set_member_name(b, "ranges");
    json_builder_begin_object(b);
    /* sorted, so that the same ranges give the same text */
    GList *names = g_list_sort(g_hash_table_get_keys(ranges), (GCompareFunc)strcmp);
    for (GList *l = names; l != NULL; l = l->next) {
        const float *range = g_hash_table_lookup(ranges, l->data);
        json_builder_set_member_name(b, l->data);
        json_builder_add_double_value(b, *range);
    }
    g_list_free(names);
    json_builder_end_object(b);
    json_builder_end_object(b);
    JsonNode *root = json_builder_get_root(b);
    char *text = json_to_string(root, FALSE);
    json_node_unref(root);
    g_object_unref(b);
    return text;
}

/* The JSON object @text (@length bytes; -1: up to its NUL) holds, parsed with
 * @parser; NULL with @error set (VD_ERROR_FORMAT) naming @path and @what. */
static JsonObject *parse_object(JsonParser *parser, const char *text, gssize length,
                                const char *path, const char *what, GError **error)
{
    GError *json_error = NULL;
    if (!json_parser_load_from_data(parser, text, length, &json_error)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: %s is not JSON: %s", path, what,
                    json_error->message);
        g_error_free(json_error);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: %s is not a JSON object", path, what);
        return NULL;
    }
    return json_node_get_object(root);
}

/* The type of @obj's member @name where it is a value (G_TYPE_INVALID for an
 * object, array, null or no member). */
static GType member_type(JsonObject *obj, const char *name)
{
    JsonNode *node = json_object_get_member(obj, name);
    return node != NULL && JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node)
                                                       : G_TYPE_INVALID;
}

GHashTable *vd_calibration_parse(const char *path, const char *text, int *frames, GError **error)
{
    JsonParser *parser = json_parser_new();
    GHashTable *ranges = NULL;
    JsonObject *obj = parse_object(parser, text, -1, path, CALIBRATION_KEY, error);
    if (obj == NULL)
        goto out;
    JsonNode *members = json_object_get_member(obj, "ranges");
    if (member_type(obj, "method") != G_TYPE_STRING ||
        strcmp(json_object_get_string_member(obj, "method"), "max") != 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: " CALIBRATION_KEY " has no \"method\": \"max\"", path);
        goto out;
    }
    gint64 n_frames =
        member_type(obj, "frames") == G_TYPE_INT64 ? json_object_get_int_member(obj, "frames") : 0;
    if (n_frames < 1 || n_frames > G_MAXINT) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "%s: " CALIBRATION_KEY " has no positive \"frames\" count", path);
        goto out;
    }
    if (members == NULL || !JSON_NODE_HOLDS_OBJECT(members)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: " CALIBRATION_KEY " has no \"ranges\"",
                    path);
        goto out;
    }
    ranges = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    JsonObject *robj = json_node_get_object(members);
    GList *names = json_object_get_members(robj);
    for (GList *l = names; l != NULL; l = l->next) {
        JsonNode *v = json_object_get_member(robj, l->data);
        GType t = JSON_NODE_HOLDS_VALUE(v) ? json_node_get_value_type(v) : G_TYPE_INVALID;
        double d = t == G_TYPE_DOUBLE  ? json_node_get_double(v)
                   : t == G_TYPE_INT64 ? (double)json_node_get_int(v)
                                       : NAN;
        if (!isfinite(d) || d < 0.0 || d > 3.0e38) {
            g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                        "%s: " CALIBRATION_KEY " range of %s is not a finite number >= 0", path,
                        (const char *)l->data);
            g_list_free(names);
            g_hash_table_unref(ranges);
            ranges = NULL;
            goto out;
        }
        float *range = g_new(float, 1);
        *range = (float)d;
        g_hash_table_insert(ranges, g_strdup(l->data), range);
    }
    g_list_free(names);
    if (frames != NULL)
        *frames = (int)n_frames;
out:
    g_object_unref(parser);
    return ranges;
}

gboolean vd_model_save_calibrated(const char *path, const char *calibration, const char *out_path,
                                  GError **error)
{
    GMappedFile *file = NULL;
    JsonParser *parser = NULL;
    GHashTable *check = NULL;
    char *header = NULL, *contents = NULL;
    gboolean ok = FALSE;
    GError *sub = NULL;

    /* what the loader will read back */
    check = vd_calibration_parse("the calibration", calibration, NULL, error);
    if (check == NULL)
        goto out;
    file = g_mapped_file_new(path, FALSE, &sub);
    if (file == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_FILE, "%s", sub->message);
        g_error_free(sub);
        goto out;
    }
    const guint8 *data = (const guint8 *)g_mapped_file_get_contents(file);
    gsize size = g_mapped_file_get_length(file);
    guint64 n = 0;
    for (int i = 0; i < 8 && size >= 8; i++)
        n |= (guint64)data[i] << (8 * i);
    if (size < 8 || n == 0 || n > size - 8) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: not a safetensors file", path);
        goto out;
    }
    parser = json_parser_new();
    JsonObject *obj =
        parse_object(parser, (const char *)data + 8, (gssize)n, path, "the header", error);
    if (obj == NULL)
        goto out;
    JsonNode *meta = json_object_get_member(obj, "__metadata__");
    if (meta == NULL || !JSON_NODE_HOLDS_OBJECT(meta)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT, "%s: the header has no __metadata__", path);
        goto out;
    }
    json_object_set_string_member(json_node_get_object(meta), CALIBRATION_KEY, calibration);
    gsize header_len = 0;
    header = json_to_string(json_parser_get_root(parser), FALSE);
    header_len = strlen(header);
    /* safetensors pads the header with spaces to a multiple of 8 bytes */
    gsize padded = (header_len + 7) / 8 * 8;
    gsize tensors = size - 8 - (gsize)n;
    contents = g_try_malloc(8 + padded + tensors);
    if (contents == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory writing %s", out_path);
        goto out;
    }
    for (int i = 0; i < 8; i++)
        contents[i] = (char)(((guint64)padded >> (8 * i)) & 0xff);
    memcpy(contents + 8, header, header_len);
    memset(contents + 8 + header_len, ' ', padded - header_len);
    memcpy(contents + 8 + padded, data + 8 + n, tensors);
    if (!g_file_set_contents(out_path, contents, (gssize)(8 + padded + tensors), &sub)) {
        g_set_error(error, VD_ERROR, VD_ERROR_FILE, "%s", sub->message);
        g_error_free(sub);
        goto out;
    }
    ok = TRUE;
out:
    g_free(contents);
    g_free(header);
    if (parser != NULL)
        g_object_unref(parser);
    if (file != NULL)
        g_mapped_file_unref(file);
    if (check != NULL)
        g_hash_table_unref(check);
    return ok;
}
