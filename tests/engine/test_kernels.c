/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend runs oneDNN's optimised kernels for the processor it is on, never
 * its reference loops (hundreds to thousands of times slower): every convolution,
 * pooling, matrix product and eltwise primitive of a frame of the bundled model and
 * of a ResNet-50-FPN (the tiny fixture's generator at torchvision's real sizes,
 * random weights), of both MobileNetV3-Large-FPN variants, of fasterrcnn_resnet50_fpn_v2,
 * of maskrcnn_resnet50_fpn (with its mask branch) and of keypointrcnn_resnet50_fpn
 * (with its keypoint branch) is checked by the
 * implementation name oneDNN gives it
 * (vd_context_kernels()). bf16 runs only where the processor has it natively, and
 * is refused clearly elsewhere (on aarch64, naming the reference implementations
 * oneDNN gives it, and failing where oneDNN gives kernels of its own there).
 * Where oneDNN has only reference loops (aarch64 with Advanced SIMD alone) every
 * such layer runs XNNPACK's float32 operators
 * instead, int8's quantised convolutions its per-channel int8 operators (qs8_qc8w,
 * qd8_f32_qc8w; where the processor has the dot product, else int8 is refused
 * naming it), and bf16 is refused naming it; VD_CPU_LAYERS=xnnpack (the
 * kernels-xnnpack run) makes that path run on any machine whose build has XNNPACK.
 * fp16 runs there where XNNPACK has fp16 kernels for the CPU (aarch64 with the FP16
 * arithmetic, x86 with AVX2 and F16C): every such layer is then XNNPACK's _f16
 * operator ("xnnpack:f16"; the mask and keypoint branches stay float32, as in bf16); elsewhere
 * (oneDNN's layers, a build without XNNPACK) fp16 is refused naming the cause.
 *
 * meson runs this test natively and again with oneDNN capped (ONEDNN_MAX_CPU_ISA)
 * at AVX512_CORE, AVX2 and SSE41, so that one machine proves the paths of the
 * smaller ones; VD_TEST_ISA names the ISA a capped run expects, and a run whose cap
 * is above what the machine has, or is what it has (the native run again), skips with
 * exit 77. */
#include "cpu/vd_cpu_isa.h"
#include "cpu/vd_cpu_layers.h"
#include "cpu/vd_cpu_xnnpack.h"
#include "model_fixture.h"
#include "vd_config.h"
#include "vd_context_private.h"

#include <glib/gstdio.h>
#include <string.h>

/* what the CPU backend reads of this processor (oneDNN's ISA, capped) */
static vd_cpu_caps cpu_caps(void)
{
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    return caps;
}

#define FRAME_W 640
#define FRAME_H 480

/* A deterministic frame with structure at several scales (gradients, a grid of
 * blocks, noise), so that the RPN proposes boxes everywhere. */
static guint8 *test_frame(void)
{
    guint8 *pixels = g_malloc((gsize)FRAME_W * FRAME_H * 3);
    guint32 state = 12345;
    for (int y = 0; y < FRAME_H; y++)
        for (int x = 0; x < FRAME_W; x++) {
            state = state * 1664525u + 1013904223u;
            guint8 *p = pixels + ((gsize)y * FRAME_W + x) * 3;
            int block = ((x / 40) + (y / 40)) % 3;
            p[0] = (guint8)((x * 255) / FRAME_W);
            p[1] = (guint8)(block * 100 + (state >> 28));
            p[2] = (guint8)((y * 255) / FRAME_H);
        }
    return pixels;
}

/* Where meson asks for small frames (VD_TEST_SMALL=1: the capped and forced-layout
 * runs, every run under a sanitizer) @model runs at a small size: 128/192 pixels, 32
 * proposals, 8 detections; under emulation (VD_TEST_EMULATED=1: tests/debian13-
 * arm64.sh's runs under qemu-user, a hundred times slower than native) at 64/96
 * pixels, 8 proposals, 4 detections, where a frame's arithmetic is what the run's time
 * is. Which kernel a layer gets depends on its channels, kernel and stride, which
 * stay, not on the image's size or the number of boxes (docs/testing.md: the same
 * implementations, layer for layer, at each size); the native runs keep the models'
 * sizes. */
static gboolean emulated(void)
{
    return fx_emulated();
}

static gboolean small_frames(void)
{
    return emulated() || g_strcmp0(g_getenv("VD_TEST_SMALL"), "1") == 0;
}

static vd_model *for_this_run(vd_model *model)
{
    /* the short side and the cap, then the RPN's top-n before and after NMS and the
     * detections, each at most this */
    static const int emulated_sizes[] = {64, 96, 32, 8, 4}, small_sizes[] = {128, 192, 64, 32, 8};
    const int *s = emulated() ? emulated_sizes : small_frames() ? small_sizes : NULL;
    if (s != NULL) {
        vd_config *cfg = &model->config;
        cfg->min_size = s[0];
        cfg->max_size = s[1];
        cfg->rpn_pre_nms_top_n = MIN(cfg->rpn_pre_nms_top_n, s[2]);
        cfg->rpn_post_nms_top_n = MIN(cfg->rpn_post_nms_top_n, s[3]);
        cfg->detections_per_img = MIN(cfg->detections_per_img, s[4]);
    }
    return model;
}

static vd_model *bundled_model(void)
{
    GError *error = NULL;
    char *path = g_build_filename(VD_BUILD_MODELDIR, VD_DEFAULT_MODEL_NAME, NULL);
    vd_model *model = vd_model_load(path, &error);
    g_assert_no_error(error);
    g_free(path);
    return for_this_run(model);
}

/* torchvision's fasterrcnn_resnet50_fpn: ResNet-50 (Bottleneck, 3-4-6-3), all four
 * stages into a 256-channel FPN with the pool level, 3 anchors per location, 7x7
 * RoIs, a 1024-wide box head, 91 classes, 800/1333 resize. */
static vd_model *resnet50_fpn(void)
{
    tiny_arch a = resnet50_fpn_arch();
    fixture *fx = fx_tiny(&a);
    fx_config_replace(fx, "\"min_size\":96,\"max_size\":160", "\"min_size\":800,\"max_size\":1333");
    fx_randomize(fx, 50);
    GError *error = NULL;
    vd_model *model = fx_load(fx, &error);
    g_assert_no_error(error);
    fx_free(fx);
    return for_this_run(model);
}

/* torchvision's fasterrcnn_mobilenet_v3_large_fpn (low_res: _320_fpn): MobileNetV3-
 * Large (depthwise convolutions, hardswish, SE), features 13 and 16 into the FPN with
 * the pool level, 15 anchors per location, random weights. */
static vd_model *mobilenet_v3_fpn(gboolean low_res)
{
    mnv3_arch a = mnv3_large(low_res);
    fixture *fx = fx_mnv3(&a);
    fx_randomize(fx, 3);
    GError *error = NULL;
    vd_model *model = fx_load(fx, &error);
    g_assert_no_error(error);
    fx_free(fx);
    return for_this_run(model);
}

/* whether the CPU backend runs a context's layers on XNNPACK here (vd_xnn_choose_for:
 * an int8 one's on aarch64 where oneDNN has no int8 kernel too) */
static gboolean layers_xnnpack_for(vd_precision precision)
{
    gboolean use = FALSE;
    const char *why = NULL;
    GError *error = NULL;
    g_assert_true(vd_xnn_choose_for(precision == VD_PRECISION_INT8, &use, &why, &error));
    g_assert_no_error(error);
    return use;
}

static gboolean layers_xnnpack(void)
{
    return layers_xnnpack_for(VD_PRECISION_FP32);
}

static vd_context *cpu_context(vd_model *model, vd_precision precision, GError **error)
{
    vd_context_params params = vd_context_default_params();
    params.device = VD_DEVICE_CPU;
    params.precision = precision;
    params.n_threads = 2;
    /* every candidate: models with torchvision's random initialisation score about
     * 1/num_classes, below the default threshold, and the mask branch runs only on
     * detections */
    if (vd_model_has_masks(model))
        params.score_threshold = 0.0f;
    /* Keypoint R-CNN: the keypoint branch on 16 detections (one batch of rows; its
     * eight 512-channel convolutions over 100 would take seconds per frame) */
    if (vd_model_num_keypoints(model) > 0) {
        params.score_threshold = 0.0f;
        params.max_detections = 16;
    }
    return vd_context_new(model, &params, error);
}

/* Runs one frame and checks every primitive of the context. */
static void check_frame_kernels(vd_model *model, vd_precision precision)
{
    GError *error = NULL;
    vd_cpu_caps caps = cpu_caps();
    vd_context *ctx = cpu_context(model, precision, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_precision(ctx), ==, precision);

    /* the description says what runs: the layout is the ISA's block, or NHWC where
     * oneDNN's fastest kernels take it (always bf16 with AMX) */
    const char *describe = vd_context_describe(ctx);
    g_test_message("%s: %s", vd_model_description(model), describe);
    g_assert_true(g_str_has_prefix(describe, "cpu: oneDNN "));
    if (precision == VD_PRECISION_INT8)
        g_assert_nonnull(strstr(describe, ", int8 + "));
    else
        g_assert_nonnull(strstr(describe, precision == VD_PRECISION_BF16   ? ", bf16,"
                                          : precision == VD_PRECISION_FP16 ? ", fp16,"
                                                                           : ", fp32,"));
    g_assert_nonnull(strstr(describe, ", 2 threads,"));
    gboolean nhwc = strstr(describe, "layout nhwc,") != NULL;
    g_assert_true(nhwc || strstr(describe, caps.channel_block == 16 ? "layout nChw16c,"
                                                                    : "layout nChw8c,") != NULL);
    /* the ISA named as its architecture's: "ISA avx2", "ISA advanced_simd (asimd ...)" */
    char *isa = g_strdup_printf(", ISA %s,", caps.description);
    g_assert_nonnull(strstr(describe, isa));
    g_free(isa);
    /* XNNPACK's layers: NHWC activations, and the description says so */
    gboolean xnn = layers_xnnpack_for(precision);
    g_assert_true(!xnn || nhwc);
    g_assert_true((strstr(describe, ", layers XNNPACK (") != NULL) == xnn);
    /* AMX: bf16 convolutions run its kernels, which take NHWC */
    gboolean amx = precision == VD_PRECISION_BF16 && caps.amx;
    g_assert_true(!amx || nhwc);
    /* VD_CPU_LAYOUT forces one (the kernels-nhwc run); int8 is NHWC */
    if (precision == VD_PRECISION_INT8)
        g_assert_true(nhwc);
    else if (g_strcmp0(g_getenv("VD_CPU_LAYOUT"), "nhwc") == 0)
        g_assert_true(nhwc);
    else if (g_strcmp0(g_getenv("VD_CPU_LAYOUT"), "blocked") == 0)
        g_assert_false(nhwc);

    const vd_kernel_info *kernels = NULL;
    g_assert_cmpint(vd_context_kernels(ctx, &kernels), ==, 0); /* nothing before a frame */

    guint8 *pixels = test_frame();
    vd_image image = vd_image_rgb(pixels, FRAME_W, FRAME_H);
    vd_result result;
    g_assert_true(vd_detect(ctx, &image, 1, &result, &error));
    g_assert_no_error(error);
    if (vd_model_has_masks(model)) {
        g_assert_cmpint(result.n_detections, >, 0);
        for (int i = 0; i < result.n_detections; i++)
            g_assert_nonnull(result.detections[i].mask);
    }
    if (vd_model_num_keypoints(model) > 0) {
        g_assert_cmpint(result.n_detections, >, 0);
        for (int i = 0; i < result.n_detections; i++)
            g_assert_nonnull(result.detections[i].keypoints);
    }
    vd_result_clear(&result);

    int n = vd_context_kernels(ctx, &kernels);
    int n_conv = 0, n_pool = 0, n_matmul = 0, n_deconv = 0, n_bad = 0, n_slow = 0;
    /* the kernel every bf16 convolution must run: AMX's where the CPU has it
     * (VD_TEST_EXPECT_KERNEL names another, to see this check fail elsewhere) */
    const char *expect = g_getenv("VD_TEST_EXPECT_KERNEL");
    if (expect == NULL && amx)
        expect = "amx";
    if (precision != VD_PRECISION_BF16)
        expect = NULL;
    /* int8: the body's convolutions (the stem aside), the FPN's and the RPN's 3x3
     * ones run VNNI or AMX int8 kernels, named for their ISA */
    int n_int8 = 0, n_not_int8 = 0;
    gboolean stem = FALSE, fc6 = FALSE;
    gboolean roi_winograd =
        caps.own_winograd_ok && !xnn && g_strcmp0(g_getenv("VD_CPU_WINOGRAD"), "0") != 0;
    for (int i = 0; i < n; i++) {
        const vd_kernel_info *k = &kernels[i];
        gboolean checked = g_str_equal(k->kind, "convolution") || g_str_equal(k->kind, "pooling") ||
                           g_str_equal(k->kind, "matmul") || g_str_equal(k->kind, "eltwise") ||
                           g_str_equal(k->kind, "deconvolution");
        if (g_test_verbose())
            g_test_message("  %-12s %-48s %s", k->kind, k->layer, k->implementation);
        /* "ref:any", and a reference loop inside another scheme: "gemm:ref" (a
         * convolution as a matrix product on oneDNN's reference sgemm, what NHWC
         * gets on Advanced SIMD alone) */
        if (checked && (g_str_has_prefix(k->implementation, "ref") ||
                        strstr(k->implementation, ":ref") != NULL ||
                        strstr(k->implementation, "unknown") != NULL)) {
            g_test_message("reference kernel: %s %s: %s", k->kind, k->layer, k->implementation);
            n_bad++;
        }
        /* with XNNPACK every one of these layers is its operator */
        if (checked && xnn && !g_str_has_prefix(k->implementation, "xnnpack:")) {
            g_test_message("not XNNPACK's: %s %s: %s", k->kind, k->layer, k->implementation);
            n_bad++;
        }
        /* fp16: its _f16 operator, but for the mask branch (float32, as in bf16)
         * (VD_TEST_EXPECT_FP16_KERNEL names another, to see this check fail) */
        const char *want_f16 = g_getenv("VD_TEST_EXPECT_FP16_KERNEL");
        gboolean mask_layer = g_str_has_prefix(k->layer, "roi_heads.mask_") ||
                              g_str_has_prefix(k->layer, "roi_heads.keypoint_");
        if (checked && precision == VD_PRECISION_FP16 &&
            g_strcmp0(k->implementation, mask_layer ? "xnnpack:f32"
                                         : want_f16 ? want_f16
                                                    : "xnnpack:f16") != 0) {
            g_test_message("not the fp16 operator: %s %s: %s", k->kind, k->layer,
                           k->implementation);
            n_bad++;
        }
        /* the mask and keypoint heads' 3x3 convolutions: our F(2x2, 3x3) wherever
         * it runs (x86, oneDNN's layers; VD_CPU_WINOGRAD=0 turns it off) */
        if (roi_winograd && g_str_equal(k->kind, "convolution") &&
            (g_str_has_prefix(k->layer, "roi_heads.mask_head.") ||
             g_str_has_prefix(k->layer, "roi_heads.keypoint_head.")) &&
            g_strcmp0(k->implementation, "vd_winograd_2x3:sgemm") != 0) {
            g_test_message("not our Winograd: %s %s: %s", k->kind, k->layer, k->implementation);
            n_bad++;
        }
        /* depthwise convolutions (oneDNN's "dw" and "brdgmm" kernels) have no
         * matrix form for AMX; the mask and keypoint branches run float32 in every
         * context (their 3x3 convolutions our Winograd on oneDNN's sgemm) */
        if (expect != NULL && !mask_layer &&
            (g_str_equal(k->kind, "convolution") || g_str_equal(k->kind, "deconvolution")) &&
            strstr(k->implementation, expect) == NULL && strstr(k->implementation, "dw") == NULL &&
            strstr(k->implementation, "brdgmm") == NULL) {
            g_test_message("not a %s kernel: %s %s: %s", expect, k->kind, k->layer,
                           k->implementation);
            n_slow++;
        }
        /* int8's quantisations: XNNPACK's conversion where it runs the layers (a
         * oneDNN reorder is a reference loop on aarch64) */
        if (precision == VD_PRECISION_INT8 && xnn && strstr(k->layer, ".quantise") != NULL &&
            g_strcmp0(k->implementation, "xnnpack:convert_f32_qs8") != 0) {
            g_test_message("not XNNPACK's quantisation: %s %s: %s", k->kind, k->layer,
                           k->implementation);
            n_bad++;
        }
        /* the one-stage heads' 3x3 towers and their final convolutions too (P6 and
         * P7 are backbone.fpn.'s); SSD300:
         * every convolution of its feature extractor but the first (3 input channels) */
        gboolean ssd = model->config.detector == VD_DETECTOR_SSD;
        gboolean int8_layer = g_str_equal(k->kind, "convolution") &&
                              ((ssd &&
                                (g_str_has_prefix(k->layer, "backbone.features.") ||
                                 g_str_has_prefix(k->layer, "backbone.extra.")) &&
                                !g_str_equal(k->layer, model->config.ssd.body[0].ops[0].name)) ||
                               (g_str_has_prefix(k->layer, "backbone.body.layer")) ||
                               g_str_has_prefix(k->layer, "backbone.fpn.") ||
                               g_str_has_prefix(k->layer, "rpn.head.conv[") ||
                               g_str_has_prefix(k->layer, "head.classification_head.conv.") ||
                               g_str_has_prefix(k->layer, "head.regression_head.conv.") ||
                               g_str_has_prefix(k->layer, "head.classification_head.cls_logits[") ||
                               g_str_has_prefix(k->layer, "head.regression_head.bbox_reg"));
        if (precision == VD_PRECISION_INT8 && int8_layer) {
            /* AMX's where the CPU has it, else VNNI's (VD_TEST_EXPECT_INT8_KERNEL names
             * another, to see this check fail) */
            const char *want = g_getenv("VD_TEST_EXPECT_INT8_KERNEL");
            if (want == NULL)
                want = xnn ? "xnnpack:q" : caps.amx ? "amx" : "vnni";
            /* XNNPACK's: its per-channel int8 operators, qs8_qc8w (int8 output) or
             * qd8_f32_qc8w (float32 output) */
            if (xnn && strstr(k->implementation, "_qc8w") == NULL) {
                g_test_message("not XNNPACK's per-channel int8: %s %s: %s", k->kind, k->layer,
                               k->implementation);
                n_not_int8++;
            }
            if (strstr(k->implementation, want) == NULL) {
                g_test_message("not an int8 %s kernel: %s %s: %s", want, k->kind, k->layer,
                               k->implementation);
                n_not_int8++;
            }
            n_int8++;
        }
        n_conv += g_str_equal(k->kind, "convolution");
        n_pool += g_str_equal(k->kind, "pooling");
        n_matmul += g_str_equal(k->kind, "matmul");
        n_deconv += g_str_equal(k->kind, "deconvolution");
        stem = stem || g_str_equal(k->layer, "backbone.body.conv1") ||
               g_str_equal(k->layer, "backbone.body.0");
        fc6 = fc6 || g_str_has_prefix(k->layer, "roi_heads.box_head.fc6");
    }
    g_test_message("%d primitives: %d convolutions, %d pooling, %d matmul; %d reference", n, n_conv,
                   n_pool, n_matmul, n_bad);
    g_assert_cmpint(n_bad, ==, 0);
    g_assert_cmpint(n_slow, ==, 0);
    g_assert_cmpint(n_not_int8, ==, 0);
    if (precision == VD_PRECISION_INT8 && model->config.detector == VD_DETECTOR_SSD) {
        const vd_ssd_config *s = &model->config.ssd;
        int convs = 0;
        for (int i = 0; i < s->n_body + s->n_extra; i++) {
            const vd_ssd_layers *list = i < s->n_body ? &s->body[i] : &s->extra[i - s->n_body];
            for (int j = 0; j < list->n_ops; j++)
                convs += list->ops[j].kind == VD_SSD_CONV;
        }
        g_assert_cmpint(n_int8, ==, convs - 1);
    } else if (precision == VD_PRECISION_INT8) {
        int body = 0;
        for (int b = 0; b < model->resnet.n_blocks; b++)
            body += (model->config.resnet.block == VD_BLOCK_BOTTLENECK ? 3 : 2) +
                    model->resnet.blocks[b].has_downsample;
        /* the RPN's 3x3 convolution on every level; one-stage detectors: P6, P7 and
         * every tower layer of both branches on every level, and both branches'
         * final convolutions (FCOS: regression and centerness as one) */
        const vd_config *c = &model->config;
        int heads = c->detector == VD_DETECTOR_ONE_STAGE
                        ? 2 + c->n_fpn_levels * (c->head.n_cls_convs + c->head.n_reg_convs + 2)
                        : c->n_fpn_levels;
        g_assert_cmpint(n_int8, ==, body + 2 * c->n_returned_layers + heads);
    }
    const vd_config *cfg = &model->config;
    if (cfg->detector == VD_DETECTOR_SSD) {
        /* SSD, SSDlite: a convolution per conv layer of every layer list (heads
         * included), a pooling per max-pool, no product; the first convolution
         * (VGG16's conv1_1, MobileNetV3's stem) reported under its module's name */
        const vd_ssd_config *s = &cfg->ssd;
        const vd_ssd_layers *lists[4 * VD_MAX_FPN_LEVELS];
        int n_lists = 0, n_conv_layers = 0, n_pool_layers = 0;
        for (int i = 0; i < s->n_body; i++)
            lists[n_lists++] = &s->body[i];
        for (int i = 0; i < s->n_extra; i++)
            lists[n_lists++] = &s->extra[i];
        for (int l = 0; l < s->n_levels; l++) {
            lists[n_lists++] = &s->cls[l];
            lists[n_lists++] = &s->reg[l];
        }
        for (int i = 0; i < n_lists; i++)
            for (int j = 0; j < lists[i]->n_ops; j++) {
                n_conv_layers += lists[i]->ops[j].kind == VD_SSD_CONV;
                n_pool_layers += lists[i]->ops[j].kind == VD_SSD_MAXPOOL;
            }
        gboolean first = FALSE;
        for (int i = 0; i < n; i++)
            first = first || g_str_equal(kernels[i].layer, s->body[0].ops[0].name);
        g_assert_cmpint(n_conv, >=, n_conv_layers); /* Winograd splits add parts */
        g_assert_cmpint(n_pool, ==, n_pool_layers);
        g_assert_cmpint(n_matmul, ==, 0);
        g_assert_cmpint(n_deconv, ==, 0);
        g_assert_true(first);
        g_free(pixels);
        vd_context_free(ctx);
        return;
    }
    /* every layer reported: stem + backbone + FPN + RPN convolutions, max-pool, the
     * three box-head products; one-stage detectors: P6 and P7, the head's two
     * branches on every level, no product */
    gboolean mnv3 = cfg->backbone_type == VD_BACKBONE_MOBILENET_V3;
    gboolean one_stage = cfg->detector == VD_DETECTOR_ONE_STAGE;
    int expected_conv =
        1 + 2 * cfg->n_returned_layers +
        (one_stage ? 2 + cfg->n_fpn_levels * (cfg->head.n_cls_convs + cfg->head.n_reg_convs + 2)
                   : 2 * cfg->n_fpn_levels);
    for (int b = 0; !mnv3 && b < model->resnet.n_blocks; b++)
        expected_conv += (cfg->resnet.block == VD_BLOCK_BOTTLENECK ? 3 : 2) +
                         model->resnet.blocks[b].has_downsample;
    /* MobileNetV3: expand (where present), depthwise and project per block, the
     * last conv; no max-pool */
    for (int b = 0; mnv3 && b < cfg->mnv3.n_blocks; b++)
        expected_conv += 2 + (model->mnv3.blocks[b].expand.out_channels > 0);
    expected_conv += mnv3 && model->mnv3.last.out_channels > 0;
    /* fasterrcnn_resnet50_fpn_v2: the RPN's further 3x3 convolutions on every level,
     * the conv box head's convolutions; fc6 and the predictor, no fc7 */
    if (!one_stage)
        expected_conv += cfg->n_fpn_levels * (cfg->rpn_conv_depth - 1) + cfg->n_box_convs;
    /* Mask R-CNN: the mask head's convolutions and the logits, the deconvolution */
    if (cfg->has_masks)
        expected_conv += cfg->n_mask_convs + 1;
    /* Keypoint R-CNN: the keypoint head's convolutions, the deconvolution */
    if (cfg->has_keypoints)
        expected_conv += cfg->n_kp_convs;
    g_assert_cmpint(n_deconv, ==, cfg->has_masks || cfg->has_keypoints ? 1 : 0);
    g_assert_cmpint(n_conv, >=, expected_conv); /* Winograd splits add parts */
    g_assert_cmpint(n_pool, ==, mnv3 ? 0 : 1);
    g_assert_cmpint(n_matmul, ==, one_stage ? 0 : model->fc7.out_features > 0 ? 3 : 2);
    g_assert_true(stem);
    g_assert_true(fc6 != one_stage);

    g_free(pixels);
    vd_context_free(ctx);
}

static void test_bundled_fp32(void)
{
    vd_model *model = bundled_model();
    check_frame_kernels(model, VD_PRECISION_FP32);
    vd_model_unref(model);
}

static void test_resnet50_fp32(void)
{
    /* emulated, its layers are Mask R-CNN's without the mask branch (the same
     * body, FPN, RPN and box head): that test checks them where it runs */
    const char *exports = g_getenv("VD_TEST_EXPORTS");
    if (emulated() && exports != NULL && *exports != '\0') {
        g_test_skip("emulated: these layers are checked in maskrcnn-resnet50-fpn's");
        return;
    }
    vd_model *model = resnet50_fpn();
    check_frame_kernels(model, VD_PRECISION_FP32);
    vd_model_unref(model);
}

static void test_mobilenet_v3_fp32(void)
{
    for (int low_res = 0; low_res <= 1; low_res++) {
        vd_model *model = mobilenet_v3_fpn(low_res);
        check_frame_kernels(model, VD_PRECISION_FP32);
        vd_model_unref(model);
    }
}

/* The model of torchvision's @builder with its random initialisation, exported by
 * tools/export_torchvision.py with transform 512/853 into $VD_TEST_EXPORTS as
 * <builder>-512.safetensors (meson builds them once for every run of this test);
 * NULL where meson found no torchvision (VD_TEST_EXPORTS unset). Transform 512/853,
 * as the Mask R-CNN parity tests: what these models add to fasterrcnn_resnet50_fpn
 * (the RPN's further convolutions, the convolutions over the 1000 RoIs' and the
 * detections' features) has the shapes it has at 800/1333, the ResNet-50-FPN test
 * covers the backbone and FPN at 800/1333, and a frame costs half as much. */
#define NO_TORCHVISION                                                                             \
    "no torchvision exports (VD_TEST_EXPORTS: meson sets it where its Python has torchvision)"
static vd_model *exported_model(const char *builder)
{
    const char *dir = g_getenv("VD_TEST_EXPORTS");
    if (dir == NULL || *dir == '\0')
        return NULL;
    char *name = g_strconcat(builder, "-512.safetensors", NULL);
    char *path = g_build_filename(dir, name, NULL);
    GError *error = NULL;
    vd_model *model = vd_model_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpint(
        model->config.n_box_convs, ==,
        g_str_has_prefix(builder, "fasterrcnn_") && g_str_has_suffix(builder, "_v2") ? 4 : 0);
    /* SSD and SSDlite: their fixed size (the exporter takes no min/max size for them) */
    if (model->config.detector == VD_DETECTOR_SSD)
        g_assert_cmpint(model->config.fixed_h, ==, model->config.ssd.lite ? 320 : 300);
    else
        g_assert_cmpint(model->config.min_size, ==, 512);
    g_free(path);
    g_free(name);
    return for_this_run(model);
}

static vd_model *resnet50_fpn_v2(void)
{
    return exported_model("fasterrcnn_resnet50_fpn_v2");
}

/* Emulated, the families added after R-CNN's (Keypoint R-CNN, the RetinaNets,
 * FCOS, SSD300) are left out: on a NEON-only CPU every layer of a process runs on
 * XNNPACK (vd_xnn_choose), their layers are kinds the R-CNN models have (3x3
 * convolutions at stride 1 and 2, 1x1, the 4x4 transposed convolution) or that
 * kernels-xnnpack checks on XNNPACK's layers on x86 (the Debian 13 run: SSD300's
 * dilated fc6 and ceil_mode max-pool), and each of their frames takes minutes under
 * qemu. SSDlite320 (about 1 GFLOP) stays in fp32 (its ReLU6 convolutions on the
 * NEON kernels): 6.7-15 s under qemu's neoverse-n1 on the shared 2-core machine. */
static gboolean left_out_emulated(const char *builder)
{
    static const char *const later[] = {"keypointrcnn_resnet50_fpn", "retinanet_resnet50_fpn",
                                        "retinanet_resnet50_fpn_v2", "fcos_resnet50_fpn",
                                        "ssd300_vgg16"};
    if (!emulated())
        return FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(later); i++)
        if (g_str_equal(builder, later[i]))
            return TRUE;
    return FALSE;
}

/* The fp32 frame kernels of the exported model of @builder (skipped without
 * torchvision, and emulated for the later families). */
static void check_exported(const char *builder)
{
    if (left_out_emulated(builder)) {
        g_test_skip("emulated: this family's layers are checked natively (kernels-xnnpack)");
        return;
    }
    vd_model *model = exported_model(builder);
    if (model == NULL) {
        g_test_skip(NO_TORCHVISION);
        return;
    }
    check_frame_kernels(model, VD_PRECISION_FP32);
    vd_model_unref(model);
}

/* fasterrcnn_resnet50_fpn_v2: its RPN's second convolution and the conv box head's
 * batched convolutions over the RoIs are optimised kernels too. */
static void test_resnet50_v2_fp32(void)
{
    /* emulated, its kinds of layer are Mask R-CNN's in float32 (3x3 and 1x1
     * convolutions, the convolutions over a batch of RoIs, the linear layers),
     * which that test checks, and its own in fp16, which /kernels/fp16 checks on
     * v2 itself: its float32 frame took 70 of the emulated run's seconds */
    const char *exports = g_getenv("VD_TEST_EXPORTS");
    if (emulated() && exports != NULL && *exports != '\0') {
        g_test_skip("emulated: these layers are checked in maskrcnn-resnet50-fpn's fp32 and in "
                    "its own fp16");
        return;
    }
    check_exported("fasterrcnn_resnet50_fpn_v2");
}

/* maskrcnn_resnet50_fpn (engine/MASKRCNN.md): the mask head's batched
 * convolutions, the transposed convolution and the logits convolution over the
 * detections are optimised kernels. maskrcnn_resnet50_fpn_v2 runs the same
 * mask-branch primitives (its norms are folded into the convolutions' weights)
 * after fasterrcnn_resnet50_fpn_v2's, which the test above covers. */
static void test_maskrcnn_fp32(void)
{
    check_exported("maskrcnn_resnet50_fpn");
}

/* keypointrcnn_resnet50_fpn (engine/KEYPOINTRCNN.md): the keypoint head's batched
 * 3x3 convolutions and its 4x4 stride-2 transposed convolution to the 17 keypoints
 * over the detections are optimised kernels. */
static void test_keypointrcnn_fp32(void)
{
    check_exported("keypointrcnn_resnet50_fpn");
}

/* retinanet_resnet50_fpn (engine/RETINANET.md): P6 and P7 and the dense head's
 * convolutions on all five levels (256 channels, the logits' 9 x 91 and the
 * deltas' 36 padded to the channel block) are optimised kernels. */
static void test_retinanet_fp32(void)
{
    check_exported("retinanet_resnet50_fpn");
}

/* retinanet_resnet50_fpn_v2: P6 from C5 (2048 input channels) and the head's
 * convolutions without bias (its GroupNorm is a plain-C step, no primitive). */
static void test_retinanet_v2_fp32(void)
{
    check_exported("retinanet_resnet50_fpn_v2");
}

/* fcos_resnet50_fpn: the regression's last convolution has bbox_reg's and
 * bbox_ctrness's outputs (4 + 1, padded to the channel block). */
static void test_fcos_fp32(void)
{
    check_exported("fcos_resnet50_fpn");
}

/* ssd300_vgg16 (engine/SSD.md): VGG16's convolutions (conv1_1 on the 3-channel
 * input, fc6 dilated by 6), its max-pools (the third with ceil_mode: padding on the
 * bottom and right), the extras' convolutions without padding down to 1x1, the
 * heads' 3x3 convolutions with 4 or 6 x 91 outputs padded to the channel block. On
 * XNNPACK's layers (kernels-xnnpack) every one of them is XNNPACK's operator. */
static void test_ssd300_fp32(void)
{
    check_exported("ssd300_vgg16");
}

/* ssdlite320_mobilenet_v3_large: MobileNetV3's and the extras' depthwise and 1x1
 * convolutions with ReLU6 or hardswish fused, the inverted residuals' sum, the
 * heads' depthwise 3x3 + ReLU6 and 1x1 convolutions (XNNPACK's, ReLU6 its clamp,
 * in kernels-xnnpack). */
static void test_ssdlite_fp32(void)
{
    check_exported("ssdlite320_mobilenet_v3_large");
}

/* On aarch64 bf16 is refused because oneDNN has only reference loops for it there
 * (Debian's oneDNN, without Arm Compute Library, BF16 processor or not): the refusal
 * @message names what oneDNN gave when asked, and this fails where oneDNN gives the
 * bf16 layers kernels of its own for this CPU, which is when bf16 should run here
 * (after x86's accuracy gate, checked emulated as tests/arm64/int8-accuracy.sh
 * checks int8's). */
static void check_bf16_refusal_aarch64(const char *message)
{
    GError *error = NULL;
    vd_layers_bf16_probe probe;
    g_assert_true(vd_layers_probe_bf16(&probe, &error));
    g_assert_no_error(error);
    g_test_message("oneDNN's bf16 here: convolution %s, matmul %s", probe.conv, probe.matmul);
    g_assert_nonnull(strstr(message, probe.conv));
    g_assert_nonnull(strstr(message, probe.matmul));
    g_assert_nonnull(strstr(message, cpu_caps().bf16 ? "has BF16" : "has no BF16"));
    if (probe.native)
        g_error("oneDNN has bf16 kernels for this aarch64 CPU (convolution %s, matmul %s): "
                "bf16 should run here",
                probe.conv, probe.matmul);
    /* the names a reference implementation goes by, on this architecture */
    g_assert_true(vd_layers_impl_is_reference("ref:any"));
    g_assert_true(vd_layers_impl_is_reference("gemm:jit:bf16"));
    g_assert_false(vd_layers_impl_is_reference("brgconv:sve_256"));
}

/* bf16 where the processor has it (AVX512_BF16, AMX), and AUTO picks it there;
 * elsewhere a clear refusal at context creation, and AUTO is float32. */
static void test_bf16(void)
{
    GError *error = NULL;
    vd_model *model = bundled_model();
    gboolean xnn = layers_xnnpack();
    gboolean native = cpu_caps().native_bf16 && !xnn;
    vd_context *ctx = cpu_context(model, VD_PRECISION_AUTO, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_precision(ctx), ==, native ? VD_PRECISION_BF16 : VD_PRECISION_FP32);
    vd_context_free(ctx);

    if (native) {
        check_frame_kernels(model, VD_PRECISION_BF16);
        vd_model *r50 = resnet50_fpn();
        check_frame_kernels(r50, VD_PRECISION_BF16);
        vd_model_unref(r50);
        for (int low_res = 0; low_res <= 1; low_res++) {
            vd_model *mnv3 = mobilenet_v3_fpn(low_res);
            check_frame_kernels(mnv3, VD_PRECISION_BF16);
            vd_model_unref(mnv3);
        }
        static const char *const one_stage[] = {"retinanet_resnet50_fpn",
                                                "retinanet_resnet50_fpn_v2", "fcos_resnet50_fpn",
                                                "ssd300_vgg16", "ssdlite320_mobilenet_v3_large"};
        for (size_t i = 0; i < G_N_ELEMENTS(one_stage); i++) {
            /* emulated, SSD's are left out as in fp32 */
            if (g_str_has_prefix(one_stage[i], "ssd") && left_out_emulated(one_stage[i]))
                continue;
            vd_model *retinanet = exported_model(one_stage[i]);
            if (retinanet != NULL) {
                check_frame_kernels(retinanet, VD_PRECISION_BF16);
                vd_model_unref(retinanet);
            }
        }
        /* v2's conv box head runs bf16 convolutions over the RoIs' bf16 features */
        vd_model *v2 = resnet50_fpn_v2();
        if (v2 != NULL) {
            check_frame_kernels(v2, VD_PRECISION_BF16);
            vd_model_unref(v2);
        } else {
            g_test_message("fasterrcnn_resnet50_fpn_v2 not checked: " NO_TORCHVISION);
        }
        /* Keypoint R-CNN: bf16 body, FPN, RPN and box head, its keypoint branch in
         * float32 on the bf16 features */
        vd_model *kp = exported_model("keypointrcnn_resnet50_fpn");
        if (kp != NULL) {
            check_frame_kernels(kp, VD_PRECISION_BF16);
            vd_model_unref(kp);
        } else {
            g_test_message("keypointrcnn_resnet50_fpn not checked: " NO_TORCHVISION);
        }
    } else {
        g_assert_null(cpu_context(model, VD_PRECISION_BF16, &error));
        g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
        g_test_message("bf16 refused: %s", error->message);
        g_assert_nonnull(strstr(error->message, "bf16"));
        /* the cause: the ISA, or XNNPACK's float32 layers where the ISA has it */
        g_assert_nonnull(
            strstr(error->message, cpu_caps().native_bf16 ? "XNNPACK" : "AVX512_BF16"));
        if (cpu_caps().arch == VD_CPU_ARCH_AARCH64)
            check_bf16_refusal_aarch64(error->message);
        g_clear_error(&error);
    }
    vd_model_unref(model);
}

/* fp16 where the layers run XNNPACK and it has fp16 kernels for this CPU (and, on
 * aarch64, the CPU has the FP16 arithmetic), every layer then XNNPACK's _f16
 * operator; AUTO stays fp32 there. Elsewhere a clear refusal naming the cause. */
static void test_fp16(void)
{
    GError *error = NULL;
    vd_model *model = bundled_model();
    vd_cpu_caps caps = cpu_caps();
    gboolean xnn = layers_xnnpack();
    const char *f16_why = NULL;
    gboolean runs = fx_cpu_runs_fp16(&f16_why);
    g_test_message("XNNPACK's fp16: %s", f16_why);
    if (xnn) {
        vd_context *ctx = cpu_context(model, VD_PRECISION_AUTO, &error);
        g_assert_no_error(error);
        g_assert_cmpint(vd_context_precision(ctx), ==, VD_PRECISION_FP32);
        vd_context_free(ctx);
    }
    if (runs) {
        check_frame_kernels(model, VD_PRECISION_FP16);
        /* emulated, ResNet-50-FPN's layers are checked in v2 and Mask R-CNN (the
         * same body and FPN), MobileNetV3-Large-FPN's in its 320 builder's (the
         * same layers at another size): each frame there takes a minute */
        if (!emulated()) {
            vd_model *r50 = resnet50_fpn();
            check_frame_kernels(r50, VD_PRECISION_FP16);
            vd_model_unref(r50);
        }
        for (int low_res = emulated() ? 1 : 0; low_res <= 1; low_res++) {
            vd_model *mnv3 = mobilenet_v3_fpn(low_res);
            check_frame_kernels(mnv3, VD_PRECISION_FP16);
            vd_model_unref(mnv3);
        }
        /* v2's conv box head: fp16 convolutions over the RoIs' fp16 features; Mask
         * R-CNN: its mask branch in float32 (emulated, left out: its fp16 layers
         * are v2's body and FPN and MobileNetV3's box head, its float32 mask
         * branch the fp32 run's, and its frame took two of the run's minutes);
         * SSDlite and SSD300: every layer fp16, the heads' last convolutions
         * widened to float32 (emulated, left out: SSD300 as in fp32, SSDlite to
         * keep its cost there under half a minute) */
        const char *builders[] = {"fasterrcnn_resnet50_fpn_v2", "maskrcnn_resnet50_fpn",
                                  "keypointrcnn_resnet50_fpn", "ssdlite320_mobilenet_v3_large",
                                  "ssd300_vgg16"};
        for (guint i = 0; i < G_N_ELEMENTS(builders); i++) {
            if (left_out_emulated(builders[i]) ||
                (emulated() && (g_str_equal(builders[i], "maskrcnn_resnet50_fpn") ||
                                g_str_has_prefix(builders[i], "ssd")))) {
                g_test_message("emulated: %s left out", builders[i]);
                continue;
            }
            vd_model *m = exported_model(builders[i]);
            if (m != NULL) {
                check_frame_kernels(m, VD_PRECISION_FP16);
                vd_model_unref(m);
            } else {
                g_test_message("%s not checked: " NO_TORCHVISION, builders[i]);
            }
        }
    } else {
        g_assert_null(cpu_context(model, VD_PRECISION_FP16, &error));
        g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
        g_test_message("fp16 refused: %s", error->message);
        g_assert_true(g_str_has_prefix(error->message, "precision fp16 needs XNNPACK's layers and "
                                                       "the CPU's FP16 arithmetic"));
        /* the cause: oneDNN's layers (and a build without XNNPACK), no FP16
         * arithmetic, or XNNPACK without fp16 kernels for this CPU */
        if (!xnn)
            g_assert_nonnull(strstr(error->message, "the CPU backend's layers run oneDNN here"));
        if (!vd_xnn_built())
            g_assert_nonnull(strstr(error->message, "this build has no XNNPACK"));
        if (xnn && caps.arch == VD_CPU_ARCH_AARCH64 && !caps.fp16)
            g_assert_nonnull(strstr(error->message, "without the FP16 arithmetic"));
        else if (xnn)
            g_assert_nonnull(strstr(error->message, f16_why));
        g_clear_error(&error);
    }
    vd_model_unref(model);
}

/* @model with an int8 calibration of the test frame (as vd-detect --calibrate
 * makes one, without the file). */
static void calibrate(vd_model *model)
{
    GError *error = NULL;
    vd_context_params params = vd_context_default_params();
    params.device = VD_DEVICE_CPU;
    params.n_threads = 2;
    params.calibrate = TRUE;
    vd_context *ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_precision(ctx), ==, VD_PRECISION_FP32);
    guint8 *pixels = test_frame();
    vd_image image = vd_image_rgb(pixels, FRAME_W, FRAME_H);
    vd_result result;
    g_assert_true(vd_detect(ctx, &image, 1, &result, &error));
    vd_result_clear(&result);
    char *calibration = vd_context_calibration(ctx, &error);
    g_assert_no_error(error);
    if (model->int8_ranges != NULL)
        g_hash_table_unref(model->int8_ranges);
    model->int8_ranges = vd_calibration_parse("test", calibration, &model->int8_frames, &error);
    g_assert_no_error(error);
    g_assert_cmpint(model->int8_frames, ==, 1);
    g_free(calibration);
    g_free(pixels);
    vd_context_free(ctx);
}

/* int8 where oneDNN runs VNNI (AVX512-VNNI, AVX-VNNI, AMX): every quantised
 * convolution on an int8 kernel of that ISA; on XNNPACK's layers where it runs
 * int8 (aarch64 with the dot product; x86, where the tests force it) every one on
 * its per-channel int8 operators and every quantisation its conversion, no
 * reference loop; elsewhere refused naming the cause. */
static void test_int8(void)
{
    GError *error = NULL;
    vd_model *model = bundled_model();
    calibrate(model);
    gboolean xnn = layers_xnnpack_for(VD_PRECISION_INT8);
    const char *int8_why = "";
    gboolean runs = xnn ? vd_xnn_int8_supported(&int8_why) : cpu_caps().int8;
    g_test_message("int8 on %s: %s", xnn ? "XNNPACK" : "oneDNN", runs ? "runs" : "refused");
    if (!runs) {
        /* the R-CNN family's and a one-stage detector's (a tiny RetinaNet, the same
         * check before any calibration is read) */
        fixture *fx = fx_tiny_retinanet(2, FALSE);
        vd_model *retinanet = fx_load(fx, &error);
        g_assert_no_error(error);
        fx_free(fx);
        vd_model *refused[2] = {model, retinanet};
        for (int i = 0; i < 2; i++) {
            g_assert_null(cpu_context(refused[i], VD_PRECISION_INT8, &error));
            g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
            g_test_message("int8 refused: %s", error->message);
            g_assert_nonnull(strstr(error->message, xnn ? "dot product" : "VNNI"));
            if (xnn && cpu_caps().dotprod)
                g_assert_nonnull(strstr(error->message, int8_why));
            g_clear_error(&error);
        }
        vd_model_unref(retinanet);
        vd_model_unref(model);
        return;
    }
    check_frame_kernels(model, VD_PRECISION_INT8);
    vd_model_unref(model);
    /* emulated, the bundled model alone (its BasicBlocks have both kinds of
     * residual sum; a Bottleneck's layers are the same operators): the others
     * would add a minute to the arm64 run */
    if (emulated()) {
        g_test_message("emulated: int8 checked on the bundled model alone");
        return;
    }
    vd_model *r50 = resnet50_fpn();
    calibrate(r50);
    check_frame_kernels(r50, VD_PRECISION_INT8);
    vd_model_unref(r50);
    /* v2, Mask R-CNN and Keypoint R-CNN: int8 backbone, FPN and RPN, their float
     * heads; the RetinaNets and FCOS: int8 backbone, FPN, P6 and P7 (from P5 and,
     * v2, from C5) and the heads' towers (v2 and FCOS: GroupNorm between them);
     * SSD300: VGG16 and the extras but the first convolution, float heads */
    const char *builders[] = {"fasterrcnn_resnet50_fpn_v2",
                              "maskrcnn_resnet50_fpn",
                              "keypointrcnn_resnet50_fpn",
                              "retinanet_resnet50_fpn",
                              "retinanet_resnet50_fpn_v2",
                              "fcos_resnet50_fpn",
                              "ssd300_vgg16"};
    for (guint i = 0; i < G_N_ELEMENTS(builders); i++) {
        /* SSD's max-pools and dilated convolution have no XNNPACK layer */
        if (g_str_has_prefix(builders[i], "ssd") && xnn) {
            g_test_message("%s not checked: SSD does not run on XNNPACK's layers", builders[i]);
            continue;
        }
        vd_model *m = exported_model(builders[i]);
        if (m == NULL) {
            g_test_message("%s not checked: " NO_TORCHVISION, builders[i]);
            continue;
        }
        calibrate(m);
        check_frame_kernels(m, VD_PRECISION_INT8);
        vd_model_unref(m);
    }
}

/* The ISA oneDNN runs uncapped, from this program run again without
 * ONEDNN_MAX_CPU_ISA (oneDNN reads the cap once per process). */
#define PRINT_NATIVE_ISA "--print-native-isa"
static dnnl_cpu_isa_t native_isa(const char *self)
{
    char *argv[] = {(char *)self, PRINT_NATIVE_ISA, NULL};
    char **envp = g_environ_unsetenv(g_get_environ(), "ONEDNN_MAX_CPU_ISA");
    char *out = NULL;
    int status = 0;
    GError *error = NULL;
    g_assert_true(
        g_spawn_sync(NULL, argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error));
    g_assert_no_error(error);
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    char *end = NULL;
    guint64 isa = g_ascii_strtoull(out, &end, 16);
    g_assert_true(end != out);
    g_free(out);
    g_strfreev(envp);
    return (dnnl_cpu_isa_t)isa;
}

int main(int argc, char **argv)
{
    GError *error = NULL;
    if (argc == 2 && g_str_equal(argv[1], PRINT_NATIVE_ISA)) {
        g_print("%x\n", (unsigned)vd_layers_isa());
        return 0;
    }
    g_test_init(&argc, &argv, NULL);

    /* a capped run whose cap is above the machine's ISA repeats the native run */
    const char *expect = g_getenv("VD_TEST_ISA");
    if (expect != NULL && *expect != '\0') {
        /* the cap's value as this architecture's oneDNN has it */
        dnnl_cpu_isa_t want = (dnnl_cpu_isa_t)vd_cpu_isa_value(vd_cpu_arch_native(), expect);
        g_assert_cmpuint(want, !=, 0);
        g_assert_cmpstr(g_getenv("ONEDNN_MAX_CPU_ISA"), ==, expect);
        if (vd_layers_isa() != want) {
            g_print("SKIP: this processor does not have %s (oneDNN runs ISA 0x%x here): the "
                    "native run covers it\n",
                    expect, (unsigned)vd_layers_isa());
            return 77;
        }
        if (native_isa(argv[0]) == want) {
            g_print("SKIP: this processor has no more than %s: the native run covers it\n", expect);
            return 77;
        }
    }

    tmp_dir = g_dir_make_tmp("vd-kernels-XXXXXX", &error);
    g_assert_no_error(error);
    g_test_add_func("/kernels/bundled/fp32", test_bundled_fp32);
    g_test_add_func("/kernels/resnet50-fpn/fp32", test_resnet50_fp32);
    g_test_add_func("/kernels/mobilenet-v3-large-fpn/fp32", test_mobilenet_v3_fp32);
    g_test_add_func("/kernels/resnet50-fpn-v2/fp32", test_resnet50_v2_fp32);
    g_test_add_func("/kernels/maskrcnn-resnet50-fpn/fp32", test_maskrcnn_fp32);
    g_test_add_func("/kernels/keypointrcnn-resnet50-fpn/fp32", test_keypointrcnn_fp32);
    g_test_add_func("/kernels/retinanet-resnet50-fpn/fp32", test_retinanet_fp32);
    g_test_add_func("/kernels/retinanet-resnet50-fpn-v2/fp32", test_retinanet_v2_fp32);
    g_test_add_func("/kernels/fcos-resnet50-fpn/fp32", test_fcos_fp32);
    g_test_add_func("/kernels/ssd300-vgg16/fp32", test_ssd300_fp32);
    g_test_add_func("/kernels/ssdlite320-mobilenet-v3-large/fp32", test_ssdlite_fp32);
    g_test_add_func("/kernels/bf16", test_bf16);
    g_test_add_func("/kernels/fp16", test_fp16);
    g_test_add_func("/kernels/int8", test_int8);
    int result = g_test_run();
    g_rmdir(tmp_dir);
    g_free(tmp_dir);
    return result;
}
