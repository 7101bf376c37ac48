/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One frame's detections as one line of JSON (see jsonframe.h). The
 * values themselves are written by jsonformat.c, which the JSON fuzzer
 * runs without GStreamer. */
#include "jsonframe.h"
#include "gstvisiondetectmeta.h"
#include "detections.h"
#include "jsonformat.h"
#include "mask.h"

#include <math.h>

/* COCO's uncompressed RLE of @mask in a @width x @height frame: "size" [height,
 * width], "counts" the lengths of alternating runs of 0 and 1 (starting with 0)
 * in column-major order, the pixels outside the mask's rectangle 0. */
static void
append_rle (GString * json, const GstVisionMask * mask, gint width, gint height)
{
  guint64 run = 0;
  gboolean value = FALSE, first = TRUE;
  guint x0 = MIN (mask->x, (guint) width), y0 = MIN (mask->y, (guint) height);
  guint x1 = MIN (mask->x + mask->width, (guint) width);
  guint y1 = MIN (mask->y + mask->height, (guint) height);
  guint x, y;

#define RUN_OF(v, n) G_STMT_START {                                     \
    if ((n) > 0) {                                                      \
      if ((v) != value) {                                               \
        g_string_append_printf (json, "%s%" G_GUINT64_FORMAT,           \
            first ? "" : ",", run);                                     \
        first = FALSE;                                                  \
        value = (v);                                                    \
        run = 0;                                                        \
      }                                                                 \
      run += (n);                                                       \
    }                                                                   \
  } G_STMT_END

  g_string_append_printf (json, ",\"segmentation\":{\"size\":[%d,%d],"
      "\"counts\":[", height, width);
  RUN_OF (FALSE, (guint64) x0 * height);
  for (x = x0; x < x1; x++) {
    RUN_OF (FALSE, y0);
    for (y = y0; y < y1; y++)
      RUN_OF (gst_vision_mask_at (mask, x, y), 1);
    RUN_OF (FALSE, (guint) height - y1);
  }
  RUN_OF (FALSE, (guint64) ((guint) width - x1) * height);
#undef RUN_OF
  g_string_append_printf (json, "%s%" G_GUINT64_FORMAT "]}", first ? "" : ",",
      run);
}

/* @buffer's stream time in @segment, GST_CLOCK_TIME_NONE without one. */
static GstClockTime
stream_time (const GstSegment * segment, GstBuffer * buffer)
{
  if (segment == NULL || segment->format != GST_FORMAT_TIME
      || !GST_BUFFER_PTS_IS_VALID (buffer))
    return GST_CLOCK_TIME_NONE;
  return gst_segment_to_stream_time (segment, GST_FORMAT_TIME,
      GST_BUFFER_PTS (buffer));
}

/* @v rounded to a whole pixel, @otherwise when it is not finite; bounded so
 * that a foreign ROI's absurd box cannot overflow the arithmetic. */
static gint64
whole_pixel (gdouble v, gint64 otherwise)
{
  if (!isfinite (v))
    return otherwise;
  return (gint64) llround (CLAMP (v, -1e15, 1e15));
}

/* The keypoints of the detection of ROI meta @roi_id, if any
 * (gst_vision_keypoints_of_roi()), as "keypoints": [[x, y, score], ...]
 * (frame pixels; score null where the param has none). */
static void
append_keypoints (GString * json, GstBuffer * buffer, gint roi_id, gint width,
    gint height)
{
  gfloat *points;
  guint n = 0, i;

  if ((points = gst_vision_keypoints_of_roi (buffer, roi_id, width, height,
              &n)) == NULL)
    return;
  g_string_append (json, ",\"keypoints\":[");
  for (i = 0; i < n; i++) {
    g_string_append (json, i ? ",[" : "[");
    gst_vision_json_append_number (json, points[3 * i], 2);
    g_string_append_c (json, ',');
    gst_vision_json_append_number (json, points[3 * i + 1], 2);
    g_string_append_c (json, ',');
    if (isfinite (points[3 * i + 2]))
      gst_vision_json_append_number (json, points[3 * i + 2], 4);
    else
      g_string_append (json, "null");
    g_string_append_c (json, ']');
  }
  g_string_append_c (json, ']');
  g_free (points);
}

/* The string array @field of @s as "field":[...], when it has one. */
static void
append_string_array (GString * json, const GstStructure * s,
    const gchar * field)
{
  const GValue *v = s != NULL ? gst_structure_get_value (s, field) : NULL;
  guint i, n;

  if (v == NULL || !GST_VALUE_HOLDS_ARRAY (v))
    return;
  n = gst_value_array_get_size (v);
  g_string_append_printf (json, ",\"%s\":[", field);
  for (i = 0; i < n; i++) {
    const GValue *item = gst_value_array_get_value (v, i);

    if (i)
      g_string_append_c (json, ',');
    if (G_VALUE_HOLDS_STRING (item) && g_value_get_string (item) != NULL)
      gst_vision_json_append_string (json, g_value_get_string (item));
    else
      g_string_append (json, "null");
  }
  g_string_append_c (json, ']');
}

/* gvametaconvert's "tensors" of an object with keypoints (its convert_tensor()
 * of DL Streamer's "keypoints" ROI param, as with add-tensor-data=true):
 * [{"precision": "FP32", "dims": [n, 2], "name": "keypoints", "format":
 * "keypoints", "confidence": [n scores], "data": [x0, y0, x1, y1, ...]
 * normalised to the object's integer rectangle @rx, @ry, @rw x @rh,
 * "point_names", "point_connections" (when the model names them)}]. */
static void
append_keypoints_tensor (GString * json, GstBuffer * buffer, gint roi_id,
    gint width, gint height, gint64 rx, gint64 ry, gint64 rw, gint64 rh)
{
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_get_video_region_of_interest_meta_id (buffer, roi_id);
  const GstStructure *param = roi != NULL ?
      gst_video_region_of_interest_meta_get_param (roi, "keypoints") : NULL;
  gfloat *points;
  guint n = 0, i;

  if (rw <= 0 || rh <= 0 || (points = gst_vision_keypoints_of_roi (buffer,
              roi_id, width, height, &n)) == NULL)
    return;
  g_string_append_printf (json, ",\"tensors\":[{\"precision\":\"FP32\","
      "\"dims\":[%u,2],\"name\":\"keypoints\",\"format\":\"keypoints\","
      "\"confidence\":[", n);
  for (i = 0; i < n; i++) {
    if (i)
      g_string_append_c (json, ',');
    if (isfinite (points[3 * i + 2]))
      gst_vision_json_append_number (json, points[3 * i + 2], 6);
    else
      g_string_append (json, "null");
  }
  g_string_append (json, "],\"data\":[");
  for (i = 0; i < n; i++) {
    if (i)
      g_string_append_c (json, ',');
    gst_vision_json_append_number (json, (points[3 * i] - rx) / (gdouble) rw,
        6);
    g_string_append_c (json, ',');
    gst_vision_json_append_number (json,
        (points[3 * i + 1] - ry) / (gdouble) rh, 6);
  }
  g_string_append_c (json, ']');
  append_string_array (json, param, "point_names");
  append_string_array (json, param, "point_connections");
  g_string_append (json, "}]");
  g_free (points);
}

/* DL Streamer's gvametaconvert line (its jsonconverter.cpp, format=json,
 * add-empty-results=true): "resolution", "timestamp" (stream time, ns;
 * absent without one), "objects" (absent when there is none), each with the
 * ROI's integer rectangle "x", "y", "w", "h", "region_id" (the ROI meta's
 * id; -1 for an analytics entry without one), "id" (the tracked object's id,
 * absent when untracked), "roi_type" (the class name, absent without one),
 * and "detection": "bounding_box" {x_min, x_max, y_min, y_max} normalised,
 * "confidence" and "label_id" (absent when unknown), "label"; for an object
 * with keypoints, "tensors" (append_keypoints_tensor()). */
static gchar *
dlstreamer_line (GstBuffer * buffer, const GstSegment * segment, gint width,
    gint height, GArray * detections)
{
  GString *json = g_string_sized_new (64 + 256 * detections->len);
  GstClockTime timestamp = stream_time (segment, buffer);
  guint i;

  g_string_append_printf (json, "{\"resolution\":{\"width\":%d,\"height\":%d}",
      width, height);
  if (GST_CLOCK_TIME_IS_VALID (timestamp))
    g_string_append_printf (json, ",\"timestamp\":%" G_GUINT64_FORMAT,
        timestamp);
  for (i = 0; i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);
    const gchar *label = d->label ? g_quark_to_string (d->label) : NULL;
    /* the ROI meta's integer pixels, as DL Streamer reads them */
    gint64 x = whole_pixel (d->x, 0);
    gint64 y = whole_pixel (d->y, 0);
    gint64 x2 = whole_pixel (d->x + d->w, x);
    gint64 y2 = whole_pixel (d->y + d->h, y);

    g_string_append_printf (json, "%s{\"x\":%" G_GINT64_FORMAT ",\"y\":%"
        G_GINT64_FORMAT ",\"w\":%" G_GINT64_FORMAT ",\"h\":%" G_GINT64_FORMAT
        ",\"region_id\":%d", i ? "," : ",\"objects\":[", x, y, MAX (x2 - x, 0),
        MAX (y2 - y, 0), d->roi_id);
    if (d->object_id != 0)
      g_string_append_printf (json, ",\"id\":%d", d->object_id);
    if (label != NULL && *label != '\0') {
      g_string_append (json, ",\"roi_type\":");
      gst_vision_json_append_string (json, label);
    }
    g_string_append (json, ",\"detection\":{\"bounding_box\":{\"x_min\":");
    gst_vision_json_append_number (json, d->x / width, 6);
    g_string_append (json, ",\"x_max\":");
    gst_vision_json_append_number (json, (d->x + d->w) / width, 6);
    g_string_append (json, ",\"y_min\":");
    gst_vision_json_append_number (json, d->y / height, 6);
    g_string_append (json, ",\"y_max\":");
    gst_vision_json_append_number (json, (d->y + d->h) / height, 6);
    g_string_append (json, "}");
    if (d->confidence >= 0.0) {
      g_string_append (json, ",\"confidence\":");
      gst_vision_json_append_number (json, d->confidence, 6);
    }
    if (d->label_id >= 0)
      g_string_append_printf (json, ",\"label_id\":%d", d->label_id);
    if (label != NULL && *label != '\0') {
      g_string_append (json, ",\"label\":");
      gst_vision_json_append_string (json, label);
    }
    g_string_append (json, "}");
    append_keypoints_tensor (json, buffer, d->roi_id, width, height, x, y,
        MAX (x2 - x, 0), MAX (y2 - y, 0));
    g_string_append (json, "}");
  }
  if (detections->len > 0)
    g_string_append (json, "]");
  g_string_append (json, "}");
  return g_string_free (json, FALSE);
}

gchar *
gst_vision_json_frame_to_string (GstBuffer * buffer,
    const GstSegment * segment, gint width, gint height, guint64 frame_index,
    GstVisionJsonFormat format)
{
  GPtrArray *masks = NULL;
  GArray *detections;
  GString *json;
  GstVisionDetectMeta *meta;
  GstClockTime timestamp;
  guint i;

  if (format == GST_VISION_JSON_FORMAT_DLSTREAMER) {
    gchar *line;

    detections = gst_vision_detections_from_buffer (buffer, width, height);
    line = dlstreamer_line (buffer, segment, width, height, detections);
    g_array_unref (detections);
    return line;
  }

  detections = gst_vision_detections_from_buffer_full (buffer, width, height,
      &masks);
  json = g_string_sized_new (128 + 256 * detections->len);
  g_string_append_printf (json, "{\"frame\":%" G_GUINT64_FORMAT ",\"pts\":",
      frame_index);
  if (GST_BUFFER_PTS_IS_VALID (buffer))
    g_string_append_printf (json, "%" G_GUINT64_FORMAT,
        GST_BUFFER_PTS (buffer));
  else
    g_string_append (json, "null");
  /* where the frame is in the stream (a seek, a segment's start): pts is
   * only where it is in the buffers' timeline */
  timestamp = stream_time (segment, buffer);
  g_string_append (json, ",\"stream_time\":");
  if (GST_CLOCK_TIME_IS_VALID (timestamp))
    g_string_append_printf (json, "%" G_GUINT64_FORMAT, timestamp);
  else
    g_string_append (json, "null");
  g_string_append_printf (json, ",\"width\":%d,\"height\":%d", width, height);
  /* whether visiondetect looked at the frame: "nothing found" and "not looked
   * at" differ (absent when no visiondetect ran upstream) */
  meta = gst_buffer_get_vision_detect_meta (buffer);
  if (meta != NULL) {
    g_string_append_printf (json, ",\"inferred\":%s",
        meta->inference == GST_VISION_DETECT_INFERRED ? "true" : "false");
    /* a repeated frame carries the detections of the frame it repeats */
    if (meta->inference == GST_VISION_DETECT_REPEATED)
      g_string_append (json, ",\"repeated\":true");
    else if (meta->inference != GST_VISION_DETECT_INFERRED)
      g_string_append_printf (json, ",\"skipped\":\"%s\"",
          gst_vision_detect_inference_name (meta->inference));
  }
  g_string_append (json, ",\"objects\":[");

  for (i = 0; i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);

    g_string_append_printf (json, "%s{\"id\":%d,\"label\":", i ? "," : "",
        d->roi_id);
    gst_vision_json_append_string (json,
        d->label ? g_quark_to_string (d->label) : "");
    g_string_append_printf (json, ",\"label_id\":%d,\"confidence\":",
        d->label_id);
    gst_vision_json_append_number (json, d->confidence, 6);
    g_string_append (json, ",\"box\":{\"x_min\":");
    gst_vision_json_append_number (json, d->x / width, 6);
    g_string_append (json, ",\"y_min\":");
    gst_vision_json_append_number (json, d->y / height, 6);
    g_string_append (json, ",\"x_max\":");
    gst_vision_json_append_number (json, (d->x + d->w) / width, 6);
    g_string_append (json, ",\"y_max\":");
    gst_vision_json_append_number (json, (d->y + d->h) / height, 6);
    g_string_append (json, "},\"rect\":{\"x\":");
    gst_vision_json_append_number (json, d->x, 2);
    g_string_append (json, ",\"y\":");
    gst_vision_json_append_number (json, d->y, 2);
    g_string_append (json, ",\"w\":");
    gst_vision_json_append_number (json, d->w, 2);
    g_string_append (json, ",\"h\":");
    gst_vision_json_append_number (json, d->h, 2);
    g_string_append (json, "}");
    /* only for instance masks (a Mask R-CNN's, on the ROI meta, else in the
     * companion meta) */
    {
      GstVisionMask mask;

      if (gst_vision_mask_for_detection (buffer, d,
              g_ptr_array_index (masks, i), &mask)) {
        append_rle (json, &mask, width, height);
        gst_vision_mask_clear (&mask);
      }
    }
    /* only for keypoints (a Keypoint R-CNN's, on the ROI meta): [x, y, score]
     * in frame pixels */
    append_keypoints (json, buffer, d->roi_id, width, height);
    /* only for tracked objects, so that untracked streams keep their schema */
    if (d->object_id > 0)
      g_string_append_printf (json, ",\"object_id\":%d,\"tracked\":%s",
          d->object_id, d->tracked ? "true" : "false");
    g_string_append (json, "}");
  }
  g_string_append (json, "]}");

  g_array_unref (detections);
  g_ptr_array_unref (masks);
  return g_string_free (json, FALSE);
}

gboolean
gst_vision_json_frame_in_segment (const GstSegment * segment,
    GstBuffer * buffer)
{
  GstClockTime start = GST_BUFFER_PTS (buffer);
  GstClockTime stop = start;

  if (segment->format != GST_FORMAT_TIME || !GST_CLOCK_TIME_IS_VALID (start))
    return TRUE;
  if (GST_BUFFER_DURATION_IS_VALID (buffer))
    stop = start + GST_BUFFER_DURATION (buffer);
  return gst_segment_clip (segment, GST_FORMAT_TIME, start, stop, NULL, NULL);
}
