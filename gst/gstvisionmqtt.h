/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionmqtt: publishes the detections of each frame to an MQTT broker. */
#ifndef __GST_VISION_MQTT_H__
#define __GST_VISION_MQTT_H__

#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS

#define GST_TYPE_VISION_MQTT (gst_vision_mqtt_get_type ())
G_DECLARE_FINAL_TYPE (GstVisionMqtt, gst_vision_mqtt, GST, VISION_MQTT,
    GstBaseTransform);

GST_ELEMENT_REGISTER_DECLARE (visionmqtt);

G_END_DECLS

#endif /* __GST_VISION_MQTT_H__ */
