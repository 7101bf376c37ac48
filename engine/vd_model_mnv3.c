/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The MobileNetV3 backbone's part of the loader (engine/MOBILENETV3.md): its
 * configuration section and its weights, batch norms folded. */
#include "vd_model_loader.h"

#include <string.h>

#define VD_MAX_CHANNELS 65536

/* MobileNetV3 (engine/MOBILENETV3.md): the stem, the block list, the last 1x1 conv;
 * returned layers index torchvision's features (0 the stem .. n_blocks + 1). */
static gboolean parse_backbone_mnv3(const char *path, JsonObject *o, vd_config *c,
                                    JsonObject **eps_per_module, int *n_computed, GError **error)
{
    static const char *const keys[] = {"type",
                                       "arch",
                                       "stem_channels",
                                       "blocks",
                                       "last_channels",
                                       "returned_layers",
                                       "norm_eps",
                                       "norm_eps_per_module",
                                       NULL};
    static const char *const block_keys[] = {"kernel",       "expanded_channels",
                                             "out_channels", "se_channels",
                                             "activation",   "stride",
                                             "dilation",     NULL};
    JsonArray *blocks;
    const char *arch;

    if (!check_keys(path, o, "backbone", keys, error))
        return FALSE;
    c->backbone_type = VD_BACKBONE_MOBILENET_V3;
    if (!(arch = get_string(path, o, "backbone", "arch", error)))
        return FALSE;
    if (strcmp(arch, "mobilenet_v3_large") != 0 && strcmp(arch, "mobilenet_v3_small") != 0)
        return config_error(error, path,
                            "'backbone.arch' is '%.64s', expected "
                            "'mobilenet_v3_large' or 'mobilenet_v3_small'",
                            arch);
    g_strlcpy(c->mnv3.arch, arch, sizeof c->mnv3.arch);
    if (!get_int(path, o, "backbone", "stem_channels", 1, VD_MAX_CHANNELS, &c->stem_channels,
                 error) ||
        !get_int(path, o, "backbone", "last_channels", 1, VD_MAX_CHANNELS, &c->mnv3.last_channels,
                 error) ||
        !get_float(path, o, "backbone", "norm_eps", 0.0, 1.0, FALSE, &c->norm_eps, error))
        return FALSE;
    blocks = get_array(path, o, "backbone", "blocks", 1, VD_MAX_BLOCKS, error);
    if (!blocks)
        return FALSE;
    c->mnv3.n_blocks = (int)json_array_get_length(blocks);
    for (int b = 0; b < c->mnv3.n_blocks; b++) {
        JsonNode *node = json_array_get_element(blocks, b);
        vd_mnv3_block_config *bc = &c->mnv3.blocks[b];
        char section[48];
        const char *activation;
        JsonObject *bo;
        int dilation;

        g_snprintf(section, sizeof section, "backbone.blocks[%d]", b);
        if (!JSON_NODE_HOLDS_OBJECT(node))
            return config_error(error, path, "'%s' is not an object", section);
        bo = json_node_get_object(node);
        if (!check_keys(path, bo, section, block_keys, error) ||
            !get_int(path, bo, section, "kernel", 1, 11, &bc->kernel, error) ||
            !get_int(path, bo, section, "expanded_channels", 1, VD_MAX_CHANNELS,
                     &bc->expanded_channels, error) ||
            !get_int(path, bo, section, "out_channels", 1, VD_MAX_CHANNELS, &bc->out_channels,
                     error) ||
            !get_int(path, bo, section, "se_channels", 0, VD_MAX_SE_CHANNELS, &bc->se_channels,
                     error) ||
            !get_int(path, bo, section, "stride", 1, 2, &bc->stride, error) ||
            !get_int(path, bo, section, "dilation", 1, 64, &dilation, error))
            return FALSE;
        if (bc->kernel % 2 == 0)
            return config_error(error, path, "'%s.kernel' is %d, expected an odd size", section,
                                bc->kernel);
        if (dilation != 1) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "%s: %s: dilated MobileNetV3 blocks (dilation %d) are not supported", path,
                        section, dilation);
            return FALSE;
        }
        if (!(activation = get_string(path, bo, section, "activation", error)))
            return FALSE;
        if (strcmp(activation, "relu") == 0)
            bc->activation = VD_ACT_RELU;
        else if (strcmp(activation, "hardswish") == 0)
            bc->activation = VD_ACT_HARDSWISH;
        else
            return config_error(error, path,
                                "'%s.activation' is '%.32s', expected 'relu' or "
                                "'hardswish'",
                                section, activation);
    }
    if (!parse_returned_layers(path, o, c, 0, c->mnv3.n_blocks + 1, "feature indices", error))
        return FALSE;
    for (int i = 0; i < c->n_returned_layers; i++) {
        int f = c->returned_layers[i];
        c->fpn_in_channels[i] = f == 0                  ? c->stem_channels
                                : f <= c->mnv3.n_blocks ? c->mnv3.blocks[f - 1].out_channels
                                                        : c->mnv3.last_channels;
    }
    *n_computed = c->returned_layers[c->n_returned_layers - 1] + 1;
    return parse_eps_per_module(path, o, eps_per_module, error);
}

/* torchvision's mobilenet_v3 features under backbone.body.<index>: the stem
 * (Conv2dNormActivation '.0'/'.1'), the InvertedResidual blocks ('.block.<j>': expand
 * when the width changes, depthwise, SE ('fc1', 'fc2'), project), the last 1x1 conv;
 * only up to the last returned feature (IntermediateLayerGetter drops the rest). */
static gboolean load_backbone_mnv3(loader *ld, vd_model *model, int n_features, GError **error)
{
    const vd_config *c = &model->config;
    model->mnv3.n_computed = n_features;
    int n = n_features;
    int in_channels = c->stem_channels;
    char conv[80], bn[80], prefix[48];

    if (!load_conv_bn(ld, "backbone.body.0.0", "backbone.body.0.1", &model->stem, c->stem_channels,
                      3, 3, 2, 1, error))
        return FALSE;
    for (int b = 0; b < c->mnv3.n_blocks && b + 1 < n; b++) {
        const vd_mnv3_block_config *bc = &c->mnv3.blocks[b];
        vd_mnv3_block *mb = &model->mnv3.blocks[b];
        int exp = bc->expanded_channels, j = 0;

        g_snprintf(prefix, sizeof prefix, "backbone.body.%d.block", b + 1);
#define CONV_BN(field, out_, in_, k_, stride_, groups_)                                            \
    g_snprintf(conv, sizeof conv, "%s.%d.0", prefix, j);                                           \
    g_snprintf(bn, sizeof bn, "%s.%d.1", prefix, j);                                               \
    if (!load_conv_bn_groups(ld, conv, bn, &mb->field, out_, in_, k_, stride_, (k_ - 1) / 2,       \
                             groups_, error))                                                      \
        return FALSE;                                                                              \
    j++;
        if (exp != in_channels) {
            CONV_BN(expand, exp, in_channels, 1, 1, 1)
        }
        CONV_BN(depthwise, exp, exp, bc->kernel, bc->stride, exp)
        if (bc->se_channels > 0) {
            const gint64 w1[4] = {bc->se_channels, exp, 1, 1}, b1[1] = {bc->se_channels};
            const gint64 w2[4] = {exp, bc->se_channels, 1, 1}, b2[1] = {exp};
            mb->se_fc1.out_features = bc->se_channels;
            mb->se_fc1.in_features = exp;
            mb->se_fc2.out_features = exp;
            mb->se_fc2.in_features = bc->se_channels;
#define SE_TENSOR(dst, field, ndim, shape)                                                         \
    g_snprintf(conv, sizeof conv, "%s.%d." field, prefix, j);                                      \
    if (!(dst = read_tensor(ld, conv, NULL, ndim, shape, error)))                                  \
        return FALSE;
            SE_TENSOR(mb->se_fc1.weight, "fc1.weight", 4, w1)
            SE_TENSOR(mb->se_fc1.bias, "fc1.bias", 1, b1)
            SE_TENSOR(mb->se_fc2.weight, "fc2.weight", 4, w2)
            SE_TENSOR(mb->se_fc2.bias, "fc2.bias", 1, b2)
#undef SE_TENSOR
            j++;
        }
        CONV_BN(project, bc->out_channels, exp, 1, 1, 1)
#undef CONV_BN
        mb->residual = bc->stride == 1 && in_channels == bc->out_channels;
        in_channels = bc->out_channels;
    }
    if (n == c->mnv3.n_blocks + 2) {
        g_snprintf(conv, sizeof conv, "backbone.body.%d.0", c->mnv3.n_blocks + 1);
        g_snprintf(bn, sizeof bn, "backbone.body.%d.1", c->mnv3.n_blocks + 1);
        if (!load_conv_bn(ld, conv, bn, &model->mnv3.last, c->mnv3.last_channels, in_channels, 1, 1,
                          0, error))
            return FALSE;
    }
    return TRUE;
}

static void mnv3_clear(vd_model *model)
{
    for (int b = 0; b < VD_MAX_BLOCKS; b++) {
        vd_conv_free(&model->mnv3.blocks[b].expand);
        vd_conv_free(&model->mnv3.blocks[b].depthwise);
        vd_conv_free(&model->mnv3.blocks[b].project);
        vd_linear_free(&model->mnv3.blocks[b].se_fc1);
        vd_linear_free(&model->mnv3.blocks[b].se_fc2);
    }
    vd_conv_free(&model->mnv3.last);
}

static void mnv3_name(const vd_config *c, char *out, size_t size)
{
    g_strlcpy(out, c->mnv3.arch, size);
}

const vd_backbone_loader vd_mnv3_loader = {
    .type = "mobilenet_v3",
    .backbone_type = VD_BACKBONE_MOBILENET_V3,
    .parse = parse_backbone_mnv3,
    .load = load_backbone_mnv3,
    .clear = mnv3_clear,
    .name = mnv3_name,
    .returned = "MobileNetV3 feature",
};
