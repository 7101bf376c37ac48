/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer harness of the model loader: any bytes as a model file must load or
 * fail with a VD_ERROR, never crash, read out of bounds or leak (the fuzz build
 * runs under AddressSanitizer and UBSan). The seeds (corpus/model) are a small but
 * complete model file in each storage type and its header alone; the engine
 * suite's fuzz test covers hand-made mutations of the same structure. */
#include "vd_model_private.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    vd_model *model = vd_model_load_bytes("fuzz-input", data, size, &error);
    if (model != NULL) {
        /* what a user of a loaded model reads */
        for (int c = 0; c < vd_model_num_classes(model); c++)
            if (vd_model_class_name(model, c) == NULL)
                abort();
        if (vd_model_description(model) == NULL)
            abort();
        vd_model_unref(model);
    } else if (error == NULL || error->domain != VD_ERROR) {
        abort(); /* a failure must say why, in the engine's domain */
    }
    g_clear_error(&error);
    return 0;
}
