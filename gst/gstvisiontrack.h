/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack: persistent object ids across frames for the detections of the
 * ROI metas, and predicted boxes on the frames without detection. */
#ifndef __GST_VISION_TRACK_H__
#define __GST_VISION_TRACK_H__

#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS

#define GST_TYPE_VISION_TRACK (gst_vision_track_get_type ())
G_DECLARE_FINAL_TYPE (GstVisionTrack, gst_vision_track, GST, VISION_TRACK,
    GstBaseTransform);

GST_ELEMENT_REGISTER_DECLARE (visiontrack);

G_END_DECLS

#endif /* __GST_VISION_TRACK_H__ */
