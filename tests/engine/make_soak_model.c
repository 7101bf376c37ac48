/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes the soak test's model (tests/gst/test_soak.c): the engine tests' tiny
 * ResNet-FPN fixture with random weights, resizing frames to 32..64 pixels, so
 * that a frame costs about a millisecond and 20 000 of them fit in a CI run.
 *   make-soak-model DIR        writes DIR/soak-tiny.safetensors
 *   make-soak-model DIR mask   writes DIR/mask-tiny.safetensors: the same as a
 *                              Mask R-CNN (fx_tiny_mask), for the element's mask
 *                              tests (tests/gst/test_visiondetect_masks.c)
 *   make-soak-model DIR keypoint   writes DIR/keypoint-tiny.safetensors: the same
 *                              as a Keypoint R-CNN (fx_keypoint with
 *                              keypoint_tiny: 3 keypoints, no names), for the
 *                              element chain's keypoint leak test (leaks-keypoints) */
#include "model_fixture.h"

#include <string.h>



int main(int argc, char **argv)
{
    gboolean mask = argc == 3 && strcmp(argv[2], "mask") == 0;
    gboolean keypoint = argc == 3 && strcmp(argv[2], "keypoint") == 0;
    if (argc != 2 && !mask && !keypoint) {
        g_printerr("usage: %s DIR [mask|keypoint]\n", argv[0]);
        return 2;
    }
    tmp_dir = argv[1];
    tiny_arch a = tiny_basic();
    /* 16 FPN channels, not the fixture's 8: oneDNN has no optimised 3x3 convolution
     * for 8 channels on AVX-512 (its reference loop made a frame 12 ms instead of
     * 0.8 ms), and the soak test's frames are what CI time is spent on */
    a.fpn_channels = 16;
    tiny_arch basic = tiny_basic();
    keypoint_arch k = keypoint_tiny();
    fixture *fx = mask       ? fx_tiny_mask(FALSE)
                  : keypoint ? fx_keypoint(&basic, &k)
                             : fx_tiny(&a);
    fx_randomize(fx, 11);
    const char *from = "\"min_size\":96,\"max_size\":160";
    char *at = strstr(fx->config, from);
    if (at == NULL) {
        g_printerr("the fixture's transform is not %s\n", from);
        return 1;
    }
    GString *config = g_string_new_len(fx->config, at - fx->config);
    g_string_append(config, "\"min_size\":32,\"max_size\":64");
    g_string_append(config, at + strlen(from));
    g_free(fx->config);
    fx->config = g_string_free(config, FALSE);

    char *path = fx_write(fx, mask       ? "mask-tiny.safetensors"
                              : keypoint ? "keypoint-tiny.safetensors"
                                         : "soak-tiny.safetensors");
    GError *error = NULL;
    vd_model *model = vd_model_load(path, &error);
    if (model == NULL) {
        g_printerr("%s: %s\n", path, error->message);
        return 1;
    }
    vd_model_unref(model);
    g_free(path);
    fx_free(fx);
    return 0;
}
