/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The companion meta (GstVisionDetectMeta) through GStreamer's own elements:
 * copies keep it, videoscale rescales it, videoconvert keeps it. No engine
 * needed. Where GStreamer 1.22 gives the meta no way to follow the picture
 * (a letterboxing videoscale, videoflip, videocrop, videobox), the boxes must
 * not survive at the wrong place: each test draws an object, puts a box on
 * it and checks that any box after the element is where the object went. */
#include "vdtest.h"

#include <math.h>
#include <string.h>

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

/* An RGB frame, dark, with a white object at (OBJ_X, OBJ_Y, OBJ_W, OBJ_H) and
 * a companion meta (and an ROI meta) with exactly that box. */
#define OBJ_X 40
#define OBJ_Y 30
#define OBJ_W 80
#define OBJ_H 60

static GstBuffer *
frame_with_object (gint width, gint height)
{
  GstVideoInfo info;
  GstVideoFrame frame;
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  GstVideoRegionOfInterestMeta *roi;
  gint x, y;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, width, height);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_memset (buffer, 0, 0x20, GST_VIDEO_INFO_SIZE (&info));
  fail_unless (gst_video_frame_map (&frame, &info, buffer, GST_MAP_WRITE));
  for (y = OBJ_Y; y < OBJ_Y + OBJ_H; y++)
    for (x = OBJ_X; x < OBJ_X + OBJ_W; x++)
      memset ((guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame, 0) +
          y * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0) + 3 * x, 0xff, 3);
  gst_video_frame_unmap (&frame);

  meta = vdtest_add_detect_meta (buffer, width, height);
  vdtest_add_detection (meta, OBJ_X, OBJ_Y, OBJ_W, OBJ_H, 0.9, 1, "box", 0);
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "box", OBJ_X,
      OBJ_Y, OBJ_W, OBJ_H);
  roi->id = 0;
  return buffer;
}

/* The bounding box of the bright pixels of an RGB @width x @height buffer
 * (brighter than halfway between the object and the background, so that a
 * scaler's blurred edge counts half a pixel either way). */
static void
find_object (GstBuffer * buffer, gint width, gint height, gdouble * box)
{
  GstVideoInfo info;
  GstVideoFrame frame;
  gint x, y, x1 = width, y1 = height, x2 = -1, y2 = -1;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, width, height);
  fail_unless (gst_video_frame_map (&frame, &info, buffer, GST_MAP_READ));
  for (y = 0; y < height; y++)
    for (x = 0; x < width; x++) {
      const guint8 *p = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame,
          0) + y * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0) + 3 * x;

      if (p[1] > (0xff + 0x20) / 2) {
        x1 = MIN (x1, x);
        y1 = MIN (y1, y);
        x2 = MAX (x2, x);
        y2 = MAX (y2, y);
      }
    }
  gst_video_frame_unmap (&frame);
  fail_unless (x2 >= 0, "the object is not in the output frame");
  box[0] = x1;
  box[1] = y1;
  box[2] = x2 + 1 - x1;
  box[3] = y2 + 1 - y1;
}

/* Runs the frame with the object through @description (RGB 320x240 in,
 * @width x @height out) and checks that the companion meta, if it is still
 * there, puts its box where the object is (within 1.5 pixels: the scaler's
 * blur and the halfway threshold move an edge by up to a pixel). Returns
 * whether the meta survived. */
static gboolean
object_followed (const gchar * description, gint width, gint height)
{
  GstBuffer *buffer = frame_with_object (320, 240);
  GList *out = vdtest_run_pipeline (description,
      "video/x-raw,format=RGB,width=320,height=240,framerate=30/1,"
      "pixel-aspect-ratio=1/1", &buffer, 1);
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (out->data);
  gdouble object[4];
  gboolean kept = meta != NULL;

  find_object (out->data, width, height, object);
  GST_INFO ("%s: object at %.0f,%.0f %.0fx%.0f, companion meta %s",
      description, object[0], object[1], object[2], object[3],
      kept ? "kept" : "dropped");
  if (kept) {
    const GstVisionDetection *d;

    fail_unless_equals_int (meta->width, width);
    fail_unless_equals_int (meta->height, height);
    fail_unless_equals_int (meta->detections->len, 1);
    d = &g_array_index (meta->detections, GstVisionDetection, 0);
    fail_unless (fabs (d->x - object[0]) <= 1.5 && fabs (d->y - object[1]) <= 1.5
        && fabs (d->w - object[2]) <= 1.5 && fabs (d->h - object[3]) <= 1.5,
        "%s: the box %.2f,%.2f %.2fx%.2f is not on the object %.0f,%.0f "
        "%.0fx%.0f", description, d->x, d->y, d->w, d->h, object[0],
        object[1], object[2], object[3]);
  }
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (buffer);
  return kept;
}

/* 4:3 to 1:1 with square pixels: videoscale letterboxes (add-borders, its
 * default) or stretches; the meta's transform is told neither, so it drops
 * the boxes rather than put them at the wrong place (the old transform
 * stretched them: 40 pixels off in y). */
GST_START_TEST (test_videoscale_letterbox)
{
  fail_if (object_followed ("videoscale add-borders=true ! capsfilter "
          "caps=video/x-raw,width=320,height=320,pixel-aspect-ratio=1/1",
          320, 320));
  fail_if (object_followed ("videoscale ! capsfilter "
          "caps=video/x-raw,width=480,height=240,pixel-aspect-ratio=1/1",
          480, 240));
  /* stretched: it would have been right, but the transform cannot tell */
  fail_if (object_followed ("videoscale add-borders=false ! capsfilter "
          "caps=video/x-raw,width=320,height=320,pixel-aspect-ratio=1/1",
          320, 320));
}

GST_END_TEST;

/* Scales that keep the display aspect ratio (to within one output pixel)
 * keep the boxes, on the object. */
GST_START_TEST (test_videoscale_same_aspect)
{
  fail_unless (object_followed ("videoscale add-borders=true ! capsfilter "
          "caps=video/x-raw,width=640,height=480,pixel-aspect-ratio=1/1",
          640, 480));
  /* 427x320 is 4:3 to within a third of a pixel: no border */
  fail_unless (object_followed ("videoscale add-borders=true ! capsfilter "
          "caps=video/x-raw,width=427,height=320,pixel-aspect-ratio=1/1",
          427, 320));
  /* non-square output pixels of the same display aspect ratio */
  fail_unless (object_followed ("videoscale add-borders=true ! capsfilter "
          "caps=video/x-raw,width=320,height=320,pixel-aspect-ratio=4/3",
          320, 320));
}

GST_END_TEST;

/* GStreamer 1.22's videoflip, videocrop and videobox never call a meta's
 * transform function: they drop every meta tagged with anything besides
 * "video" (ours has "size"), GStreamer's ROI metas too. docs/metadata.md says so;
 * these tests hold it to that and check that no box is left at the wrong
 * place. (videoflip's deprecated "method" property is overridden by
 * "video-direction" in gst_parse_launch in 1.22.0: the flips below use
 * video-direction.) */
GST_START_TEST (test_videoflip)
{
  fail_if (object_followed ("videoflip video-direction=horiz", 320, 240));
  fail_if (object_followed ("videoflip video-direction=vert", 320, 240));
  fail_if (object_followed ("videoflip video-direction=90r", 240, 320));
  fail_if (object_followed ("videoflip video-direction=180", 320, 240));
}

GST_END_TEST;

GST_START_TEST (test_videocrop)
{
  fail_if (object_followed ("videocrop left=20 top=10 right=30", 270, 230));
}

GST_END_TEST;

GST_START_TEST (test_videobox)
{
  /* positive values crop, negative ones add borders */
  fail_if (object_followed ("videobox left=20 top=10", 300, 230));
  fail_if (object_followed ("videobox left=-20 top=-10 fill=black", 340, 250));
}

GST_END_TEST;

/* the ROI metas through the same elements: dropped by flip, crop and box */
GST_START_TEST (test_roi_dropped_by_filters)
{
  const gchar *descriptions[] = { "videoflip video-direction=horiz",
    "videocrop left=20", "videobox left=-20", NULL
  };
  guint i;

  for (i = 0; descriptions[i] != NULL; i++) {
    GstBuffer *buffer = frame_with_object (320, 240);
    GList *out = vdtest_run_pipeline (descriptions[i],
        "video/x-raw,format=RGB,width=320,height=240,framerate=30/1",
        &buffer, 1);

    fail_unless_equals_int (vdtest_count_roi_metas (out->data), 0);
    g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
    gst_buffer_unref (buffer);
  }
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
  tcase_add_test (tc, test_videoscale_letterbox);
  tcase_add_test (tc, test_videoscale_same_aspect);
  tcase_add_test (tc, test_videoflip);
  tcase_add_test (tc, test_videocrop);
  tcase_add_test (tc, test_videobox);
  tcase_add_test (tc, test_roi_dropped_by_filters);
  return s;
}

GST_CHECK_MAIN (visiondetectmeta);
