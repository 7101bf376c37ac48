/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test helper for preprocess_vs_torch.py: runs vd_cpu_preprocess on a raw
 * packed RGB file with the ImageNet mean/std and writes the NHWC float32
 * [padded_h][padded_w][3] result; ARITHMETIC is "torch1" (the default) or "torch2",
 * as in a model file's "transform.resize_arithmetic".
 *   preprocess-dump IN.rgb WIDTH HEIGHT RESIZED_H RESIZED_W PADDED_H PADDED_W OUT.f32
 *                   [ARITHMETIC] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/vd_cpu_ops.h"

int main(int argc, char **argv)
{
    vd_resize_arithmetic arithmetic = VD_RESIZE_ARITHMETIC_TORCH1;
    if (argc == 10 && strcmp(argv[9], "torch2") == 0)
        arithmetic = VD_RESIZE_ARITHMETIC_TORCH2;
    else if (argc == 10 && strcmp(argv[9], "torch1") != 0)
        argc = 0;
    if (argc != 9 && argc != 10) {
        fprintf(stderr, "usage: %s IN.rgb W H RH RW PH PW OUT.f32 [torch1|torch2]\n", argv[0]);
        return 2;
    }
    int w = atoi(argv[2]), h = atoi(argv[3]);
    int rh = atoi(argv[4]), rw = atoi(argv[5]), ph = atoi(argv[6]), pw = atoi(argv[7]);
    const float mean[3] = {0.485f, 0.456f, 0.406f};
    const float std[3] = {0.229f, 0.224f, 0.225f};
    gchar *pixels = NULL;
    gsize length = 0;
    GError *error = NULL;
    if (!g_file_get_contents(argv[1], &pixels, &length, &error)) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    if (w <= 0 || h <= 0 || length != (gsize)w * h * 3) {
        fprintf(stderr, "%s: %zu bytes is not %dx%d RGB\n", argv[1], (size_t)length, w, h);
        return 1;
    }
    vd_image image = vd_image_rgb((const uint8_t *)pixels, w, h);
    gsize out_size = (gsize)ph * pw * 3 * sizeof(float);
    float *out = g_malloc(out_size);
    if (!vd_cpu_preprocess(&image, mean, std, arithmetic, rh, rw, ph, pw, out, &error) ||
        !g_file_set_contents(argv[8], (const gchar *)out, out_size, &error)) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    g_free(out);
    g_free(pixels);
    return 0;
}
