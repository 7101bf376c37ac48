/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's labels files (see labels.h). */
#include "labels.h"

#include <string.h>
#include <visiondetect/vd.h>

/* The text of a labels file: one class name per line, either num_classes lines
 * (line 1 is the background class) or num_classes - 1 lines (class 1 first);
 * trailing whitespace and empty lines at the end are ignored. Every name must be
 * one the engine accepts in a model file (vd_class_name_validate(): UTF-8, no
 * NUL or control characters, a sane length), since it goes into the metadata
 * and the JSON as it is; the first bad line is named. */
gchar **
gst_vision_labels_parse (const gchar * contents, gsize length,
    gint num_classes, GError ** error)
{
  gchar *text;
  gchar **lines = NULL, **names = NULL;
  guint n_lines, i, first;
  const gchar *nul;

  /* a NUL byte would end the text early and shift every later name */
  nul = length > 0 ? memchr (contents, '\0', length) : NULL;
  if (nul != NULL) {
    guint line = 1;
    const gchar *p;

    for (p = contents; p < nul; p++)
      line += *p == '\n';
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "line %u contains a NUL byte", line);
    return NULL;
  }

  text = g_strndup (length > 0 ? contents : "", length);
  lines = g_strsplit (text, "\n", -1);
  g_free (text);
  for (i = 0; lines[i] != NULL; i++)
    g_strchomp (lines[i]);
  n_lines = g_strv_length (lines);
  while (n_lines > 0 && lines[n_lines - 1][0] == '\0')
    n_lines--;

  if (n_lines == (guint) num_classes)
    first = 0;
  else if (n_lines + 1 == (guint) num_classes)
    first = 1;
  else {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "it has %u names, the model has %d classes (%d lines with the "
        "background class, or %d without)", n_lines, num_classes - 1,
        num_classes, num_classes - 1);
    goto out_free_lines;
  }

  names = g_new0 (gchar *, num_classes + 1);
  names[0] = g_strdup (first == 1 ? "__background__" : lines[0]);
  for (i = 0; i < n_lines; i++) {
    GError *invalid = NULL;

    if (!vd_class_name_validate (lines[i], -1, &invalid)) {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
          "line %u is not a usable class name: %s", i + 1, invalid->message);
      g_error_free (invalid);
      g_clear_pointer (&names, g_strfreev);
      goto out_free_lines;
    }
  }
  for (i = 1; i < (guint) num_classes; i++) {
    const gchar *line = lines[i - first];

    if (line[0] == '\0') {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
          "line %u is empty", i - first + 1);
      g_clear_pointer (&names, g_strfreev);
      goto out_free_lines;
    }
    names[i] = g_strdup (line);
  }

out_free_lines:
  g_strfreev (lines);
  return names;
}
