/* One frame's detections as one line of JSON: the schema visionjson writes and
 * visionmqtt publishes (see the README's visionjson section). */
#ifndef __GST_VISION_JSON_FRAME_H__
#define __GST_VISION_JSON_FRAME_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* Returns (transfer full) the JSON object of @buffer's detections, without a
 * newline: `frame` is @frame_index, `pts` the buffer's (null when it has
 * none), `width` and `height` the frame size the boxes are normalised by. The
 * detections are read with gst_vision_detections_from_buffer(), so regions of
 * interest that other elements added are written too. Any thread. */
gchar *gst_vision_json_frame_to_string (GstBuffer * buffer, gint width,
    gint height, guint64 frame_index);

/* Whether @buffer is at least partly inside @segment (a TIME segment; a
 * buffer without a timestamp or a segment in another format counts as
 * inside). The frames outside are those a sink drops: visionjson and
 * visionmqtt neither write nor number them. */
gboolean gst_vision_json_frame_in_segment (const GstSegment * segment,
    GstBuffer * buffer);

G_END_DECLS

#endif /* __GST_VISION_JSON_FRAME_H__ */
