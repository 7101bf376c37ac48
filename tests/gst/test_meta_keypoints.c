/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keypoints in the companion meta (GstVisionDetectMeta), through its public
 * API (linked: libgstvisiondetectmeta-1.0): setting and reading them, bad
 * arguments refused, copies, the scale transform (x, y scaled as the boxes),
 * and videoscale followed by visionjson and visionoverlay (the ROI meta's
 * "keypoints" param is gone there: the companion's keypoints are written and
 * drawn). No engine needed. */
#include "vdtest.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define W 64
#define H 48

/* x, y (frame pixels) and score of the two keypoints of detection 0 */
static const gfloat points[6] = { 16.0f, 18.0f, 1.5f, 36.0f, 28.0f, 2.5f };

static GstVisionDetection
detection (gdouble x, gdouble y, gdouble w, gdouble h, gint roi_id)
{
  GstVisionDetection d;

  memset (&d, 0, sizeof (d));
  d.x = x;
  d.y = y;
  d.w = w;
  d.h = h;
  d.confidence = 0.75;
  d.label_id = 1;
  d.label = g_quark_from_string ("person");
  d.roi_id = roi_id;
  return d;
}

/* A grey RGB frame of W x H with detection 0 (keypoints, ROI meta id 0 with
 * no param: what a scale transform leaves) and detection 1 (none, id 1). */
static GstBuffer *
frame_with_keypoints (void)
{
  GstVideoInfo info;
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  GstVisionDetection d;
  GstVideoRegionOfInterestMeta *roi;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, W, H);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_memset (buffer, 0, 0x40, GST_VIDEO_INFO_SIZE (&info));
  meta = gst_buffer_add_vision_detect_meta (buffer, W, H);
  d = detection (6.0, 8.0, 40.0, 30.0, 0);
  gst_vision_detect_meta_add_detection (meta, &d);
  fail_unless (gst_vision_detect_meta_set_keypoints (meta, 0, points, 6));
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "person", 6, 8,
      40, 30);
  roi->id = 0;
  d = detection (50.0, 30.0, 10.0, 10.0, 1);
  gst_vision_detect_meta_add_detection (meta, &d);
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "person", 50, 30,
      10, 10);
  roi->id = 1;
  return buffer;
}

/* @meta's keypoints of detection 0 are points scaled by @sx, @sy. */
static void
check_points (const GstVisionDetectMeta * meta, gdouble sx, gdouble sy)
{
  gsize n = 0;
  const gfloat *v = gst_vision_detect_meta_get_keypoints (meta, 0, &n);

  fail_unless (v != NULL);
  fail_unless_equals_int (n, 6);
  for (guint i = 0; i < 2; i++) {
    fail_unless (fabs (v[3 * i] - points[3 * i] * sx) < 1e-4);
    fail_unless (fabs (v[3 * i + 1] - points[3 * i + 1] * sy) < 1e-4);
    fail_unless_equals_float (v[3 * i + 2], points[3 * i + 2]);
  }
  fail_unless (gst_vision_detect_meta_get_keypoints (meta, 1, &n) == NULL);
  fail_unless_equals_int (n, 0);
}

/* Set and read; bad index or length refused (nothing changed); replaced;
 * removed with none. */
GST_START_TEST (test_set_get)
{
  GstBuffer *buffer = frame_with_keypoints ();
  GstVisionDetectMeta *meta = gst_buffer_get_vision_detect_meta (buffer);
  const gfloat other[3] = { 1.0f, 2.0f, 3.0f };
  gsize n = 99;

  check_points (meta, 1.0, 1.0);
  fail_if (gst_vision_detect_meta_set_keypoints (meta, 2, other, 3));
  fail_if (gst_vision_detect_meta_set_keypoints (meta, 0, other, 2));
  fail_if (gst_vision_detect_meta_set_keypoints (meta, 0, NULL, 3));
  check_points (meta, 1.0, 1.0);
  fail_unless (gst_vision_detect_meta_get_keypoints (meta, 7, &n) == NULL);
  fail_unless_equals_int (n, 0);
  fail_unless (gst_vision_detect_meta_set_keypoints (meta, 1, other, 3));
  fail_unless (gst_vision_detect_meta_get_keypoints (meta, 1, &n)[1] == 2.0f);
  fail_unless_equals_int (n, 3);
  fail_unless (gst_vision_detect_meta_set_keypoints (meta, 1, NULL, 0));
  check_points (meta, 1.0, 1.0);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

/* A buffer copy keeps them; the buffer's own go with it. */
GST_START_TEST (test_copy)
{
  GstBuffer *buffer = frame_with_keypoints ();
  GstBuffer *copy = gst_buffer_copy (buffer);

  gst_buffer_unref (buffer);
  check_points (gst_buffer_get_vision_detect_meta (copy), 1.0, 1.0);
  gst_buffer_unref (copy);
}

GST_END_TEST;

/* videoscale (2x wide, 1.5x high would change the aspect: 2x both) scales
 * them as the boxes. */
GST_START_TEST (test_videoscale)
{
  GstBuffer *in = frame_with_keypoints ();
  GList *out = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=128,height=96",
      "video/x-raw,format=RGB,width=64,height=48,framerate=30/1", &in, 1);

  fail_unless_equals_int (g_list_length (out), 1);
  check_points (gst_buffer_get_vision_detect_meta (out->data), 2.0, 2.0);
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
}

GST_END_TEST;

/* videoscale ! visionjson: "keypoints" from the companion, in the new frame's
 * pixels; the other object has none. */
GST_START_TEST (test_json_after_videoscale)
{
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, "out.jsonl", NULL);
  gchar *description = g_strdup_printf ("videoscale ! capsfilter "
      "caps=video/x-raw,width=128,height=96 ! visionjson location=\"%s\"",
      path);
  GstBuffer *in = frame_with_keypoints ();
  JsonParser *parser = json_parser_new ();
  JsonArray *objects, *kp;
  gchar *contents = NULL;
  GList *out;

  out = vdtest_run_pipeline (description, "video/x-raw,format=RGB,width=64,"
      "height=48,framerate=30/1", &in, 1);
  fail_unless_equals_int (g_list_length (out), 1);
  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  fail_unless (json_parser_load_from_data (parser, contents, -1, NULL));
  objects = json_object_get_array_member (json_node_get_object
      (json_parser_get_root (parser)), "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);
  kp = json_object_get_array_member (json_array_get_object_element (objects,
          0), "keypoints");
  fail_unless (kp != NULL, "no keypoints after videoscale");
  fail_unless_equals_int (json_array_get_length (kp), 2);
  for (guint i = 0; i < 2; i++) {
    JsonArray *p = json_array_get_array_element (kp, i);

    fail_unless (fabs (json_array_get_double_element (p, 0) -
            2 * points[3 * i]) <= 5e-3);
    fail_unless (fabs (json_array_get_double_element (p, 1) -
            2 * points[3 * i + 1]) <= 5e-3);
    fail_unless (fabs (json_array_get_double_element (p, 2) -
            points[3 * i + 2]) <= 5e-3);
  }
  fail_if (json_object_has_member (json_array_get_object_element (objects, 1),
          "keypoints"));

  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
  g_object_unref (parser);
  g_free (contents);
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (description);
  g_free (dir);
}

GST_END_TEST;

/* videoscale ! visionoverlay (2x): the companion's keypoints are drawn where
 * they are scaled to, and not with keypoints=false. */
GST_START_TEST (test_overlay_after_videoscale)
{
  const gchar *caps =
      "video/x-raw,format=RGB,width=64,height=48,framerate=30/1";
  GstBuffer *in = frame_with_keypoints ();
  GList *with = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=128,height=96 ! visionoverlay text=none "
      "line-width=1", caps, &in, 1);
  GList *without = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=128,height=96 ! visionoverlay text=none "
      "line-width=1 keypoints=false", caps, &in, 1);
  guint8 *a, *b;
  gint stride;

  fail_unless_equals_int (g_list_length (with), 1);
  fail_unless_equals_int (g_list_length (without), 1);
  a = vdtest_frame_bytes (with->data, 128, 96, &stride);
  b = vdtest_frame_bytes (without->data, 128, 96, &stride);
  for (guint i = 0; i < 2; i++) {
    gsize at = (gsize) (2 * points[3 * i + 1]) * stride
        + 3 * (gsize) (2 * points[3 * i]);

    fail_unless (memcmp (a + at, b + at, 3) != 0, "keypoint %u not drawn", i);
  }
  /* away from the points and the boxes: untouched */
  fail_unless (memcmp (a + 90 * stride + 3 * 5, b + 90 * stride + 3 * 5,
          3) == 0);

  g_free (a);
  g_free (b);
  g_list_free_full (with, (GDestroyNotify) gst_buffer_unref);
  g_list_free_full (without, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
}

GST_END_TEST;

static Suite *
meta_keypoints_suite (void)
{
  Suite *s = suite_create ("meta-keypoints");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_set_get);
  tcase_add_test (tc, test_copy);
  tcase_add_test (tc, test_videoscale);
  tcase_add_test (tc, test_json_after_videoscale);
  tcase_add_test (tc, test_overlay_after_videoscale);
  return s;
}

GST_CHECK_MAIN (meta_keypoints);
