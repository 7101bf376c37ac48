/* PLACEHOLDER: the CUDA backend is being written (issue 4). */
#include "vd_config.h"
#include "vd_context_private.h"

gboolean vd_cuda_available(int device_index) { return FALSE; }
static void *cuda_create(vd_context *ctx, GError **error)
{
    g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "the CUDA backend is not built yet");
    return NULL;
}
static void cuda_destroy(void *state) {}
static gboolean cuda_detect(void *state, vd_context *ctx, const vd_image *images, int n,
                            vd_result *results, GError **error) { return FALSE; }
const vd_backend vd_cuda_backend = {"cuda", cuda_create, cuda_destroy, cuda_detect};
