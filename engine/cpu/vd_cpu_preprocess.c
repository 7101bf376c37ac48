/* PLACEHOLDER: pre-processing being written (issue 2). */
#include "vd_cpu_ops.h"
gboolean vd_cpu_preprocess(const vd_image *image, const float mean[3], const float std[3],
                           int resized_h, int resized_w, int padded_h, int padded_w,
                           float *dst, GError **error)
{
    g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "not built yet");
    return FALSE;
}
