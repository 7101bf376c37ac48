/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes the models of the arm64 run's parity with the x86 engine
 * (tests/debian13-arm64.sh, phase "parity"; tests/arm64/parity.py compares): the
 * real architectures of torchvision's models with random weights (randomize()),
 * each with a transform, RPN and detection limits small enough for emulation
 * (qemu-user runs a hundred times slower than the machine):
 *
 *   make-parity-models DIR   writes into DIR
 *     mobilenet-v3-large-320-fpn.safetensors
 *                                           fasterrcnn_mobilenet_v3_large_320_fpn
 *     maskrcnn-resnet50-fpn.safetensors     maskrcnn_resnet50_fpn (its mask branch:
 *                                           14x14, four convolutions of 256,
 *                                           dim_reduced 256, 91 classes)
 *
 * (with the bundled model, which the parity runs too). fasterrcnn_resnet50_fpn is not
 * among them: every layer of it is Mask R-CNN's (the same body, FPN, RPN and box
 * head), and its own frames took a third of the emulated parity's time.
 *
 * Every layer keeps its channels, kernel and stride (what decides the kernels that
 * run it); only the image's size, the number of proposals and of detections are
 * smaller than torchvision's. Loaded back once each, so that a file the engine
 * rejects fails here. */
#include "model_fixture.h"

#include <string.h>

/* The transform of every model here: 128 pixels on the short side, 160 at most
 * (torchvision's 800/1333, 320/640 for the 320 variant): the parity's 320x240 frame
 * runs at 120x160 (padded to 128x160), its 360x480 one at 160x120 (160x128) */
#define PARITY_MIN_SIZE 128
#define PARITY_MAX_SIZE 160

/* A random network's ReLU features share a large positive mean, which random
 * classifier weights turn into one logit far above the others for every input: every
 * anchor's objectness and every detection's class score would be 1.0 in float32,
 * ties that leave the comparison nothing to check (and the order of the top-n
 * arbitrary). So the two classifiers (the RPN's objectness, the box predictor's
 * classes) have their weights centred on each output (which cancels the shared
 * mean), no bias, and the objectness a quarter of its weights: the proposals'
 * scores are then spread over about 0.55..0.97, the detections' over 0.07..0.97. */
static void calm_classifier(fixture *fx, const char *prefix, float gain)
{
    char name[96];
    g_snprintf(name, sizeof name, "%s.weight", prefix);
    fx_tensor *w = fx_find(fx, name);
    gsize row = w->n / (gsize)w->shape[0];
    for (gint64 o = 0; o < w->shape[0]; o++) {
        float *v = w->values + (gsize)o * row;
        double mean = 0.0;
        for (gsize i = 0; i < row; i++)
            mean += v[i];
        mean /= (double)row;
        for (gsize i = 0; i < row; i++)
            v[i] = (float)((v[i] - mean) * gain);
    }
    g_snprintf(name, sizeof name, "%s.bias", prefix);
    fx_tensor *b = fx_find(fx, name);
    memset(b->values, 0, b->n * sizeof(float));
}

static void randomize(fixture *fx, guint32 seed)
{
    fx_randomize(fx, seed);
    calm_classifier(fx, "rpn.head.cls_logits", 0.25f);
    calm_classifier(fx, "roi_heads.box_predictor.cls_score", 1.0f);
}

/* fx_tiny's transform and RPN limits (arch_config) as the parity's: 128/160,
 * torchvision's 1000 proposals a level before NMS and 32 after instead of its 1000
 * (the box head's first layer, 12544 x 1024, is 13 MMAC a proposal). Many proposals
 * before NMS keep every level's top-n cut far below the scores kept after it, where
 * a rank flipped between two near-equal scores would make a proposal one-sided that
 * the comparison cannot tell from a wrong one (the levels are not dumped). */
static void parity_limits(fixture *fx, int detections)
{
    char text[96];
    g_snprintf(text, sizeof text, "\"min_size\":%d,\"max_size\":%d", PARITY_MIN_SIZE,
               PARITY_MAX_SIZE);
    fx_config_replace(fx, "\"min_size\":96,\"max_size\":160", text);
    fx_config_replace(fx, "\"pre_nms_top_n\":1000,\"post_nms_top_n\":500",
                      "\"pre_nms_top_n\":1000,\"post_nms_top_n\":32");
    g_snprintf(text, sizeof text, "\"detections_per_img\":%d", detections);
    fx_config_replace(fx, "\"detections_per_img\":100", text);
}

static gboolean write_model(fixture *fx, const char *file_name)
{
    char *path = fx_write(fx, file_name);
    GError *error = NULL;
    vd_model *model = vd_model_load(path, &error);
    gboolean ok = model != NULL;

    if (ok)
        g_print("%s: %s\n", path, vd_model_description(model));
    else
        g_printerr("%s: %s\n", path, error->message);
    g_clear_error(&error);
    if (model != NULL)
        vd_model_unref(model);
    g_free(path);
    fx_free(fx);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        g_printerr("usage: %s DIR\n", argv[0]);
        return 2;
    }
    tmp_dir = argv[1];
    if (g_mkdir_with_parents(tmp_dir, 0755) != 0) {
        g_printerr("%s: cannot create %s\n", argv[0], tmp_dir);
        return 1;
    }
    gboolean ok = TRUE;

    /* fasterrcnn_mobilenet_v3_large_320_fpn (its RPN keeps 150 proposals a level
     * before NMS and 150 after: 32 after here, as above); 16 detections */
    mnv3_arch mnv3 = mnv3_large(TRUE);
    mnv3.min_size = PARITY_MIN_SIZE;
    mnv3.max_size = PARITY_MAX_SIZE;
    fixture *fx = fx_mnv3(&mnv3);
    randomize(fx, 3);
    fx_config_replace(fx, "\"pre_nms_top_n\":150,\"post_nms_top_n\":150",
                      "\"pre_nms_top_n\":150,\"post_nms_top_n\":32");
    fx_config_replace(fx, "\"detections_per_img\":100", "\"detections_per_img\":16");
    ok = write_model(fx, "mobilenet-v3-large-320-fpn.safetensors") && ok;

    /* maskrcnn_resnet50_fpn; 16 detections, each through the mask head (four 3x3
     * convolutions of 256 channels at 14x14: half a GMAC a detection). The CPU
     * backend runs the mask head on batches of 16 (BOX_ROWS_QUANTUM): 16 detections
     * cost what one does. */
    tiny_arch r50 = resnet50_fpn_arch();
    mask_arch mask = mask_torchvision();
    fx = fx_mask(&r50, &mask);
    randomize(fx, 91);
    parity_limits(fx, 16);
    ok = write_model(fx, "maskrcnn-resnet50-fpn.safetensors") && ok;

    return ok ? 0 : 1;
}
