/* PLACEHOLDER: the model loader is being written (issue 2). */
#include "vd_model_private.h"

vd_model *vd_model_load(const char *path, GError **error)
{
    g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "model loading not built yet: %s", path);
    return NULL;
}
vd_model *vd_model_ref(vd_model *model) { g_atomic_int_inc(&model->ref_count); return model; }
void vd_model_unref(vd_model *model) { (void)model; }
int vd_model_num_classes(const vd_model *model) { return model->config.num_classes; }
const char *vd_model_class_name(const vd_model *model, int label) { return NULL; }
const char *vd_model_description(const vd_model *model) { return model->description; }
float vd_model_score_threshold(const vd_model *model) { return model->config.box_score_thresh; }
int vd_config_stage_channels(const vd_config *config, int stage) { return 0; }
