/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionjson: every line parses back and matches the metadata it was written
 * from; the bus messages carry the same JSON. Detections are put on the buffers
 * by hand, so no engine is needed. */
#include "vdtest.h"
#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#define WIDTH 320
#define HEIGHT 240

static const gchar *caps = "video/x-raw,format=RGB,width=320,height=240,"
    "framerate=25/1";

static GstBuffer *
new_frame (GstClockTime pts)
{
  GstVideoInfo info;
  GstBuffer *buffer;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, WIDTH, HEIGHT);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  GST_BUFFER_PTS (buffer) = pts;
  return buffer;
}

/* A "visionjson location=<@path> <properties>" harness, the properties
 * formatted from @props_format, @path out.jsonl in a new temporary folder
 * (@dir); remove_output removes and frees both. */
static GstHarness *
new_writer (gchar ** dir, gchar ** path, const gchar * props_format, ...)
{
  gchar *props, *launch;
  GstHarness *h;
  va_list args;

  va_start (args, props_format);
  props = g_strdup_vprintf (props_format, args);
  va_end (args);
  *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  *path = g_build_filename (*dir, "out.jsonl", NULL);
  launch = g_strdup_printf ("visionjson location=\"%s\"%s%s", *path,
      *props ? " " : "", props);
  h = gst_harness_new_parse (launch);
  g_free (launch);
  g_free (props);
  return h;
}

static void
remove_output (gchar * dir, gchar * path)
{
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (dir);
}

static void
check_object (JsonObject * o, gint id, const gchar * label, gint label_id,
    gdouble confidence, gdouble x, gdouble y, gdouble w, gdouble h)
{
  JsonObject *box = json_object_get_object_member (o, "box");
  JsonObject *rect = json_object_get_object_member (o, "rect");

  fail_unless_equals_int (json_object_get_int_member (o, "id"), id);
  fail_unless_equals_string (json_object_get_string_member (o, "label"), label);
  fail_unless_equals_int (json_object_get_int_member (o, "label_id"), label_id);
  /* written rounded to 1e-6 (normalised, confidence) and 1e-2 (pixels) */
  fail_unless (fabs (json_object_get_double_member (o, "confidence") -
          confidence) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (box, "x_min") - x / WIDTH)
      <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (box, "y_min") - y / HEIGHT)
      <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (box, "x_max") -
          (x + w) / WIDTH) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (box, "y_max") -
          (y + h) / HEIGHT) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (rect, "x") - x) <= 5.01e-3);
  fail_unless (fabs (json_object_get_double_member (rect, "y") - y) <= 5.01e-3);
  fail_unless (fabs (json_object_get_double_member (rect, "w") - w) <= 5.01e-3);
  fail_unless (fabs (json_object_get_double_member (rect, "h") - h) <= 5.01e-3);
}

static JsonObject *
parse_line (JsonParser * parser, const gchar * line)
{
  GError *error = NULL;

  fail_unless (json_parser_load_from_data (parser, line, -1, &error),
      "invalid JSON line: %s: %s", error ? error->message : "", line);
  fail_unless (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_node_get_object (json_parser_get_root (parser));
}

GST_START_TEST (test_lines_match_metadata)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "post-messages=true");
  GstElement *json = gst_harness_find_element (h, "visionjson");
  GstBus *bus = gst_bus_new ();
  GstBuffer *b0, *b1, *b2, *out;
  GstVisionDetectMeta *meta;
  GstVideoRegionOfInterestMeta *roi;
  gchar *contents, **lines;
  JsonParser *parser = json_parser_new ();
  JsonObject *o;
  JsonArray *objects;
  GstMessage *msg;
  guint i;

  gst_element_set_bus (json, bus);
  gst_harness_set_src_caps_str (h, caps);

  /* frame 0: two detections in the companion meta (and their ROI metas) */
  b0 = new_frame (0);
  meta = vdtest_add_detect_meta (b0, WIDTH, HEIGHT);
  vdtest_add_detection (meta, 10.125, 20.5, 100.25, 50.0, 0.9375, 2, "box", 0);
  vdtest_add_detection (meta, 150.0, 100.0, 30.5, 40.0, 0.123456789, 1,
      "ball \"quoted\"", 1);
  /* their ROI metas bare, as after GStreamer's scale transform: the companion
   * gives the exact box, confidence and label id */
  gst_buffer_add_video_region_of_interest_meta (b0, "box", 10, 21, 100,
      50)->id = 0;
  gst_buffer_add_video_region_of_interest_meta (b0, "ball \"quoted\"", 150,
      100, 31, 40)->id = 1;
  /* frame 1: nothing, and no timestamp; visiondetect skipped it */
  b1 = new_frame (GST_CLOCK_TIME_NONE);
  vdtest_add_detect_meta (b1, WIDTH, HEIGHT)->inference =
      GST_VISION_DETECT_SKIPPED_LATE;
  /* frame 2: ROI metas only, one with DL Streamer's params, one bare */
  b2 = new_frame (80 * GST_MSECOND);
  roi = gst_buffer_add_video_region_of_interest_meta (b2, "car", 32, 24, 64,
      48);
  roi->id = 3;
  gst_video_region_of_interest_meta_add_param (roi,
      gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE, 0.1,
          "y_min", G_TYPE_DOUBLE, 0.1, "x_max", G_TYPE_DOUBLE, 0.3,
          "y_max", G_TYPE_DOUBLE, 0.3, "confidence", G_TYPE_DOUBLE, 0.5,
          "label_id", G_TYPE_INT, 3, "label", G_TYPE_STRING, "car", NULL));
  roi = gst_buffer_add_video_region_of_interest_meta (b2, "face", 1, 2, 3, 4);
  roi->id = 4;

  fail_unless_equals_int (gst_harness_push (h, b0), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (h, b1), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (h, b2), GST_FLOW_OK);
  /* passthrough: the same buffers, metas untouched */
  for (i = 0; i < 3; i++) {
    out = gst_harness_pull (h);
    fail_unless (out != NULL);
    gst_buffer_unref (out);
  }
  gst_element_set_bus (json, NULL);
  gst_object_unref (json);
  gst_harness_teardown (h);     /* closes the file */

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  fail_unless (g_str_has_suffix (contents, "\n"));
  lines = g_strsplit (contents, "\n", -1);
  fail_unless_equals_int (g_strv_length (lines), 4);    /* and "" after the last \n */

  o = parse_line (parser, lines[0]);
  fail_unless_equals_int (json_object_get_int_member (o, "frame"), 0);
  fail_unless_equals_int (json_object_get_int_member (o, "pts"), 0);
  fail_unless_equals_int (json_object_get_int_member (o, "width"), WIDTH);
  fail_unless_equals_int (json_object_get_int_member (o, "height"), HEIGHT);
  fail_unless (json_object_get_boolean_member (o, "inferred"));
  fail_unless (!json_object_has_member (o, "skipped"));
  objects = json_object_get_array_member (o, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);
  check_object (json_array_get_object_element (objects, 0), 0, "box", 2,
      0.9375, 10.125, 20.5, 100.25, 50.0);
  check_object (json_array_get_object_element (objects, 1), 1,
      "ball \"quoted\"", 1, 0.123456789, 150.0, 100.0, 30.5, 40.0);

  o = parse_line (parser, lines[1]);
  fail_unless_equals_int (json_object_get_int_member (o, "frame"), 1);
  fail_unless (json_object_get_null_member (o, "pts"));
  fail_unless (!json_object_get_boolean_member (o, "inferred"));
  fail_unless_equals_string (json_object_get_string_member (o, "skipped"),
      "late");
  fail_unless_equals_int (json_array_get_length (json_object_get_array_member
          (o, "objects")), 0);

  o = parse_line (parser, lines[2]);
  fail_unless_equals_int (json_object_get_int_member (o, "frame"), 2);
  fail_unless_equals_int (json_object_get_int_member (o, "pts"),
      80 * GST_MSECOND);
  /* no visiondetect upstream: nothing said about inference */
  fail_unless (!json_object_has_member (o, "inferred"));
  objects = json_object_get_array_member (o, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);
  check_object (json_array_get_object_element (objects, 0), 3, "car", 3, 0.5,
      32.0, 24.0, 64.0, 48.0);
  check_object (json_array_get_object_element (objects, 1), 4, "face", -1,
      -1.0, 1.0, 2.0, 3.0, 4.0);

  /* the bus got the same lines */
  for (i = 0; i < 3; i++) {
    const GstStructure *s;
    guint64 frame;

    msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    fail_unless (msg != NULL, "no element message for frame %u", i);
    s = gst_message_get_structure (msg);
    fail_unless (gst_structure_has_name (s, "visionjson"));
    fail_unless (gst_structure_get_uint64 (s, "frame", &frame));
    fail_unless_equals_uint64 (frame, i);
    fail_unless_equals_string (gst_structure_get_string (s, "json"), lines[i]);
    gst_message_unref (msg);
  }

  g_strfreev (lines);
  g_free (contents);
  g_object_unref (parser);
  gst_object_unref (bus);
  remove_output (dir, path);
}

GST_END_TEST;

/* The frames of test_dlstreamer_format through visionjson with @format
 * ("visiondetect" or "dlstreamer"), in a segment whose stream time is 10 s
 * at its start (1 s): the lines written. */
static gchar **
stream_time_lines (const gchar * format)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "format=%s", format);
  GstVisionDetectMeta *meta;
  GstVideoRegionOfInterestMeta *roi;
  GstBuffer *b0, *b1, *b2;
  GstSegment segment;
  gchar *contents, **lines;

  gst_harness_set_src_caps_str (h, caps);
  gst_segment_init (&segment, GST_FORMAT_TIME);
  segment.start = GST_SECOND;
  segment.time = 10 * GST_SECOND;
  fail_unless (gst_harness_push_event (h, gst_event_new_segment (&segment)));

  /* frame 0: one of ours (the companion gives the exact box; tracked: the
   * "object_id" param), and another element's bare ROI */
  b0 = new_frame (1500 * GST_MSECOND);
  meta = vdtest_add_detect_meta (b0, WIDTH, HEIGHT);
  vdtest_add_detection (meta, 10.25, 20.5, 100.5, 50.0, 0.9375, 2, "box", 0);
  roi = gst_buffer_add_video_region_of_interest_meta (b0, "box", 10, 21, 100,
      50);
  roi->id = 0;
  gst_video_region_of_interest_meta_add_param (roi,
      gst_structure_new ("object_id", "id", G_TYPE_INT, 7, NULL));
  gst_buffer_add_video_region_of_interest_meta (b0, "face", 1, 2, 3, 4)->id =
      5;
  /* frame 1: nothing; frame 2: no timestamp */
  b1 = new_frame (1540 * GST_MSECOND);
  b2 = new_frame (GST_CLOCK_TIME_NONE);
  fail_unless_equals_int (gst_harness_push (h, b0), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (h, b1), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (h, b2), GST_FLOW_OK);
  gst_harness_teardown (h);     /* closes the file */

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  lines = g_strsplit (contents, "\n", -1);
  fail_unless_equals_int (g_strv_length (lines), 4);    /* and "" after the last \n */
  g_free (contents);
  remove_output (dir, path);
  return lines;
}

/* format=dlstreamer writes DL Streamer's gvametaconvert JSON (field names as
 * its jsonconverter.cpp writes them): resolution, timestamp in stream time,
 * objects absent on a frame without any; per object the ROI's integer
 * rectangle, region_id, id (tracked only), roi_type, and detection with the
 * normalised bounding_box, confidence, label_id and label, the last three
 * absent when unknown. The default format's stream_time is the same stream
 * time (pts 1.5 s in a segment starting at 1 s with time 10 s: 10.5 s). */
GST_START_TEST (test_dlstreamer_format)
{
  gchar **lines = stream_time_lines ("dlstreamer");
  JsonParser *parser = json_parser_new ();
  JsonObject *o, *obj, *det, *bb;
  JsonArray *objects;

  o = parse_line (parser, lines[0]);
  fail_unless (json_object_get_size (o) == 3, "%s", lines[0]);
  obj = json_object_get_object_member (o, "resolution");
  fail_unless_equals_int (json_object_get_int_member (obj, "width"), WIDTH);
  fail_unless_equals_int (json_object_get_int_member (obj, "height"), HEIGHT);
  fail_unless_equals_int64 (json_object_get_int_member (o, "timestamp"),
      10500 * GST_MSECOND);
  objects = json_object_get_array_member (o, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);

  obj = json_array_get_object_element (objects, 0);
  fail_unless (json_object_get_size (obj) == 8, "%s", lines[0]);
  fail_unless_equals_int (json_object_get_int_member (obj, "x"), 10);
  fail_unless_equals_int (json_object_get_int_member (obj, "y"), 21);
  fail_unless_equals_int (json_object_get_int_member (obj, "w"), 101);
  fail_unless_equals_int (json_object_get_int_member (obj, "h"), 50);
  fail_unless_equals_int (json_object_get_int_member (obj, "region_id"), 0);
  fail_unless_equals_int (json_object_get_int_member (obj, "id"), 7);
  fail_unless_equals_string (json_object_get_string_member (obj, "roi_type"),
      "box");
  det = json_object_get_object_member (obj, "detection");
  fail_unless_equals_int (json_object_get_size (det), 4);
  fail_unless_equals_string (json_object_get_string_member (det, "label"),
      "box");
  fail_unless_equals_int (json_object_get_int_member (det, "label_id"), 2);
  fail_unless (fabs (json_object_get_double_member (det, "confidence") -
          0.9375) <= 5e-7);
  bb = json_object_get_object_member (det, "bounding_box");
  fail_unless_equals_int (json_object_get_size (bb), 4);
  fail_unless (fabs (json_object_get_double_member (bb, "x_min") -
          10.25 / WIDTH) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (bb, "x_max") -
          110.75 / WIDTH) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (bb, "y_min") -
          20.5 / HEIGHT) <= 5e-7);
  fail_unless (fabs (json_object_get_double_member (bb, "y_max") -
          70.5 / HEIGHT) <= 5e-7);

  /* another element's bare ROI: no id, confidence or label_id */
  obj = json_array_get_object_element (objects, 1);
  fail_unless (json_object_get_size (obj) == 7, "%s", lines[0]);
  fail_unless (!json_object_has_member (obj, "id"));
  fail_unless_equals_int (json_object_get_int_member (obj, "region_id"), 5);
  fail_unless_equals_int (json_object_get_int_member (obj, "w"), 3);
  det = json_object_get_object_member (obj, "detection");
  fail_unless (!json_object_has_member (det, "confidence"));
  fail_unless (!json_object_has_member (det, "label_id"));
  fail_unless_equals_string (json_object_get_string_member (det, "label"),
      "face");

  o = parse_line (parser, lines[1]);
  fail_unless (!json_object_has_member (o, "objects"), "%s", lines[1]);
  fail_unless_equals_int64 (json_object_get_int_member (o, "timestamp"),
      10540 * GST_MSECOND);
  o = parse_line (parser, lines[2]);
  fail_unless (!json_object_has_member (o, "timestamp"), "%s", lines[2]);
  fail_unless (json_object_has_member (o, "resolution"));
  g_strfreev (lines);

  /* ours: pts as it is, stream_time beside it */
  lines = stream_time_lines ("visiondetect");
  o = parse_line (parser, lines[0]);
  fail_unless_equals_int64 (json_object_get_int_member (o, "pts"),
      1500 * GST_MSECOND);
  fail_unless_equals_int64 (json_object_get_int_member (o, "stream_time"),
      10500 * GST_MSECOND);
  objects = json_object_get_array_member (o, "objects");
  fail_unless_equals_int (json_object_get_int_member
      (json_array_get_object_element (objects, 0), "object_id"), 7);
  o = parse_line (parser, lines[2]);
  fail_unless (json_object_get_null_member (o, "stream_time"));
  g_strfreev (lines);
  g_object_unref (parser);
}

GST_END_TEST;

/* a location that cannot be written is an error naming it */
GST_START_TEST (test_unwritable_location)
{
  gchar *error = vdtest_pipeline_error ("videotestsrc num-buffers=1 ! "
      "visionjson location=/nonexistent/dir/out.jsonl ! fakesink");

  fail_unless (error != NULL);
  fail_unless (strstr (error, "/nonexistent/dir/out.jsonl") != NULL, "%s",
      error);
  g_free (error);
}

GST_END_TEST;

/* Labels come from other elements' ROI metas too, in any bytes: a label that is
 * not UTF-8 is written with U+FFFD for its invalid bytes, and the line stays
 * JSON; so do coordinates far beyond any frame. */
GST_START_TEST (test_foreign_labels_and_numbers)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "");
  GstBuffer *b = new_frame (0);
  GstVideoRegionOfInterestMeta *roi;
  JsonParser *parser = json_parser_new ();
  JsonObject *line, *o;
  gchar *contents = NULL;

  gst_harness_set_src_caps_str (h, caps);
  roi = gst_buffer_add_video_region_of_interest_meta (b, "cu\xff" "be\xc3", 1, 2,
      3, 4);
  roi->id = 0;
  roi = gst_buffer_add_video_region_of_interest_meta (b, "far", 0, 0, 10, 10);
  roi->id = 1;
  gst_video_region_of_interest_meta_add_param (roi,
      gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE, 1e300,
          "y_min", G_TYPE_DOUBLE, -1e40, "x_max", G_TYPE_DOUBLE, 2e300,
          "y_max", G_TYPE_DOUBLE, 1.0, "confidence", G_TYPE_DOUBLE, 0.5, NULL));
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  fail_unless (g_utf8_validate (contents, -1, NULL), "not UTF-8: %s", contents);
  line = parse_line (parser, g_strstrip (contents));
  o = json_array_get_object_element (json_object_get_array_member (line,
          "objects"), 0);
  fail_unless_equals_string (json_object_get_string_member (o, "label"),
      "cu\xef\xbf\xbd" "be\xef\xbf\xbd");
  g_object_unref (parser);
  g_free (contents);
  remove_output (dir, path);
}

GST_END_TEST;

/* A "mask_rcnn" ROI param (DL Streamer's instance-segmentation convention, which
 * visiondetect follows) of @mh x @mw float32 probabilities. */
static GstStructure *
mask_param_n (const gfloat * probs, guint n_values, guint mw, guint mh)
{
  GstStructure *s = gst_structure_new ("mask_rcnn",
      "format", G_TYPE_STRING, "segmentation_mask",
      "precision", G_TYPE_INT, 10,
      "data_buffer", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, probs,
          (gsize) n_values * sizeof (gfloat), 1), NULL);
  GValue dims = G_VALUE_INIT, v = G_VALUE_INIT;

  gst_value_array_init (&dims, 2);
  g_value_init (&v, G_TYPE_UINT);
  g_value_set_uint (&v, mh);
  gst_value_array_append_value (&dims, &v);
  g_value_set_uint (&v, mw);
  gst_value_array_append_value (&dims, &v);
  gst_structure_take_value (s, "dims", &dims);
  g_value_unset (&v);
  return s;
}

static GstStructure *
mask_param (const gfloat * probs, guint mw, guint mh)
{
  return mask_param_n (probs, mw * mh, mw, mh);
}

/* Instance masks on the ROI metas are written as COCO RLE "segmentation" in
 * frame pixels (probability >= 0.5): visiondetect's, one value per ROI pixel,
 * and a DL Streamer-style 2x2 mask stretched over its ROI; a ROI without a
 * mask, or with a malformed one, has no "segmentation". */
GST_START_TEST (test_segmentation_rle)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "");
  GstBuffer *b = new_frame (0);
  GstVideoRegionOfInterestMeta *roi;
  JsonParser *parser = json_parser_new ();
  JsonArray *objects;
  JsonObject *line;
  gchar *contents = NULL;
  /* ROI 0: 5x3 at (317, 1), partly outside the frame on the right: 3 columns */
  const gfloat exact[15] = { 0.9f, 0.1f, 0.5f, 0.49f, 1.0f,
    0.0f, 0.6f, 0.6f, 0.2f, 0.7f,
    1.0f, 1.0f, 0.0f, 0.3f, 0.8f
  };
  const gfloat coarse[4] = { 1.0f, 0.0f, 0.0f, 0.75f };
  const gfloat bad[3] = { 1.0f, 1.0f, 1.0f };
  guint8 *frame;

  gst_harness_set_src_caps_str (h, caps);
  roi = gst_buffer_add_video_region_of_interest_meta (b, "a", 315, 1, 5, 3);
  roi->id = 0;
  gst_video_region_of_interest_meta_add_param (roi, mask_param (exact, 5, 3));
  roi = gst_buffer_add_video_region_of_interest_meta (b, "b", 10, 20, 4, 4);
  roi->id = 1;
  gst_video_region_of_interest_meta_add_param (roi, mask_param (coarse, 2, 2));
  roi = gst_buffer_add_video_region_of_interest_meta (b, "c", 50, 50, 4, 4);
  roi->id = 2;
  roi = gst_buffer_add_video_region_of_interest_meta (b, "d", 60, 60, 4, 4);
  roi->id = 3;
  /* dims 2x2 but 3 values */
  gst_video_region_of_interest_meta_add_param (roi, mask_param_n (bad, 3, 2, 2));
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  line = parse_line (parser, g_strstrip (contents));
  objects = json_object_get_array_member (line, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 4);

  frame = vdtest_decode_rle (json_object_get_object_member
      (json_array_get_object_element (objects, 0), "segmentation"), WIDTH,
      HEIGHT);
  for (guint y = 0; y < HEIGHT; y++)
    for (guint x = 0; x < WIDTH; x++) {
      gboolean in = x >= 315 && y >= 1 && y < 4;
      guint8 want = in ? exact[(y - 1) * 5 + (x - 315)] >= 0.5f : 0;
      fail_unless_equals_int (frame[y * WIDTH + x], want);
    }
  g_free (frame);

  frame = vdtest_decode_rle (json_object_get_object_member
      (json_array_get_object_element (objects, 1), "segmentation"), WIDTH,
      HEIGHT);
  for (guint y = 0; y < HEIGHT; y++)
    for (guint x = 0; x < WIDTH; x++) {
      gboolean in = x >= 10 && x < 14 && y >= 20 && y < 24;
      guint8 want = in ? coarse[((y - 20) / 2) * 2 + (x - 10) / 2] >= 0.5f : 0;
      fail_unless_equals_int (frame[y * WIDTH + x], want);
    }
  g_free (frame);
  fail_if (json_object_has_member (json_array_get_object_element (objects, 2),
          "segmentation"));
  fail_if (json_object_has_member (json_array_get_object_element (objects, 3),
          "segmentation"));

  g_object_unref (parser);
  g_free (contents);
  remove_output (dir, path);
}

GST_END_TEST;

/* A "keypoints" ROI param as visiondetect writes a Keypoint R-CNN's (DL
 * Streamer's pose convention): @n (x, y) positions normalised to the ROI,
 * dims [n, 2], and @scores as "confidence" unless NULL. */
static GstStructure *
keypoints_param (const gfloat * xy, const gfloat * scores, guint n, guint dim1)
{
  GstStructure *s = gst_structure_new ("keypoints",
      "format", G_TYPE_STRING, "keypoints",
      "precision", G_TYPE_INT, 10,
      "data_buffer", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, xy,
          2 * (gsize) n * sizeof (gfloat), 1), NULL);
  GValue dims = G_VALUE_INIT, v = G_VALUE_INIT;

  if (scores != NULL)
    gst_structure_set (s, "confidence", G_TYPE_VARIANT,
        g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, scores,
            (gsize) n * sizeof (gfloat), 1), NULL);
  gst_value_array_init (&dims, 2);
  g_value_init (&v, G_TYPE_UINT);
  g_value_set_uint (&v, n);
  gst_value_array_append_value (&dims, &v);
  g_value_set_uint (&v, dim1);
  gst_value_array_append_value (&dims, &v);
  gst_structure_take_value (s, "dims", &dims);
  g_value_unset (&v);
  return s;
}

/* Keypoints on the ROI metas are written as "keypoints": [[x, y, score], ...]
 * in frame pixels (the ROI's rectangle times the normalised position), the
 * score null where the param has none; a ROI without keypoints, or with a
 * malformed param (dims not [n, 2]), has no "keypoints". */
GST_START_TEST (test_keypoints)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "");
  GstBuffer *b = new_frame (0);
  GstVideoRegionOfInterestMeta *roi;
  JsonParser *parser = json_parser_new ();
  JsonArray *objects, *points;
  JsonObject *line;
  gchar *contents = NULL;
  const gfloat xy[6] = { 0.25f, 0.5f, 0.0f, 1.0f, 1.25f, -0.1f };
  const gfloat scores[3] = { 7.5f, -1.25f, 0.0625f };
  const gdouble want[3][3] = { {110.0, 70.0, 7.5}, {100.0, 80.0, -1.25},
  {150.0, 58.0, 0.0625}
  };

  gst_harness_set_src_caps_str (h, caps);
  /* 40x20 at (100, 60) */
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 100, 60, 40,
      20);
  roi->id = 0;
  gst_video_region_of_interest_meta_add_param (roi,
      keypoints_param (xy, scores, 3, 2));
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 10, 10, 8,
      8);
  roi->id = 1;
  gst_video_region_of_interest_meta_add_param (roi,
      keypoints_param (xy, NULL, 2, 2));
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 20, 20, 8,
      8);
  roi->id = 2;
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 30, 30, 8,
      8);
  roi->id = 3;
  gst_video_region_of_interest_meta_add_param (roi,
      keypoints_param (xy, scores, 2, 3));
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  line = parse_line (parser, g_strstrip (contents));
  objects = json_object_get_array_member (line, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 4);
  points = json_object_get_array_member (json_array_get_object_element
      (objects, 0), "keypoints");
  fail_unless_equals_int (json_array_get_length (points), 3);
  for (guint i = 0; i < 3; i++) {
    JsonArray *p = json_array_get_array_element (points, i);

    fail_unless_equals_int (json_array_get_length (p), 3);
    for (guint k = 0; k < 3; k++)
      fail_unless (fabs (json_array_get_double_element (p, k) - want[i][k])
          <= 5e-3, "keypoint %u value %u: %g, want %g", i, k,
          json_array_get_double_element (p, k), want[i][k]);
  }
  points = json_object_get_array_member (json_array_get_object_element
      (objects, 1), "keypoints");
  fail_unless_equals_int (json_array_get_length (points), 2);
  fail_unless (fabs (json_array_get_double_element
          (json_array_get_array_element (points, 0), 0) - 12.0) <= 5e-3);
  fail_unless (json_node_is_null (json_array_get_element
          (json_array_get_array_element (points, 0), 2)));
  fail_if (json_object_has_member (json_array_get_object_element (objects, 2),
          "keypoints"));
  fail_if (json_object_has_member (json_array_get_object_element (objects, 3),
          "keypoints"));

  g_object_unref (parser);
  g_free (contents);
  remove_output (dir, path);
}

GST_END_TEST;

/* The string array @field of @s set to @v (@n strings). */
static void
set_strings (GstStructure * s, const gchar * field, const gchar * const *v,
    guint n)
{
  GValue array = G_VALUE_INIT, str = G_VALUE_INIT;

  gst_value_array_init (&array, n);
  g_value_init (&str, G_TYPE_STRING);
  for (guint i = 0; i < n; i++) {
    g_value_set_string (&str, v[i]);
    gst_value_array_append_value (&array, &str);
  }
  g_value_unset (&str);
  gst_structure_take_value (s, field, &array);
}

/* format=dlstreamer writes an object's keypoints as gvametaconvert writes DL
 * Streamer's "keypoints" tensor: "tensors": [{"precision": "FP32", "dims":
 * [n, 2], "name": "keypoints", "format": "keypoints", "confidence": [n],
 * "data": [x0, y0, ...] normalised to the object's rectangle, "point_names",
 * "point_connections"}]; an object without keypoints has no "tensors". */
GST_START_TEST (test_keypoints_dlstreamer)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "format=dlstreamer");
  GstBuffer *b = new_frame (0);
  GstVideoRegionOfInterestMeta *roi;
  GstStructure *param;
  JsonParser *parser = json_parser_new ();
  JsonArray *objects, *tensors, *a;
  JsonObject *line, *t;
  gchar *contents = NULL;
  const gfloat xy[4] = { 0.25f, 0.5f, 0.0f, 1.0f };
  const gfloat scores[2] = { 7.5f, -1.25f };
  const gchar *names[2] = { "nose", "left_eye" };
  const gchar *connections[2] = { "nose", "left_eye" };
  const gdouble want_data[4] = { 0.25, 0.5, 0.0, 1.0 };

  gst_harness_set_src_caps_str (h, caps);
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 100, 60, 40,
      20);
  roi->id = 0;
  param = keypoints_param (xy, scores, 2, 2);
  set_strings (param, "point_names", names, 2);
  set_strings (param, "point_connections", connections, 2);
  gst_video_region_of_interest_meta_add_param (roi, param);
  roi = gst_buffer_add_video_region_of_interest_meta (b, "person", 10, 10, 8,
      8);
  roi->id = 1;
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  line = parse_line (parser, g_strstrip (contents));
  objects = json_object_get_array_member (line, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);
  tensors = json_object_get_array_member (json_array_get_object_element
      (objects, 0), "tensors");
  fail_unless (tensors != NULL);
  fail_unless_equals_int (json_array_get_length (tensors), 1);
  t = json_array_get_object_element (tensors, 0);
  fail_unless_equals_string (json_object_get_string_member (t, "name"),
      "keypoints");
  fail_unless_equals_string (json_object_get_string_member (t, "format"),
      "keypoints");
  fail_unless_equals_string (json_object_get_string_member (t, "precision"),
      "FP32");
  a = json_object_get_array_member (t, "dims");
  fail_unless_equals_int (json_array_get_length (a), 2);
  fail_unless_equals_int (json_array_get_int_element (a, 0), 2);
  fail_unless_equals_int (json_array_get_int_element (a, 1), 2);
  a = json_object_get_array_member (t, "data");
  fail_unless_equals_int (json_array_get_length (a), 4);
  for (guint i = 0; i < 4; i++)
    fail_unless (fabs (json_array_get_double_element (a, i) - want_data[i])
        <= 1e-5, "data %u: %g, want %g", i, json_array_get_double_element (a,
            i), want_data[i]);
  a = json_object_get_array_member (t, "confidence");
  fail_unless_equals_int (json_array_get_length (a), 2);
  fail_unless (fabs (json_array_get_double_element (a, 0) - 7.5) <= 1e-6);
  fail_unless (fabs (json_array_get_double_element (a, 1) + 1.25) <= 1e-6);
  a = json_object_get_array_member (t, "point_names");
  fail_unless_equals_int (json_array_get_length (a), 2);
  fail_unless_equals_string (json_array_get_string_element (a, 1), "left_eye");
  a = json_object_get_array_member (t, "point_connections");
  fail_unless_equals_int (json_array_get_length (a), 2);
  fail_unless_equals_string (json_array_get_string_element (a, 0), "nose");
  fail_if (json_object_has_member (json_array_get_object_element (objects, 1),
          "tensors"));

  g_object_unref (parser);
  g_free (contents);
  remove_output (dir, path);
}

GST_END_TEST;


/* Two visionjson elements of one process writing one file (a tee) would mix
 * their lines: the second is refused with an error naming the file and the
 * first writer, whatever path it is given; the file stays the first one's,
 * every line valid JSON; once the first has stopped the file is free. */
GST_START_TEST (test_one_writer_per_file)
{
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, "out.jsonl", NULL);
  gchar *link = g_build_filename (dir, "link.jsonl", NULL);
  gchar *launch, *error, *contents = NULL, **lines;
  guint i, n;

  fail_unless (symlink (path, link) == 0);
  for (i = 0; i < 2; i++) {
    launch = g_strdup_printf ("videotestsrc num-buffers=20 ! "
        "video/x-raw,width=64,height=48 ! tee name=t "
        "t. ! queue ! visionjson name=first location=\"%s\" ! fakesink "
        "t. ! queue ! visionjson name=second location=\"%s\" ! fakesink",
        path, i == 0 ? path : link);
    error = vdtest_pipeline_error (launch);
    fail_unless (error != NULL, "two writers of one file accepted");
    fail_unless (strstr (error, "is writing that file") != NULL
        && (strstr (error, "\"first\"") != NULL
            || strstr (error, "\"second\"") != NULL), "%s", error);
    g_free (error);
    g_free (launch);

    /* what is in the file is one writer's whole lines */
    fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
    lines = g_strsplit (contents, "\n", -1);
    for (n = 0; lines[n] != NULL && lines[n][0] != '\0'; n++) {
      JsonParser *parser = json_parser_new ();

      fail_unless (json_parser_load_from_data (parser, lines[n], -1, NULL),
          "line %u: %s", n, lines[n]);
      g_object_unref (parser);
    }
    g_strfreev (lines);
    g_free (contents);
  }

  /* one writer at a time is fine, again and again */
  for (i = 0; i < 2; i++) {
    launch = g_strdup_printf ("videotestsrc num-buffers=3 ! "
        "video/x-raw,width=64,height=48 ! visionjson location=\"%s\" ! "
        "fakesink", i == 0 ? path : link);
    error = vdtest_pipeline_error (launch);
    fail_unless (error == NULL, "%s", error);
    g_free (launch);
    fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
    lines = g_strsplit (contents, "\n", -1);
    fail_unless_equals_int (g_strv_length (lines), 4);  /* 3 lines + "" */
    g_strfreev (lines);
    g_free (contents);
  }

  g_unlink (link);
  g_unlink (path);
  g_rmdir (dir);
  g_free (link);
  g_free (path);
  g_free (dir);
}

GST_END_TEST;

GST_START_TEST (test_properties)
{
  GstElement *e = gst_element_factory_make ("visionjson", NULL);
  gchar *location;
  gboolean post;

  fail_unless (e != NULL);
  g_object_get (e, "location", &location, "post-messages", &post, NULL);
  fail_unless (location == NULL && !post);
  g_object_set (e, "location", "/tmp/x.jsonl", "post-messages", TRUE, NULL);
  g_object_get (e, "location", &location, "post-messages", &post, NULL);
  fail_unless_equals_string (location, "/tmp/x.jsonl");
  fail_unless (post);
  g_free (location);
  gst_object_unref (e);
}

GST_END_TEST;

/* Seeks @pipeline (paused) with a flush to @position and waits until it has
 * prerolled again: the sink holds one frame, so visionjson wrote one line. */
static void
flushing_seek (GstElement * pipeline, GstClockTime position)
{
  fail_unless (gst_element_seek_simple (pipeline, GST_FORMAT_TIME,
          GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE, position));
  fail_unless_equals_int (gst_element_get_state (pipeline, NULL, NULL,
          30 * GST_SECOND), GST_STATE_CHANGE_SUCCESS);
}

/* A file (raw video in Matroska, seekable) played from a prerolled pipeline:
 * a flushing seek starts `frame` at 0 again, wherever it goes; `pts` says
 * where. matroskademux sends the frames before an accurate seek's position
 * too (no index in this file): outside the segment, they get no line.
 * Expected lines: the preroll (frame 0, pts 0), a seek to 200 ms
 * (frame 0, pts 200 ms), a seek to 0 (frame 0, pts 0), then playing to EOS
 * (frames 1..9, pts 40 ms apart). */
GST_START_TEST (test_flushing_seek)
{
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *video = g_build_filename (dir, "clip.mkv", NULL);
  gchar *path = g_build_filename (dir, "out.jsonl", NULL);
  gchar *launch, *contents, **lines, *error;
  JsonParser *parser = json_parser_new ();
  GstElement *pipeline;
  GstBus *bus;
  GstMessage *msg;
  guint i, n;

  launch = g_strdup_printf ("videotestsrc num-buffers=10 ! video/x-raw,"
      "format=I420,width=64,height=48,framerate=25/1 ! matroskamux ! "
      "filesink location=%s", video);
  error = vdtest_pipeline_error (launch);
  fail_unless (error == NULL, "could not write the clip: %s", error);
  g_free (launch);

  launch = g_strdup_printf ("filesrc location=%s ! decodebin ! videoconvert ! "
      "visionjson location=%s ! fakesink sync=false", video, path);
  pipeline = gst_parse_launch (launch, NULL);
  fail_unless (pipeline != NULL);
  bus = gst_element_get_bus (pipeline);
  fail_unless_equals_int (gst_element_set_state (pipeline, GST_STATE_PAUSED),
      GST_STATE_CHANGE_ASYNC);
  fail_unless_equals_int (gst_element_get_state (pipeline, NULL, NULL,
          30 * GST_SECOND), GST_STATE_CHANGE_SUCCESS);
  flushing_seek (pipeline, 200 * GST_MSECOND);
  flushing_seek (pipeline, 0);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg != NULL && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS,
      "no EOS");
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  lines = g_strsplit (contents, "\n", -1);
  n = g_strv_length (lines) - 1;      /* the last line ends with a newline */
  fail_unless (n == 12, "%u lines, not 12:\n%s", n, contents);
  for (i = 0; i < n; i++) {
    JsonObject *o = parse_line (parser, lines[i]);
    gint64 frame = json_object_get_int_member (o, "frame");
    gint64 pts = json_object_get_int_member (o, "pts");

    switch (i) {
      case 0:
      case 2:
        fail_unless (frame == 0 && pts == 0, "line %u: %s", i, lines[i]);
        break;
      case 1:
        fail_unless (frame == 0 && pts == 200 * GST_MSECOND, "line %u: %s", i,
            lines[i]);
        break;
      default:
        fail_unless (frame == i - 2 && pts == (i - 2) * 40 * GST_MSECOND,
            "line %u: %s", i, lines[i]);
        break;
    }
  }

  g_strfreev (lines);
  g_free (contents);
  g_object_unref (parser);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  g_unlink (path);
  g_unlink (video);
  g_rmdir (dir);
  g_free (launch);
  g_free (path);
  g_free (video);
  g_free (dir);
}

GST_END_TEST;

/* The ROI metas are the truth: a detection whose ROI meta another element
 * removed is gone, what it changed in the params wins, and a foreign ROI that
 * reuses an id of ours is not hidden; the companion fills what the ROI lost. */
GST_START_TEST (test_roi_metas_are_the_truth)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "");
  GstBuffer *b = new_frame (0);
  GstVisionDetectMeta *meta = vdtest_add_detect_meta (b, WIDTH, HEIGHT);
  GstVideoRegionOfInterestMeta *roi;
  JsonParser *parser = json_parser_new ();
  JsonArray *objects;
  gchar *contents;
  JsonObject *o;

  gst_harness_set_src_caps_str (h, caps);
  vdtest_add_detection (meta, 10.0, 20.0, 40.0, 30.0, 0.9, 2, "box", 0);
  vdtest_add_detection (meta, 100.0, 50.0, 20.0, 20.0, 0.8, 1, "ball", 1);
  vdtest_add_detection (meta, 200.0, 10.0, 30.0, 30.0, 0.7, 1, "ball", 2);
  /* id 0: a classifier relabelled it and changed its confidence */
  roi = gst_buffer_add_video_region_of_interest_meta (b, "crate", 10, 20, 40,
      30);
  roi->id = 0;
  gst_video_region_of_interest_meta_add_param (roi,
      gst_structure_new ("detection", "confidence", G_TYPE_DOUBLE, 0.25,
          "label", G_TYPE_STRING, "crate", NULL));
  /* id 1: removed by a filter (no ROI meta); id 2: kept, bare */
  gst_buffer_add_video_region_of_interest_meta (b, "ball", 200, 10, 30,
      30)->id = 2;
  /* a foreign detector's ROI that also has id 0, elsewhere */
  gst_buffer_add_video_region_of_interest_meta (b, "face", 60, 120, 16,
      16)->id = 0;

  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  o = parse_line (parser, g_strstrip (contents));
  objects = json_object_get_array_member (o, "objects");
  fail_unless_equals_int (json_array_get_length (objects), 3);
  /* the ROI's params win, the companion fills the label id and exact box */
  check_object (json_array_get_object_element (objects, 0), 0, "crate", 2,
      0.25, 10.0, 20.0, 40.0, 30.0);
  check_object (json_array_get_object_element (objects, 1), 2, "ball", 1, 0.7,
      200.0, 10.0, 30.0, 30.0);
  /* not ours: nothing from the companion */
  check_object (json_array_get_object_element (objects, 2), 0, "face", -1,
      -1.0, 60.0, 120.0, 16.0, 16.0);

  g_free (contents);
  g_object_unref (parser);
  remove_output (dir, path);
}

GST_END_TEST;

#ifdef HAVE_GST_ANALYTICS
/* @b through visionjson into a file of its own: the objects of its line
 * (owned by @parser) */
static JsonArray *
objects_of_frame (GstBuffer * b, JsonParser * parser)
{
  gchar *dir, *path;
  GstHarness *h = new_writer (&dir, &path, "");
  gchar *contents;
  JsonObject *o;

  gst_harness_set_src_caps_str (h, caps);
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  gst_buffer_unref (gst_harness_pull (h));
  gst_harness_teardown (h);
  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  o = parse_line (parser, g_strstrip (contents));
  g_free (contents);
  remove_output (dir, path);
  return json_object_get_array_member (o, "objects");
}

/* The analytics relation meta's object-detection entries that no ROI meta shows
 * (another detector's, as GStreamer's tensor decoders attach them) are objects
 * too, after the ROI metas', with id -1 and the id of the tracking entry they
 * relate to; an entry a ROI meta shows (same class, box within 2 pixels, as
 * visiondetect's after a scale) is not repeated, nor one of a companion meta's
 * detection whose ROI meta is gone. */
GST_START_TEST (test_analytics_entries)
{
  GstBuffer *b = new_frame (0);
  GstAnalyticsRelationMeta *relations =
      gst_buffer_add_analytics_relation_meta (b);
  GstAnalyticsODMtd od;
  GstAnalyticsTrackingMtd trk;
  GstVideoRegionOfInterestMeta *roi;
  JsonParser *parser = json_parser_new ();
  JsonArray *objects;
  JsonObject *o;

  /* shown by a ROI meta one pixel off */
  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("box"), 11, 20, 40, 30, 0.9f, &od));
  roi = gst_buffer_add_video_region_of_interest_meta (b, "box", 10, 20, 40, 30);
  roi->id = 5;
  /* another detector's, tracked */
  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("person"), 100, 50, 20, 60, 0.75f, &od));
  fail_unless (gst_analytics_relation_meta_add_tracking_mtd (relations, 7, 0,
          &trk));
  fail_unless (gst_analytics_relation_meta_set_relation (relations,
          GST_ANALYTICS_REL_TYPE_RELATE_TO, od.id, trk.id));
  /* and untracked; the same box as the ROI meta's but another class */
  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("crate"), 10, 20, 40, 30, 0.5f, &od));
  /* visiondetect's, whose ROI meta a filter removed: its companion entry
   * (in a frame of twice the size, as before a videoscale) says so */
  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("ball"), 200, 100, 20, 20, 0.95f, &od));
  vdtest_add_detection (vdtest_add_detect_meta (b, 2 * WIDTH, 2 * HEIGHT),
      401.0, 199.0, 40.0, 40.0, 0.95, 1, "ball", 9);

  objects = objects_of_frame (b, parser);
  fail_unless_equals_int (json_array_get_length (objects), 3);
  check_object (json_array_get_object_element (objects, 0), 5, "box", -1,
      -1.0, 10.0, 20.0, 40.0, 30.0);
  fail_if (json_object_has_member (json_array_get_object_element (objects, 0),
          "object_id"));
  o = json_array_get_object_element (objects, 1);
  check_object (o, -1, "person", -1, 0.75, 100.0, 50.0, 20.0, 60.0);
  fail_unless_equals_int (json_object_get_int_member (o, "object_id"), 7);
  fail_if (json_object_get_boolean_member (o, "tracked"));
  o = json_array_get_object_element (objects, 2);
  check_object (o, -1, "crate", -1, 0.5, 10.0, 20.0, 40.0, 30.0);
  fail_if (json_object_has_member (o, "object_id"));
  g_object_unref (parser);
}

GST_END_TEST;
#endif

#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
/* A mask buffer as GStreamer's segmentation entries hold it */
static GstBuffer *
seg_mask (GstVideoFormat format, guint w, guint h, guint set_columns)
{
  guint bpp = format == GST_VIDEO_FORMAT_GRAY8 ? 1 : 2;
  GstBuffer *b = gst_buffer_new_allocate (NULL, (gsize) w * h * bpp, NULL);
  GstMapInfo map;

  fail_unless (gst_buffer_map (b, &map, GST_MAP_WRITE));
  memset (map.data, 0, map.size);
  for (guint y = 0; y < h; y++)
    for (guint x = 0; x < MIN (set_columns, w); x++)
      map.data[(y * w + x) * bpp + bpp - 1] = 7;       /* 7, or 0x0700 LE */
  gst_buffer_unmap (b, &map);
  {
    gsize offset[GST_VIDEO_MAX_PLANES] = { 0 };
    gint stride[GST_VIDEO_MAX_PLANES] = { (gint) (w * bpp) };

    gst_buffer_add_video_meta_full (b, GST_VIDEO_FRAME_FLAG_NONE, format, w,
        h, 1, offset, stride);
  }
  return b;
}

/* Another detector's instance masks (segmentation entries its
 * object-detection entries relate to) are written as the objects'
 * "segmentation": a GRAY8 mask at half the rectangle's resolution, resampled
 * (the left half of its columns set), and a GRAY16 one over a rectangle
 * partly outside the frame, clipped. */
GST_START_TEST (test_analytics_foreign_masks)
{
  GstBuffer *b = new_frame (0);
  GstAnalyticsRelationMeta *relations =
      gst_buffer_add_analytics_relation_meta (b);
  GstAnalyticsODMtd od;
  GstAnalyticsSegmentationMtd seg;
  guint region_ids[2] = { 0, 7 };
  JsonParser *parser = json_parser_new ();
  JsonArray *objects;
  guint8 *frame;

  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("person"), 100, 50, 20, 60, 0.8f, &od));
  fail_unless (gst_analytics_relation_meta_add_segmentation_mtd (relations,
          seg_mask (GST_VIDEO_FORMAT_GRAY8, 10, 30, 5),
          GST_SEGMENTATION_TYPE_INSTANCE, 2, region_ids, 100, 50, 20, 60,
          &seg));
  fail_unless (gst_analytics_relation_meta_set_relation (relations,
          GST_ANALYTICS_REL_TYPE_RELATE_TO, od.id, seg.id));
  fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
          g_quark_from_string ("dog"), 300, 200, 40, 40, 0.7f, &od));
  fail_unless (gst_analytics_relation_meta_add_segmentation_mtd (relations,
          seg_mask (GST_VIDEO_FORMAT_GRAY16_LE, 40, 40, 40),
          GST_SEGMENTATION_TYPE_INSTANCE, 2, region_ids, 300, 200, 40, 40,
          &seg));
  fail_unless (gst_analytics_relation_meta_set_relation (relations,
          GST_ANALYTICS_REL_TYPE_RELATE_TO, od.id, seg.id));

  objects = objects_of_frame (b, parser);
  fail_unless_equals_int (json_array_get_length (objects), 2);
  frame = vdtest_decode_rle (json_object_get_object_member
      (json_array_get_object_element (objects, 0), "segmentation"), WIDTH,
      HEIGHT);
  for (guint y = 0; y < HEIGHT; y++)
    for (guint x = 0; x < WIDTH; x++)
      fail_unless_equals_int (frame[y * WIDTH + x], x >= 100 && x < 110
          && y >= 50 && y < 110);
  g_free (frame);
  frame = vdtest_decode_rle (json_object_get_object_member
      (json_array_get_object_element (objects, 1), "segmentation"), WIDTH,
      HEIGHT);
  for (guint y = 0; y < HEIGHT; y++)
    for (guint x = 0; x < WIDTH; x++)
      fail_unless_equals_int (frame[y * WIDTH + x], x >= 300 && y >= 200);
  g_free (frame);
  g_object_unref (parser);
}

GST_END_TEST;
#endif

static Suite *
visionjson_suite (void)
{
  Suite *s = suite_create ("visionjson");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_lines_match_metadata);
  tcase_add_test (tc, test_roi_metas_are_the_truth);
  tcase_add_test (tc, test_dlstreamer_format);
#ifdef HAVE_GST_ANALYTICS
  tcase_add_test (tc, test_analytics_entries);
#endif
#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
  tcase_add_test (tc, test_analytics_foreign_masks);
#endif
  tcase_add_test (tc, test_unwritable_location);
  tcase_add_test (tc, test_one_writer_per_file);
  tcase_add_test (tc, test_foreign_labels_and_numbers);
  tcase_add_test (tc, test_segmentation_rle);
  tcase_add_test (tc, test_keypoints);
  tcase_add_test (tc, test_keypoints_dlstreamer);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_flushing_seek);
  return s;
}

GST_CHECK_MAIN (visionjson);
