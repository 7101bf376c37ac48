/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's labels files: the parser, free of GStreamer (GLib and the
 * engine's public header only) so that the libFuzzer harness of tests/fuzz runs
 * the very code the element does. */
#ifndef GST_VISION_LABELS_H
#define GST_VISION_LABELS_H

#include <glib.h>

G_BEGIN_DECLS

/* The class names of a labels file's @length bytes at @contents for a model of
 * @num_classes classes (>= 2): a NULL-terminated array of @num_classes names
 * (free with g_strfreev()), or NULL with @error set (G_FILE_ERROR_INVAL) naming
 * the first line that is wrong. */
gchar **gst_vision_labels_parse (const gchar * contents, gsize length,
    gint num_classes, GError ** error);

G_END_DECLS

#endif /* GST_VISION_LABELS_H */
