/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionjson's JSON values (see jsonformat.h). */
#include "jsonformat.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

void
gst_vision_json_append_number (GString * json, gdouble value, gint decimals)
{
  /* below 1e15: at most 16 integer digits, a sign, a point and 9 decimals
   * (G_ASCII_DTOSTR_BUF_SIZE, 39 bytes, used to cut values from 1e38 on short
   * into another number) */
  gchar buf[64];
  gchar format[8];
  gsize len;

  if (!isfinite (value)) {
    g_string_append (json, "null");
    return;
  }
  decimals = CLAMP (decimals, 0, 9);
  if (fabs (value) >= 1e15) {
    /* beyond the integers a double holds exactly, in exponent form: hundreds
     * of digits of a fixed-point form read back wrong in parsers that take
     * them for a 64-bit integer (json-glib does: the JSON fuzzer's 1e300 seed) */
    g_ascii_formatd (buf, sizeof (buf), "%.17g", value);
    g_string_append (json, buf);
    return;
  }
  g_snprintf (format, sizeof (format), "%%.%df", decimals);
  g_ascii_formatd (buf, sizeof (buf), format, value);
  len = strlen (buf);
  if (strchr (buf, '.') != NULL) {
    while (len > 0 && buf[len - 1] == '0')
      len--;
    if (len > 0 && buf[len - 1] == '.')
      len--;
  }
  buf[len] = '\0';
  if (strcmp (buf, "-0") == 0)
    strcpy (buf, "0");
  g_string_append (json, buf);
}

void
gst_vision_json_append_string (GString * json, const gchar * value)
{
  gchar *valid = g_utf8_validate (value, -1, NULL) ? NULL :
      g_utf8_make_valid (value, -1);
  JsonNode *node = json_node_init_string (json_node_alloc (),
      valid != NULL ? valid : value);
  gchar *quoted = json_to_string (node, FALSE);

  g_string_append (json, quoted);
  g_free (quoted);
  json_node_unref (node);
  g_free (valid);
}
