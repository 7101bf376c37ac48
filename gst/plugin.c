/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect: the GStreamer plugin (visiondetect, visiontrack, visionoverlay,
 * visionjson and, built with libmosquitto, visionmqtt). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "vd_config.h"

#include <gst/gst.h>

#include "gstvisiondetect.h"
#include "gstvisiondetectmeta.h"
#include "gstvisionjson.h"
#include "gstvisionoverlay.h"
#include "gstvisiontrack.h"
#ifdef HAVE_MQTT
#include "gstvisionmqtt.h"
#endif

#define PACKAGE "visiondetect"

static gboolean
plugin_init (GstPlugin * plugin)
{
  gboolean ret = FALSE;

  /* the default model may be given through the environment: rescan when it changes */
  gst_plugin_add_dependency_simple (plugin, "VISIONDETECT_MODEL", NULL, NULL,
      GST_PLUGIN_DEPENDENCY_FLAG_NONE);

  /* registered now, so that applications can find the meta by name */
  gst_vision_detect_meta_get_info ();

  ret |= GST_ELEMENT_REGISTER (visiondetect, plugin);
  ret |= GST_ELEMENT_REGISTER (visiontrack, plugin);
  ret |= GST_ELEMENT_REGISTER (visionoverlay, plugin);
  ret |= GST_ELEMENT_REGISTER (visionjson, plugin);
#ifdef HAVE_MQTT
  ret |= GST_ELEMENT_REGISTER (visionmqtt, plugin);
#endif
  return ret;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, visiondetect,
    "Object detection with torchvision-compatible Faster R-CNN models",
    plugin_init, VD_VERSION, "LGPL", "visiondetect",
    "https://github.com/visiondetect")
