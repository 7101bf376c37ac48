/* The companion meta (GstVisionDetectMeta) through GStreamer's own elements:
 * copies keep it, videoscale rescales it, videoconvert keeps it. No engine
 * needed. (Rotations are not followed: videoflip, a GstVideoFilter, copies
 * every video meta unchanged, GStreamer's ROI metas included.) */
#include "vdtest.h"

#include <math.h>

static GstBuffer *
frame_with_detections (gint width, gint height)
{
  GstVideoInfo info;
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  GstVideoRegionOfInterestMeta *roi;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, width, height);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_memset (buffer, 0, 0x40, GST_VIDEO_INFO_SIZE (&info));

  meta = vdtest_add_detect_meta (buffer, width, height);
  vdtest_add_detection (meta, 10.25, 20.5, 100.0, 50.75, 0.875, 2, "box", 0);
  vdtest_add_detection (meta, 150.0, 100.0, 30.5, 40.0, 0.5, 1, "ball", 1);
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "box", 10, 21,
      100, 50);
  roi->id = 0;
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "ball", 150, 100,
      31, 40);
  roi->id = 1;
  return buffer;
}

static guint
count_detect_metas (GstBuffer * buffer)
{
  gpointer state = NULL;
  guint n = 0;

  while (gst_buffer_iterate_meta_filtered (buffer, &state,
          vdtest_detect_meta_api ()) != NULL)
    n++;
  return n;
}

static void
check_scaled (GstBuffer * out, gdouble sx, gdouble sy, guint width,
    guint height)
{
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (out);
  const GstVisionDetection *d;

  fail_unless (meta != NULL, "the detections were dropped");
  fail_unless_equals_int (count_detect_metas (out), 1);
  fail_unless_equals_int (meta->width, width);
  fail_unless_equals_int (meta->height, height);
  fail_unless_equals_int (meta->detections->len, 2);
  d = &g_array_index (meta->detections, GstVisionDetection, 0);
  fail_unless (fabs (d->x - 10.25 * sx) < 1e-9 && fabs (d->y - 20.5 * sy) < 1e-9
      && fabs (d->w - 100.0 * sx) < 1e-9 && fabs (d->h - 50.75 * sy) < 1e-9);
  fail_unless (d->confidence == 0.875 && d->label_id == 2 && d->roi_id == 0);
  fail_unless_equals_string (g_quark_to_string (d->label), "box");
  d = &g_array_index (meta->detections, GstVisionDetection, 1);
  fail_unless (fabs (d->x - 150.0 * sx) < 1e-9 && fabs (d->h - 40.0 * sy) < 1e-9);
  fail_unless (d->confidence == 0.5 && d->label_id == 1 && d->roi_id == 1);
}

GST_START_TEST (test_copy)
{
  GstBuffer *buffer = frame_with_detections (320, 240);
  GstBuffer *copy = gst_buffer_copy (buffer);
  GstVisionDetectMeta *a, *b;

  check_scaled (copy, 1.0, 1.0, 320, 240);
  a = vdtest_get_detect_meta (buffer);
  b = vdtest_get_detect_meta (copy);
  fail_unless (a->detections != b->detections, "copies share their array");
  g_array_index (b->detections, GstVisionDetection, 0).x = 0;
  fail_unless (g_array_index (a->detections, GstVisionDetection, 0).x == 10.25);
  gst_buffer_unref (copy);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

GST_START_TEST (test_videoscale)
{
  GstBuffer *buffer = frame_with_detections (320, 240);
  GList *out = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=640,height=360",
      "video/x-raw,format=RGB,width=320,"
      "height=240,framerate=30/1", &buffer, 1);
  GstVideoRegionOfInterestMeta *roi;

  check_scaled (out->data, 2.0, 1.5, 640, 360);
  /* GStreamer rescales its ROI metas too (dropping their params) */
  roi = gst_buffer_get_video_region_of_interest_meta_id (out->data, 0);
  fail_unless (roi != NULL);
  fail_unless_equals_int (roi->x, 20);
  fail_unless_equals_int (vdtest_count_roi_metas (out->data), 2);
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

GST_START_TEST (test_videoconvert_then_scale)
{
  GstBuffer *buffer = frame_with_detections (320, 240);
  GList *out = vdtest_run_pipeline ("videoconvert ! video/x-raw,format=NV12 ! "
      "videoscale ! video/x-raw,width=160,height=120 ! videoconvert ! "
      "capsfilter caps=video/x-raw,format=BGRx", "video/x-raw,format=RGB,width=320,height=240,"
      "framerate=30/1", &buffer, 1);

  check_scaled (out->data, 0.5, 0.5, 160, 120);
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

static Suite *
visiondetectmeta_suite (void)
{
  Suite *s = suite_create ("visiondetectmeta");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_copy);
  tcase_add_test (tc, test_videoscale);
  tcase_add_test (tc, test_videoconvert_then_scale);
  return s;
}

GST_CHECK_MAIN (visiondetectmeta);
