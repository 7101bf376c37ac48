/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack: ids across frames on the ROI metas (our params and DL Streamer's
 * "object_id" structure) and the companion meta, predicted boxes on frames
 * without detection, resets on flush and size changes, visionjson's fields,
 * and bad metadata. Detections are put on the buffers by hand, as visiondetect
 * would (ROI meta with "detection" params plus the companion meta). Built
 * against GStreamer >= 1.24: the tracking entries of the analytics relation
 * meta. */
#include "vdtest.h"
#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 320
#define HEIGHT 240

static const gchar *caps = "video/x-raw,format=RGB,width=320,height=240,"
    "framerate=25/1";

static GstBuffer *
new_frame (guint index)
{
  GstBuffer *buffer = gst_buffer_new_allocate (NULL, WIDTH * HEIGHT * 3, NULL);

  GST_BUFFER_PTS (buffer) = index * 40 * GST_MSECOND;
  GST_BUFFER_DURATION (buffer) = 40 * GST_MSECOND;
  return buffer;
}

/* a detection as visiondetect attaches it */
static void
add_detection (GstBuffer * buffer, GstVisionDetectMeta ** meta, gint roi_id,
    const gchar * label, gint label_id, gdouble x, gdouble y, gdouble w,
    gdouble h, gdouble confidence)
{
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_add_video_region_of_interest_meta (buffer, label, (guint) x,
      (guint) y, (guint) w, (guint) h);

  roi->id = roi_id;
  gst_video_region_of_interest_meta_add_param (roi,
      gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE, x / WIDTH,
          "y_min", G_TYPE_DOUBLE, y / HEIGHT, "x_max", G_TYPE_DOUBLE,
          (x + w) / WIDTH, "y_max", G_TYPE_DOUBLE, (y + h) / HEIGHT,
          "confidence", G_TYPE_DOUBLE, confidence, "label_id", G_TYPE_INT,
          label_id, "label", G_TYPE_STRING, label, NULL));
  if (*meta == NULL)
    *meta = vdtest_add_detect_meta (buffer, WIDTH, HEIGHT);
  vdtest_add_detection (*meta, x, y, w, h, confidence, label_id, label, roi_id);
}

/* a frame of visiondetect: two balls crossing horizontally, or a skipped
 * frame (no meta at all) */
static GstBuffer *
crossing_frame (guint i, gboolean detected)
{
  GstBuffer *b = new_frame (i);
  GstVisionDetectMeta *meta = NULL;

  if (!detected)
    return b;
  meta = vdtest_add_detect_meta (b, WIDTH, HEIGHT);
  /* roi ids swap order each frame: ids must come from the boxes */
  add_detection (b, &meta, i % 2, "ball", 1, 20.0 + 6.0 * i, 100, 30, 30, 0.9);
  add_detection (b, &meta, 1 - i % 2, "ball", 1, 270.0 - 6.0 * i, 104, 30, 30,
      0.8);
  return b;
}

typedef struct
{
  gint roi_id;
  gint object_id;               /* from the "detection" params, 0 when none */
  gint dl_object_id;            /* from the "object_id" structure, 0 when none */
  gboolean tracked;
  gdouble cx;
} RoiInfo;

static GArray *
roi_infos (GstBuffer * buffer)
{
  GArray *infos = g_array_new (FALSE, TRUE, sizeof (RoiInfo));
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;

  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
    RoiInfo info = { roi->id, 0, 0, FALSE, roi->x + roi->w / 2.0 };
    GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
        "detection");
    GstStructure *o = gst_video_region_of_interest_meta_get_param (roi,
        "object_id");

    if (s != NULL) {
      gst_structure_get_int (s, "object_id", &info.object_id);
      gst_structure_get_boolean (s, "tracked", &info.tracked);
    }
    if (o != NULL)
      fail_unless (gst_structure_get_int (o, "id", &info.dl_object_id));
    g_array_append_val (infos, info);
  }
  return infos;
}

static GstVisionDetection *
companion_for (GstBuffer * buffer, gint roi_id)
{
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (buffer);
  guint i;

  if (meta == NULL)
    return NULL;
  for (i = 0; i < meta->detections->len; i++) {
    GstVisionDetection *d =
        &g_array_index (meta->detections, GstVisionDetection, i);
    if (d->roi_id == roi_id)
      return d;
  }
  return NULL;
}

static GstHarness *
new_track (const gchar * props)
{
  gchar *launch = g_strdup_printf ("visiontrack %s", props ? props : "");
  GstHarness *h = gst_harness_new_parse (launch);

  g_free (launch);
  gst_harness_set_src_caps_str (h, caps);
  return h;
}

/* The output of crossing_frame (@i, @detected) through @h. */
static GstBuffer *
push_crossing (GstHarness * h, guint i, gboolean detected)
{
  fail_unless_equals_int (gst_harness_push (h, crossing_frame (i, detected)),
      GST_FLOW_OK);
  return gst_harness_pull (h);
}

/* Two balls cross; the left one (starting at x 35) keeps one id, the right one
 * another, through the crossing; the ids are on both ROI conventions and in the
 * companion meta. The first frame has no ids (confirm-hits 2). */
GST_START_TEST (test_ids_through_crossing)
{
  GstHarness *h = new_track (NULL);
  gint left_id = 0, right_id = 0;
  guint i;

  for (i = 0; i < 40; i++) {
    GstBuffer *out;
    GArray *infos;
    guint k;

    out = push_crossing (h, i, TRUE);
    infos = roi_infos (out);
    fail_unless_equals_int (infos->len, 2);
    for (k = 0; k < infos->len; k++) {
      RoiInfo *r = &g_array_index (infos, RoiInfo, k);
      gboolean left = r->roi_id == (gint) (i % 2);
      GstVisionDetection *d = companion_for (out, r->roi_id);

      fail_unless (d != NULL);
      fail_unless (!r->tracked && !d->tracked);
      if (i == 0) {
        fail_unless_equals_int (r->object_id, 0);
        fail_unless_equals_int (r->dl_object_id, 0);
        fail_unless_equals_int (d->object_id, 0);
        continue;
      }
      if (i == 1) {
        if (left)
          left_id = r->object_id;
        else
          right_id = r->object_id;
      }
      fail_unless (r->object_id > 0, "frame %u: no id", i);
      fail_unless_equals_int (r->object_id, left ? left_id : right_id);
      fail_unless_equals_int (r->dl_object_id, r->object_id);
      fail_unless_equals_int (d->object_id, r->object_id);
    }
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  fail_unless (left_id > 0 && right_id > 0 && left_id != right_id);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Detections on every 3rd frame (visiondetect interval=3: the other frames
 * carry no meta): the frames between get both balls, predicted, marked
 * tracked, with their ids, near where they are; a frame with the companion
 * meta but no detection is a detection frame (no prediction from it beyond
 * hold-misses). */
GST_START_TEST (test_predictions_on_skipped_frames)
{
  GstHarness *h = new_track (NULL);
  gint ids[2] = { 0, 0 };
  guint i;

  for (i = 0; i < 30; i++) {
    gboolean detected = i % 3 == 0;
    GstBuffer *out;
    GArray *infos;
    guint k;

    out = push_crossing (h, i, detected);
    infos = roi_infos (out);
    if (i == 3) {
      for (k = 0; k < infos->len; k++) {
        RoiInfo *r = &g_array_index (infos, RoiInfo, k);
        ids[r->roi_id == 1] = r->object_id;
      }
    }
    if (i < 3) {
      g_array_unref (infos);
      gst_buffer_unref (out);
      continue;
    }
    fail_unless_equals_int (infos->len, 2);
    for (k = 0; k < infos->len; k++) {
      RoiInfo *r = &g_array_index (infos, RoiInfo, k);
      GstVisionDetection *d = companion_for (out, r->roi_id);

      fail_unless (r->object_id == ids[0] || r->object_id == ids[1]);
      fail_unless_equals_int (r->dl_object_id, r->object_id);
      fail_unless (r->tracked == !detected);
      fail_unless (d != NULL && d->tracked == !detected
          && d->object_id == r->object_id);
      if (!detected) {
        /* the left ball's centre is at 35 + 6 i: the prediction follows
         * once the velocity is known (within 8 px, the speed is 6 px/frame) */
        gdouble left = 35.0 + 6.0 * i, right = 285.0 - 6.0 * i;

        if (i > 9)
          fail_unless (fabs (r->cx - left) < 8.0 || fabs (r->cx - right) < 8.0,
              "frame %u: predicted centre %f, balls at %f and %f", i, r->cx,
              left, right);
      }
    }
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  fail_unless (ids[0] > 0 && ids[1] > 0 && ids[0] != ids[1]);

  /* inference ran and found nothing: shown once more (hold-misses 1), then not */
  for (i = 30; i < 33; i++) {
    GstBuffer *b = new_frame (i);
    GstBuffer *out;
    GArray *infos;

    vdtest_add_detect_meta (b, WIDTH, HEIGHT);
    out = gst_harness_push_and_pull (h, b);
    infos = roi_infos (out);
    fail_unless_equals_int (infos->len, i == 30 ? 2 : 0);
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Tracked boxes keep their keypoints: on a detection frame the ROI meta's
 * "keypoints" param and the companion entry's keypoints stay with the
 * detection the track matched (its object id beside them); on a frame the
 * detector skipped, the predicted boxes carry none (a pose is not predicted:
 * the last one moved with the box would show limbs where they no longer
 * are). */
GST_START_TEST (test_keypoints_kept)
{
  GstHarness *h = new_track (NULL);
  guint i;

  for (i = 0; i < 12; i++) {
    gboolean detected = i % 3 == 0;
    GstBuffer *in = crossing_frame (i, detected), *out;
    GstVisionDetectMeta *meta = gst_buffer_get_vision_detect_meta (in);
    GstVideoRegionOfInterestMeta *roi;
    gpointer state = NULL;
    guint k;

    for (k = 0; meta != NULL && k < meta->detections->len; k++) {
      const GstVisionDetection *d =
          &g_array_index (meta->detections, GstVisionDetection, k);
      /* one keypoint at the box's centre, its score the ROI id */
      const gfloat point[3] = { (gfloat) (d->x + d->w / 2),
        (gfloat) (d->y + d->h / 2), (gfloat) d->roi_id
      };

      fail_unless (gst_vision_detect_meta_set_keypoints (meta, k, point, 3));
      gst_video_region_of_interest_meta_add_param
          (gst_buffer_get_video_region_of_interest_meta_id (in, d->roi_id),
          gst_structure_new ("keypoints", "format", G_TYPE_STRING,
              "keypoints", "roi", G_TYPE_INT, d->roi_id, NULL));
    }
    fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
    out = gst_harness_pull (h);
    meta = gst_buffer_get_vision_detect_meta (out);
    fail_unless (meta != NULL || i < 3);
    while ((roi = (GstVideoRegionOfInterestMeta *)
            gst_buffer_iterate_meta_filtered (out, &state,
                GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
      GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
          "keypoints");
      gint marker = -1;

      if (detected) {
        fail_unless (s != NULL, "frame %u: ROI %d lost its keypoints", i,
            roi->id);
        fail_unless (gst_structure_get_int (s, "roi", &marker));
        fail_unless_equals_int (marker, roi->id);
      } else {
        fail_unless (s == NULL, "frame %u: keypoints on a predicted box", i);
      }
    }
    for (k = 0; meta != NULL && k < meta->detections->len; k++) {
      const GstVisionDetection *d =
          &g_array_index (meta->detections, GstVisionDetection, k);
      gsize n = 0;
      const gfloat *v = gst_vision_detect_meta_get_keypoints (meta, k, &n);

      fail_unless_equals_int (d->tracked, !detected);
      if (detected) {
        fail_unless (v != NULL && n == 3, "frame %u: entry %u lost its "
            "keypoints", i, k);
        fail_unless_equals_float (v[2], (gfloat) d->roi_id);
        fail_unless (fabs (v[0] - (d->x + d->w / 2)) < 1e-3);
        fail_unless (i < 3 || d->object_id > 0);
      } else {
        fail_unless (v == NULL, "frame %u: keypoints on predicted entry %u",
            i, k);
        fail_unless (d->object_id > 0);
      }
    }
    gst_buffer_unref (out);
  }
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Frames visiondetect repeated (GAP duplicates of its last inferred frame, as
 * videorate makes them from a source at a third of the rate): the same
 * detections, with the ids of the frame they repeat, as detections; for the
 * tracker they are frames without a new observation, so that it learns the
 * balls' motion from the real frames and a frame without detection after them
 * is predicted where the balls are (within 6 px; measured: exactly there, and
 * 10 px behind when repeated frames were fed to the tracker as new
 * observations of balls standing still). */
GST_START_TEST (test_repeated_frames)
{
  GstHarness *h = new_track (NULL);
  gint ids[2] = { 0, 0 }, source_ids[2] = { 0, 0 };
  GstBuffer *out;
  GArray *infos;
  guint i, k;

  for (i = 0; i < 30; i++) {
    guint source = i - i % 3;
    GstBuffer *b = crossing_frame (source, TRUE);

    GST_BUFFER_PTS (b) = i * 40 * GST_MSECOND;
    if (i != source) {
      vdtest_get_detect_meta (b)->inference = GST_VISION_DETECT_REPEATED;
      GST_BUFFER_FLAG_SET (b, GST_BUFFER_FLAG_GAP);
    }
    out = gst_harness_push_and_pull (h, b);
    infos = roi_infos (out);
    fail_unless_equals_int (infos->len, 2);
    for (k = 0; k < infos->len; k++) {
      RoiInfo *r = &g_array_index (infos, RoiInfo, k);
      GstVisionDetection *d = companion_for (out, r->roi_id);

      fail_if (r->tracked, "frame %u: a repeated detection as a prediction", i);
      fail_unless (d != NULL && d->object_id == r->object_id);
      if (i == source)
        source_ids[r->roi_id] = r->object_id;
      else
        fail_unless_equals_int (r->object_id, source_ids[r->roi_id]);
      if (i == 6)
        ids[r->roi_id == 1] = r->object_id;
      if (i >= 6)
        fail_unless (r->object_id == ids[0] || r->object_id == ids[1],
            "frame %u: id %d, want %d or %d", i, r->object_id, ids[0], ids[1]);
    }
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  fail_unless (ids[0] > 0 && ids[1] > 0 && ids[0] != ids[1]);

  /* frame 30, skipped: both balls predicted where they are at its time */
  out = push_crossing (h, 30, FALSE);
  infos = roi_infos (out);
  fail_unless_equals_int (infos->len, 2);
  for (k = 0; k < infos->len; k++) {
    RoiInfo *r = &g_array_index (infos, RoiInfo, k);
    gdouble left = 35.0 + 6.0 * 30, right = 285.0 - 6.0 * 30;

    fail_unless (r->tracked);
    fail_unless (fabs (r->cx - left) < 6.0 || fabs (r->cx - right) < 6.0,
        "predicted centre %f, balls at %f and %f", r->cx, left, right);
  }
  g_array_unref (infos);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* One ball, detected on frames 0, 6, 9 (interval 3, frame 3's inference found
 * nothing): its id appears on frame 1 (predicted, provisional, with the
 * detection's label id), frame 3's miss hides it (not predicted as
 * hold-misses would show a confirmed track), and frame 6's detection has the
 * same id; with confirm-frames=0 the id waits for two detections in a row. */
GST_START_TEST (test_id_between_detections)
{
  const gchar *props[] = { NULL, "confirm-frames=0" };
  guint v;

  for (v = 0; v < G_N_ELEMENTS (props); v++) {
    GstHarness *h = new_track (props[v]);
    gint id = 0;
    guint i;

    for (i = 0; i < 10; i++) {
      GstBuffer *b = new_frame (i), *out;
      GstVisionDetectMeta *meta = NULL;
      GArray *infos;
      guint expected;

      if (i % 3 == 0)
        meta = vdtest_add_detect_meta (b, WIDTH, HEIGHT);
      if (i % 3 == 0 && i != 3)
        add_detection (b, &meta, 0, "ball", 3, 100.0 + 2.0 * i, 100, 30, 30,
            0.9);
      out = gst_harness_push_and_pull (h, b);
      infos = roi_infos (out);
      if (props[v] == NULL)
        expected = i == 3 || i == 4 || i == 5 ? 0 : 1;
      else
        expected = i % 3 == 0 && i != 3 ? 1 : 0;
      fail_unless (infos->len == expected, "frame %u (%s): %u ROIs, not %u",
          i, props[v] ? props[v] : "defaults", infos->len, expected);
      if (infos->len == 1) {
        RoiInfo *r = &g_array_index (infos, RoiInfo, 0);
        GstVideoRegionOfInterestMeta *roi =
            gst_buffer_get_video_region_of_interest_meta_id (out, r->roi_id);
        GstStructure *s =
            gst_video_region_of_interest_meta_get_param (roi, "detection");
        gint label_id = -1;

        fail_unless (r->tracked == (i % 3 != 0));
        if (props[v] == NULL && i >= 1) {
          if (id == 0)
            id = r->object_id;
          fail_unless (id > 0);
          fail_unless_equals_int (r->object_id, id);
        }
        /* without: tentative on frame 0, dropped by frame 3's miss, again
         * tentative on frame 6, confirmed on frame 9 */
        if (props[v] != NULL)
          fail_unless_equals_int (r->object_id, i == 9 ? 1 : 0);
        fail_unless (gst_structure_get_int (s, "label_id", &label_id));
        fail_unless_equals_int (label_id, 3);
        fail_unless_equals_string (g_quark_to_string (roi->roi_type), "ball");
      }
      g_array_unref (infos);
      gst_buffer_unref (out);
    }
    fail_unless (props[v] != NULL || id > 0);
    gst_harness_teardown (h);
  }
}

GST_END_TEST;

static gint
first_object_id (GstBuffer * buffer)
{
  GArray *infos = roi_infos (buffer);
  gint id = infos->len > 0 ? g_array_index (infos, RoiInfo, 0).object_id : -1;

  g_array_unref (infos);
  return id;
}

static gint
push_ball (GstHarness * h, guint i)
{
  GstBuffer *b = new_frame (i);
  GstVisionDetectMeta *meta = NULL;
  GstBuffer *out;
  gint id;

  add_detection (b, &meta, 0, "ball", 1, 100, 100, 30, 30, 0.9);
  out = gst_harness_push_and_pull (h, b);
  id = first_object_id (out);
  gst_buffer_unref (out);
  return id;
}

/* A flush (a seek) and a change of frame size forget the tracks: the same box
 * gets a new id after them, and ids never repeat. */
GST_START_TEST (test_flush_and_caps_reset)
{
  GstHarness *h = new_track ("confirm-hits=1");
  gint id;

  id = push_ball (h, 0);
  fail_unless (id > 0);
  fail_unless_equals_int (push_ball (h, 1), id);
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  /* the harness needs its segment again after the flush */
  {
    GstSegment segment;

    gst_segment_init (&segment, GST_FORMAT_TIME);
    fail_unless (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  }
  fail_unless_equals_int (push_ball (h, 2), id + 1);
  fail_unless_equals_int (push_ball (h, 3), id + 1);

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=640,"
      "height=480,framerate=25/1");
  fail_unless_equals_int (push_ball (h, 4), id + 2);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Bad metadata never crashes and is never tracked: a ROI meta without
 * params (another element's: tracked from its integer box, given DL Streamer's
 * "object_id" structure only), empty boxes, NaN and infinite params, a label
 * that is not UTF-8; invalid settings at run time are a warning. */
GST_START_TEST (test_bad_metadata)
{
  GstHarness *h = new_track ("confirm-hits=1");
  GstElement *track = gst_harness_find_element (h, "visiontrack");
  guint i;

  for (i = 0; i < 4; i++) {
    GstBuffer *b = new_frame (i);
    GstVideoRegionOfInterestMeta *roi;
    GstBuffer *out;
    GArray *infos;
    guint k;

    roi = gst_buffer_add_video_region_of_interest_meta (b, "face", 10, 10, 40,
        40);
    roi->id = 7;
    roi = gst_buffer_add_video_region_of_interest_meta (b, "empty", 100, 100,
        0, 0);
    roi->id = 8;
    roi = gst_buffer_add_video_region_of_interest_meta (b, "nan", 200, 100,
        20, 20);
    roi->id = 9;
    gst_video_region_of_interest_meta_add_param (roi,
        gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE, NAN,
            "y_min", G_TYPE_DOUBLE, 0.1, "x_max", G_TYPE_DOUBLE, INFINITY,
            "y_max", G_TYPE_DOUBLE, 0.2, "confidence", G_TYPE_DOUBLE, NAN,
            NULL));
    roi = gst_buffer_add_video_region_of_interest_meta (b, "huge", 0, 0,
        G_MAXUINT, G_MAXUINT);
    roi->id = 10;
    gst_video_region_of_interest_meta_add_param (roi,
        gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE, -1e300,
            "y_min", G_TYPE_DOUBLE, -1e300, "x_max", G_TYPE_DOUBLE, 1e300,
            "y_max", G_TYPE_DOUBLE, 1e300, "confidence", G_TYPE_STRING, "x",
            NULL));
    roi = gst_buffer_add_video_region_of_interest_meta (b, "\xff\xfe", 60, 60,
        20, 20);
    roi->id = 11;
    if (i == 2)
      g_object_set (track, "low-threshold", 0.9f, NULL);   /* above high */

    out = gst_harness_push_and_pull (h, b);
    infos = roi_infos (out);
    for (k = 0; k < infos->len; k++) {
      RoiInfo *r = &g_array_index (infos, RoiInfo, k);

      if (r->roi_id == 7 || r->roi_id == 11) {
        /* no "detection" params to write to: DL Streamer's structure only */
        fail_unless_equals_int (r->object_id, 0);
        fail_unless (r->dl_object_id > 0, "frame %u roi %d untracked", i,
            r->roi_id);
      } else if (r->roi_id >= 8 && r->roi_id <= 10) {
        fail_unless_equals_int (r->dl_object_id, 0);
      }
    }
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  gst_object_unref (track);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* visionjson after visiontrack writes object_id and tracked */
GST_START_TEST (test_json_fields)
{
  GstHarness *h = new_track ("confirm-hits=1 ! visionjson post-messages=true");
  GstElement *json = gst_harness_find_element (h, "visionjson");
  GstBus *bus = gst_bus_new ();
  GstBuffer *out;
  GstMessage *msg;
  guint i;

  gst_element_set_bus (json, bus);
  for (i = 0; i < 3; i++) {
    out = gst_harness_push_and_pull (h, crossing_frame (i, i != 2));
    gst_buffer_unref (out);
  }
  for (i = 0; i < 3; i++) {
    const gchar *line;

    msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT);
    fail_unless (msg != NULL);
    line = gst_structure_get_string (gst_message_get_structure (msg), "json");
    fail_unless (strstr (line, "\"object_id\":1,") != NULL, "%s", line);
    fail_unless (strstr (line, "\"object_id\":2,") != NULL, "%s", line);
    fail_unless ((strstr (line, "\"tracked\":true") != NULL) == (i == 2),
        "%s", line);
    gst_message_unref (msg);
  }
  gst_element_set_bus (json, NULL);
  gst_object_unref (bus);
  gst_object_unref (json);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* visionoverlay draws ids and trails of tracked objects (and predicted boxes
 * dashed) without trouble; the trail leaves pixels between the boxes */
GST_START_TEST (test_overlay_trail)
{
  GstHarness *h = gst_harness_new_parse ("visiontrack ! visionoverlay "
      "trail=20 line-width=2");
  GstBuffer *out = NULL;
  GstMapInfo map;
  guint i;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGBx,width=320,"
      "height=240,framerate=25/1");
  for (i = 0; i < 12; i++) {
    GstBuffer *b = gst_buffer_new_allocate (NULL, WIDTH * HEIGHT * 4, NULL);
    GstVisionDetectMeta *meta = NULL;

    gst_buffer_memset (b, 0, 0, WIDTH * HEIGHT * 4);
    GST_BUFFER_PTS (b) = i * 40 * GST_MSECOND;
    if (i % 2 == 0)
      add_detection (b, &meta, 0, "ball", 1, 20.0 + 10.0 * i, 100, 30, 30,
          0.9);
    if (out)
      gst_buffer_unref (out);
    out = gst_harness_push_and_pull (h, b);
  }
  /* the first centres (35..45, 115) are far from the last box (130..160):
   * only the trail can have drawn there */
  gst_buffer_map (out, &map, GST_MAP_READ);
  {
    guint x, lit = 0;

    for (x = 36; x < 100; x++) {
      const guint8 *p = map.data + (115 * WIDTH + x) * 4;
      lit += (p[0] | p[1] | p[2]) != 0;
    }
    fail_unless (lit > 40, "only %u trail pixels", lit);
  }
  gst_buffer_unmap (out, &map);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}

GST_END_TEST;

#ifdef HAVE_GST_ANALYTICS
/* visiondetect's frame built against GStreamer >= 1.24: each ROI meta also an
 * object-detection entry; @linked: the ROI meta has the entry's id (as
 * visiondetect and DL Streamer link them), else ids of its own (another
 * element's, found by class and box) */
static GstBuffer *
crossing_frame_od (guint i, gboolean detected, gboolean linked)
{
  GstBuffer *b = new_frame (i);
  GstAnalyticsRelationMeta *relations;
  GstVisionDetectMeta *meta = NULL;
  const gdouble xs[2] = { 20.0 + 6.0 * i, 270.0 - 6.0 * i };
  const gdouble ys[2] = { 100, 104 };
  const gdouble confs[2] = { 0.9, 0.8 };

  if (!detected)
    return b;
  meta = vdtest_add_detect_meta (b, WIDTH, HEIGHT);
  relations = gst_buffer_add_analytics_relation_meta (b);
  for (guint k = 0; k < 2; k++) {
    GstAnalyticsODMtd od;

    fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
            g_quark_from_string ("ball"), (gint) xs[k], (gint) ys[k], 30, 30,
            confs[k], &od));
    add_detection (b, &meta, linked ? (gint) od.id : 7 + (gint) k, "ball", 1,
        xs[k], ys[k], 30, 30, confs[k]);
  }
  return b;
}

static guint
count_entries (GstAnalyticsRelationMeta * relations, GstAnalyticsMtdType type)
{
  GstAnalyticsMtd mtd;
  gpointer state = NULL;
  guint n = 0;

  while (relations != NULL && gst_analytics_relation_meta_iterate (relations,
          &state, type, &mtd))
    n++;
  return n;
}

/* Every ROI meta with an id has its object-detection entry (visiondetect's, or
 * visiontrack's for a predicted box, with the ROI meta's id) and a tracking
 * entry related from it: the object id, the running time of the first frame
 * with that id, of the last detection, lost once a detection frame missed it.
 * After the objects leave, the entries stay, lost, unrelated, while the tracks
 * are kept. Detection frames alternate ROI metas linked by id and not. */
GST_START_TEST (test_analytics_tracking)
{
  GstHarness *h = new_track (NULL);
  GHashTable *first_frames = g_hash_table_new (NULL, NULL);
  GstClockTime last_detection = 0;
  guint i, n_checked = 0;

  for (i = 0; i < 33; i++) {
    gboolean detected = i < 30 ? i % 3 == 0 : TRUE;
    GstBuffer *in = i < 30 ? crossing_frame_od (i, detected, i % 2 == 0) :
        new_frame (i);
    GstClockTime now = i * 40 * GST_MSECOND;
    GstAnalyticsRelationMeta *relations;
    GstBuffer *out;
    GArray *infos;
    guint k, n_shown = 0;

    if (i >= 30)                /* inference ran and found nothing */
      vdtest_add_detect_meta (in, WIDTH, HEIGHT);
    if (detected && i < 30)
      last_detection = now;
    out = gst_harness_push_and_pull (h, in);
    relations = gst_buffer_get_analytics_relation_meta (out);
    infos = roi_infos (out);
    for (k = 0; k < infos->len; k++) {
      RoiInfo *r = &g_array_index (infos, RoiInfo, k);
      GstVideoRegionOfInterestMeta *roi =
          gst_buffer_get_video_region_of_interest_meta_id (out, r->roi_id);
      GstAnalyticsODMtd od;
      GstAnalyticsTrackingMtd trk;
      gpointer state = NULL;
      guint64 tid;
      GstClockTime first_seen, last_seen;
      gboolean lost, found = FALSE;
      gint x, y, w, hh;

      if (r->object_id <= 0)
        continue;
      n_shown++;
      fail_unless (relations != NULL);
      /* its entry: by id, or (another element's ids) by class and box */
      if (gst_analytics_relation_meta_get_od_mtd (relations, roi->id, &od))
        found = TRUE;
      else {
        fail_if (r->tracked, "frame %u: predicted box without its entry", i);
        while (!found && gst_analytics_relation_meta_iterate (relations,
                &state, gst_analytics_od_mtd_get_mtd_type (), &od)) {
          fail_unless (gst_analytics_od_mtd_get_location (&od, &x, &y, &w,
                  &hh, NULL));
          found = x == (gint) roi->x && y == (gint) roi->y;
        }
      }
      fail_unless (found, "frame %u: ROI %d without an entry", i, roi->id);
      fail_unless (gst_analytics_od_mtd_get_location (&od, &x, &y, &w, &hh,
              NULL));
      fail_unless (x == (gint) roi->x && y == (gint) roi->y
          && w == (gint) roi->w && hh == (gint) roi->h);
      fail_unless (gst_analytics_od_mtd_get_obj_type (&od) == roi->roi_type);

      state = NULL;
      fail_unless (gst_analytics_relation_meta_get_direct_related (relations,
              od.id, GST_ANALYTICS_REL_TYPE_RELATE_TO,
              gst_analytics_tracking_mtd_get_mtd_type (), &state, &trk),
          "frame %u: object %d without a tracking entry", i, r->object_id);
      fail_unless (gst_analytics_tracking_mtd_get_info (&trk, &tid,
              &first_seen, &last_seen, &lost));
      fail_unless_equals_int ((gint) tid, r->object_id);
      if (!g_hash_table_contains (first_frames, GINT_TO_POINTER (r->object_id)))
        g_hash_table_insert (first_frames, GINT_TO_POINTER (r->object_id),
            GSIZE_TO_POINTER (now + 1));
      fail_unless_equals_uint64 (first_seen,
          GPOINTER_TO_SIZE (g_hash_table_lookup (first_frames,
                  GINT_TO_POINTER (r->object_id))) - 1);
      fail_unless_equals_uint64 (last_seen, last_detection);
      fail_unless (lost == (i >= 30), "frame %u: lost %d", i, lost);
      n_checked++;
    }
    /* one tracking entry per track with an id, shown or not; the ids from
     * frame 1, a frame without detection (confirm-frames 2) */
    fail_unless_equals_int (count_entries (relations,
            gst_analytics_tracking_mtd_get_mtd_type ()), i == 0 ? 0 : 2);
    if (i >= 1 && i < 31)
      fail_unless_equals_int (n_shown, 2);
    if (i >= 31) {
      GstAnalyticsMtd trk;
      gpointer state = NULL;

      /* not shown (hold-misses 1): lost, no box */
      fail_unless_equals_int (n_shown, 0);
      fail_unless_equals_int (count_entries (relations,
              gst_analytics_od_mtd_get_mtd_type ()), 0);
      while (gst_analytics_relation_meta_iterate (relations, &state,
              gst_analytics_tracking_mtd_get_mtd_type (), &trk)) {
        gboolean lost = FALSE;
        GstClockTime last_seen = 0;

        fail_unless (gst_analytics_tracking_mtd_get_info (&trk, NULL, NULL,
                &last_seen, &lost));
        fail_unless (lost);
        fail_unless_equals_uint64 (last_seen, 27 * 40 * GST_MSECOND);
      }
    }
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  /* 2 objects on frames 1..30 */
  fail_unless_equals_int (n_checked, 2 * 30);
  fail_unless_equals_int (g_hash_table_size (first_frames), 2);
  g_hash_table_unref (first_frames);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Detections without object-detection entries (another detector): the tracking
 * entries are there, related to nothing; visiontrack adds entries only for the
 * boxes it predicts. */
GST_START_TEST (test_analytics_without_entries)
{
  GstHarness *h = new_track (NULL);
  guint i;

  for (i = 0; i < 6; i++) {
    GstBuffer *out = gst_harness_push_and_pull (h, crossing_frame (i, TRUE));
    GstAnalyticsRelationMeta *relations =
        gst_buffer_get_analytics_relation_meta (out);
    GstAnalyticsTrackingMtd trk;
    gpointer state = NULL;
    GArray *infos = roi_infos (out);
    guint n = 0;

    fail_unless_equals_int (count_entries (relations,
            gst_analytics_od_mtd_get_mtd_type ()), 0);
    while (relations != NULL && gst_analytics_relation_meta_iterate (relations,
            &state, gst_analytics_tracking_mtd_get_mtd_type (), &trk)) {
      guint64 tid;
      gboolean match = FALSE;

      fail_unless (gst_analytics_tracking_mtd_get_info (&trk, &tid, NULL, NULL,
              NULL));
      for (guint k = 0; k < infos->len; k++)
        match |= g_array_index (infos, RoiInfo, k).object_id == (gint) tid;
      fail_unless (match, "frame %u: tracking entry %" G_GUINT64_FORMAT
          " for no ROI meta", i, tid);
      n++;
    }
    /* ids from the second detection (confirm-hits 2) */
    fail_unless_equals_int (n, i == 0 ? 0 : 2);
    g_array_unref (infos);
    gst_buffer_unref (out);
  }
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Another detector that attaches only object-detection entries (GStreamer's
 * tensor decoders): its detections are tracked, each entry related to a
 * tracking entry whose id follows its ball through the crossing; a frame
 * without entries is one without detection, the tracks predicted with entries
 * of their own. */
GST_START_TEST (test_analytics_entries_only)
{
  GstHarness *h = new_track (NULL);
  guint64 left_id = 0, right_id = 0;
  guint i;

  for (i = 0; i < 24; i++) {
    gboolean detected = i % 4 != 3;
    GstBuffer *b = new_frame (i);
    const gint xs[2] = { 20 + 6 * (gint) i, 270 - 6 * (gint) i };
    GstAnalyticsRelationMeta *relations;
    GstAnalyticsODMtd od;
    gpointer state = NULL;
    GstBuffer *out;
    guint n_od = 0;

    if (detected) {
      relations = gst_buffer_add_analytics_relation_meta (b);
      for (guint k = 0; k < 2; k++)
        fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
                g_quark_from_string ("ball"), xs[k], 100 + 4 * (gint) k, 30,
                30, 0.9f - 0.1f * k, &od));
    }
    out = gst_harness_push_and_pull (h, b);
    relations = gst_buffer_get_analytics_relation_meta (out);
    if (i == 0) {
      fail_unless_equals_int (count_entries (relations,
              gst_analytics_tracking_mtd_get_mtd_type ()), 0);
      gst_buffer_unref (out);
      continue;
    }
    fail_unless (relations != NULL);
    while (gst_analytics_relation_meta_iterate (relations, &state,
            gst_analytics_od_mtd_get_mtd_type (), &od)) {
      GstAnalyticsTrackingMtd trk;
      gpointer rel_state = NULL;
      guint64 tid;
      gboolean lost;
      gint x, y, w, hh;

      fail_unless (gst_analytics_od_mtd_get_location (&od, &x, &y, &w, &hh,
              NULL));
      fail_unless (gst_analytics_relation_meta_get_direct_related (relations,
              od.id, GST_ANALYTICS_REL_TYPE_RELATE_TO,
              gst_analytics_tracking_mtd_get_mtd_type (), &rel_state, &trk),
          "frame %u: entry at x %d without a tracking entry", i, x);
      fail_unless (gst_analytics_tracking_mtd_get_info (&trk, &tid, NULL, NULL,
              &lost));
      fail_if (lost);
      /* the ball at the left at first (centre 35 + 6 i, top 100), the other
       * one at 285 - 6 i, top 104: told apart by their tops where they
       * cross */
      if (abs (y - 100) < abs (y - 104)) {
        fail_unless (fabs (x + w / 2.0 - (35.0 + 6.0 * i)) < 8.0,
            "frame %u: the left ball at x %d", i, x);
        if (left_id == 0)
          left_id = tid;
        fail_unless_equals_uint64 (tid, left_id);
      } else {
        fail_unless (fabs (x + w / 2.0 - (285.0 - 6.0 * i)) < 8.0,
            "frame %u: the right ball at x %d", i, x);
        if (right_id == 0)
          right_id = tid;
        fail_unless_equals_uint64 (tid, right_id);
      }
      n_od++;
    }
    /* the detector's two entries, or visiontrack's two predicted boxes (also
     * as ROI metas) */
    fail_unless_equals_int (n_od, 2);
    fail_unless_equals_int (vdtest_count_roi_metas (out), detected ? 0 : 2);
    gst_buffer_unref (out);
  }
  fail_unless (left_id > 0 && right_id > 0 && left_id != right_id);
  gst_harness_teardown (h);
}

GST_END_TEST;
#endif

static Suite *
visiontrack_suite (void)
{
  Suite *s = suite_create ("visiontrack");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_ids_through_crossing);
  tcase_add_test (tc, test_predictions_on_skipped_frames);
  tcase_add_test (tc, test_keypoints_kept);
  tcase_add_test (tc, test_repeated_frames);
  tcase_add_test (tc, test_id_between_detections);
  tcase_add_test (tc, test_flush_and_caps_reset);
  tcase_add_test (tc, test_bad_metadata);
  tcase_add_test (tc, test_json_fields);
  tcase_add_test (tc, test_overlay_trail);
#ifdef HAVE_GST_ANALYTICS
  tcase_add_test (tc, test_analytics_tracking);
  tcase_add_test (tc, test_analytics_without_entries);
  tcase_add_test (tc, test_analytics_entries_only);
#endif
  return s;
}

GST_CHECK_MAIN (visiontrack);
