/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One frame's detections as one line of JSON: the schema visionjson writes and
 * visionmqtt publishes (see docs/elements.md, visionjson). */
#ifndef __GST_VISION_JSON_FRAME_H__
#define __GST_VISION_JSON_FRAME_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* The schemas a frame's line can take. */
typedef enum
{
  /* ours: see docs/elements.md, visionjson */
  GST_VISION_JSON_FORMAT_VISIONDETECT,
  /* DL Streamer's gvametaconvert (format=json, add-empty-results=true):
   * resolution, timestamp, objects with x, y, w, h, region_id, id, roi_type
   * and detection {bounding_box, confidence, label_id, label} */
  GST_VISION_JSON_FORMAT_DLSTREAMER,
} GstVisionJsonFormat;

/* Returns (transfer full) the JSON object of @buffer's detections in
 * @format, without a newline. Ours: `frame` is @frame_index, `pts` the
 * buffer's and `stream_time` its stream time in @segment (null when the
 * buffer has no timestamp or the segment is not in time), `width` and
 * `height` the frame size the boxes are normalised by. DL Streamer's:
 * `timestamp` the stream time (absent when there is none), as gvametaconvert
 * writes it. The detections are read with gst_vision_detections_from_buffer(),
 * so regions of interest and analytics entries that other elements added are
 * written too. Any thread. */
gchar *gst_vision_json_frame_to_string (GstBuffer * buffer,
    const GstSegment * segment, gint width, gint height, guint64 frame_index,
    GstVisionJsonFormat format);

/* Whether @buffer is at least partly inside @segment (a TIME segment; a
 * buffer without a timestamp or a segment in another format counts as
 * inside). The frames outside are those a sink drops: visionjson and
 * visionmqtt neither write nor number them. */
gboolean gst_vision_json_frame_in_segment (const GstSegment * segment,
    GstBuffer * buffer);

G_END_DECLS

#endif /* __GST_VISION_JSON_FRAME_H__ */
