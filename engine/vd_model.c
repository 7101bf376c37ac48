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

gboolean load_linear(loader *ld, const char *prefix, vd_linear *linear, int out, int in,
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
