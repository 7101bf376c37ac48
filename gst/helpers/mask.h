/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Instance masks on regions of interest, as visiondetect attaches them with a
 * Mask R-CNN model and DL Streamer's instance segmentation does: a "mask_rcnn"
 * param of the GstVideoRegionOfInterestMeta with format "segmentation_mask",
 * precision 10 (FP32), dims [height, width] and the float32 probabilities,
 * row-major, in "data_buffer" (a GVariant of bytes), stretched over the ROI's
 * rectangle (visiondetect's cover it pixel for pixel; DL Streamer's are the
 * model's 28x28 or so). Read by visionjson and visionoverlay, which fall back
 * to the companion meta's 8-bit mask (GstVisionDetectionMask) when the ROI meta
 * has no such param (GStreamer's scale transform drops a ROI meta's params;
 * the companion meta resamples its masks). */
#ifndef __GST_VISION_MASK_H__
#define __GST_VISION_MASK_H__

#include <gst/video/video.h>

G_BEGIN_DECLS

#include "gstvisiondetectmeta.h"

typedef struct
{
  guint x, y, width, height;    /* the mask's rectangle, frame pixels */
  guint mask_width, mask_height;        /* the dims */
  const gfloat *probs;          /* mask_height x mask_width, in data; or */
  const guint8 *bytes;          /* mask_height x mask_width, in bytes_ref */
  GVariant *data;
  GBytes *bytes_ref;
} GstVisionMask;

/* Fills @mask from @roi's "mask_rcnn" param; FALSE (and @mask cleared) when it
 * has none or one that does not follow the convention (another format or
 * precision, dims that are not two positive numbers, a data size that does
 * not match them, an empty rectangle). Release with gst_vision_mask_clear(). */
gboolean gst_vision_mask_from_roi (const GstVideoRegionOfInterestMeta * roi,
    GstVisionMask * mask);

/* The mask of detection @d (from gst_vision_detections_from_buffer_full(),
 * whose mask array gives @companion, nullable): its ROI meta's "mask_rcnn"
 * param when it has one, else @companion (the companion meta's mask, one
 * byte per frame pixel: >= 128 is in the object). FALSE (and @mask cleared)
 * when neither gives one. Release with gst_vision_mask_clear(). */
gboolean gst_vision_mask_for_detection (GstBuffer * buffer,
    const GstVisionDetection * d, const GstVisionDetectionMask * companion,
    GstVisionMask * mask);

void gst_vision_mask_clear (GstVisionMask * mask);

/* Whether frame pixel (@x, @y), inside the rectangle, is in the object: its
 * probability (the mask's nearest sample) >= 0.5 (a byte >= 128). */
static inline gboolean
gst_vision_mask_at (const GstVisionMask * mask, guint x, guint y)
{
  guint mx = (guint) (((guint64) (x - mask->x) * mask->mask_width) /
      mask->width);
  guint my = (guint) (((guint64) (y - mask->y) * mask->mask_height) /
      mask->height);
  if (mask->bytes != NULL)
    return mask->bytes[(gsize) my * mask->mask_width + mx] >= 128;
  return mask->probs[(gsize) my * mask->mask_width + mx] >= 0.5f;
}

G_END_DECLS

#endif /* __GST_VISION_MASK_H__ */
