/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionjson: writes the detections of each frame as JSON Lines. */
#ifndef __GST_VISION_JSON_H__
#define __GST_VISION_JSON_H__

#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS

#define GST_TYPE_VISION_JSON (gst_vision_json_get_type ())
G_DECLARE_FINAL_TYPE (GstVisionJson, gst_vision_json, GST, VISION_JSON,
    GstBaseTransform);

GST_ELEMENT_REGISTER_DECLARE (visionjson);

G_END_DECLS

#endif /* __GST_VISION_JSON_H__ */
