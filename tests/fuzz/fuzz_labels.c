/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer harness of the labels-file parser (gst/helpers/labels.c, the code
 * the visiondetect element runs): the first byte chooses the model's class count
 * (2..257), the rest is the file. The parser must return exactly that many names,
 * each one the engine accepts (vd_class_name_validate()) and none empty but the
 * background's, or fail with an error; never crash or leak (ASan + UBSan). */
#include "../../gst/helpers/labels.h"

#include <stdint.h>
#include <stdlib.h>
#include <visiondetect/vd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int num_classes = 2 + data[0];
    GError *error = NULL;
    gchar **names = gst_vision_labels_parse((const gchar *)data + 1, size - 1, num_classes, &error);
    if (names == NULL) {
        if (error == NULL)
            abort(); /* a failure must say why */
        g_error_free(error);
        return 0;
    }
    if (error != NULL || g_strv_length(names) != (guint)num_classes)
        abort();
    for (int c = 0; c < num_classes; c++)
        if (!vd_class_name_validate(names[c], -1, NULL) || (c > 0 && names[c][0] == '\0'))
            abort();
    g_strfreev(names);
    return 0;
}
