/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ResNet backbone's part of the loader (resnet_fpn_backbone; models.md): its
 * configuration section and its weights, batch norms folded. */
#include "vd_model_loader.h"

#include <string.h>

static int stage_out_channels(vd_block_type block, int stage)
{
    return (64 << (stage - 1)) * (block == VD_BLOCK_BOTTLENECK ? 4 : 1);
}

int vd_config_stage_channels(const vd_config *config, int stage)
{
    if (!config || config->backbone_type != VD_BACKBONE_RESNET || stage < 1 || stage > 4)
        return 0;
    return stage_out_channels(config->resnet.block, stage);
}

/* ResNet (resnet_fpn_backbone): the block type, the stem and widths (torchvision's
 * plain ResNets only), the returned stages and the blocks per stage;
 * *@n_stages_used: the stages computed, up to the last returned one. */
static gboolean parse_backbone_resnet(const char *path, JsonObject *o, vd_config *c,
                                      JsonObject **eps_per_module, int *n_stages_used,
                                      GError **error)
{
    static const char *const keys[] = {"type",
                                       "depth",
                                       "block",
                                       "layers",
                                       "stem_channels",
                                       "width_per_group",
                                       "groups",
                                       "returned_layers",
                                       "norm_eps",
                                       "norm_eps_per_module",
                                       NULL};
    const char *block;
    JsonArray *layers;
    int groups, total_blocks = 0;

    if (!check_keys(path, o, "backbone", keys, error))
        return FALSE;
    c->backbone_type = VD_BACKBONE_RESNET;
    if (!(block = get_string(path, o, "backbone", "block", error)))
        return FALSE;
    if (strcmp(block, "basic") == 0) {
        c->resnet.block = VD_BLOCK_BASIC;
    } else if (strcmp(block, "bottleneck") == 0) {
        c->resnet.block = VD_BLOCK_BOTTLENECK;
    } else {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: ResNet block '%s' is not supported ('basic' or 'bottleneck')", path,
                    block);
        return FALSE;
    }
    /* depth is informational (0 when the exporter could not name the ResNet) */
    if (!get_int(path, o, "backbone", "depth", 0, 1000, &c->resnet.depth, error) ||
        !get_int(path, o, "backbone", "stem_channels", 1, 4096, &c->stem_channels, error) ||
        !get_int(path, o, "backbone", "width_per_group", 1, 4096, &c->resnet.width_per_group,
                 error) ||
        !get_int(path, o, "backbone", "groups", 1, 4096, &groups, error) ||
        !get_float(path, o, "backbone", "norm_eps", 0.0, 1.0, FALSE, &c->norm_eps, error))
        return FALSE;
    if (c->stem_channels != 64 || c->resnet.width_per_group != 64 || groups != 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s: ResNet with stem_channels %d, width_per_group %d, groups %d is not "
                    "supported (only 64, 64, 1: no ResNeXt or wide ResNet)",
                    path, c->stem_channels, c->resnet.width_per_group, groups);
        return FALSE;
    }

    if (!parse_returned_layers(path, o, c, 1, 4, "stage numbers", error))
        return FALSE;
    for (int i = 0; i < c->n_returned_layers; i++)
        c->fpn_in_channels[i] = stage_out_channels(c->resnet.block, c->returned_layers[i]);
    *n_stages_used = c->returned_layers[c->n_returned_layers - 1];

    /* Stages after the last returned one are not in the file (torchvision's
     * IntermediateLayerGetter drops them); their counts are informational. */
    layers = get_array(path, o, "backbone", "layers", 4, 4, error);
    if (!layers)
        return FALSE;
    for (int i = 0; i < 4; i++) {
        JsonNode *node = json_array_get_element(layers, i);
        gint64 v = node_is_int(node) ? json_node_get_int(node) : -1;
        gint64 min = i < *n_stages_used ? 1 : 0;
        if (v < min || v > VD_MAX_BLOCKS)
            return config_error(error, path,
                                "'backbone.layers[%d]' must be an integer in [%" G_GINT64_FORMAT
                                ", %d]",
                                i, min, VD_MAX_BLOCKS);
        c->resnet.layers[i] = (int)v;
        if (i < *n_stages_used)
            total_blocks += (int)v;
    }
    if (total_blocks > VD_MAX_BLOCKS)
        return config_error(error, path, "%d ResNet blocks, more than the %d supported",
                            total_blocks, VD_MAX_BLOCKS);

    return parse_eps_per_module(path, o, eps_per_module, error);
}

static gboolean load_backbone(loader *ld, vd_model *model, int n_stages_used, GError **error)
{
    const vd_config *c = &model->config;
    gboolean bottleneck = c->resnet.block == VD_BLOCK_BOTTLENECK;
    int in_channels = c->stem_channels;
    char conv[64], bn[64];

    if (!load_conv_bn(ld, "backbone.body.conv1", "backbone.body.bn1", &model->stem,
                      c->stem_channels, 3, 7, 2, 3, error))
        return FALSE;
    model->resnet.n_stages_used = n_stages_used;
    model->resnet.n_blocks = 0;
    for (int s = 0; s < 4; s++)
        model->resnet.stage_first_block[s] = 0;
    for (int s = 0; s < model->resnet.n_stages_used; s++) {
        int planes = 64 << s;
        int out_channels = stage_out_channels(c->resnet.block, s + 1);

        model->resnet.stage_first_block[s] = model->resnet.n_blocks;
        for (int b = 0; b < c->resnet.layers[s]; b++) {
            vd_block *block = &model->resnet.blocks[model->resnet.n_blocks++];
            int stride = (s > 0 && b == 0) ? 2 : 1;
            char prefix[48];

            g_snprintf(prefix, sizeof prefix, "backbone.body.layer%d.%d", s + 1, b);
#define CONV_BN(field, index, out_, in_, k_, stride_, pad_)                                        \
    g_snprintf(conv, sizeof conv, "%s.conv%d", prefix, index);                                     \
    g_snprintf(bn, sizeof bn, "%s.bn%d", prefix, index);                                           \
    if (!load_conv_bn(ld, conv, bn, &block->field, out_, in_, k_, stride_, pad_, error))           \
        return FALSE;
            if (bottleneck) {
                CONV_BN(conv1, 1, planes, in_channels, 1, 1, 0)
                CONV_BN(conv2, 2, planes, planes, 3, stride, 1)
                CONV_BN(conv3, 3, out_channels, planes, 1, 1, 0)
            } else {
                CONV_BN(conv1, 1, planes, in_channels, 3, stride, 1)
                CONV_BN(conv2, 2, planes, planes, 3, 1, 1)
            }
#undef CONV_BN
            /* torchvision's _make_layer adds the shortcut conv exactly in this case */
            block->has_downsample = stride != 1 || in_channels != out_channels;
            if (block->has_downsample) {
                g_snprintf(conv, sizeof conv, "%s.downsample.0", prefix);
                g_snprintf(bn, sizeof bn, "%s.downsample.1", prefix);
                if (!load_conv_bn(ld, conv, bn, &block->downsample, out_channels, in_channels, 1,
                                  stride, 0, error))
                    return FALSE;
            }
            in_channels = out_channels;
        }
    }
    for (int s = model->resnet.n_stages_used; s < 4; s++)
        model->resnet.stage_first_block[s] = model->resnet.n_blocks;
    return TRUE;
}

static void resnet_clear(vd_model *model)
{
    for (int b = 0; b < VD_MAX_BLOCKS; b++) {
        vd_conv_free(&model->resnet.blocks[b].conv1);
        vd_conv_free(&model->resnet.blocks[b].conv2);
        vd_conv_free(&model->resnet.blocks[b].conv3);
        vd_conv_free(&model->resnet.blocks[b].downsample);
    }
}

/* "resnet50"; "resnet" where the exporter could not name the depth (0) */
static void resnet_name(const vd_config *c, char *out, size_t size)
{
    if (c->resnet.depth > 0)
        g_snprintf(out, size, "resnet%d", c->resnet.depth);
    else
        g_strlcpy(out, "resnet", size);
}

const vd_backbone_loader vd_resnet_loader = {
    .type = "resnet",
    .backbone_type = VD_BACKBONE_RESNET,
    .parse = parse_backbone_resnet,
    .load = load_backbone,
    .clear = resnet_clear,
    .name = resnet_name,
    .returned = "ResNet stage",
};
