/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model loader's part for SSD and SSDlite (engine/SSD.md): the backbone's
 * layer lists (VGG16 with its L2 norm, or SSDlite's MobileNetV3 feature extractor,
 * and the extra layers), DefaultBoxGenerator's parameters, the heads, and their
 * weights, batch norms folded. The layer lists are the exporter's ops, each
 * convolution and squeeze-and-excitation naming its module. */
#include "vd_model_loader.h"

#include <string.h>

#define VD_MAX_SSD_OPS 4096
#define VD_MAX_SSD_CHANNELS 65536

/* The "name" member of @o: a module name (a state_dict prefix) */
static const char *get_name(const char *path, JsonObject *o, const char *section, GError **error)
{
    const char *name = get_string(path, o, section, "name", error);
    if (name != NULL &&
        (strlen(name) == 0 || strlen(name) > 200 || !vd_class_name_validate(name, -1, NULL)))
        return config_error(error, path, "'%s.name' is not a module name", section), NULL;
    return name;
}

static gboolean get_bool_member(const char *path, JsonObject *o, const char *section,
                                const char *key, gboolean *out, GError **error)
{
    JsonNode *node = json_object_get_member(o, key);
    if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return config_error(error, path, "'%s.%s' is missing or not a boolean", section, key);
    *out = json_node_get_boolean(node);
    return TRUE;
}

static vd_ssd_op *ops_add(GArray *ops, const char *path, const char *section, GError **error)
{
    if (ops->len >= VD_MAX_SSD_OPS) {
        config_error(error, path, "'%s' has more than %d layers", section, VD_MAX_SSD_OPS);
        return NULL;
    }
    g_array_set_size(ops, ops->len + 1);
    return &g_array_index(ops, vd_ssd_op, ops->len - 1);
}

/* The last op of @ops when it is a convolution that an activation or a batch-norm
 * may still follow (none yet, no residual add), else NULL */
static vd_ssd_op *open_conv(GArray *ops)
{
    vd_ssd_op *last = ops->len > 0 ? &g_array_index(ops, vd_ssd_op, ops->len - 1) : NULL;
    return last != NULL && last->kind == VD_SSD_CONV && last->act == VD_ACT_NONE && !last->add_saved
               ? last
               : NULL;
}

/* The ops of JSON array @array (section @section in errors) appended to @ops;
 * *@channels: the channels going in, then out. An inverted residual with its
 * residual becomes a VD_SSD_SAVE, its layers, and its last convolution's add. */
static gboolean parse_ops(const char *path, JsonArray *array, const char *section, GArray *ops,
                          int *channels, gboolean nested, GError **error)
{
    static const char *const conv_keys[] = {"op",     "name",   "in_channels", "out_channels",
                                            "kernel", "stride", "padding",     "dilation",
                                            "groups", "bias",   NULL};
    static const char *const pool_keys[] = {"op",      "name",      "kernel", "stride",
                                            "padding", "ceil_mode", NULL};
    static const char *const se_keys[] = {"op", "name", "channels", "squeeze_channels", NULL};
    static const char *const ir_keys[] = {"op", "residual", "layers", NULL};
    static const char *const bn_keys[] = {"op", "name", NULL};
    static const char *const act_keys[] = {"op", NULL};
    guint n = json_array_get_length(array);

    for (guint i = 0; i < n; i++) {
        JsonNode *node = json_array_get_element(array, i);
        char where[96];
        const char *kind, *name;
        JsonObject *o;
        vd_ssd_op *op, *conv;

        g_snprintf(where, sizeof where, "%s[%u]", section, i);
        if (!JSON_NODE_HOLDS_OBJECT(node))
            return config_error(error, path, "'%s' is not an object", where);
        o = json_node_get_object(node);
        if (!(kind = get_string(path, o, where, "op", error)))
            return FALSE;
        if (strcmp(kind, "conv") == 0) {
            int in, out, kernel, stride, padding, dilation, groups;
            gboolean bias;
            if (!check_keys(path, o, where, conv_keys, error) ||
                !(name = get_name(path, o, where, error)) ||
                !get_int(path, o, where, "in_channels", 1, VD_MAX_SSD_CHANNELS, &in, error) ||
                !get_int(path, o, where, "out_channels", 1, VD_MAX_SSD_CHANNELS, &out, error) ||
                !get_int(path, o, where, "kernel", 1, 11, &kernel, error) ||
                !get_int(path, o, where, "stride", 1, 4, &stride, error) ||
                !get_int(path, o, where, "padding", 0, 64, &padding, error) ||
                !get_int(path, o, where, "dilation", 1, 64, &dilation, error) ||
                !get_int(path, o, where, "groups", 1, VD_MAX_SSD_CHANNELS, &groups, error) ||
                !get_bool_member(path, o, where, "bias", &bias, error))
                return FALSE;
            if (in != *channels)
                return config_error(error, path, "'%s.in_channels' is %d; its input has %d", where,
                                    in, *channels);
            if (groups != 1 && !(groups == in && groups == out)) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s: %s: a convolution of %d groups is not supported (1, or "
                            "depthwise)",
                            path, where, groups);
                return FALSE;
            }
            if (!(op = ops_add(ops, path, where, error)))
                return FALSE;
            op->kind = VD_SSD_CONV;
            op->name = g_strdup(name);
            op->bias = bias;
            op->conv = (vd_conv){.out_channels = out,
                                 .in_channels = in,
                                 .kernel = kernel,
                                 .stride = stride,
                                 .padding = padding,
                                 .groups = groups,
                                 .dilation = dilation};
            *channels = out;
        } else if (strcmp(kind, "batch_norm") == 0) {
            if (!check_keys(path, o, where, bn_keys, error) ||
                !(name = get_name(path, o, where, error)))
                return FALSE;
            conv = open_conv(ops);
            if (conv == NULL || conv->bias || conv->bn_name != NULL) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s: %s: a batch-norm not after a convolution without bias is not "
                            "supported",
                            path, where);
                return FALSE;
            }
            conv->bn_name = g_strdup(name);
        } else if (strcmp(kind, "relu") == 0 || strcmp(kind, "relu6") == 0 ||
                   strcmp(kind, "hardswish") == 0) {
            if (!check_keys(path, o, where, act_keys, error))
                return FALSE;
            conv = open_conv(ops);
            if (conv == NULL) {
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s: %s: an activation not after a convolution is not supported", path,
                            where);
                return FALSE;
            }
            conv->act = kind[0] == 'h'               ? VD_ACT_HARDSWISH
                        : strcmp(kind, "relu6") == 0 ? VD_ACT_RELU6
                                                     : VD_ACT_RELU;
        } else if (strcmp(kind, "maxpool") == 0) {
            if (!check_keys(path, o, where, pool_keys, error) ||
                !(name = get_name(path, o, where, error)) ||
                !(op = ops_add(ops, path, where, error)))
                return FALSE;
            op->kind = VD_SSD_MAXPOOL;
            op->name = g_strdup(name);
            if (!get_int(path, o, where, "kernel", 1, 16, &op->kernel, error) ||
                !get_int(path, o, where, "stride", 1, 16, &op->stride, error) ||
                !get_int(path, o, where, "padding", 0, 8, &op->padding, error) ||
                !get_bool_member(path, o, where, "ceil_mode", &op->ceil_mode, error))
                return FALSE;
            if (2 * op->padding > op->kernel)
                return config_error(error, path, "'%s.padding' is more than half the kernel",
                                    where);
        } else if (strcmp(kind, "squeeze_excitation") == 0) {
            int c, s;
            if (!check_keys(path, o, where, se_keys, error) ||
                !(name = get_name(path, o, where, error)) ||
                !get_int(path, o, where, "channels", 1, VD_MAX_SSD_CHANNELS, &c, error) ||
                !get_int(path, o, where, "squeeze_channels", 1, VD_MAX_SE_CHANNELS, &s, error))
                return FALSE;
            if (c != *channels)
                return config_error(error, path, "'%s.channels' is %d; its input has %d", where, c,
                                    *channels);
            if (!(op = ops_add(ops, path, where, error)))
                return FALSE;
            op->kind = VD_SSD_SQUEEZE_EXCITE;
            op->name = g_strdup(name);
            op->fc1 = (vd_linear){.out_features = s, .in_features = c};
            op->fc2 = (vd_linear){.out_features = c, .in_features = s};
        } else if (strcmp(kind, "inverted_residual") == 0) {
            gboolean residual;
            JsonArray *layers;
            int in = *channels;
            char inner[96];
            if (nested)
                return config_error(error, path, "'%s': nested inverted residual blocks", where);
            if (!check_keys(path, o, where, ir_keys, error) ||
                !get_bool_member(path, o, where, "residual", &residual, error) ||
                !(layers = get_array(path, o, where, "layers", 1, 64, error)))
                return FALSE;
            if (residual) {
                if (!(op = ops_add(ops, path, where, error)))
                    return FALSE;
                op->kind = VD_SSD_SAVE;
            }
            guint first = ops->len;
            g_snprintf(inner, sizeof inner, "%s.layers", where);
            if (!parse_ops(path, layers, inner, ops, channels, TRUE, error))
                return FALSE;
            if (residual) {
                conv = ops->len > first ? open_conv(ops) : NULL;
                if (conv == NULL || *channels != in)
                    return config_error(error, path,
                                        "'%s': a residual block must end with a convolution "
                                        "without activation keeping its %d channels",
                                        where, in);
                conv->add_saved = TRUE;
            }
        } else {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "%s: %s: layer '%.32s' is not supported in an SSD model", path, where,
                        kind);
            return FALSE;
        }
    }
    return TRUE;
}

/* One layer list @array into @layers, its input of @in channels */
static gboolean parse_layers(const char *path, JsonArray *array, const char *section, int in,
                             vd_ssd_layers *layers, GError **error)
{
    GArray *ops = g_array_new(FALSE, TRUE, sizeof(vd_ssd_op));
    int channels = in;
    gboolean ok = parse_ops(path, array, section, ops, &channels, FALSE, error);
    layers->in_channels = in;
    layers->out_channels = channels;
    layers->n_ops = (int)ops->len;
    /* kept even when parsing failed: the model frees the names */
    layers->ops = (vd_ssd_op *)g_array_free(ops, FALSE);
    if (ok && layers->n_ops == 0)
        ok = config_error(error, path, "'%s' has no layers", section);
    return ok;
}

/* A member @key of @o that is an array of layer lists, at most @max, into
 * @layers[] (*@n of them), the first reading @in channels, each the previous */
static gboolean parse_layer_lists(const char *path, JsonObject *o, const char *section,
                                  const char *key, int max, int in, vd_ssd_layers *layers, int *n,
                                  GError **error)
{
    JsonArray *lists = get_array(path, o, section, key, 1, max, error);
    if (lists == NULL)
        return FALSE;
    *n = 0;
    for (guint i = 0; i < json_array_get_length(lists); i++) {
        JsonNode *node = json_array_get_element(lists, i);
        char where[64];
        g_snprintf(where, sizeof where, "%s.%s[%u]", section, key, i);
        if (!JSON_NODE_HOLDS_ARRAY(node))
            return config_error(error, path, "'%s' is not an array", where);
        (*n)++;
        if (!parse_layers(path, json_node_get_array(node), where, in, &layers[i], error))
            return FALSE;
        in = layers[i].out_channels;
    }
    return TRUE;
}

static gboolean parse_backbone_ssd(const char *path, JsonObject *o, vd_config *c,
                                   JsonObject **eps_per_module, int *n_computed, GError **error)
{
    static const char *const vgg_keys[] = {
        "type", "features", "l2_norm", "extra", "norm_eps", "norm_eps_per_module", NULL};
    static const char *const mnv3_keys[] = {
        "type", "arch", "stages", "extra", "norm_eps", "norm_eps_per_module", NULL};
    static const char *const l2_keys[] = {"channels", "eps", NULL};
    vd_ssd_config *s = &c->ssd;
    const char *type = get_string(path, o, "backbone", "type", error);
    int n_extra_max;

    (void)n_computed;
    if (c->detector != VD_DETECTOR_SSD)
        return config_error(error, path,
                            "backbone type 'ssd' is only valid with architecture "
                            "'ssd' or 'ssdlite'");
    c->backbone_type = VD_BACKBONE_SSD;
    c->norm_eps = 1e-5f;
    if (type == NULL)
        return FALSE;
    s->lite = strcmp(type, "mobilenet_v3") == 0;
    if (s->lite) {
        const char *arch;
        if (!check_keys(path, o, "backbone", mnv3_keys, error) ||
            !(arch = get_string(path, o, "backbone", "arch", error)))
            return FALSE;
        if (strcmp(arch, "mobilenet_v3_large") != 0)
            return config_error(error, path,
                                "'backbone.arch' is '%.64s', expected "
                                "'mobilenet_v3_large'",
                                arch);
        if (!parse_layer_lists(path, o, "backbone", "stages", 2, 3, s->body, &s->n_body, error))
            return FALSE;
    } else {
        JsonArray *features;
        JsonObject *l2;
        if (!check_keys(path, o, "backbone", vgg_keys, error) ||
            !(features = get_array(path, o, "backbone", "features", 1, VD_MAX_SSD_OPS, error)))
            return FALSE;
        s->n_body = 1;
        if (!parse_layers(path, features, "backbone.features", 3, &s->body[0], error) ||
            !(l2 = get_section(path, o, "l2_norm", error)) ||
            !check_keys(path, l2, "backbone.l2_norm", l2_keys, error) ||
            !get_int(path, l2, "backbone.l2_norm", "channels", 1, VD_MAX_SSD_CHANNELS,
                     &s->l2_channels, error) ||
            !get_float(path, l2, "backbone.l2_norm", "eps", 0.0, 1.0, TRUE, &s->l2_eps, error))
            return FALSE;
        if (s->l2_channels != s->body[0].out_channels)
            return config_error(error, path,
                                "'backbone.l2_norm.channels' is %d; the features "
                                "give %d",
                                s->l2_channels, s->body[0].out_channels);
    }
    n_extra_max = VD_MAX_FPN_LEVELS - s->n_body;
    if (!parse_layer_lists(path, o, "backbone", "extra", n_extra_max,
                           s->body[s->n_body - 1].out_channels, s->extra, &s->n_extra, error))
        return FALSE;
    s->n_levels = s->n_body + s->n_extra;
    for (int l = 0; l < s->n_levels; l++)
        s->level_channels[l] =
            l < s->n_body ? s->body[l].out_channels : s->extra[l - s->n_body].out_channels;
    if (json_object_has_member(o, "norm_eps") &&
        !get_float(path, o, "backbone", "norm_eps", 0.0, 1.0, FALSE, &c->norm_eps, error))
        return FALSE;
    return parse_eps_per_module(path, o, eps_per_module, error);
}

/* "anchors": DefaultBoxGenerator */
gboolean parse_ssd_anchors(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"type", "aspect_ratios", "scales", "steps", "clip", NULL};
    vd_ssd_config *s = &c->ssd;
    JsonObject *o = get_section(path, config, "anchors", error);
    JsonArray *ratios, *scales;
    const char *type;
    JsonNode *steps;

    if (!o || !check_keys(path, o, "anchors", keys, error) ||
        !(type = get_string(path, o, "anchors", "type", error)))
        return FALSE;
    if (strcmp(type, "default_boxes") != 0)
        return config_error(error, path, "'anchors.type' is '%.64s', expected 'default_boxes'",
                            type);
    if (!(ratios =
              get_array(path, o, "anchors", "aspect_ratios", s->n_levels, s->n_levels, error)) ||
        !(scales =
              get_array(path, o, "anchors", "scales", s->n_levels + 1, s->n_levels + 1, error)) ||
        !get_bool_member(path, o, "anchors", "clip", &s->clip, error))
        return FALSE;
    for (int l = 0; l <= s->n_levels; l++) {
        JsonNode *v = json_array_get_element(scales, l);
        if (!JSON_NODE_HOLDS_VALUE(v) || (json_node_get_value_type(v) != G_TYPE_DOUBLE &&
                                          json_node_get_value_type(v) != G_TYPE_INT64))
            return config_error(error, path, "'anchors.scales[%d]' is not a number", l);
        s->scales[l] = json_node_get_double(v);
        if (!(s->scales[l] > 0.0 && s->scales[l] < 1e3))
            return config_error(error, path, "'anchors.scales[%d]' is out of range", l);
    }
    for (int l = 0; l < s->n_levels; l++) {
        JsonNode *v = json_array_get_element(ratios, l);
        JsonArray *r;
        if (!JSON_NODE_HOLDS_ARRAY(v) ||
            json_array_get_length(r = json_node_get_array(v)) > VD_MAX_SSD_ASPECT_RATIOS)
            return config_error(error, path,
                                "'anchors.aspect_ratios[%d]' is not an array of at most %d", l,
                                VD_MAX_SSD_ASPECT_RATIOS);
        s->n_aspect_ratios[l] = (int)json_array_get_length(r);
        for (int k = 0; k < s->n_aspect_ratios[l]; k++) {
            JsonNode *e = json_array_get_element(r, k);
            if (!JSON_NODE_HOLDS_VALUE(e) || (json_node_get_value_type(e) != G_TYPE_DOUBLE &&
                                              json_node_get_value_type(e) != G_TYPE_INT64))
                return config_error(error, path, "'anchors.aspect_ratios[%d][%d]' is not a number",
                                    l, k);
            s->aspect_ratios[l][k] = json_node_get_double(e);
            if (!(s->aspect_ratios[l][k] > 0.0 && s->aspect_ratios[l][k] < 1e3))
                return config_error(error, path, "'anchors.aspect_ratios[%d][%d]' is out of range",
                                    l, k);
        }
        s->anchors[l] = 2 + 2 * s->n_aspect_ratios[l];
    }
    steps = json_object_get_member(o, "steps");
    if (steps == NULL)
        return config_error(error, path, "'anchors.steps' is missing");
    if (!JSON_NODE_HOLDS_NULL(steps)) {
        JsonArray *a = get_array(path, o, "anchors", "steps", s->n_levels, s->n_levels, error);
        if (a == NULL)
            return FALSE;
        for (int l = 0; l < s->n_levels; l++) {
            JsonNode *e = json_array_get_element(a, l);
            gint64 v = node_is_int(e) ? json_node_get_int(e) : 0;
            if (v < 1 || v > 4096)
                return config_error(error, path,
                                    "'anchors.steps[%d]' is not an integer in "
                                    "1..4096",
                                    l);
            s->steps[l] = (int)v;
        }
    }
    return TRUE;
}

/* "head": SSDHead (one conv per level and branch) or SSDLiteHead (layer lists) */
gboolean parse_ssd_head(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    static const char *const keys[] = {"type",
                                       "in_channels",
                                       "num_anchors",
                                       "kernel",
                                       "classification",
                                       "regression",
                                       "bbox_reg_weights",
                                       "bbox_xform_clip",
                                       "score_thresh",
                                       "nms_thresh",
                                       "detections_per_img",
                                       "topk_candidates",
                                       NULL};
    vd_ssd_config *s = &c->ssd;
    JsonObject *o = get_section(path, config, "head", error);
    JsonArray *in_channels, *num_anchors;
    const char *type;

    if (!o || !check_keys(path, o, "head", keys, error) ||
        !(type = get_string(path, o, "head", "type", error)))
        return FALSE;
    if (strcmp(type, s->lite ? "ssdlite" : "ssd") != 0)
        return config_error(error, path, "'head.type' '%.64s' is not the architecture's", type);
    if (!(in_channels =
              get_array(path, o, "head", "in_channels", s->n_levels, s->n_levels, error)) ||
        !(num_anchors = get_array(path, o, "head", "num_anchors", s->n_levels, s->n_levels, error)))
        return FALSE;
    for (int l = 0; l < s->n_levels; l++) {
        JsonNode *a = json_array_get_element(in_channels, l),
                 *b = json_array_get_element(num_anchors, l);
        if (!node_is_int(a) || json_node_get_int(a) != s->level_channels[l])
            return config_error(error, path,
                                "'head.in_channels[%d]' is not the %d channels of "
                                "feature map %d",
                                l, s->level_channels[l], l);
        if (!node_is_int(b) || json_node_get_int(b) != s->anchors[l])
            return config_error(error, path,
                                "'head.num_anchors[%d]' is not the %d default boxes "
                                "of feature map %d",
                                l, s->anchors[l], l);
    }
    if (!parse_box_coder(path, o, c, error) || !parse_head_thresholds(path, o, c, error))
        return FALSE;
    if (!s->lite) {
        if (!get_int(path, o, "head", "kernel", 1, 7, &s->head_kernel, error))
            return FALSE;
        if (s->head_kernel % 2 == 0)
            return config_error(error, path, "'head.kernel' %d is not odd", s->head_kernel);
        return TRUE;
    }
    for (int b = 0; b < 2; b++) {
        const char *key = b == 0 ? "classification" : "regression";
        vd_ssd_layers *layers = b == 0 ? s->cls : s->reg;
        JsonArray *lists = get_array(path, o, "head", key, s->n_levels, s->n_levels, error);
        if (lists == NULL)
            return FALSE;
        for (int l = 0; l < s->n_levels; l++) {
            JsonNode *node = json_array_get_element(lists, l);
            char where[48];
            int out = b == 0 ? s->anchors[l] * c->num_classes : 4 * s->anchors[l];
            g_snprintf(where, sizeof where, "head.%s[%d]", key, l);
            if (!JSON_NODE_HOLDS_ARRAY(node))
                return config_error(error, path, "'%s' is not an array", where);
            if (!parse_layers(path, json_node_get_array(node), where, s->level_channels[l],
                              &layers[l], error))
                return FALSE;
            const vd_ssd_op *last = &layers[l].ops[layers[l].n_ops - 1];
            if (layers[l].out_channels != out || last->kind != VD_SSD_CONV ||
                last->act != VD_ACT_NONE)
                return config_error(error, path,
                                    "'%s' must end with a convolution of %d outputs without "
                                    "activation",
                                    where, out);
        }
    }
    return TRUE;
}

/* The weights of one layer list */
static gboolean load_layers(loader *ld, vd_ssd_layers *layers, GError **error)
{
    for (int i = 0; i < layers->n_ops; i++) {
        vd_ssd_op *op = &layers->ops[i];
        vd_conv *cv = &op->conv;
        if (op->kind == VD_SSD_CONV) {
            int dilation = cv->dilation;
            gboolean ok;
            if (op->bn_name != NULL) {
                ok = load_conv_bn_groups(ld, op->name, op->bn_name, cv, cv->out_channels,
                                         cv->in_channels, cv->kernel, cv->stride, cv->padding,
                                         cv->groups, error);
            } else {
                const gint64 wshape[4] = {cv->out_channels, cv->in_channels / cv->groups,
                                          cv->kernel, cv->kernel},
                             bshape[1] = {cv->out_channels};
                char *name = g_strdup_printf("%s.weight", op->name);
                cv->weight = read_tensor(ld, name, NULL, 4, wshape, error);
                g_free(name);
                if (cv->weight != NULL && op->bias) {
                    name = g_strdup_printf("%s.bias", op->name);
                    cv->bias = read_tensor(ld, name, NULL, 1, bshape, error);
                    g_free(name);
                } else if (cv->weight != NULL) {
                    cv->bias = g_try_new0(float, cv->out_channels);
                    if (cv->bias == NULL)
                        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory");
                }
                ok = cv->bias != NULL;
            }
            cv->dilation = dilation;
            if (!ok)
                return FALSE;
        } else if (op->kind == VD_SSD_SQUEEZE_EXCITE) {
            vd_linear *fc[2] = {&op->fc1, &op->fc2};
            for (int k = 0; k < 2; k++) {
                const gint64 wshape[4] = {fc[k]->out_features, fc[k]->in_features, 1, 1},
                             bshape[1] = {fc[k]->out_features};
                char *name = g_strdup_printf("%s.fc%d.weight", op->name, k + 1);
                fc[k]->weight = read_tensor(ld, name, NULL, 4, wshape, error);
                g_free(name);
                if (fc[k]->weight == NULL)
                    return FALSE;
                name = g_strdup_printf("%s.fc%d.bias", op->name, k + 1);
                fc[k]->bias = read_tensor(ld, name, NULL, 1, bshape, error);
                g_free(name);
                if (fc[k]->bias == NULL)
                    return FALSE;
            }
        }
    }
    return TRUE;
}

static gboolean load_backbone_ssd(loader *ld, vd_model *model, int n_computed, GError **error)
{
    vd_ssd_config *s = &model->config.ssd;
    (void)n_computed;
    for (int i = 0; i < s->n_body; i++)
        if (!load_layers(ld, &s->body[i], error))
            return FALSE;
    for (int i = 0; i < s->n_extra; i++)
        if (!load_layers(ld, &s->extra[i], error))
            return FALSE;
    if (s->l2_channels > 0) {
        const gint64 shape[1] = {s->l2_channels};
        s->l2_scale = read_tensor(ld, "backbone.scale_weight", NULL, 1, shape, error);
        if (s->l2_scale == NULL)
            return FALSE;
    }
    return TRUE;
}

gboolean load_ssd_head(loader *ld, vd_model *model, GError **error)
{
    vd_config *c = &model->config;
    vd_ssd_config *s = &c->ssd;
    if (s->lite) {
        for (int l = 0; l < s->n_levels; l++)
            if (!load_layers(ld, &s->cls[l], error) || !load_layers(ld, &s->reg[l], error))
                return FALSE;
        return TRUE;
    }
    /* SSDHead: one convolution per level and branch, padding kernel / 2 */
    for (int l = 0; l < s->n_levels; l++) {
        for (int b = 0; b < 2; b++) {
            vd_ssd_layers *layers = b == 0 ? &s->cls[l] : &s->reg[l];
            int out = b == 0 ? s->anchors[l] * c->num_classes : 4 * s->anchors[l];
            char name[80];
            g_snprintf(name, sizeof name, "head.%s_head.module_list.%d",
                       b == 0 ? "classification" : "regression", l);
            layers->ops = g_new0(vd_ssd_op, 1);
            layers->n_ops = 1;
            layers->in_channels = s->level_channels[l];
            layers->out_channels = out;
            layers->ops[0].kind = VD_SSD_CONV;
            layers->ops[0].name = g_strdup(name);
            if (!load_conv_bias(ld, name, NULL, &layers->ops[0].conv, out, s->level_channels[l],
                                s->head_kernel, 1, s->head_kernel / 2, error))
                return FALSE;
        }
    }
    return TRUE;
}

static void layers_free(vd_ssd_layers *layers)
{
    for (int i = 0; i < layers->n_ops; i++) {
        vd_ssd_op *op = &layers->ops[i];
        g_free(op->name);
        g_free(op->bn_name);
        vd_conv_free(&op->conv);
        vd_linear_free(&op->fc1);
        vd_linear_free(&op->fc2);
    }
    g_free(layers->ops);
    *layers = (vd_ssd_layers){0};
}

void vd_ssd_clear(vd_model *model)
{
    vd_ssd_config *s = &model->config.ssd;
    for (int i = 0; i < 2; i++)
        layers_free(&s->body[i]);
    for (int l = 0; l < VD_MAX_FPN_LEVELS; l++) {
        layers_free(&s->extra[l]);
        layers_free(&s->cls[l]);
        layers_free(&s->reg[l]);
    }
    g_free(s->l2_scale);
    s->l2_scale = NULL;
}

static void clear_backbone_ssd(vd_model *model)
{
    vd_ssd_clear(model);
}

static void name_ssd(const vd_config *c, char *out, size_t size)
{
    g_strlcpy(out, c->ssd.lite ? "mobilenet_v3_large" : "vgg16", size);
}

/* Both SSD backbones ("vgg16", "mobilenet_v3" under an SSD architecture) */
const vd_backbone_loader vd_ssd_backbone_loader = {
    .type = "ssd",
    .backbone_type = VD_BACKBONE_SSD,
    .parse = parse_backbone_ssd,
    .load = load_backbone_ssd,
    .clear = clear_backbone_ssd,
    .name = name_ssd,
    .returned = "feature map",
};
