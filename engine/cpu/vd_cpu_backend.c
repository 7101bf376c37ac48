/* PLACEHOLDER: CPU forward being written (issue 2). */
#include "vd_context_private.h"
static void *cpu_create(vd_context *ctx, GError **error)
{
    g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL, "not built yet");
    return NULL;
}
static void cpu_destroy(void *state) {}
static gboolean cpu_detect(void *state, vd_context *ctx, const vd_image *images, int n,
                           vd_result *results, GError **error) { return FALSE; }
const vd_backend vd_cpu_backend = {"cpu", cpu_create, cpu_destroy, cpu_detect};
