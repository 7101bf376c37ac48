/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionoverlay: draws detections onto the frames. */
#ifndef __GST_VISION_OVERLAY_H__
#define __GST_VISION_OVERLAY_H__

#include <gst/gst.h>
#include <gst/video/video.h>
#include <gst/video/gstvideofilter.h>

G_BEGIN_DECLS

#define GST_TYPE_VISION_OVERLAY (gst_vision_overlay_get_type ())
G_DECLARE_FINAL_TYPE (GstVisionOverlay, gst_vision_overlay, GST, VISION_OVERLAY,
    GstVideoFilter);

/**
 * GstVisionOverlayText:
 * @GST_VISION_OVERLAY_TEXT_NONE: boxes only
 * @GST_VISION_OVERLAY_TEXT_LABEL: the class name
 * @GST_VISION_OVERLAY_TEXT_CONFIDENCE: the confidence
 * @GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE: "label confidence"
 */
typedef enum
{
  GST_VISION_OVERLAY_TEXT_NONE,
  GST_VISION_OVERLAY_TEXT_LABEL,
  GST_VISION_OVERLAY_TEXT_CONFIDENCE,
  GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE,
} GstVisionOverlayText;

GST_ELEMENT_REGISTER_DECLARE (visionoverlay);

G_END_DECLS

#endif /* __GST_VISION_OVERLAY_H__ */
