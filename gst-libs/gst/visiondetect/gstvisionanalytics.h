/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the meta library and the plugin: GstAnalytics helpers, for builds
 * against GStreamer >= 1.24 (HAVE_GST_ANALYTICS). */
#ifndef GST_VISION_ANALYTICS_H
#define GST_VISION_ANALYTICS_H

#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#include <gst/video/video.h>

#include "gstvisiondetectmeta.h"

#include <math.h>

G_BEGIN_DECLS

/* Whether the object-detection entry @od and the ROI meta @roi are the same
 * detection: the same class, each edge of the boxes within 2 pixels (the two
 * metas' scale transforms round differently). */
static inline gboolean
gst_vision_od_is_roi (GstAnalyticsODMtd * od,
    const GstVideoRegionOfInterestMeta * roi)
{
  gint x, y, w, h;

  return gst_analytics_od_mtd_get_obj_type (od) == roi->roi_type
      && gst_analytics_od_mtd_get_location (od, &x, &y, &w, &h, NULL)
      && ABS (x - (gint) roi->x) <= 2 && ABS (y - (gint) roi->y) <= 2
      && ABS (x + w - (gint) (roi->x + roi->w)) <= 2
      && ABS (y + h - (gint) (roi->y + roi->h)) <= 2;
}

/* Whether a ROI meta of @buffer shows @od (as gst_vision_od_is_roi()). */
static inline gboolean
gst_vision_od_has_roi (GstBuffer * buffer, GstAnalyticsODMtd * od)
{
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;

  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL)
    if (gst_vision_od_is_roi (od, roi))
      return TRUE;
  return FALSE;
}

/* Whether a GstVisionDetectMeta entry of @buffer (visiondetect's or
 * visiontrack's, rescaled to the @width x @height frame) is @od's detection:
 * the same class, each edge within 2 pixels. Those elements add one for each
 * entry, so an entry whose ROI meta another element removed or relabelled is
 * not taken for another detector's. */
static inline gboolean
gst_vision_od_has_companion (GstBuffer * buffer, GstAnalyticsODMtd * od,
    gint width, gint height)
{
  GQuark type = gst_analytics_od_mtd_get_obj_type (od);
  GstVisionDetectMeta *meta;
  gpointer state = NULL;
  gint x, y, w, h;

  if (!gst_analytics_od_mtd_get_location (od, &x, &y, &w, &h, NULL))
    return FALSE;
  while ((meta = (GstVisionDetectMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VISION_DETECT_META_API_TYPE)) != NULL) {
    gdouble sx = meta->width > 0 ? (gdouble) width / meta->width : 1.0;
    gdouble sy = meta->height > 0 ? (gdouble) height / meta->height : 1.0;
    guint i;

    for (i = 0; i < meta->detections->len; i++) {
      const GstVisionDetection *d =
          &g_array_index (meta->detections, GstVisionDetection, i);

      if (d->label == type && fabs (d->x * sx - x) <= 2.0
          && fabs (d->y * sy - y) <= 2.0
          && fabs ((d->x + d->w) * sx - (x + w)) <= 2.0
          && fabs ((d->y + d->h) * sy - (y + h)) <= 2.0)
        return TRUE;
    }
  }
  return FALSE;
}

G_END_DECLS
#endif /* HAVE_GST_ANALYTICS */
#endif /* GST_VISION_ANALYTICS_H */
