/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionjson's JSON values, free of GStreamer (GLib and json-glib only) so that
 * the libFuzzer harness of tests/fuzz runs the very code the element does. */
#ifndef GST_VISION_JSON_FORMAT_H
#define GST_VISION_JSON_FORMAT_H

#include <glib.h>

G_BEGIN_DECLS

/* Appends @value as a JSON number with at most @decimals (0..9) decimals and no
 * trailing zeros (json-glib would print 17 significant digits:
 * 0.0075709999999999996), from 1e15 on in exponent form with 17 digits, or null
 * when it is not finite. */
void gst_vision_json_append_number (GString * json, gdouble value,
    gint decimals);

/* Appends @value as a JSON string, escaped by json-glib; a @value that is not
 * valid UTF-8 (a label another element set, say) has its invalid bytes replaced
 * by U+FFFD, so the line stays JSON. */
void gst_vision_json_append_string (GString * json, const gchar * value);

G_END_DECLS

#endif /* GST_VISION_JSON_FORMAT_H */
