/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Instance masks on regions of interest (see mask.h). */
#include "mask.h"

#include <string.h>

/* DL Streamer's precision code for float32 tensors (its GVAPrecision). */
#define DLSTREAMER_PRECISION_FP32 10

static gboolean
dim_at (const GValue * dims, guint i, guint * out)
{
  const GValue *v = gst_value_array_get_value (dims, i);

  if (G_VALUE_HOLDS_UINT (v))
    *out = g_value_get_uint (v);
  else if (G_VALUE_HOLDS_INT (v) && g_value_get_int (v) > 0)
    *out = (guint) g_value_get_int (v);
  else
    return FALSE;
  return *out > 0;
}

gboolean
gst_vision_mask_from_roi (const GstVideoRegionOfInterestMeta * roi,
    GstVisionMask * mask)
{
  GstStructure *s;
  const GValue *dims;
  gint precision = 0;
  gsize size = 0;

  memset (mask, 0, sizeof (*mask));
  s = gst_video_region_of_interest_meta_get_param (
      (GstVideoRegionOfInterestMeta *) roi, "mask_rcnn");
  if (s == NULL || roi->w == 0 || roi->h == 0
      || g_strcmp0 (gst_structure_get_string (s, "format"),
          "segmentation_mask") != 0
      || !gst_structure_get_int (s, "precision", &precision)
      || precision != DLSTREAMER_PRECISION_FP32)
    return FALSE;
  dims = gst_structure_get_value (s, "dims");
  if (dims == NULL || !GST_VALUE_HOLDS_ARRAY (dims)
      || gst_value_array_get_size (dims) != 2
      || !dim_at (dims, 0, &mask->mask_height)
      || !dim_at (dims, 1, &mask->mask_width)
      || !gst_structure_get (s, "data_buffer", G_TYPE_VARIANT, &mask->data,
          NULL))
    goto out_invalid;
  if (!g_variant_is_of_type (mask->data, G_VARIANT_TYPE_BYTESTRING))
    goto out_invalid;
  mask->probs = g_variant_get_fixed_array (mask->data, &size, 1);
  if (size / sizeof (gfloat) / mask->mask_width != mask->mask_height
      || size != (gsize) mask->mask_width * mask->mask_height * sizeof (gfloat)
      || ((guintptr) mask->probs) % sizeof (gfloat) != 0)
    goto out_invalid;
  mask->x = roi->x;
  mask->y = roi->y;
  mask->width = roi->w;
  mask->height = roi->h;
  return TRUE;

out_invalid:
  gst_vision_mask_clear (mask);
  return FALSE;
}

gboolean
gst_vision_mask_for_detection (GstBuffer * buffer,
    const GstVisionDetection * d, const GstVisionDetectionMask * companion,
    GstVisionMask * mask)
{
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_get_video_region_of_interest_meta_id (buffer, d->roi_id);

  /* the ROI meta's own mask wins, as its other fields do */
  if (roi != NULL && gst_vision_mask_from_roi (roi, mask))
    return TRUE;
  memset (mask, 0, sizeof (*mask));
  if (companion == NULL || companion->data == NULL || companion->width == 0
      || companion->height == 0
      || g_bytes_get_size (companion->data) !=
      (gsize) companion->width * companion->height)
    return FALSE;
  mask->x = companion->x;
  mask->y = companion->y;
  mask->width = mask->mask_width = companion->width;
  mask->height = mask->mask_height = companion->height;
  mask->bytes_ref = g_bytes_ref (companion->data);
  mask->bytes = g_bytes_get_data (mask->bytes_ref, NULL);
  return TRUE;
}

void
gst_vision_mask_clear (GstVisionMask * mask)
{
  g_clear_pointer (&mask->data, g_variant_unref);
  g_clear_pointer (&mask->bytes_ref, g_bytes_unref);
  memset (mask, 0, sizeof (*mask));
}
