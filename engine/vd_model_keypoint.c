/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keypoint R-CNN's part of a model file (architecture "keypointrcnn",
 * engine/KEYPOINTRCNN.md): the "roi_heads.keypoint_head" section, the keypoint
 * count, names and skeleton, and the weights of roi_heads.keypoint_head and
 * roi_heads.keypoint_predictor. The rest of the model is the Faster R-CNN of
 * vd_model_rcnn.c. */
#include "vd_model_loader.h"

#include <string.h>

/* roi_heads.keypoint_head: KeypointRCNNHeads and KeypointRCNNPredictor with their
 * pooler. */
gboolean parse_keypoint_head(const char *path, JsonObject *roi, vd_config *c, GError **error)
{
    static const char *const keys[] = {"output_size",    "sampling_ratio", "featmap_names",
                                       "conv_channels",  "deconv_kernel",  "deconv_stride",
                                       "deconv_padding", "up_scale",       NULL};
    const char *section = "roi_heads.keypoint_head";
    JsonObject *o = get_section(path, roi, "keypoint_head", error);

    if (!o || !check_keys(path, o, section, keys, error) ||
        !get_int(path, o, section, "output_size", 1, 64, &c->kp_output_size, error) ||
        !get_int(path, o, section, "sampling_ratio", 1, 64, &c->kp_sampling_ratio, error) ||
        !get_int(path, o, section, "deconv_kernel", 1, 16, &c->kp_deconv_kernel, error) ||
        !get_int(path, o, section, "deconv_stride", 1, 16, &c->kp_deconv_stride, error) ||
        !get_int(path, o, section, "deconv_padding", 0, 16, &c->kp_deconv_padding, error) ||
        !get_int(path, o, section, "up_scale", 1, 16, &c->kp_up_scale, error) ||
        !parse_featmap_names(path, o, section, c, &c->n_kp_roi_levels, error))
        return FALSE;
    if (vd_config_heatmap_size(c) < 1)
        return config_error(error, path,
                            "'%s' gives an empty heatmap: the %dx%d transposed convolution of "
                            "stride %d with padding %d on %dx%d RoI features",
                            section, c->kp_deconv_kernel, c->kp_deconv_kernel, c->kp_deconv_stride,
                            c->kp_deconv_padding, c->kp_output_size, c->kp_output_size);
    if (vd_config_heatmap_size(c) > 1024)
        return config_error(error, path, "'%s' gives %dx%d heatmaps (at most 1024x1024)", section,
                            vd_config_heatmap_size(c), vd_config_heatmap_size(c));
    return get_conv_channels(path, o, section, VD_MAX_KEYPOINT_CONVS, c->kp_conv_channels,
                             &c->n_kp_convs, error);
}

/* "num_keypoints", and the optional "keypoint_names" and "keypoint_skeleton". */
gboolean parse_keypoints(const char *path, JsonObject *config, vd_config *c, GError **error)
{
    JsonNode *node;

    if (!get_int(path, config, "config", "num_keypoints", 1, VD_MAX_KEYPOINTS, &c->num_keypoints,
                 error))
        return FALSE;
    if ((node = json_object_get_member(config, "keypoint_names")) != NULL) {
        JsonArray *names;
        if (!JSON_NODE_HOLDS_ARRAY(node))
            return config_error(error, path, "'keypoint_names' is not an array");
        names = json_node_get_array(node);
        if ((int)json_array_get_length(names) != c->num_keypoints)
            return config_error(error, path, "%u keypoint names for %d keypoints",
                                json_array_get_length(names), c->num_keypoints);
        c->keypoint_names = g_new0(char *, c->num_keypoints + 1);
        for (int i = 0; i < c->num_keypoints; i++) {
            JsonNode *name = json_array_get_element(names, i);
            GError *invalid = NULL;
            if (!node_is_string(name))
                return config_error(error, path, "'keypoint_names[%d]' is not a string", i);
            if (!vd_class_name_validate(json_node_get_string(name), -1, &invalid)) {
                gboolean ok =
                    config_error(error, path, "'keypoint_names[%d]' is not a usable name: %s", i,
                                 invalid->message);
                g_error_free(invalid);
                return ok;
            }
            c->keypoint_names[i] = g_strdup(json_node_get_string(name));
        }
    }
    if ((node = json_object_get_member(config, "keypoint_skeleton")) != NULL) {
        JsonArray *pairs;
        if (!JSON_NODE_HOLDS_ARRAY(node))
            return config_error(error, path, "'keypoint_skeleton' is not an array");
        pairs = json_node_get_array(node);
        if (json_array_get_length(pairs) > 4096)
            return config_error(error, path, "'keypoint_skeleton' has %u pairs (at most 4096)",
                                json_array_get_length(pairs));
        c->n_skeleton = (int)json_array_get_length(pairs);
        c->skeleton = g_new0(int, 2 * (gsize)MAX(c->n_skeleton, 1));
        for (int i = 0; i < c->n_skeleton; i++) {
            JsonNode *pair = json_array_get_element(pairs, i);
            JsonArray *ends = JSON_NODE_HOLDS_ARRAY(pair) ? json_node_get_array(pair) : NULL;
            if (ends == NULL || json_array_get_length(ends) != 2)
                return config_error(error, path,
                                    "'keypoint_skeleton[%d]' is not a pair of keypoint indices", i);
            for (guint e = 0; e < 2; e++) {
                JsonNode *end = json_array_get_element(ends, e);
                if (!node_is_int(end) || json_node_get_int(end) < 0 ||
                    json_node_get_int(end) >= c->num_keypoints)
                    return config_error(error, path,
                                        "'keypoint_skeleton[%d][%u]' must be a keypoint index in "
                                        "[0, %d]",
                                        i, e, c->num_keypoints - 1);
                c->skeleton[2 * i + e] = (int)json_node_get_int(end);
            }
        }
    }
    return TRUE;
}

/* roi_heads.keypoint_head.{0,2,..} (3x3 conv with bias, ReLU between) and
 * roi_heads.keypoint_predictor.kps_score_lowres (ConvTranspose2d with bias). */
gboolean load_keypoint_head(loader *ld, vd_model *model, GError **error)
{
    const vd_config *c = &model->config;
    int in = c->fpn_channels, K = c->num_keypoints, k = c->kp_deconv_kernel;
    char name[80];

    for (int j = 0; j < c->n_kp_convs; j++) {
        int out = c->kp_conv_channels[j];
        /* nn.Sequential: conv at 2 j, ReLU (no weights) at 2 j + 1 */
        g_snprintf(name, sizeof name, "roi_heads.keypoint_head.%d", 2 * j);
        if (!load_conv_bias(ld, name, NULL, &model->kp_convs[j], out, in, 3, 1, 1, error))
            return FALSE;
        in = out;
    }
    /* ConvTranspose2d: weight [in][out][k][k] */
    const gint64 wshape[4] = {in, K, k, k}, bshape[1] = {K};
    vd_conv *d = &model->kp_deconv;
    d->out_channels = K;
    d->in_channels = in;
    d->kernel = k;
    d->stride = c->kp_deconv_stride;
    d->padding = c->kp_deconv_padding;
    d->groups = 1;
    return (d->weight = read_tensor(ld, "roi_heads.keypoint_predictor.kps_score_lowres.weight",
                                    NULL, 4, wshape, error)) != NULL &&
           (d->bias = read_tensor(ld, "roi_heads.keypoint_predictor.kps_score_lowres.bias", NULL, 1,
                                  bshape, error)) != NULL;
}

void keypoint_head_free(vd_model *model)
{
    for (int j = 0; j < VD_MAX_KEYPOINT_CONVS; j++)
        vd_conv_free(&model->kp_convs[j]);
    vd_conv_free(&model->kp_deconv);
    g_strfreev(model->config.keypoint_names);
    g_free(model->config.skeleton);
}

int vd_model_num_keypoints(const vd_model *model)
{
    return model != NULL && model->config.has_keypoints ? model->config.num_keypoints : 0;
}

const char *vd_model_keypoint_name(const vd_model *model, int index)
{
    if (vd_model_num_keypoints(model) == 0 || model->config.keypoint_names == NULL || index < 0 ||
        index >= model->config.num_keypoints)
        return NULL;
    return model->config.keypoint_names[index];
}

int vd_model_keypoint_skeleton(const vd_model *model, const int **pairs)
{
    if (pairs != NULL)
        *pairs = NULL;
    if (vd_model_num_keypoints(model) == 0 || model->config.n_skeleton == 0)
        return 0;
    if (pairs != NULL)
        *pairs = model->config.skeleton;
    return model->config.n_skeleton;
}
