/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes the loader fuzzer's seed corpus (tests/fuzz/corpus/model): the engine
 * tests' tiny ResNet-FPN fixture cut to its first stage (a complete, loadable
 * model of about 85 000 parameters) stored as F16 and BF16, and its header
 * alone; and the tiny MobileNetV3-FPN fixture (mnv3_tiny()) as F16. Run from the fuzz build:
 * build-fuzz/tests/fuzz/make-model-seeds DIR. */
#include "../engine/model_fixture.h"

#include <glib/gstdio.h>
#include <string.h>

static void write_seed(const char *dtype, const char *name, gboolean mnv3)
{
    tiny_arch a = tiny_basic();
    mnv3_arch m = mnv3_tiny();
    fixture *fx = mnv3 ? fx_mnv3(&m) : fx_tiny(&a);
    for (guint i = 0; i < fx->tensors->len; i++) {
        fx_tensor *t = g_ptr_array_index(fx->tensors, i);
        g_free(t->dtype);
        t->dtype = g_strdup(dtype);
    }
    char *path = fx_write(fx, name);
    GError *error = NULL;
    vd_model *model = vd_model_load(path, &error);
    g_assert_no_error(error);
    vd_model_unref(model);
    g_print("%s\n", path);
    g_free(path);
    fx_free(fx);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        g_printerr("usage: make-model-seeds DIR\n");
        return 2;
    }
    tmp_dir = argv[1];
    write_seed("F16", "tiny-f16.safetensors", FALSE);
    write_seed("BF16", "tiny-bf16.safetensors", FALSE);
    write_seed("F16", "tiny-mobilenet-v3-f16.safetensors", TRUE);

    /* the header alone (the loader fails at the first tensor's data) */
    char *path = g_build_filename(tmp_dir, "tiny-f16.safetensors", NULL);
    char *contents = NULL;
    gsize length = 0;
    g_assert_true(g_file_get_contents(path, &contents, &length, NULL));
    guint64 header_len = 0;
    memcpy(&header_len, contents, 8);
    char *header_path = g_build_filename(tmp_dir, "header-only.safetensors", NULL);
    g_assert_true(g_file_set_contents(header_path, contents, (gssize)(8 + header_len), NULL));
    g_print("%s\n", header_path);
    g_free(header_path);
    g_free(contents);
    g_free(path);
    return 0;
}
