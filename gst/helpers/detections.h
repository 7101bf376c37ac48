/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the plugin: the one writer of every form of a detection on a
 * buffer, for visiondetect (its detections) and visiontrack (its predicted
 * boxes). */
#ifndef __GST_VISION_DETECTIONS_H__
#define __GST_VISION_DETECTIONS_H__

#include <gst/gst.h>
#include <gst/video/video.h>

#include "gstvisiondetectmeta.h"

G_BEGIN_DECLS

/* One detection to attach, in pixels of the frame it was found on.
 *
 * @label is the class name as a quark; 0 (a class without a name, which only
 * another producer's analytics entry can give) leaves the ROI meta's roi_type
 * 0 and its "detection" structure without "label". @label_id is -1 when the
 * class id is not known. @object_id > 0 is the tracked object's id, 0 none;
 * @tracked marks a box visiontrack predicted (no detection on this frame).
 *
 * @mask, when not NULL, is an instance mask over the rectangle @mask_x,
 * @mask_y, @mask_width x @mask_height of the frame, one byte a pixel,
 * round(255 p) (the engine's vd_detection mask); it is copied.
 *
 * @keypoints, when not NULL, are @n_keypoints points of a Keypoint R-CNN
 * detection, x, y (frame pixels) and score each (the engine's vd_keypoint);
 * @keypoint_names (@n_keypoints names, or NULL) and @skeleton (@n_skeleton
 * pairs of 0-based keypoint indices, or NULL) are the model's; all copied. */
typedef struct
{
  gdouble x1, y1, x2, y2;
  gdouble confidence;
  gint label_id;
  GQuark label;
  gint object_id;
  gboolean tracked;
  const guint8 *mask;
  gint mask_x, mask_y, mask_width, mask_height;
  const gfloat *keypoints;      /* [n_keypoints][3] */
  gint n_keypoints;
  const gchar *const *keypoint_names;
  const gint *skeleton;         /* [n_skeleton][2] */
  gint n_skeleton;
} GstVisionDetectionEntry;

/* What gst_vision_detections_attach() gave one entry: the id of its ROI meta
 * and of its object-detection entry (-1 when there is none: GStreamer < 1.24,
 * or the analytics meta refused it). */
typedef struct
{
  gint roi_id;
  gint od_id;
} GstVisionDetectionIds;

/* Attaches each of the @n_entries detections of a @width x @height frame to
 * @buffer (writable) in every form it has, in this order:
 *
 * - the box clamped to the frame, its edges rounded to whole pixels for the
 *   integer forms;
 * - built against GStreamer >= 1.24, an object-detection entry
 *   (GstAnalyticsODMtd: class quark, rounded box, confidence) of the buffer's
 *   GstAnalyticsRelationMeta (added when the buffer has none);
 * - a GstVideoRegionOfInterestMeta (roi_type the class quark, the rounded box)
 *   whose id is the entry's id, as DL Streamer links them, unless that is
 *   below the ids of the ROI metas already on the buffer: then the next id
 *   after those; with its "detection" structure: x_min, y_min, x_max, y_max
 *   (normalised, doubles), confidence (double), label_id (int), label (the
 *   class name, whenever the class has one), and object_id (int) with an
 *   "object_id" structure {id} (DL Streamer's gvatrack) when @object_id > 0,
 *   tracked=TRUE for a predicted box; with a mask, DL Streamer's "mask_rcnn"
 *   structure over the ROI's rectangle; with keypoints, DL Streamer's
 *   "keypoints" structure (gst_vision_keypoints_param());
 * - an entry of @companion (which may describe another frame size: the box
 *   and the keypoints are rescaled to it) with the mask (same size only) and
 *   the keypoints beside it;
 * - built against GStreamer >= 1.26, for each mask, after every entry's
 *   object-detection entry (so that those have consecutive ids), a
 *   segmentation entry related both ways to its detection's.
 *
 * @element names the element in the debug log. @ids, when not NULL, gets
 * @n_entries ids. Streaming thread of the caller. */
void gst_vision_detections_attach (GstElement * element, GstBuffer * buffer,
    GstVisionDetectMeta * companion, gint width, gint height,
    const GstVisionDetectionEntry * entries, guint n_entries,
    GstVisionDetectionIds * ids);

/* The "keypoints" ROI param of @e's keypoints on a ROI of @rx, @ry, @rw x
 * @rh frame pixels (@rw, @rh > 0), as DL Streamer's pose estimation attaches
 * one: format "keypoints", precision FP32, dims [n, 2] (guint), data_buffer
 * (a GVariant of bytes) the n (x, y) float32 pairs normalised to the ROI
 * ((x - rx) / rw), confidence (a GVariant of bytes) the n float32 scores,
 * and, when the model names them, point_names (strings) and
 * point_connections (strings: the skeleton's pairs of names, one after the
 * other). */
GstStructure *gst_vision_keypoints_param (const GstVisionDetectionEntry * e,
    guint rx, guint ry, guint rw, guint rh);

/* Reads a "keypoints" ROI param @s (gst_vision_keypoints_param()'s form)
 * on a ROI of @rx, @ry, @rw x @rh: a new array of n [x, y, score] triples in
 * frame pixels (score NaN without "confidence") and *@n, or NULL when @s is
 * not such a structure or is malformed. */
gfloat *gst_vision_keypoints_from_param (const GstStructure * s, guint rx,
    guint ry, guint rw, guint rh, guint * n);

/* The keypoints of the detection that ROI meta @roi_id of @buffer shows, in
 * pixels of the buffer's @width x @height frame: its "keypoints" param (the
 * truth), else those of the GstVisionDetectMeta entry with the same ROI id
 * and box (as gst_vision_detections_from_buffer() matches them; rescaled to
 * @width x @height when the meta describes another size: a
 * scale transform drops the ROI meta's params). A new array of n [x, y,
 * score] triples and *@n, or NULL when the detection has none. */
gfloat *gst_vision_keypoints_of_roi (GstBuffer * buffer, gint roi_id,
    guint width, guint height, guint * n);

G_END_DECLS

#endif /* __GST_VISION_DETECTIONS_H__ */
