/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plugin's process-wide cache of loaded models: every visiondetect element
 * of a process that runs the same model file shares one vd_model (weights and
 * configuration are immutable and thread-safe), so N streams hold the host copy
 * of the weights once. Each element still has its own vd_context. */
#ifndef __GST_VISION_MODEL_CACHE_H__
#define __GST_VISION_MODEL_CACHE_H__

#include <glib.h>
#include <visiondetect/vd.h>

G_BEGIN_DECLS

/* Returns a reference to the model of @path, loading it unless an element
 * already holds the same file (same device and inode, size, modification and
 * change times: a file rewritten in place is loaded anew). @shared says which
 * happened.
 * Release with gst_vision_model_cache_release(). */
vd_model *gst_vision_model_cache_acquire (const gchar * path, gboolean * shared,
    GError ** error);

/* Drops an element's reference; the model is freed with its last user. */
void gst_vision_model_cache_release (vd_model * model);

G_END_DECLS

#endif /* __GST_VISION_MODEL_CACHE_H__ */
