/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack: persistent object ids for the detections of each frame. */

/**
 * SECTION:element-visiontrack
 * @title: visiontrack
 *
 * visiontrack follows the objects detected upstream across frames and gives
 * each one an id that stays the same while it is in view: the tracker core of
 * tracker/vt_tracker.h (ByteTrack-style association of high- and then
 * low-confidence detections with the constant-velocity Kalman predictions of
 * the tracks, per class). It reads the detections from the buffer's
 * #GstVideoRegionOfInterestMeta (from visiondetect or any other element) and,
 * for each detection of a confirmed track, sets:
 *
 * - `object_id` (int) in the ROI meta's "detection" parameter structure, and a
 *   parameter structure named "object_id" with field `id` (int), as DL
 *   Streamer's gvatrack does (the ROI meta's own `id` stays its per-buffer id);
 * - `object_id` in visiondetect's companion meta, so visionoverlay and
 *   visionjson show it.
 *
 * On a frame no detection ran on (visiondetect's companion meta says so: the
 * frames #GstVisionDetect:interval skips, and those skipped as late on a live
 * source; from another detector, a frame without any ROI meta), and for a
 * confirmed track that missed at most #GstVisionTrack:hold-misses detection
 * frames, it adds the track's predicted box as a new ROI meta (and companion
 * entry) marked `tracked`=TRUE in its "detection" structure, so that an overlay
 * sees every object on every frame. With such frames, a new object gets its id
 * on the first frame without detection after its first detection
 * (#GstVisionTrack:confirm-frames), not a whole interval later; if the next
 * detection frame misses it, it is hidden until it is detected again.
 * A detection's keypoints (a Keypoint R-CNN's) stay with it, its object id
 * beside them; a predicted box carries none (the box is predicted, not the
 * pose).
 *
 * Built against GStreamer >= 1.24, it also tracks the #GstAnalyticsODMtd
 * entries no ROI meta shows (another detector's, e.g. GStreamer's tensor
 * decoders), and adds one #GstAnalyticsTrackingMtd
 * per track with an id to the buffer's #GstAnalyticsRelationMeta (first seen,
 * last seen, lost), related from the #GstAnalyticsODMtd of the track's box on
 * the frame (its detection's, or one added with a predicted box).
 *
 * visiondetect's default threshold (0.5) keeps no low-confidence detections;
 * with `visiondetect threshold=0.1` the second association round can use them
 * (an object partly hidden keeps its id).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=in.mp4 ! decodebin ! videoconvert ! \
 *     visiondetect threshold=0.1 interval=3 ! visiontrack ! \
 *     visionoverlay trail=30 ! videoconvert ! autovideosink
 * ]|
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "vd_config.h"

#include "gstvisiontrack.h"
#include "gstvisiondetectmeta.h"
#include "helpers/detections.h"
#include "vt_tracker.h"

#include <math.h>
#include <string.h>

#include <gst/video/video.h>
#include "gstvisionanalytics.h"

GST_DEBUG_CATEGORY_STATIC (gst_vision_track_debug);
#define GST_CAT_DEFAULT gst_vision_track_debug

#define DEFAULT_HIGH_THRESHOLD 0.5f
#define DEFAULT_LOW_THRESHOLD 0.1f
#define DEFAULT_NEW_TRACK_THRESHOLD 0.6f
#define DEFAULT_MATCH_IOU 0.2f
#define DEFAULT_CONFIRM_HITS 2
#define DEFAULT_CONFIRM_FRAMES 2
#define DEFAULT_MAX_LOST 30
#define DEFAULT_MAX_LOST_TIME 0
#define DEFAULT_HOLD_MISSES 1
#define DEFAULT_PER_CLASS TRUE

enum
{
  PROP_0,
  PROP_HIGH_THRESHOLD,
  PROP_LOW_THRESHOLD,
  PROP_NEW_TRACK_THRESHOLD,
  PROP_MATCH_IOU,
  PROP_CONFIRM_HITS,
  PROP_CONFIRM_FRAMES,
  PROP_MAX_LOST,
  PROP_MAX_LOST_TIME,
  PROP_HOLD_MISSES,
  PROP_PER_CLASS,
};

/* frames whose running time is kept: a track's last detection is the frame
 * frames_lost frames back */
#define RECENT_FRAMES 64

struct _GstVisionTrack
{
  GstBaseTransform parent;

  /* properties, protected by the object lock */
  vt_tracker_params params;
  guint hold_misses;
  gboolean params_changed;

  /* streaming thread */
  vt_tracker *tracker;
  GstVideoInfo info;
  gboolean have_info;
  GHashTable *label_ids;        /* object id -> its label_id + 1 */
  GHashTable *class_label_ids;  /* class quark -> the last label_id + 1 seen */
  GArray *detections;           /* vt_detection of the frame */
  GPtrArray *rois;              /* their GstVideoRegionOfInterestMeta */
  GArray *ids;                  /* gint32 per detection */
  gboolean ids_current;         /* @ids are those of the last update, and only
                                 * repeated frames have come since */
  guint repeats;                /* repeated frames since the last update */
  GArray *track_ods;            /* gint per track: its predicted box's
                                 * object-detection entry, -1 when none */
  GArray *predictions;          /* GstVisionDetectionEntry of the frame */
  GArray *predicted_tracks;     /* guint: the track of each prediction */
#ifdef HAVE_GST_ANALYTICS
  GArray *od_only;              /* guint: the entry of each detection after
                                 * the ROI metas' (entries without one) */
  GHashTable *track_times;      /* object id -> TrackTimes */
  /* running times of the last frames, the newest at recent[recent_head] */
  GstClockTime recent[RECENT_FRAMES];
  guint recent_head, n_recent;
#endif
};

#ifdef HAVE_GST_ANALYTICS
typedef struct
{
  GstClockTime first_seen;      /* running time of its first frame with an id */
  GstClockTime last_seen;       /* running time of its last matched frame */
} TrackTimes;
#endif

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

#define gst_vision_track_parent_class parent_class
G_DEFINE_TYPE (GstVisionTrack, gst_vision_track, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (visiontrack, "visiontrack", GST_RANK_NONE,
    GST_TYPE_VISION_TRACK);

/* Forgets every track (a flush, a new stream, another frame size). Ids keep
 * increasing, so that a count downstream never sees an id twice. */
static void
reset_tracks (GstVisionTrack * self)
{
  if (self->tracker != NULL)
    vt_tracker_reset (self->tracker);
  self->ids_current = FALSE;
  if (self->label_ids != NULL)
    g_hash_table_remove_all (self->label_ids);
  if (self->class_label_ids != NULL)
    g_hash_table_remove_all (self->class_label_ids);
#ifdef HAVE_GST_ANALYTICS
  if (self->track_times != NULL)
    g_hash_table_remove_all (self->track_times);
  self->n_recent = 0;
#endif
}

/* The detection of @roi in frame pixels: the normalised box of its "detection"
 * parameters when they are there and finite (exact), else its integer box. */
static void
roi_to_detection (GstVideoRegionOfInterestMeta * roi, gint width, gint height,
    vt_detection * d)
{
  GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
      "detection");
  gdouble x1 = roi->x, y1 = roi->y;
  gdouble x2 = (gdouble) roi->x + roi->w, y2 = (gdouble) roi->y + roi->h;
  gdouble confidence = 1.0;

  if (s != NULL) {
    gdouble nx1, ny1, nx2, ny2, c;

    if (gst_structure_get (s, "x_min", G_TYPE_DOUBLE, &nx1,
            "y_min", G_TYPE_DOUBLE, &ny1, "x_max", G_TYPE_DOUBLE, &nx2,
            "y_max", G_TYPE_DOUBLE, &ny2, NULL)
        && isfinite (nx1) && isfinite (ny1) && isfinite (nx2)
        && isfinite (ny2)) {
      x1 = nx1 * width;
      y1 = ny1 * height;
      x2 = nx2 * width;
      y2 = ny2 * height;
    }
    /* a ROI without a confidence (another element's) counts as certain */
    if (gst_structure_get_double (s, "confidence", &c))
      confidence = c;
  }
  d->x1 = (gfloat) x1;
  d->y1 = (gfloat) y1;
  d->x2 = (gfloat) x2;
  d->y2 = (gfloat) y2;
  d->score = (gfloat) confidence;
  /* classes compared by name: label ids of different detectors differ */
  d->class_id = (gint) roi->roi_type;
  /* the tracker ignores NaN, infinite and empty boxes itself */
}

static gint
roi_label_id (GstVideoRegionOfInterestMeta * roi)
{
  GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
      "detection");
  gint label_id = -1;

  if (s != NULL)
    gst_structure_get_int (s, "label_id", &label_id);
  return label_id;
}

/* DL Streamer's convention ("object_id" structure, "id") and ours (object_id
 * in the "detection" structure). */
static void
set_roi_object_id (GstVideoRegionOfInterestMeta * roi, gint object_id)
{
  GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
      "detection");

  if (s != NULL)
    gst_structure_set (s, "object_id", G_TYPE_INT, object_id, NULL);
  s = gst_video_region_of_interest_meta_get_param (roi, "object_id");
  if (s != NULL)
    gst_structure_set (s, "id", G_TYPE_INT, object_id, NULL);
  else
    gst_video_region_of_interest_meta_add_param (roi,
        gst_structure_new ("object_id", "id", G_TYPE_INT, object_id, NULL));
}

static void
set_companion_object_id (GstBuffer * buffer, gint roi_id, gint object_id)
{
  GstVisionDetectMeta *meta;
  gpointer state = NULL;

  while ((meta = (GstVisionDetectMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VISION_DETECT_META_API_TYPE)) != NULL) {
    guint i;

    for (i = 0; i < meta->detections->len; i++) {
      GstVisionDetection *d =
          &g_array_index (meta->detections, GstVisionDetection, i);

      if (d->roi_id == roi_id && !d->tracked)
        d->object_id = object_id;
    }
  }
}

/* The predicted box of @track as an entry for gst_vision_detections_attach()
 * (a ROI meta marked tracked, a companion entry, an object-detection entry:
 * the forms visiondetect gives its detections). FALSE when the box is
 * outside the frame or degenerate. No keypoints: a Kalman filter predicts
 * the box, not the pose, and the last keypoints moved with the box would
 * show limbs where they no longer are (ByteTrack, BoT-SORT and Ultralytics'
 * pose tracking report keypoints only for the detections a track matched).
 * On a detection frame the detections keep theirs: the ROI metas and the
 * companion entries are visiondetect's, given an object id in place. */
static gboolean
prediction_entry (GstVisionTrack * self, const vt_track * track,
    GstVisionDetectionEntry * e)
{
  const gint width = GST_VIDEO_INFO_WIDTH (&self->info);
  const gint height = GST_VIDEO_INFO_HEIGHT (&self->info);
  gpointer stored = g_hash_table_lookup (self->label_ids,
      GINT_TO_POINTER (track->id));
  gdouble x1, y1, x2, y2;

  x1 = CLAMP (track->x1, 0.0, width);
  y1 = CLAMP (track->y1, 0.0, height);
  x2 = CLAMP (track->x2, x1, width);
  y2 = CLAMP (track->y2, y1, height);
  if (!(x2 - x1 >= 1.0 && y2 - y1 >= 1.0))
    return FALSE;
  /* a track given its id between detections (provisionally) has no detection
   * with that id yet: the label id of its class */
  if (stored == NULL)
    stored = g_hash_table_lookup (self->class_label_ids,
        GINT_TO_POINTER (track->class_id));
  memset (e, 0, sizeof (*e));
  e->x1 = x1;
  e->y1 = y1;
  e->x2 = x2;
  e->y2 = y2;
  e->confidence = track->score;
  e->label_id = GPOINTER_TO_INT (stored) - 1;
  e->label = (GQuark) track->class_id;
  e->object_id = track->id;
  e->tracked = TRUE;
  return TRUE;
}

#ifdef HAVE_GST_ANALYTICS
/* The object-detection entry of @roi: the one with the ROI meta's id (how
 * visiondetect and DL Streamer link them), else the first with its class and
 * box (another element's; as gst_vision_od_is_roi()). */
static gboolean
find_od (GstAnalyticsRelationMeta * relations,
    const GstVideoRegionOfInterestMeta * roi, GstAnalyticsODMtd * od)
{
  gpointer state = NULL;

  /* (an id past the entries: the lookup would log an error) */
  if (roi->id >= 0
      && (gsize) roi->id < gst_analytics_relation_get_length (relations)
      && gst_analytics_relation_meta_get_od_mtd (relations, roi->id, od)
      && gst_vision_od_is_roi (od, roi))
    return TRUE;
  while (gst_analytics_relation_meta_iterate (relations, &state,
          gst_analytics_od_mtd_get_mtd_type (), od))
    if (gst_vision_od_is_roi (od, roi))
      return TRUE;
  return FALSE;
}

/* The object-detection entries of @buffer that no ROI meta shows (another
 * detector's: GStreamer's own tensor decoders attach only those; not those of
 * a companion entry, whose ROI meta was removed downstream) as detections
 * after the ROI metas', their entry ids in od_only. */
static void
append_od_detections (GstVisionTrack * self, GstBuffer * buffer)
{
  GstAnalyticsRelationMeta *relations =
      gst_buffer_get_analytics_relation_meta (buffer);
  GstAnalyticsODMtd od;
  gpointer state = NULL;

  g_array_set_size (self->od_only, 0);
  if (relations == NULL)
    return;
  while (gst_analytics_relation_meta_iterate (relations, &state,
          gst_analytics_od_mtd_get_mtd_type (), &od)) {
    vt_detection d;
    gint x, y, w, h;
    gfloat confidence;

    if (!gst_analytics_od_mtd_get_location (&od, &x, &y, &w, &h, &confidence)
        || w <= 0 || h <= 0 || gst_vision_od_has_roi (buffer, &od)
        || gst_vision_od_has_companion (buffer, &od,
            GST_VIDEO_INFO_WIDTH (&self->info),
            GST_VIDEO_INFO_HEIGHT (&self->info)))
      continue;
    d.x1 = (gfloat) x;
    d.y1 = (gfloat) y;
    d.x2 = (gfloat) x + w;
    d.y2 = (gfloat) y + h;
    d.score = confidence;
    d.class_id = (gint) gst_analytics_od_mtd_get_obj_type (&od);
    g_array_append_val (self->detections, d);
    g_array_append_val (self->od_only, od.id);
  }
}

/* One tracking entry per track with an id, as GStreamer's trackers add them:
 * the id, the running times of its first frame with that id and of the last
 * frame a detection matched it, lost while unmatched since the last detection
 * frame; related (RELATE_TO) from the object-detection entry of this frame's
 * box: its detection's entry when the detector added one, its predicted
 * box's. */
static void
add_tracking_entries (GstVisionTrack * self, GstBuffer * buffer,
    const vt_track * tracks, size_t n_tracks, GstClockTime running_time)
{
  GstAnalyticsRelationMeta *relations = NULL;
  size_t k;

  self->recent_head = (self->recent_head + 1) % RECENT_FRAMES;
  self->recent[self->recent_head] = running_time;
  self->n_recent = MIN (self->n_recent + 1, RECENT_FRAMES);
  for (k = 0; k < n_tracks; k++) {
    const vt_track *t = &tracks[k];
    gint od_id = g_array_index (self->track_ods, gint, k);
    GstAnalyticsTrackingMtd trk;
    GstAnalyticsODMtd od;
    TrackTimes *times;

    if (t->id <= 0)
      continue;
    if (relations == NULL) {
      relations = gst_buffer_get_analytics_relation_meta (buffer);
      if (relations == NULL)
        relations = gst_buffer_add_analytics_relation_meta (buffer);
      if (relations == NULL)
        return;
    }
    times = g_hash_table_lookup (self->track_times, GINT_TO_POINTER (t->id));
    if (times == NULL) {
      times = g_new (TrackTimes, 1);
      times->first_seen = running_time;
      times->last_seen = GST_CLOCK_TIME_NONE;
      g_hash_table_insert (self->track_times, GINT_TO_POINTER (t->id), times);
    }
    /* a track given its id between detections was matched a few frames ago;
     * one lost longer than the frames kept keeps its earlier value */
    if (t->frames_lost < self->n_recent)
      times->last_seen = self->recent[(self->recent_head + RECENT_FRAMES -
              t->frames_lost) % RECENT_FRAMES];
    if (!gst_analytics_relation_meta_add_tracking_mtd (relations,
            (guint64) t->id, times->first_seen, &trk))
      continue;
    gst_analytics_tracking_mtd_update_last_seen (&trk, times->last_seen);
    if (t->state == VT_TRACK_LOST)
      gst_analytics_tracking_mtd_set_lost (&trk);
    if (t->detection >= 0 && (guint) t->detection < self->rois->len
        && find_od (relations, g_ptr_array_index (self->rois, t->detection),
            &od))
      od_id = (gint) od.id;
    else if (t->detection >= 0 && (guint) t->detection >= self->rois->len
        && (guint) t->detection < self->rois->len + self->od_only->len)
      od_id = (gint) g_array_index (self->od_only, guint,
          t->detection - self->rois->len);
    if (od_id >= 0)
      gst_analytics_relation_meta_set_relation (relations,
          GST_ANALYTICS_REL_TYPE_RELATE_TO, (guint) od_id, trk.id);
  }
}
#endif

static gboolean
id_gone (gpointer key, gpointer value, gpointer user_data)
{
  return !g_hash_table_contains (user_data, key);
}

static void
apply_params (GstVisionTrack * self)
{
  vt_tracker_params params;
  GError *error = NULL;
  gboolean changed;

  GST_OBJECT_LOCK (self);
  changed = self->params_changed;
  params = self->params;
  self->params_changed = FALSE;
  GST_OBJECT_UNLOCK (self);
  if (changed && !vt_tracker_set_params (self->tracker, &params, &error)) {
    GST_ELEMENT_WARNING (self, LIBRARY, SETTINGS,
        ("Tracker settings not applied: %s", error->message),
        ("the previous settings stay"));
    g_clear_error (&error);
  }
}

static GstFlowReturn
gst_vision_track_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  GstVisionTrack *self = GST_VISION_TRACK (trans);
  const gint width = GST_VIDEO_INFO_WIDTH (&self->info);
  const gint height = GST_VIDEO_INFO_HEIGHT (&self->info);
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;
  const vt_track *tracks;
  size_t n_tracks, k;
  GHashTable *live_ids;
  gint64 pts = GST_BUFFER_PTS_IS_VALID (buffer) ?
      (gint64) GST_BUFFER_PTS (buffer) : VT_NO_PTS;
  GstVisionDetectMeta *companion_meta;
  gboolean detected, repeated, reuse_ids;
  guint hold_misses, i;

  if (G_UNLIKELY (!self->have_info || self->tracker == NULL)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("frame before caps or before the element started"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  apply_params (self);
  GST_OBJECT_LOCK (self);
  hold_misses = self->hold_misses;
  GST_OBJECT_UNLOCK (self);

  g_array_set_size (self->detections, 0);
  g_ptr_array_set_size (self->rois, 0);
  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
    vt_detection d;

    roi_to_detection (roi, width, height, &d);
    g_array_append_val (self->detections, d);
    g_ptr_array_add (self->rois, roi);
  }
#ifdef HAVE_GST_ANALYTICS
  append_od_detections (self, buffer);
#endif
  /* visiondetect's companion meta, on every frame, says whether it ran on it;
   * without one (another detector), a frame without detections counts as
   * skipped */
  companion_meta = gst_buffer_get_vision_detect_meta (buffer);
  repeated = companion_meta != NULL
      && companion_meta->inference == GST_VISION_DETECT_REPEATED;
  detected = companion_meta != NULL ?
      companion_meta->inference == GST_VISION_DETECT_INFERRED || repeated :
      self->detections->len > 0;

  /* A repeated frame (a GAP buffer that showed visiondetect the pixels of its
   * last inferred frame, whose detections it carries) is no new observation:
   * the tracker predicts one frame ahead, as on a frame without detection,
   * so that the motion it learns is that of the real frames, and the
   * detections (the same, in the same order) take the ids they had there.
   * After a frame without detection it is what the picture shows: an
   * update. */
  reuse_ids = repeated && self->ids_current
      && self->ids->len == self->detections->len;
  if (reuse_ids) {
    vt_tracker_predict (self->tracker, pts);
    self->repeats++;
    GST_LOG_OBJECT (self, "repeated frame: the %u ids of the frame it "
        "repeats", self->ids->len);
  } else if (detected) {
    g_array_set_size (self->ids, self->detections->len);
    vt_tracker_update (self->tracker,
        (const vt_detection *) self->detections->data, self->detections->len,
        pts, (gint32 *) self->ids->data);
    self->ids_current = TRUE;
    self->repeats = 0;
  }
  if (detected) {
    for (i = 0; i < self->rois->len; i++) {
      gint32 id = g_array_index (self->ids, gint32, i);

      roi = g_ptr_array_index (self->rois, i);
      g_hash_table_insert (self->class_label_ids,
          GINT_TO_POINTER (roi->roi_type),
          GINT_TO_POINTER (roi_label_id (roi) + 1));
      if (id <= 0)
        continue;
      set_roi_object_id (roi, id);
      set_companion_object_id (buffer, roi->id, id);
      g_hash_table_insert (self->label_ids, GINT_TO_POINTER (id),
          GINT_TO_POINTER (roi_label_id (roi) + 1));
    }
  } else {
    vt_tracker_predict (self->tracker, pts);
    self->ids_current = FALSE;
  }

  /* confirmed tracks not detected on this frame, predicted */
  tracks = vt_tracker_tracks (self->tracker, &n_tracks);
  live_ids = g_hash_table_new (NULL, NULL);
  g_array_set_size (self->track_ods, n_tracks);
  g_array_set_size (self->predictions, 0);
  g_array_set_size (self->predicted_tracks, 0);
  for (k = 0; k < n_tracks; k++) {
    GstVisionDetectionEntry e;
    guint track_index = (guint) k;

    g_array_index (self->track_ods, gint, k) = -1;
    if (tracks[k].id <= 0)
      continue;
    g_hash_table_add (live_ids, GINT_TO_POINTER (tracks[k].id));
    if (tracks[k].detection >= 0 || tracks[k].misses > hold_misses)
      continue;
    /* on a repeated frame, a track matched on the frame it repeats is shown
     * by its repeated detection */
    if (reuse_ids && tracks[k].frames_lost == self->repeats)
      continue;
    /* given its id between detections, then missed: not shown until seen */
    if (tracks[k].provisional && tracks[k].misses > 0)
      continue;
    if (!prediction_entry (self, &tracks[k], &e))
      continue;
    g_array_append_val (self->predictions, e);
    g_array_append_val (self->predicted_tracks, track_index);
  }
  if (self->predictions->len > 0) {
    GstVisionDetectionIds *ids = g_new (GstVisionDetectionIds,
        self->predictions->len);

    if (companion_meta == NULL)
      companion_meta = gst_buffer_add_vision_detect_meta (buffer, width,
          height);
    gst_vision_detections_attach (GST_ELEMENT (self), buffer, companion_meta,
        width, height, (const GstVisionDetectionEntry *)
        self->predictions->data, self->predictions->len, ids);
    for (i = 0; i < self->predictions->len; i++)
      g_array_index (self->track_ods, gint,
          g_array_index (self->predicted_tracks, guint, i)) = ids[i].od_id;
    g_free (ids);
  }
#ifdef HAVE_GST_ANALYTICS
  add_tracking_entries (self, buffer, tracks, n_tracks,
      GST_BUFFER_PTS_IS_VALID (buffer) ?
      gst_segment_to_running_time (&trans->segment, GST_FORMAT_TIME,
          GST_BUFFER_PTS (buffer)) : GST_CLOCK_TIME_NONE);
  g_hash_table_foreach_remove (self->track_times, id_gone, live_ids);
#endif
  g_hash_table_foreach_remove (self->label_ids, id_gone, live_ids);
  g_hash_table_unref (live_ids);

  GST_LOG_OBJECT (self, "%s frame: %u detections, %" G_GSIZE_FORMAT " tracks",
      detected ? "detection" : "prediction", self->detections->len, n_tracks);
  return GST_FLOW_OK;
}

static gboolean
gst_vision_track_set_caps (GstBaseTransform * trans, GstCaps * incaps,
    GstCaps * outcaps)
{
  GstVisionTrack *self = GST_VISION_TRACK (trans);
  GstVideoInfo info;

  if (!gst_video_info_from_caps (&info, incaps)) {
    GST_ERROR_OBJECT (self, "invalid caps %" GST_PTR_FORMAT, incaps);
    return FALSE;
  }
  /* the tracks' boxes are in pixels of the old size */
  if (self->have_info && (GST_VIDEO_INFO_WIDTH (&info) !=
          GST_VIDEO_INFO_WIDTH (&self->info)
          || GST_VIDEO_INFO_HEIGHT (&info) !=
          GST_VIDEO_INFO_HEIGHT (&self->info))) {
    GST_DEBUG_OBJECT (self, "frame size changed: tracks reset");
    reset_tracks (self);
  }
  self->info = info;
  self->have_info = TRUE;
  return TRUE;
}

static gboolean
gst_vision_track_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionTrack *self = GST_VISION_TRACK (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_STOP:
    case GST_EVENT_STREAM_START:
      GST_DEBUG_OBJECT (self, "%s: tracks reset", GST_EVENT_TYPE_NAME (event));
      reset_tracks (self);
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

static gboolean
gst_vision_track_start (GstBaseTransform * trans)
{
  GstVisionTrack *self = GST_VISION_TRACK (trans);
  vt_tracker_params params;
  GError *error = NULL;

  GST_OBJECT_LOCK (self);
  params = self->params;
  self->params_changed = FALSE;
  GST_OBJECT_UNLOCK (self);

  self->tracker = vt_tracker_new (&params, &error);
  if (self->tracker == NULL) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("Invalid tracker settings: %s", error->message), (NULL));
    g_clear_error (&error);
    return FALSE;
  }
  self->label_ids = g_hash_table_new (NULL, NULL);
  self->class_label_ids = g_hash_table_new (NULL, NULL);
  self->detections = g_array_new (FALSE, FALSE, sizeof (vt_detection));
  self->rois = g_ptr_array_new ();
  self->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  self->track_ods = g_array_new (FALSE, FALSE, sizeof (gint));
  self->predictions = g_array_new (FALSE, FALSE,
      sizeof (GstVisionDetectionEntry));
  self->predicted_tracks = g_array_new (FALSE, FALSE, sizeof (guint));
#ifdef HAVE_GST_ANALYTICS
  self->od_only = g_array_new (FALSE, FALSE, sizeof (guint));
  self->track_times = g_hash_table_new_full (NULL, NULL, NULL, g_free);
#endif
  return TRUE;
}

static gboolean
gst_vision_track_stop (GstBaseTransform * trans)
{
  GstVisionTrack *self = GST_VISION_TRACK (trans);

  g_clear_pointer (&self->tracker, vt_tracker_free);
  g_clear_pointer (&self->label_ids, g_hash_table_unref);
  g_clear_pointer (&self->class_label_ids, g_hash_table_unref);
  g_clear_pointer (&self->detections, g_array_unref);
  g_clear_pointer (&self->rois, g_ptr_array_unref);
  g_clear_pointer (&self->ids, g_array_unref);
  g_clear_pointer (&self->track_ods, g_array_unref);
  g_clear_pointer (&self->predictions, g_array_unref);
  g_clear_pointer (&self->predicted_tracks, g_array_unref);
#ifdef HAVE_GST_ANALYTICS
  g_clear_pointer (&self->od_only, g_array_unref);
  g_clear_pointer (&self->track_times, g_hash_table_unref);
#endif
  self->have_info = FALSE;
  return TRUE;
}

static void
gst_vision_track_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstVisionTrack *self = GST_VISION_TRACK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HIGH_THRESHOLD:
      self->params.high_threshold = g_value_get_float (value);
      break;
    case PROP_LOW_THRESHOLD:
      self->params.low_threshold = g_value_get_float (value);
      break;
    case PROP_NEW_TRACK_THRESHOLD:
      self->params.new_track_threshold = g_value_get_float (value);
      break;
    case PROP_MATCH_IOU:
      self->params.match_iou = g_value_get_float (value);
      break;
    case PROP_CONFIRM_HITS:
      self->params.confirm_hits = g_value_get_uint (value);
      break;
    case PROP_CONFIRM_FRAMES:
      self->params.confirm_frames = g_value_get_uint (value);
      break;
    case PROP_MAX_LOST:
      self->params.max_lost_frames = g_value_get_uint (value);
      break;
    case PROP_MAX_LOST_TIME:
      self->params.max_lost_ns =
          (gint64) MIN (g_value_get_uint64 (value), (guint64) G_MAXINT64);
      break;
    case PROP_HOLD_MISSES:
      self->hold_misses = g_value_get_uint (value);
      break;
    case PROP_PER_CLASS:
      self->params.per_class = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  self->params_changed = TRUE;
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_track_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstVisionTrack *self = GST_VISION_TRACK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HIGH_THRESHOLD:
      g_value_set_float (value, self->params.high_threshold);
      break;
    case PROP_LOW_THRESHOLD:
      g_value_set_float (value, self->params.low_threshold);
      break;
    case PROP_NEW_TRACK_THRESHOLD:
      g_value_set_float (value, self->params.new_track_threshold);
      break;
    case PROP_MATCH_IOU:
      g_value_set_float (value, self->params.match_iou);
      break;
    case PROP_CONFIRM_HITS:
      g_value_set_uint (value, self->params.confirm_hits);
      break;
    case PROP_CONFIRM_FRAMES:
      g_value_set_uint (value, self->params.confirm_frames);
      break;
    case PROP_MAX_LOST:
      g_value_set_uint (value, self->params.max_lost_frames);
      break;
    case PROP_MAX_LOST_TIME:
      g_value_set_uint64 (value, (guint64) self->params.max_lost_ns);
      break;
    case PROP_HOLD_MISSES:
      g_value_set_uint (value, self->hold_misses);
      break;
    case PROP_PER_CLASS:
      g_value_set_boolean (value, self->params.per_class);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_track_class_init (GstVisionTrackClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_PLAYING;

  gobject_class->set_property = gst_vision_track_set_property;
  gobject_class->get_property = gst_vision_track_get_property;

  g_object_class_install_property (gobject_class, PROP_HIGH_THRESHOLD,
      g_param_spec_float ("high-threshold", "High threshold",
          "Detections at or above this confidence are matched first (and "
          "may start tracks)", 0.0f, 1.0f, DEFAULT_HIGH_THRESHOLD, rw));
  g_object_class_install_property (gobject_class, PROP_LOW_THRESHOLD,
      g_param_spec_float ("low-threshold", "Low threshold",
          "Detections from this confidence up to high-threshold are matched "
          "in a second round, to tracks only (at most high-threshold)",
          0.0f, 1.0f, DEFAULT_LOW_THRESHOLD, rw));
  g_object_class_install_property (gobject_class, PROP_NEW_TRACK_THRESHOLD,
      g_param_spec_float ("new-track-threshold", "New track threshold",
          "An unmatched detection starts a track from this confidence "
          "(and from high-threshold)", 0.0f, 1.0f,
          DEFAULT_NEW_TRACK_THRESHOLD, rw));
  g_object_class_install_property (gobject_class, PROP_MATCH_IOU,
      g_param_spec_float ("match-iou", "Match IoU",
          "Minimum IoU between a track's predicted box and a high-confidence "
          "detection to match them", 0.0f, 1.0f, DEFAULT_MATCH_IOU, rw));
  g_object_class_install_property (gobject_class, PROP_CONFIRM_HITS,
      g_param_spec_uint ("confirm-hits", "Confirm hits",
          "Detection frames a new track must be matched on (in a row) before "
          "it gets an id", 1, G_MAXINT, DEFAULT_CONFIRM_HITS, rw));
  g_object_class_install_property (gobject_class, PROP_CONFIRM_FRAMES,
      g_param_spec_uint ("confirm-frames", "Confirm frames",
          "With frames without detection between detection frames (a "
          "detector interval), a new track gets its id, provisionally, on "
          "the first such frame at least this many frames after its first "
          "detection (counting that one), rather than waiting for "
          "confirm-hits detection frames; missed on the next detection frame, "
          "it is hidden until detected again (0: ids only by confirm-hits)",
          0, G_MAXINT, DEFAULT_CONFIRM_FRAMES, rw));
  g_object_class_install_property (gobject_class, PROP_MAX_LOST,
      g_param_spec_uint ("max-lost", "Max lost frames",
          "Frames a track that is no longer detected is kept (so that it "
          "gets its id back when it reappears)", 0, G_MAXINT,
          DEFAULT_MAX_LOST, rw));
  g_object_class_install_property (gobject_class, PROP_MAX_LOST_TIME,
      g_param_spec_uint64 ("max-lost-time", "Max lost time",
          "When not 0, the time in nanoseconds of buffer timestamps a lost "
          "track is kept, instead of max-lost frames", 0, G_MAXINT64,
          DEFAULT_MAX_LOST_TIME, rw));
  g_object_class_install_property (gobject_class, PROP_HOLD_MISSES,
      g_param_spec_uint ("hold-misses", "Hold misses",
          "A confirmed track not detected is still shown, at its predicted "
          "box, until it has missed more than this many detection frames",
          0, G_MAXINT, DEFAULT_HOLD_MISSES, rw));
  g_object_class_install_property (gobject_class, PROP_PER_CLASS,
      g_param_spec_boolean ("per-class", "Per class",
          "Match detections only to tracks of the same class (roi_type)",
          DEFAULT_PER_CLASS, rw));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision object tracker", "Filter/Analyzer/Video",
      "Gives the detected objects ids that persist across frames and "
      "predicts their boxes on frames without detection",
      "visiondetect developers");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_vision_track_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_track_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_vision_track_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_track_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_vision_track_transform_ip);

  GST_DEBUG_CATEGORY_INIT (gst_vision_track_debug, "visiontrack", 0,
      "visiondetect object tracker");
}

static void
gst_vision_track_init (GstVisionTrack * self)
{
  self->params = vt_tracker_default_params ();
  self->params.high_threshold = DEFAULT_HIGH_THRESHOLD;
  self->params.low_threshold = DEFAULT_LOW_THRESHOLD;
  self->params.new_track_threshold = DEFAULT_NEW_TRACK_THRESHOLD;
  self->params.match_iou = DEFAULT_MATCH_IOU;
  self->params.confirm_hits = DEFAULT_CONFIRM_HITS;
  self->params.confirm_frames = DEFAULT_CONFIRM_FRAMES;
  self->params.max_lost_frames = DEFAULT_MAX_LOST;
  self->params.max_lost_ns = DEFAULT_MAX_LOST_TIME;
  self->params.per_class = DEFAULT_PER_CLASS;
  self->hold_misses = DEFAULT_HOLD_MISSES;
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), TRUE);
}
