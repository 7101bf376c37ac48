/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the element tests (see vdtest.h). */
#include "vdtest.h"

#include <stdio.h>
#include <string.h>

#include <json-glib/json-glib.h>

gchar *
vdtest_fixture (const gchar * name)
{
  const gchar *dir = g_getenv ("VD_TEST_FIXTURES");
  gchar *path;

  fail_unless (dir != NULL, "VD_TEST_FIXTURES is not set (run through meson test)");
  path = g_build_filename (dir, name, NULL);
  fail_unless (g_file_test (path, G_FILE_TEST_IS_REGULAR),
      "missing test fixture %s (built by tests/gst/make_test_model.py)", path);
  return path;
}

gchar *
vdtest_model (void)
{
  return vdtest_fixture ("gst-test-model.safetensors");
}

GstBuffer *
vdtest_load_ppm (const gchar * path, GstVideoInfo * info)
{
  gchar *contents = NULL;
  gsize length = 0;
  gint width, height, maxval, header = 0;
  GstBuffer *buffer;
  GstMapInfo map;
  gint y;

  fail_unless (g_file_get_contents (path, &contents, &length, NULL),
      "cannot read %s", path);
  fail_unless (sscanf (contents, "P6 %d %d %d%n", &width, &height, &maxval,
          &header) == 3 && maxval == 255, "%s is not an 8-bit binary PPM", path);
  header++;                     /* the single whitespace after maxval */
  fail_unless ((gsize) header + (gsize) width * height * 3 <= length,
      "%s is truncated", path);

  gst_video_info_set_format (info, GST_VIDEO_FORMAT_RGB, width, height);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (info), NULL);
  gst_buffer_map (buffer, &map, GST_MAP_WRITE);
  memset (map.data, 0, map.size);
  for (y = 0; y < height; y++)
    memcpy (map.data + (gsize) y * GST_VIDEO_INFO_PLANE_STRIDE (info, 0),
        contents + header + (gsize) y * width * 3, (gsize) width * 3);
  gst_buffer_unmap (buffer, &map);
  g_free (contents);
  return buffer;
}

GstBuffer *
vdtest_load_frame (gint index, GstVideoInfo * info)
{
  gchar *name = g_strdup_printf ("frame-%d.ppm", index);
  gchar *path = vdtest_fixture (name);
  GstBuffer *buffer = vdtest_load_ppm (path, info);

  g_free (path);
  g_free (name);
  return buffer;
}

GstBuffer *
vdtest_timed_copy (GstBuffer * frame, GstClockTime pts)
{
  GstBuffer *in = gst_buffer_copy (frame);

  GST_BUFFER_PTS (in) = pts;
  GST_BUFFER_DURATION (in) = 33 * GST_MSECOND;
  return in;
}

gchar *
vdtest_detect_launch (gint threads, const gchar * extra_format, ...)
{
  gchar *model = vdtest_model ();
  gchar *extra, *launch;
  va_list args;

  va_start (args, extra_format);
  extra = g_strdup_vprintf (extra_format, args);
  va_end (args);
  launch = g_strdup_printf ("visiondetect model=\"%s\" threads=%d %s", model,
      threads, extra);
  g_free (extra);
  g_free (model);
  return launch;
}

GstHarness *
vdtest_new_detect (gint threads, const gchar * extra)
{
  gchar *launch = vdtest_detect_launch (threads, "%s", extra ? extra : "");
  GstHarness *h = gst_harness_new_parse (launch);

  g_free (launch);
  return h;
}

GArray *
vdtest_vd_detect (const gchar * model, const gchar * ppm, gdouble threshold,
    gint threads)
{
  const gchar *vd_detect = g_getenv ("VD_TEST_VD_DETECT");
  gchar threshold_str[G_ASCII_DTOSTR_BUF_SIZE];
  gchar *threads_str = g_strdup_printf ("%d", threads);
  gchar *out = NULL, *err = NULL;
  gint status = 0;
  GError *error = NULL;
  JsonParser *parser;
  JsonObject *root;
  JsonArray *dets;
  GArray *result = g_array_new (FALSE, TRUE, sizeof (VdTestDetection));
  guint i;
  const gchar *argv[] = { vd_detect, "--model", model, "--device", "cpu",
    "--threads", threads_str, "--threshold", threshold_str, "--json", ppm, NULL
  };

  fail_unless (vd_detect != NULL, "VD_TEST_VD_DETECT is not set");
  g_ascii_dtostr (threshold_str, sizeof (threshold_str), threshold);
  fail_unless (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_DEFAULT,
          NULL, NULL, &out, &err, &status, &error), "cannot run %s: %s",
      vd_detect, error ? error->message : "?");
  fail_unless (g_spawn_check_wait_status (status, NULL),
      "vd-detect failed (%d): %s", status, err);

  parser = json_parser_new ();
  fail_unless (json_parser_load_from_data (parser, out, -1, &error),
      "vd-detect printed invalid JSON: %s\n%s", error ? error->message : "",
      out);
  root = json_node_get_object (json_parser_get_root (parser));
  dets = json_object_get_array_member (root, "detections");
  for (i = 0; i < json_array_get_length (dets); i++) {
    JsonObject *o = json_array_get_object_element (dets, i);
    JsonArray *box = json_object_get_array_member (o, "box");
    VdTestDetection d;

    memset (&d, 0, sizeof (d));
    d.x1 = json_array_get_double_element (box, 0);
    d.y1 = json_array_get_double_element (box, 1);
    d.x2 = json_array_get_double_element (box, 2);
    d.y2 = json_array_get_double_element (box, 3);
    d.score = json_object_get_double_member (o, "score");
    d.label = json_object_get_int_member (o, "label");
    if (json_object_has_member (o, "label_name"))
      g_strlcpy (d.label_name, json_object_get_string_member (o, "label_name"),
          sizeof (d.label_name));
    g_array_append_val (result, d);
  }
  g_object_unref (parser);
  g_free (out);
  g_free (err);
  g_free (threads_str);
  return result;
}

void
vdtest_load_plugin (void)
{
  GstPlugin *plugin = gst_plugin_load_by_name ("visiondetect");

  fail_unless (plugin != NULL, "the visiondetect plugin is not on GST_PLUGIN_PATH");
  gst_object_unref (plugin);
}

GType
vdtest_detect_meta_api (void)
{
  GType api = g_type_from_name ("GstVisionDetectMetaAPI");

  fail_unless (api != 0, "GstVisionDetectMetaAPI is not registered");
  return api;
}

GstVisionDetectMeta *
vdtest_get_detect_meta (GstBuffer * buffer)
{
  return (GstVisionDetectMeta *) gst_buffer_get_meta (buffer,
      vdtest_detect_meta_api ());
}

GstVisionDetectMeta *
vdtest_add_detect_meta (GstBuffer * buffer, guint width, guint height)
{
  const GstMetaInfo *info = gst_meta_get_info ("GstVisionDetectMeta");
  GstVisionDetectMeta *meta;

  fail_unless (info != NULL, "GstVisionDetectMeta is not registered");
  meta = (GstVisionDetectMeta *) gst_buffer_add_meta (buffer, info, NULL);
  meta->width = width;
  meta->height = height;
  return meta;
}

void
vdtest_add_detection (GstVisionDetectMeta * meta, gdouble x, gdouble y,
    gdouble w, gdouble h, gdouble confidence, gint label_id,
    const gchar * label, gint roi_id)
{
  GstVisionDetection d;

  d.x = x;
  d.y = y;
  d.w = w;
  d.h = h;
  d.confidence = confidence;
  d.label_id = label_id;
  d.label = g_quark_from_string (label);
  d.roi_id = roi_id;
  d.object_id = 0;
  d.tracked = FALSE;
  g_array_append_val (meta->detections, d);
}

guint
vdtest_count_roi_metas (GstBuffer * buffer)
{
  gpointer state = NULL;
  guint n = 0;

  while (gst_buffer_iterate_meta_filtered (buffer, &state,
          GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE) != NULL)
    n++;
  return n;
}

GstVisionDetectInference
vdtest_inference_of (GstBuffer * buffer)
{
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (buffer);

  fail_unless (meta != NULL, "a frame without the companion meta");
  return meta->inference;
}

gboolean
vdtest_same_detections (GstBuffer * a, GstBuffer * b)
{
  GstVisionDetectMeta *ma = vdtest_get_detect_meta (a);
  GstVisionDetectMeta *mb = vdtest_get_detect_meta (b);
  guint i;

  fail_unless (ma != NULL && mb != NULL);
  if (ma->width != mb->width || ma->height != mb->height
      || ma->detections->len != mb->detections->len
      || vdtest_count_roi_metas (a) != vdtest_count_roi_metas (b))
    return FALSE;
  /* field by field: the struct has padding */
  for (i = 0; i < ma->detections->len; i++) {
    const GstVisionDetection *x =
        &g_array_index (ma->detections, GstVisionDetection, i);
    const GstVisionDetection *y =
        &g_array_index (mb->detections, GstVisionDetection, i);

    if (x->x != y->x || x->y != y->y || x->w != y->w || x->h != y->h
        || x->confidence != y->confidence || x->label_id != y->label_id
        || x->label != y->label || x->roi_id != y->roi_id)
      return FALSE;
  }
  return TRUE;
}

GList *
vdtest_run_pipeline (const gchar * description, const gchar * caps,
    GstBuffer ** buffers, guint n_buffers)
{
  GstHarness *h = gst_harness_new_parse (description);
  GList *out = NULL;
  guint i;

  gst_harness_set_src_caps_str (h, caps);
  for (i = 0; i < n_buffers; i++) {
    GstBuffer *outbuf;

    fail_unless_equals_int (gst_harness_push (h, gst_buffer_ref (buffers[i])),
        GST_FLOW_OK);
    outbuf = gst_harness_pull (h);
    fail_unless (outbuf != NULL, "no output buffer for input %u", i);
    out = g_list_append (out, outbuf);
  }
  gst_harness_teardown (h);
  return out;
}

gchar *
vdtest_pipeline_error (const gchar * launch)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (launch, &error);
  GstBus *bus;
  GstMessage *msg;
  gchar *result = NULL;

  fail_unless (pipeline != NULL, "cannot parse %s: %s", launch,
      error ? error->message : "");
  bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (bus, 120 * GST_SECOND,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  fail_unless (msg != NULL, "no EOS or error in 120 s: %s", launch);
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    gchar *debug = NULL;

    gst_message_parse_error (msg, &error, &debug);
    result = g_strdup_printf ("%s\n%s", error->message, debug ? debug : "");
    g_clear_error (&error);
    g_free (debug);
  }
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  return result;
}

gdouble
vdtest_iou (gdouble ax, gdouble ay, gdouble aw, gdouble ah,
    gdouble bx, gdouble by, gdouble bw, gdouble bh)
{
  gdouble ix = MIN (ax + aw, bx + bw) - MAX (ax, bx);
  gdouble iy = MIN (ay + ah, by + bh) - MAX (ay, by);
  gdouble inter, uni;

  if (ix <= 0 || iy <= 0)
    return 0.0;
  inter = ix * iy;
  uni = aw * ah + bw * bh - inter;
  return uni > 0 ? inter / uni : 0.0;
}

guint8 *
vdtest_decode_rle (JsonObject * segmentation, guint width, guint height)
{
  JsonArray *size = json_object_get_array_member (segmentation, "size");
  JsonArray *counts = json_object_get_array_member (segmentation, "counts");
  guint8 *frame = g_malloc0 ((gsize) width * height);
  guint64 at = 0;

  fail_unless_equals_int (json_array_get_int_element (size, 0), height);
  fail_unless_equals_int (json_array_get_int_element (size, 1), width);
  for (guint i = 0; i < json_array_get_length (counts); i++) {
    gint64 n = json_array_get_int_element (counts, i);

    fail_unless (n >= 0 && at + n <= (guint64) width * height);
    for (gint64 k = 0; k < n; k++, at++)        /* column-major */
      frame[(at % height) * width + at / height] = i % 2;
  }
  fail_unless_equals_int (at, (guint64) width * height);
  return frame;
}

guint8 *
vdtest_frame_bytes (GstBuffer * buffer, guint width, guint height,
    gint * stride)
{
  GstVideoInfo info;
  GstVideoFrame frame;
  guint8 *copy;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, width, height);
  fail_unless (gst_video_frame_map (&frame, &info, buffer, GST_MAP_READ));
  *stride = GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0);
  copy = g_memdup2 (GST_VIDEO_FRAME_PLANE_DATA (&frame, 0),
      (gsize) * stride * height);
  gst_video_frame_unmap (&frame);
  return copy;
}
