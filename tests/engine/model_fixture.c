/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "model_fixture.h"

#include "cpu/vd_cpu_isa.h"
#include "cpu/vd_cpu_xnnpack.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

char *tmp_dir;

/* ------------------------------------------------------------------------ */
/* Fixture: tensors + metadata, written as a safetensors file                */



void fx_tensor_free(gpointer data)
{
    fx_tensor *t = data;
    g_free(t->name);
    g_free(t->dtype);
    g_free(t->values);
    g_free(t->raw);
    g_free(t);
}

/* An empty fixture of a visiondetect format 1 file with the model config @config
 * (taken). */
static fixture *fx_new(char *config)
{
    fixture *fx = g_new0(fixture, 1);
    fx->tensors = g_ptr_array_new_with_free_func(fx_tensor_free);
    fx->config = config;
    fx->format = g_strdup("visiondetect");
    fx->format_version = g_strdup("1");
    fx->truncate = -1;
    return fx;
}

void fx_free(fixture *fx)
{
    g_ptr_array_unref(fx->tensors);
    g_free(fx->config);
    g_free(fx->format);
    g_free(fx->format_version);
    g_free(fx->raw_header);
    g_free(fx);
}

/* Small exact values (k/256, |k| < 128): exact in F32, F16 and BF16. */
float fill_value(guint salt, gsize i)
{
    return (float)((int)((i * 37u + salt * 101u) % 255u) - 127) / 256.0f;
}

fx_tensor *fx_add(fixture *fx, const char *name, int ndim, const gint64 *shape)
{
    fx_tensor *t = g_new0(fx_tensor, 1);
    t->name = g_strdup(name);
    t->dtype = g_strdup("F32");
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->n *= (gsize)shape[i];
    }
    t->values = g_new(float, t->n ? t->n : 1);
    for (gsize i = 0; i < t->n; i++)
        t->values[i] = fill_value(fx->tensors->len, i);
    g_ptr_array_add(fx->tensors, t);
    return t;
}

fx_tensor *fx_find(fixture *fx, const char *name)
{
    for (guint i = 0; i < fx->tensors->len; i++) {
        fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        if (strcmp(t->name, name) == 0)
            return t;
    }
    g_assert_not_reached();
    return NULL;
}

void fx_remove(fixture *fx, const char *name)
{
    g_assert_true(g_ptr_array_remove(fx->tensors, fx_find(fx, name)));
}

/* Replaces the first occurrence of @old in the config text; the test fails if absent,
 * so that a fixture change cannot silently turn a negative test into a no-op. */
void fx_config_replace(fixture *fx, const char *old, const char *new_text)
{
    char *at = strstr(fx->config, old);
    char *config;

    g_assert_nonnull(at);
    config = g_strdup_printf("%.*s%s%s", (int)(at - fx->config), fx->config, new_text,
                             at + strlen(old));
    g_free(fx->config);
    fx->config = config;
}

void add_conv_bn(fixture *fx, const char *conv, const char *bn, int out, int in, int k)
{
    const gint64 wshape[4] = { out, in, k, k }, vshape[1] = { out };
    char *name = g_strdup_printf("%s.weight", conv);
    fx_tensor *t;

    fx_add(fx, name, 4, wshape);
    g_free(name);
    name = g_strdup_printf("%s.weight", bn);
    t = fx_add(fx, name, 1, vshape);
    for (gsize i = 0; i < t->n; i++)
        t->values[i] = 0.5f + fabsf(t->values[i]);
    g_free(name);
    name = g_strdup_printf("%s.bias", bn);
    fx_add(fx, name, 1, vshape);
    g_free(name);
    name = g_strdup_printf("%s.running_mean", bn);
    fx_add(fx, name, 1, vshape);
    g_free(name);
    name = g_strdup_printf("%s.running_var", bn);
    t = fx_add(fx, name, 1, vshape);
    for (gsize i = 0; i < t->n; i++)
        t->values[i] = 0.5f + fabsf(t->values[i]);
    g_free(name);
}

void add_conv_bias(fixture *fx, const char *prefix, int out, int in, int k)
{
    const gint64 wshape[4] = { out, in, k, k }, bshape[1] = { out };
    char *name = g_strdup_printf("%s.weight", prefix);
    fx_add(fx, name, 4, wshape);
    g_free(name);
    name = g_strdup_printf("%s.bias", prefix);
    fx_add(fx, name, 1, bshape);
    g_free(name);
}

void add_linear(fixture *fx, const char *prefix, int out, int in)
{
    const gint64 wshape[2] = { out, in }, bshape[1] = { out };
    char *name = g_strdup_printf("%s.weight", prefix);
    fx_add(fx, name, 2, wshape);
    g_free(name);
    name = g_strdup_printf("%s.bias", prefix);
    fx_add(fx, name, 1, bshape);
    g_free(name);
}


/* The smallest legal model: a ResNet stem, one BasicBlock in stage 1, an FPN of 8
 * channels with the pool level, one anchor per location, a 2x2 pooler and a box head
 * of 4 features. */
tiny_arch tiny_basic(void)
{
    tiny_arch a = {
        .bottleneck = FALSE, .depth = 10, .layers = { 1, 1, 1, 1 }, .returned = { 1 },
        .n_returned = 1, .fpn_channels = 8, .pool = TRUE, .n_sizes = 1, .n_ratios = 1,
        .roi_size = 2, .representation = 4, .num_classes = 3, .norm_eps = 1e-5,
        .eps_map = NULL, .featmap_names = "[\"0\",\"1\",\"2\",\"3\"]", .old_keys = FALSE,
    };
    return a;
}

int arch_stage_channels(const tiny_arch *a, int stage)
{
    return (64 << (stage - 1)) * (a->bottleneck ? 4 : 1);
}

/* The config's "aspect_ratios" after its anchor sizes: @n_ratios per level
 * (0.5, 1, 2, ...) on each of @n_levels levels. */
static void append_aspect_ratios(GString *s, int n_levels, int n_ratios)
{
    g_string_append(s, "],\"aspect_ratios\":[");
    for (int l = 0; l < n_levels; l++) {
        g_string_append(s, l ? ",[" : "[");
        for (int i = 0; i < n_ratios; i++)
            g_string_append_printf(s, "%s%g", i ? "," : "", 0.5 * (1 << i));
        g_string_append(s, "]");
    }
}

char *arch_config(const tiny_arch *a)
{
    GString *s = g_string_new(NULL);
    int n_levels = a->n_returned + (a->pool ? 1 : 0);

    g_string_append(s, "{\"architecture\":\"fasterrcnn\",");
    g_string_append(s, "\"transform\":{\"min_size\":96,\"max_size\":160,"
                       "\"image_mean\":[0.485,0.456,0.406],\"image_std\":[0.229,0.224,0.225],"
                       "\"size_divisible\":32},");
    g_string_append_printf(s, "\"backbone\":{\"type\":\"resnet\",\"depth\":%d,\"block\":\"%s\","
                           "\"layers\":[%d,%d,%d,%d],\"stem_channels\":64,"
                           "\"width_per_group\":64,\"groups\":1,\"returned_layers\":[",
                           a->depth, a->bottleneck ? "bottleneck" : "basic", a->layers[0],
                           a->layers[1], a->layers[2], a->layers[3]);
    for (int i = 0; i < a->n_returned; i++)
        g_string_append_printf(s, "%s%d", i ? "," : "", a->returned[i]);
    g_string_append_printf(s, "],\"norm_eps\":%.17g", a->norm_eps);
    if (a->eps_map)
        g_string_append_printf(s, ",\"norm_eps_per_module\":%s", a->eps_map);
    g_string_append(s, "},\"fpn\":{\"in_channels\":[");
    for (int i = 0; i < a->n_returned; i++)
        g_string_append_printf(s, "%s%d", i ? "," : "", arch_stage_channels(a, a->returned[i]));
    g_string_append_printf(s, "],\"out_channels\":%d,\"extra_block\":\"%s\"},",
                           a->fpn_channels, a->pool ? "maxpool" : "none");
    g_string_append(s, "\"anchors\":{\"sizes\":[");
    for (int l = 0; l < n_levels; l++) {
        g_string_append(s, l ? ",[" : "[");
        for (int i = 0; i < a->n_sizes; i++)
            g_string_append_printf(s, "%s%d", i ? "," : "", (32 << l) * (i + 1));
        g_string_append(s, "]");
    }
    append_aspect_ratios(s, n_levels, a->n_ratios);
    g_string_append(s, "]},\"rpn\":{\"pre_nms_top_n\":1000,\"post_nms_top_n\":500,"
                       "\"nms_thresh\":0.7,\"score_thresh\":0.0,\"min_size\":0.001},");
    g_string_append_printf(s, "\"roi_heads\":{\"output_size\":%d,\"sampling_ratio\":2,"
                           "\"featmap_names\":%s,\"representation_size\":%d,"
                           "\"score_thresh\":0.05,\"nms_thresh\":0.5,\"detections_per_img\":100,"
                           "\"bbox_reg_weights\":[10.0,10.0,5.0,5.0],\"min_size\":0.01},",
                           a->roi_size, a->featmap_names, a->representation);
    g_string_append_printf(s, "\"num_classes\":%d,\"class_names\":[\"__background__\"",
                           a->num_classes);
    for (int i = 1; i < a->num_classes; i++)
        g_string_append_printf(s, ",\"thing%d\"", i);
    g_string_append(s, "]}");
    return g_string_free(s, FALSE);
}

fixture *fx_tiny(const tiny_arch *a)
{
    fixture *fx = fx_new(arch_config(a));
    int in_channels = 64, n_stages = a->returned[a->n_returned - 1];
    int C = a->fpn_channels, A = a->n_sizes * a->n_ratios;
    char conv[96], bn[96];

    add_conv_bn(fx, "backbone.body.conv1", "backbone.body.bn1", 64, 3, 7);
    for (int s = 1; s <= n_stages; s++) {
        int planes = 64 << (s - 1), out = arch_stage_channels(a, s);
        for (int b = 0; b < a->layers[s - 1]; b++) {
            char prefix[64];
            g_snprintf(prefix, sizeof prefix, "backbone.body.layer%d.%d", s, b);
            for (int c = 1; c <= (a->bottleneck ? 3 : 2); c++) {
                int cin = c == 1 ? in_channels : planes;
                int cout = c == (a->bottleneck ? 3 : 2) ? out : planes;
                int k = a->bottleneck ? (c == 2 ? 3 : 1) : 3;
                g_snprintf(conv, sizeof conv, "%s.conv%d", prefix, c);
                g_snprintf(bn, sizeof bn, "%s.bn%d", prefix, c);
                add_conv_bn(fx, conv, bn, cout, cin, k);
            }
            if ((s > 1 && b == 0) || in_channels != out) {
                g_snprintf(conv, sizeof conv, "%s.downsample.0", prefix);
                g_snprintf(bn, sizeof bn, "%s.downsample.1", prefix);
                add_conv_bn(fx, conv, bn, out, in_channels, 1);
            }
            in_channels = out;
        }
    }
    for (int i = 0; i < a->n_returned; i++) {
        g_snprintf(conv, sizeof conv, a->old_keys ? "backbone.fpn.inner_blocks.%d"
                                                  : "backbone.fpn.inner_blocks.%d.0", i);
        add_conv_bias(fx, conv, C, arch_stage_channels(a, a->returned[i]), 1);
        g_snprintf(conv, sizeof conv, a->old_keys ? "backbone.fpn.layer_blocks.%d"
                                                  : "backbone.fpn.layer_blocks.%d.0", i);
        add_conv_bias(fx, conv, C, C, 3);
    }
    add_conv_bias(fx, a->old_keys ? "rpn.head.conv" : "rpn.head.conv.0.0", C, C, 3);
    add_conv_bias(fx, "rpn.head.cls_logits", A, C, 1);
    add_conv_bias(fx, "rpn.head.bbox_pred", 4 * A, C, 1);
    add_linear(fx, "roi_heads.box_head.fc6", a->representation, C * a->roi_size * a->roi_size);
    add_linear(fx, "roi_heads.box_head.fc7", a->representation, a->representation);
    add_linear(fx, "roi_heads.box_predictor.cls_score", a->num_classes, a->representation);
    add_linear(fx, "roi_heads.box_predictor.bbox_pred", 4 * a->num_classes, a->representation);
    return fx;
}

/* The tiny fixture's mask head: a 4x4 mask pooler, two 3x3 convolutions of 6 and 5
 * channels (@norm: without bias, each followed by batch-norm, as v2), the transposed
 * convolution to 4 channels. */
mask_arch mask_tiny(gboolean norm)
{
    mask_arch m = {
        .output_size = 4,
        .n_convs = 2,
        .conv_channels = {6, 5},
        .dim_reduced = 4,
        .norm = norm,
    };
    return m;
}

/* torchvision's maskrcnn_resnet50_fpn mask branch: a 14x14 mask pooler, MaskRCNNHeads
 * of four 3x3 convolutions of 256 channels with bias, MaskRCNNPredictor's transposed
 * convolution to 256 channels (dim_reduced) and its 1x1 logits. */
mask_arch mask_torchvision(void)
{
    mask_arch m = {
        .output_size = 14,
        .n_convs = 4,
        .conv_channels = {256, 256, 256, 256},
        .dim_reduced = 256,
        .norm = FALSE,
    };
    return m;
}

/* fx_tiny(@a) as a Mask R-CNN (engine/MASKRCNN.md) with the mask branch @m on the
 * four levels "0".."3": the mask head's convolutions (v1: with bias; norm: v2,
 * without bias and with batch-norm), the transposed convolution to dim_reduced
 * channels, the 1x1 logits to the classes. */
fixture *fx_mask(const tiny_arch *a, const mask_arch *m)
{
    fixture *fx = fx_tiny(a);
    int in = a->fpn_channels;
    char conv[64], bn[64];
    GString *head = g_string_new(NULL);

    fx_config_replace(fx, "\"architecture\":\"fasterrcnn\"", "\"architecture\":\"maskrcnn\"");
    g_string_printf(head,
                    "\"min_size\":0.01,\"mask_head\":{\"output_size\":%d,"
                    "\"sampling_ratio\":2,\"featmap_names\":[\"0\",\"1\",\"2\",\"3\"],"
                    "\"conv_channels\":[",
                    m->output_size);
    for (int j = 0; j < m->n_convs; j++)
        g_string_append_printf(head, "%s%d", j ? "," : "", m->conv_channels[j]);
    g_string_append_printf(head, "],\"dilation\":1,\"norm\":\"%s\",\"dim_reduced\":%d}}",
                           m->norm ? "batch_norm" : "none", m->dim_reduced);
    fx_config_replace(fx, "\"min_size\":0.01}", head->str);
    g_string_free(head, TRUE);
    for (int j = 0; j < m->n_convs; j++) {
        g_snprintf(conv, sizeof conv, "roi_heads.mask_head.%d.0", j);
        g_snprintf(bn, sizeof bn, "roi_heads.mask_head.%d.1", j);
        if (m->norm)
            add_conv_bn(fx, conv, bn, m->conv_channels[j], in, 3);
        else
            add_conv_bias(fx, conv, m->conv_channels[j], in, 3);
        in = m->conv_channels[j];
    }
    {
        /* ConvTranspose2d's weight: [in][out][2][2] */
        const gint64 wshape[4] = {in, m->dim_reduced, 2, 2}, bshape[1] = {m->dim_reduced};
        fx_add(fx, "roi_heads.mask_predictor.conv5_mask.weight", 4, wshape);
        fx_add(fx, "roi_heads.mask_predictor.conv5_mask.bias", 1, bshape);
    }
    add_conv_bias(fx, "roi_heads.mask_predictor.mask_fcn_logits", a->num_classes, m->dim_reduced,
                  1);
    return fx;
}

/* The tiny fixture as a Mask R-CNN: tiny_basic() with mask_tiny(@norm). */
fixture *fx_tiny_mask(gboolean norm)
{
    tiny_arch a = tiny_basic();
    mask_arch m = mask_tiny(norm);
    return fx_mask(&a, &m);
}

/* The tiny one-stage detectors (engine/RETINANET.md): tiny_basic()'s ResNet
 * returning stages 2-4 into an 8-channel FPN with LastLevelP6P7, on the five levels
 * a head of @n_convs 3x3 convolutions per branch, 3 classes.
 * RetinaNet: P6 from P5, 2 anchors per location (2 sizes, 1 ratio), the
 *   convolutions with bias ('conv.<j>.0'); @v2: P6 from C5, the convolutions
 *   without bias and GroupNorm (2 groups) after each ('conv.<j>.1').
 * FCOS (@fcos): P6 from P5, 1 anchor per location, conv with bias
 *   ('conv.<3j>') and GroupNorm ('conv.<3j + 1>'), the centerness convolution. */
static fixture *fx_tiny_one_stage(int n_convs, gboolean v2, gboolean fcos)
{
    tiny_arch a = tiny_basic();
    a.n_returned = 3;
    for (int i = 0; i < 3; i++)
        a.returned[i] = i + 2;
    a.pool = FALSE;
    fixture *fx = fx_tiny(&a);
    int C = a.fpn_channels, A = fcos ? 1 : 2, K = a.num_classes;
    gboolean gn = v2 || fcos;
    char name[96];

    for (guint i = fx->tensors->len; i-- > 0;) {
        const fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        if (g_str_has_prefix(t->name, "rpn.") || g_str_has_prefix(t->name, "roi_heads."))
            g_ptr_array_remove_index(fx->tensors, i);
    }
    g_free(fx->config);
    fx->config = g_strdup_printf(
        "{\"architecture\":\"%s\",\"builder\":\"%s\","
        "\"transform\":{\"min_size\":96,\"max_size\":160,\"image_mean\":[0.485,0.456,0.406],"
        "\"image_std\":[0.229,0.224,0.225],\"size_divisible\":32},"
        "\"backbone\":{\"type\":\"resnet\",\"depth\":10,\"block\":\"basic\","
        "\"layers\":[1,1,1,1],\"stem_channels\":64,\"width_per_group\":64,\"groups\":1,"
        "\"returned_layers\":[2,3,4],\"norm_eps\":1e-05},"
        "\"fpn\":{\"in_channels\":[128,256,512],\"out_channels\":%d,\"extra_block\":\"p6p7\","
        "\"extra_in_channels\":%d,\"extra_out_channels\":%d,\"use_P5\":%s},"
        "\"anchors\":{\"sizes\":%s,"
        "\"aspect_ratios\":[[1.0],[1.0],[1.0],[1.0],[1.0]]},"
        "\"head\":{\"type\":\"%s\",\"in_channels\":%d,\"num_anchors\":%d,"
        "\"classification_convs\":%d,\"regression_convs\":%d,%s%s"
        "\"score_thresh\":0.05,\"nms_thresh\":0.5,\"detections_per_img\":100,"
        "\"topk_candidates\":1000},"
        "\"num_classes\":%d,\"class_names\":[\"__background__\",\"thing1\",\"thing2\"]}",
        fcos ? "fcos" : "retinanet", fcos ? "fcos_resnet50_fpn" : "retinanet_resnet50_fpn", C,
        v2 ? 512 : C, C, v2 ? "false" : "true",
        fcos ? "[[8],[16],[32],[64],[128]]" : "[[32,40],[64,80],[128,160],[256,320],[512,640]]",
        fcos ? "fcos" : "retinanet", C, A, n_convs, n_convs,
        gn ? "\"norm\":\"group_norm\",\"num_groups\":2,\"norm_eps\":1e-05," : "\"norm\":\"none\",",
        fcos ? "\"centerness\":true,\"box_coder\":\"linear\",\"normalize_by_size\":true,"
             : "\"bbox_reg_weights\":[1.0,1.0,1.0,1.0],\"bbox_xform_clip\":4.135166556742356,",
        K);
    add_conv_bias(fx, "backbone.fpn.extra_blocks.p6", C, v2 ? 512 : C, 3);
    add_conv_bias(fx, "backbone.fpn.extra_blocks.p7", C, C, 3);
    static const char *const branches[2] = {"head.classification_head", "head.regression_head"};
    const gint64 wshape[4] = {C, C, 3, 3}, nshape[1] = {C};
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < n_convs; j++) {
            int conv = fcos ? 3 * j : j;
            g_snprintf(name, sizeof name, fcos ? "%s.conv.%d" : "%s.conv.%d.0", branches[b], conv);
            if (!v2)
                add_conv_bias(fx, name, C, C, 3);
            if (!gn)
                continue;
            if (v2) {
                g_snprintf(name, sizeof name, "%s.conv.%d.0.weight", branches[b], j);
                fx_add(fx, name, 4, wshape);
            }
            const char *norm_fmt = fcos ? "%s.conv.%d.%s" : "%s.conv.%d.1.%s";
            int norm = fcos ? 3 * j + 1 : j;
            g_snprintf(name, sizeof name, norm_fmt, branches[b], norm, "weight");
            fx_add(fx, name, 1, nshape);
            g_snprintf(name, sizeof name, norm_fmt, branches[b], norm, "bias");
            fx_add(fx, name, 1, nshape);
        }
    add_conv_bias(fx, "head.classification_head.cls_logits", A * K, C, 3);
    add_conv_bias(fx, "head.regression_head.bbox_reg", 4 * A, C, 3);
    if (fcos)
        add_conv_bias(fx, "head.regression_head.bbox_ctrness", A, C, 3);
    return fx;
}

fixture *fx_tiny_retinanet(int n_convs, gboolean v2)
{
    return fx_tiny_one_stage(n_convs, v2, FALSE);
}

fixture *fx_tiny_fcos(int n_convs)
{
    return fx_tiny_one_stage(n_convs, FALSE, TRUE);
}

/* A layer of fx_tiny_ssdlite()'s lists: the JSON of a convolution named @name (@in
 * to @out channels, kernel @k, stride @s, padding @p, dilation @d, depthwise when
 * @dw; with a batch norm '<name>'s sibling '.1' unless @bias, then @act) appended to
 * @json, its tensors to @fx. */
static void ssd_conv(fixture *fx, GString *json, const char *conv, const char *bn, int in,
                     int out, int k, int s, int p, int d, gboolean dw, const char *act)
{
    g_string_append_printf(json,
                           "%s{\"op\":\"conv\",\"name\":\"%s\",\"in_channels\":%d,"
                           "\"out_channels\":%d,\"kernel\":%d,\"stride\":%d,\"padding\":%d,"
                           "\"dilation\":%d,\"groups\":%d,\"bias\":%s}",
                           json->str[json->len - 1] == '[' ? "" : ",", conv, in, out, k, s, p, d,
                           dw ? in : 1, bn == NULL ? "true" : "false");
    if (bn != NULL) {
        add_conv_bn(fx, conv, bn, out, dw ? 1 : in, k);
        g_string_append_printf(json, ",{\"op\":\"batch_norm\",\"name\":\"%s\"}", bn);
    } else {
        add_conv_bias(fx, conv, out, dw ? 1 : in, k);
    }
    if (act != NULL)
        g_string_append_printf(json, ",{\"op\":\"%s\"}", act);
}

fixture *fx_tiny_ssdlite(void)
{
    const int K = 3, A = 4;
    fixture *fx = fx_new(NULL);
    GString *j = g_string_new("{\"architecture\":\"ssdlite\",\"builder\":"
                              "\"ssdlite320_mobilenet_v3_large\",\"transform\":{\"min_size\":64,"
                              "\"max_size\":64,\"image_mean\":[0.5,0.5,0.5],\"image_std\":"
                              "[0.5,0.5,0.5],\"size_divisible\":1,\"fixed_size\":[64,64],"
                              "\"resize_arithmetic\":\"torch1\"},\"backbone\":{\"type\":"
                              "\"mobilenet_v3\",\"arch\":\"mobilenet_v3_large\",\"stages\":[[");
    /* body 0: stem 3 -> 8 (32x32), inverted residual 8 -> 8 with SE, expansion to 16 */
    ssd_conv(fx, j, "backbone.features.0.0.0", "backbone.features.0.0.1", 3, 8, 3, 2, 1, 1, FALSE,
             "hardswish");
    g_string_append(j, ",{\"op\":\"inverted_residual\",\"residual\":true,\"layers\":[");
    ssd_conv(fx, j, "backbone.features.0.1.block.0.0", "backbone.features.0.1.block.0.1", 8, 8,
             3, 1, 1, 1, TRUE, "relu");
    g_string_append(j, ",{\"op\":\"squeeze_excitation\",\"name\":\"backbone.features.0.1.block.1\","
                       "\"channels\":8,\"squeeze_channels\":4}");
    add_conv_bias(fx, "backbone.features.0.1.block.1.fc1", 4, 8, 1);
    add_conv_bias(fx, "backbone.features.0.1.block.1.fc2", 8, 4, 1);
    ssd_conv(fx, j, "backbone.features.0.1.block.2.0", "backbone.features.0.1.block.2.1", 8, 8,
             1, 1, 0, 1, FALSE, NULL);
    g_string_append(j, "]}");
    ssd_conv(fx, j, "backbone.features.0.2.0", "backbone.features.0.2.1", 8, 16, 1, 1, 0, 1,
             FALSE, "hardswish");
    /* body 1: depthwise stride 2 (16x16), 1x1 to 8 */
    g_string_append(j, "],[");
    ssd_conv(fx, j, "backbone.features.1.0.0", "backbone.features.1.0.1", 16, 16, 3, 2, 1, 1, TRUE,
             "hardswish");
    ssd_conv(fx, j, "backbone.features.1.1.0", "backbone.features.1.1.1", 16, 8, 1, 1, 0, 1,
             FALSE, NULL);
    /* extra 0: SSDlite's block (8x8); extra 1: a ceil_mode max-pool (4x4) and a
     * convolution dilated by 2 */
    g_string_append(j, "]],\"extra\":[[");
    ssd_conv(fx, j, "backbone.extra.0.0.0", "backbone.extra.0.0.1", 8, 4, 1, 1, 0, 1, FALSE,
             "relu6");
    ssd_conv(fx, j, "backbone.extra.0.1.0", "backbone.extra.0.1.1", 4, 4, 3, 2, 1, 1, TRUE,
             "relu6");
    ssd_conv(fx, j, "backbone.extra.0.2.0", "backbone.extra.0.2.1", 4, 8, 1, 1, 0, 1, FALSE,
             "relu6");
    g_string_append(j, "],[{\"op\":\"maxpool\",\"name\":\"backbone.extra.1.0\",\"kernel\":3,"
                       "\"stride\":2,\"padding\":0,\"ceil_mode\":true}");
    ssd_conv(fx, j, "backbone.extra.1.1", NULL, 8, 8, 3, 1, 2, 2, FALSE, "relu");
    g_string_append(j, "]],\"norm_eps\":0.001},\"anchors\":{\"type\":\"default_boxes\","
                       "\"aspect_ratios\":[[2.0],[2.0],[2.0],[2.0]],\"scales\":[0.2,0.4,0.6,"
                       "0.8,1.0],\"steps\":null,\"clip\":true},\"head\":{\"type\":\"ssdlite\","
                       "\"in_channels\":[16,8,8,8],\"num_anchors\":[4,4,4,4],");
    static const int channels[4] = {16, 8, 8, 8};
    static const char *const branches[2] = {"classification", "regression"};
    for (int b = 0; b < 2; b++) {
        g_string_append_printf(j, "\"%s\":[", branches[b]);
        for (int l = 0; l < 4; l++) {
            char conv[96], bn[96], last[96];
            int C = channels[l];
            g_snprintf(conv, sizeof conv, "head.%s_head.module_list.%d.0.0", branches[b], l);
            g_snprintf(bn, sizeof bn, "head.%s_head.module_list.%d.0.1", branches[b], l);
            g_snprintf(last, sizeof last, "head.%s_head.module_list.%d.1", branches[b], l);
            g_string_append(j, l == 0 ? "[" : ",[");
            ssd_conv(fx, j, conv, bn, C, C, 3, 1, 1, 1, TRUE, "relu6");
            ssd_conv(fx, j, last, NULL, C, b == 0 ? A * K : 4 * A, 1, 1, 0, 1, FALSE, NULL);
            g_string_append(j, "]");
        }
        g_string_append(j, "],");
    }
    g_string_append(j, "\"bbox_reg_weights\":[10.0,10.0,5.0,5.0],\"bbox_xform_clip\":"
                       "4.135166556742356,\"score_thresh\":0.01,\"nms_thresh\":0.55,"
                       "\"detections_per_img\":100,\"topk_candidates\":100},\"num_classes\":3,"
                       "\"class_names\":[\"__background__\",\"thing1\",\"thing2\"]}");
    fx->config = g_string_free(j, FALSE);
    return fx;
}

fixture *fx_tiny_ssd300(void)
{
    const int K = 3;
    fixture *fx = fx_new(NULL);
    GString *j = g_string_new("{\"architecture\":\"ssd\",\"builder\":\"ssd300_vgg16\","
                              "\"transform\":{\"min_size\":64,\"max_size\":64,\"image_mean\":"
                              "[0.5,0.5,0.5],\"image_std\":[0.5,0.5,0.5],\"size_divisible\":1,"
                              "\"fixed_size\":[64,64],\"resize_arithmetic\":\"torch1\"},"
                              "\"backbone\":{\"type\":\"vgg16\",\"features\":[");
    /* features: 64x64 -> 32x32 -> 16x16 (ceil_mode), 16 channels */
    ssd_conv(fx, j, "backbone.features.0", NULL, 3, 8, 3, 1, 1, 1, FALSE, "relu");
    ssd_conv(fx, j, "backbone.features.2", NULL, 8, 8, 3, 1, 1, 1, FALSE, "relu");
    g_string_append(j, ",{\"op\":\"maxpool\",\"name\":\"backbone.features.4\",\"kernel\":2,"
                       "\"stride\":2,\"padding\":0,\"ceil_mode\":false}");
    ssd_conv(fx, j, "backbone.features.5", NULL, 8, 16, 3, 1, 1, 1, FALSE, "relu");
    g_string_append(j, ",{\"op\":\"maxpool\",\"name\":\"backbone.features.7\",\"kernel\":2,"
                       "\"stride\":2,\"padding\":0,\"ceil_mode\":true}");
    ssd_conv(fx, j, "backbone.features.8", NULL, 16, 16, 3, 1, 1, 1, FALSE, "relu");
    g_string_append(j, "],\"l2_norm\":{\"channels\":16,\"eps\":1e-12},\"extra\":[[");
    /* extra 0: 8x8, 32 channels; extra 1: 4x4, 16 channels */
    g_string_append(j, "{\"op\":\"maxpool\",\"name\":\"backbone.extra.0.0\",\"kernel\":2,"
                       "\"stride\":2,\"padding\":0,\"ceil_mode\":false}");
    ssd_conv(fx, j, "backbone.extra.0.1", NULL, 16, 16, 3, 1, 1, 1, FALSE, "relu");
    g_string_append(j, ",{\"op\":\"maxpool\",\"name\":\"backbone.extra.0.3\",\"kernel\":3,"
                       "\"stride\":1,\"padding\":1,\"ceil_mode\":false}");
    ssd_conv(fx, j, "backbone.extra.0.4", NULL, 16, 32, 3, 1, 2, 2, FALSE, "relu");
    ssd_conv(fx, j, "backbone.extra.0.6", NULL, 32, 32, 1, 1, 0, 1, FALSE, "relu");
    g_string_append(j, "],[");
    ssd_conv(fx, j, "backbone.extra.1.0", NULL, 32, 16, 1, 1, 0, 1, FALSE, "relu");
    ssd_conv(fx, j, "backbone.extra.1.2", NULL, 16, 16, 3, 2, 1, 1, FALSE, "relu");
    g_string_append(j, "]]},\"anchors\":{\"type\":\"default_boxes\",\"aspect_ratios\":"
                       "[[2.0],[2.0,3.0],[2.0]],\"scales\":[0.1,0.3,0.6,0.9],\"steps\":[4,8,16],"
                       "\"clip\":true},\"head\":{\"type\":\"ssd\",\"in_channels\":[16,32,16],"
                       "\"num_anchors\":[4,6,4],\"kernel\":3,");
    const gint64 scale_shape[1] = {16};
    fx_add(fx, "backbone.scale_weight", 1, scale_shape);
    static const int channels[3] = {16, 32, 16}, anchors[3] = {4, 6, 4};
    for (int l = 0; l < 3; l++) {
        char name[96];
        g_snprintf(name, sizeof name, "head.classification_head.module_list.%d", l);
        add_conv_bias(fx, name, anchors[l] * K, channels[l], 3);
        g_snprintf(name, sizeof name, "head.regression_head.module_list.%d", l);
        add_conv_bias(fx, name, 4 * anchors[l], channels[l], 3);
    }
    g_string_append(j, "\"bbox_reg_weights\":[10.0,10.0,5.0,5.0],\"bbox_xform_clip\":"
                       "4.135166556742356,\"score_thresh\":0.01,\"nms_thresh\":0.45,"
                       "\"detections_per_img\":100,\"topk_candidates\":100},\"num_classes\":3,"
                       "\"class_names\":[\"__background__\",\"thing1\",\"thing2\"]}");
    fx->config = g_string_free(j, FALSE);
    return fx;
}

/* torchvision's fasterrcnn_resnet50_fpn: ResNet-50 (Bottleneck, 3-4-6-3), all four
 * stages into a 256-channel FPN with the pool level, 3 anchors per location, 7x7
 * RoIs, a 1024-wide box head, 91 classes (the transform is fx_tiny's 96/160). */
tiny_arch resnet50_fpn_arch(void)
{
    tiny_arch a = tiny_basic();
    a.bottleneck = TRUE;
    a.depth = 50;
    a.layers[0] = 3;
    a.layers[1] = 4;
    a.layers[2] = 6;
    a.layers[3] = 3;
    a.n_returned = 4;
    for (int i = 0; i < 4; i++)
        a.returned[i] = i + 1;
    a.fpn_channels = 256;
    a.n_sizes = 1;
    a.n_ratios = 3;
    a.roi_size = 7;
    a.representation = 1024;
    a.num_classes = 91;
    return a;
}

/* Random weights scaled by 1/sqrt(fan-in) and unit batch-norm statistics, so that
 * activations stay O(1) and the RPN proposes many distinct boxes; the box deltas
 * are damped so that boxes stay near their anchors. */
void fx_randomize(fixture *fx, guint32 seed)
{
    GRand *rand = g_rand_new_with_seed(seed);
    for (guint i = 0; i < fx->tensors->len; i++) {
        fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        gsize fan_in = t->ndim >= 2 ? t->n / (gsize)t->shape[0] : 1;
        double scale = 1.0 / sqrt((double)fan_in);
        if (strstr(t->name, "bbox_pred") != NULL)
            scale *= 0.1;
        gboolean ones = g_str_has_suffix(t->name, "running_var") ||
                        g_str_has_suffix(t->name, "bn1.weight") ||
                        g_str_has_suffix(t->name, "bn2.weight") ||
                        g_str_has_suffix(t->name, "bn3.weight") ||
                        g_str_has_suffix(t->name, "downsample.1.weight");
        gboolean zeros = !ones && g_str_has_suffix(t->name, "running_mean");
        for (gsize k = 0; k < t->n; k++) {
            if (ones)
                t->values[k] = 1.0f;
            else if (zeros)
                t->values[k] = 0.0f;
            else
                t->values[k] = (float)(g_rand_double_range(rand, -1.7, 1.7) * scale);
        }
    }
    g_rand_free(rand);
}

guint32 float_bits(float f)
{
    guint32 b;
    memcpy(&b, &f, 4);
    return b;
}

guint16 half_from_exact_float(float f)
{
    guint32 b = float_bits(f);
    guint16 sign = (guint16)((b >> 16) & 0x8000u);
    int e = (int)((b >> 23) & 0xff) - 127;

    if ((b & 0x7fffffffu) == 0)
        return sign;
    g_assert_cmpint(e, >=, -14);
    g_assert_cmpint(e, <=, 15);
    g_assert_cmpuint(b & 0x1fffu, ==, 0);
    return sign | (guint16)((e + 15) << 10) | (guint16)((b >> 13) & 0x3ffu);
}

gsize dtype_size(const char *dtype)
{
    return strcmp(dtype, "F32") == 0 ? 4 : 2;
}

/* Encodes the tensor's data and assigns sequential offsets (fixed ones are kept for
 * the header only; every tensor's data is written). */
GByteArray *fx_layout(fixture *fx)
{
    GByteArray *data = g_byte_array_new();

    for (guint i = 0; i < fx->tensors->len; i++) {
        fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        guint64 begin = data->len;
        if (t->raw) {
            g_byte_array_append(data, t->raw, (guint)t->raw_size);
        } else {
            gsize size = dtype_size(t->dtype);
            gboolean f16 = strcmp(t->dtype, "F16") == 0, bf16 = strcmp(t->dtype, "BF16") == 0;
            g_byte_array_set_size(data, (guint)(begin + t->n * size));
            guint8 *out = data->data + begin;
            for (gsize k = 0; k < t->n; k++) {
                guint32 b = float_bits(t->values[k]);
                if (f16) {
                    b = half_from_exact_float(t->values[k]);
                } else if (bf16) {
                    g_assert_cmpuint(b & 0xffffu, ==, 0);
                    b >>= 16;
                }
                for (gsize j = 0; j < size; j++)
                    *out++ = (guint8)(b >> (8 * j)); /* little-endian */
            }
        }
        if (!t->fixed_offsets) {
            t->begin = begin;
            t->end = data->len;
        }
    }
    return data;
}

void append_json_string(GString *s, const char *text)
{
    g_string_append_c(s, '"');
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_printf(s, "\\%c", *p);
        else if ((guchar)*p < 0x20)
            g_string_append_printf(s, "\\u%04x", (guchar)*p);
        else
            g_string_append_c(s, *p);
    }
    g_string_append_c(s, '"');
}

/* Writes the fixture to tmp_dir/@file_name; returns the path (free it). */
char *fx_write(fixture *fx, const char *file_name)
{
    GByteArray *data = fx_layout(fx);
    GString *header = g_string_new("{");
    GByteArray *file = g_byte_array_new();
    char *path = g_build_filename(tmp_dir, file_name, NULL);
    GError *error = NULL;
    guint64 header_len;
    guint8 len_bytes[8];
    gsize size;

    if (!fx->no_metadata) {
        g_string_append(header, "\"__metadata__\":{\"format\":");
        append_json_string(header, fx->format);
        g_string_append(header, ",\"format_version\":");
        append_json_string(header, fx->format_version);
        g_string_append(header, ",\"config\":");
        append_json_string(header, fx->config);
        g_string_append(header, "}");
    }
    for (guint i = 0; i < fx->tensors->len; i++) {
        fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        if (i > 0 || !fx->no_metadata)
            g_string_append_c(header, ',');
        append_json_string(header, t->name);
        g_string_append_printf(header, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype);
        for (int d = 0; d < t->ndim; d++)
            g_string_append_printf(header, "%s%" G_GINT64_FORMAT, d ? "," : "", t->shape[d]);
        g_string_append_printf(header, "],\"data_offsets\":[%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                               "]}", t->begin, t->end);
    }
    g_string_append_c(header, '}');
    if (fx->raw_header)
        g_string_assign(header, fx->raw_header);
    if (fx->header_old) {
        const char *at = strstr(header->str, fx->header_old);
        gssize pos;
        g_assert_nonnull(at);
        pos = at - header->str;
        g_string_erase(header, pos, (gssize)strlen(fx->header_old));
        g_string_insert(header, pos, fx->header_new);
    }

    header_len = header->len + fx->header_len_delta;
    for (int i = 0; i < 8; i++)
        len_bytes[i] = (guint8)(header_len >> (8 * i));
    g_byte_array_append(file, len_bytes, 8);
    g_byte_array_append(file, (const guint8 *)header->str, (guint)header->len);
    g_byte_array_append(file, data->data, data->len);
    size = fx->truncate >= 0 ? MIN((gsize)fx->truncate, file->len) : file->len;
    g_assert_true(g_file_set_contents(path, (const char *)file->data, (gssize)size, &error));
    g_assert_no_error(error);

    g_byte_array_unref(file);
    g_byte_array_unref(data);
    g_string_free(header, TRUE);
    return path;
}

vd_model *fx_load(fixture *fx, GError **error)
{
    char *path = fx_write(fx, "fixture.safetensors");
    vd_model *model = vd_model_load(path, error);
    g_unlink(path);
    g_free(path);
    return model;
}

vd_model *fx_load_ok(fixture *fx)
{
    GError *error = NULL;
    vd_model *model = fx_load(fx, &error);

    g_assert_no_error(error);
    fx_free(fx);
    return model;
}

/* torchvision's mobilenet_v3_large features as fasterrcnn_mobilenet_v3_large_fpn
 * (low_res: _320_fpn's sizes and RPN top-n) builds them: 91 classes. */
mnv3_arch mnv3_large(gboolean low_res)
{
    static const mnv3_block_arch blocks[15] = {
        {3, 16, 16, 0, 1, FALSE},    {3, 64, 24, 0, 2, FALSE},    {3, 72, 24, 0, 1, FALSE},
        {5, 72, 40, 24, 2, FALSE},   {5, 120, 40, 32, 1, FALSE},  {5, 120, 40, 32, 1, FALSE},
        {3, 240, 80, 0, 2, TRUE},    {3, 200, 80, 0, 1, TRUE},    {3, 184, 80, 0, 1, TRUE},
        {3, 184, 80, 0, 1, TRUE},    {3, 480, 112, 120, 1, TRUE}, {3, 672, 112, 168, 1, TRUE},
        {5, 672, 160, 168, 2, TRUE}, {5, 960, 160, 240, 1, TRUE}, {5, 960, 160, 240, 1, TRUE},
    };
    mnv3_arch a = {
        .stem = 16,
        .n_blocks = 15,
        .last = 960,
        .returned = {13, 16},
        .n_returned = 2,
        .fpn_channels = 256,
        .n_sizes = 5,
        .n_ratios = 3,
        .roi_size = 7,
        .representation = 1024,
        .num_classes = 91,
        .min_size = low_res ? 320 : 800,
        .max_size = low_res ? 640 : 1333,
        .rpn_top_n = low_res ? 150 : 1000,
    };
    memcpy(a.blocks, blocks, sizeof blocks);
    return a;
}

/* The smallest MobileNetV3 that has every part: a block without expansion (with a
 * residual), one with expansion, SE and hardswish (stride 2), the last conv; the
 * block and the last conv feed the FPN; 2 sizes x 3 ratios per level. */
mnv3_arch mnv3_tiny(void)
{
    mnv3_arch a = {
        .stem = 8,
        .n_blocks = 2,
        .blocks = {{3, 8, 8, 0, 1, FALSE}, {5, 16, 8, 8, 2, TRUE}},
        .last = 16,
        .returned = {2, 3},
        .n_returned = 2,
        .fpn_channels = 8,
        .n_sizes = 2,
        .n_ratios = 3,
        .roi_size = 2,
        .representation = 4,
        .num_classes = 3,
        .min_size = 96,
        .max_size = 160,
        .rpn_top_n = 100,
    };
    return a;
}

static int mnv3_feature_channels(const mnv3_arch *a, int f)
{
    return f == 0 ? a->stem : f <= a->n_blocks ? a->blocks[f - 1].out : a->last;
}

char *mnv3_config(const mnv3_arch *a)
{
    GString *s = g_string_new(NULL);
    int n_levels = a->n_returned + 1;

    g_string_append_printf(s,
                           "{\"architecture\":\"fasterrcnn\",\"transform\":{\"min_size\":%d,"
                           "\"max_size\":%d,\"image_mean\":[0.485,0.456,0.406],"
                           "\"image_std\":[0.229,0.224,0.225],\"size_divisible\":32},",
                           a->min_size, a->max_size);
    g_string_append_printf(s,
                           "\"backbone\":{\"type\":\"mobilenet_v3\",\"arch\":"
                           "\"mobilenet_v3_large\",\"stem_channels\":%d,\"blocks\":[",
                           a->stem);
    for (int b = 0; b < a->n_blocks; b++) {
        const mnv3_block_arch *k = &a->blocks[b];
        g_string_append_printf(s,
                               "%s{\"kernel\":%d,\"expanded_channels\":%d,\"out_channels\":%d,"
                               "\"se_channels\":%d,\"activation\":\"%s\",\"stride\":%d,"
                               "\"dilation\":1}",
                               b ? "," : "", k->kernel, k->expanded, k->out, k->se,
                               k->hardswish ? "hardswish" : "relu", k->stride);
    }
    g_string_append_printf(s, "],\"last_channels\":%d,\"returned_layers\":[", a->last);
    for (int i = 0; i < a->n_returned; i++)
        g_string_append_printf(s, "%s%d", i ? "," : "", a->returned[i]);
    g_string_append(s, "],\"norm_eps\":1e-05},\"fpn\":{\"in_channels\":[");
    for (int i = 0; i < a->n_returned; i++)
        g_string_append_printf(s, "%s%d", i ? "," : "", mnv3_feature_channels(a, a->returned[i]));
    g_string_append_printf(s, "],\"out_channels\":%d,\"extra_block\":\"maxpool\"},",
                           a->fpn_channels);
    g_string_append(s, "\"anchors\":{\"sizes\":[");
    for (int l = 0; l < n_levels; l++) {
        g_string_append(s, l ? ",[" : "[");
        for (int i = 0; i < a->n_sizes; i++)
            g_string_append_printf(s, "%s%d", i ? "," : "", 32 << i);
        g_string_append(s, "]");
    }
    append_aspect_ratios(s, n_levels, a->n_ratios);
    g_string_append_printf(s,
                           "]},\"rpn\":{\"pre_nms_top_n\":%d,\"post_nms_top_n\":%d,"
                           "\"nms_thresh\":0.7,\"score_thresh\":0.05,\"min_size\":0.001},",
                           a->rpn_top_n, a->rpn_top_n);
    g_string_append_printf(s,
                           "\"roi_heads\":{\"output_size\":%d,\"sampling_ratio\":2,"
                           "\"featmap_names\":[\"0\",\"1\",\"2\",\"3\"],\"representation_size\":%d,"
                           "\"score_thresh\":0.05,\"nms_thresh\":0.5,\"detections_per_img\":100,"
                           "\"bbox_reg_weights\":[10.0,10.0,5.0,5.0],\"min_size\":0.01},",
                           a->roi_size, a->representation);
    g_string_append_printf(s, "\"num_classes\":%d}", a->num_classes);
    return g_string_free(s, FALSE);
}

fixture *fx_mnv3(const mnv3_arch *a)
{
    fixture *fx = fx_new(mnv3_config(a));
    int C = a->fpn_channels, A = a->n_sizes * a->n_ratios;
    int n_features = a->returned[a->n_returned - 1] + 1, in = a->stem;
    char conv[96], bn[96];

    add_conv_bn(fx, "backbone.body.0.0", "backbone.body.0.1", a->stem, 3, 3);
    for (int b = 0; b < a->n_blocks && b + 1 < n_features; b++) {
        const mnv3_block_arch *k = &a->blocks[b];
        int j = 0;
        if (k->expanded != in) {
            g_snprintf(conv, sizeof conv, "backbone.body.%d.block.%d.0", b + 1, j);
            g_snprintf(bn, sizeof bn, "backbone.body.%d.block.%d.1", b + 1, j++);
            add_conv_bn(fx, conv, bn, k->expanded, in, 1);
        }
        g_snprintf(conv, sizeof conv, "backbone.body.%d.block.%d.0", b + 1, j);
        g_snprintf(bn, sizeof bn, "backbone.body.%d.block.%d.1", b + 1, j++);
        add_conv_bn(fx, conv, bn, k->expanded, 1, k->kernel); /* depthwise: [C][1][k][k] */
        if (k->se > 0) {
            g_snprintf(conv, sizeof conv, "backbone.body.%d.block.%d.fc1", b + 1, j);
            add_conv_bias(fx, conv, k->se, k->expanded, 1);
            g_snprintf(conv, sizeof conv, "backbone.body.%d.block.%d.fc2", b + 1, j++);
            add_conv_bias(fx, conv, k->expanded, k->se, 1);
        }
        g_snprintf(conv, sizeof conv, "backbone.body.%d.block.%d.0", b + 1, j);
        g_snprintf(bn, sizeof bn, "backbone.body.%d.block.%d.1", b + 1, j);
        add_conv_bn(fx, conv, bn, k->out, k->expanded, 1);
        in = k->out;
    }
    if (n_features == a->n_blocks + 2) {
        g_snprintf(conv, sizeof conv, "backbone.body.%d.0", a->n_blocks + 1);
        g_snprintf(bn, sizeof bn, "backbone.body.%d.1", a->n_blocks + 1);
        add_conv_bn(fx, conv, bn, a->last, in, 1);
    }
    for (int i = 0; i < a->n_returned; i++) {
        g_snprintf(conv, sizeof conv, "backbone.fpn.inner_blocks.%d.0", i);
        add_conv_bias(fx, conv, C, mnv3_feature_channels(a, a->returned[i]), 1);
        g_snprintf(conv, sizeof conv, "backbone.fpn.layer_blocks.%d.0", i);
        add_conv_bias(fx, conv, C, C, 3);
    }
    add_conv_bias(fx, "rpn.head.conv.0.0", C, C, 3);
    add_conv_bias(fx, "rpn.head.cls_logits", A, C, 1);
    add_conv_bias(fx, "rpn.head.bbox_pred", 4 * A, C, 1);
    add_linear(fx, "roi_heads.box_head.fc6", a->representation, C * a->roi_size * a->roi_size);
    add_linear(fx, "roi_heads.box_head.fc7", a->representation, a->representation);
    add_linear(fx, "roi_heads.box_predictor.cls_score", a->num_classes, a->representation);
    add_linear(fx, "roi_heads.box_predictor.bbox_pred", 4 * a->num_classes, a->representation);
    return fx;
}

gboolean fx_emulated(void)
{
    return g_strcmp0(g_getenv("VD_TEST_EMULATED"), "1") == 0;
}

gboolean fx_cpu_runs_fp16(const char **why)
{
    gboolean xnn = FALSE;
    const char *layers_why = NULL, *f16_why = NULL;
    GError *error = NULL;
    g_assert_true(vd_xnn_choose(&xnn, &layers_why, &error));
    g_assert_no_error(error);
    gboolean f16_kernels = vd_xnn_f16_supported(&f16_why);
    if (why != NULL)
        *why = f16_why;
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    return xnn && f16_kernels && (caps.arch != VD_CPU_ARCH_AARCH64 || caps.fp16);
}

keypoint_arch keypoint_tiny(void)
{
    keypoint_arch k = {
        .output_size = 4,
        .n_convs = 2,
        .conv_channels = {6, 5},
        .num_keypoints = 3,
        .deconv_kernel = 4,
        .deconv_stride = 2,
        .deconv_padding = 1,
        .up_scale = 2,
    };
    return k;
}

keypoint_arch keypoint_torchvision(void)
{
    keypoint_arch k = {
        .output_size = 14,
        .n_convs = 8,
        .conv_channels = {512, 512, 512, 512, 512, 512, 512, 512},
        .num_keypoints = 17,
        .deconv_kernel = 4,
        .deconv_stride = 2,
        .deconv_padding = 1,
        .up_scale = 2,
    };
    return k;
}

/* fx_tiny(@a) as a Keypoint R-CNN (engine/KEYPOINTRCNN.md): the keypoint head's 3x3
 * convolutions with bias (nn.Sequential indices 0, 2, ..., the ReLUs between),
 * the predictor's transposed convolution to the keypoints. */
fixture *fx_keypoint(const tiny_arch *a, const keypoint_arch *k)
{
    fixture *fx = fx_tiny(a);
    int in = a->fpn_channels;
    char conv[64];
    GString *head = g_string_new(NULL);

    fx_config_replace(fx, "\"architecture\":\"fasterrcnn\"",
                      "\"architecture\":\"keypointrcnn\",\"builder\":\"keypointrcnn_resnet50_fpn\"");
    g_string_printf(head,
                    "\"min_size\":0.01,\"keypoint_head\":{\"output_size\":%d,"
                    "\"sampling_ratio\":2,\"featmap_names\":[\"0\",\"1\",\"2\",\"3\"],"
                    "\"conv_channels\":[",
                    k->output_size);
    for (int j = 0; j < k->n_convs; j++)
        g_string_append_printf(head, "%s%d", j ? "," : "", k->conv_channels[j]);
    g_string_append_printf(head,
                           "],\"deconv_kernel\":%d,\"deconv_stride\":%d,\"deconv_padding\":%d,"
                           "\"up_scale\":%d}},\"num_keypoints\":%d",
                           k->deconv_kernel, k->deconv_stride, k->deconv_padding, k->up_scale,
                           k->num_keypoints);
    fx_config_replace(fx, "\"min_size\":0.01}", head->str);
    g_string_free(head, TRUE);
    for (int j = 0; j < k->n_convs; j++) {
        g_snprintf(conv, sizeof conv, "roi_heads.keypoint_head.%d", 2 * j);
        add_conv_bias(fx, conv, k->conv_channels[j], in, 3);
        in = k->conv_channels[j];
    }
    /* ConvTranspose2d's weight: [in][out][k][k] */
    const gint64 wshape[4] = {in, k->num_keypoints, k->deconv_kernel, k->deconv_kernel},
                 bshape[1] = {k->num_keypoints};
    fx_add(fx, "roi_heads.keypoint_predictor.kps_score_lowres.weight", 4, wshape);
    fx_add(fx, "roi_heads.keypoint_predictor.kps_score_lowres.bias", 1, bshape);
    return fx;
}
