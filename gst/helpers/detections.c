/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one writer of every form of a detection (see detections.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "vd_config.h"

#include "detections.h"

#include <math.h>
#include <string.h>

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

GST_DEBUG_CATEGORY_STATIC (gst_vision_detections_debug);
#define GST_CAT_DEFAULT gst_vision_detections_debug

/* DL Streamer's precision code for float32 tensors (its GVAPrecision). */
#define DLSTREAMER_PRECISION_FP32 10

/* The id after those of the ROI metas already on @buffer. */
static gint
next_roi_id (GstBuffer * buffer)
{
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;
  gint next = 0;

  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL)
    if (roi->id >= next && roi->id < G_MAXINT)
      next = roi->id + 1;
  return next;
}

/* A Mask R-CNN detection's mask as a ROI meta param, as DL Streamer's Mask R-CNN
 * post-processing attaches it: a "mask_rcnn" structure with format
 * "segmentation_mask", precision FP32, dims [height, width] (guint) and the
 * probabilities, row-major float32, as a GVariant of bytes in "data_buffer",
 * covering the ROI's rectangle (@rx, @ry, @rw x @rh frame pixels). The engine's
 * 8-bit mask gives byte / 255 (>= 0.5 exactly where torchvision's probability
 * is); pixels outside the engine's mask rectangle are 0. */
static GstStructure *
mask_param (const GstVisionDetectionEntry * e, guint rx, guint ry, guint rw,
    guint rh)
{
  gfloat *probs = g_new0 (gfloat, (gsize) rw * rh);
  GValueArray *dims;
  GValue dim = G_VALUE_INIT;
  GstStructure *s;
  GVariant *data;
  guint x, y;

  for (y = 0; y < rh; y++) {
    gint fy = (gint) (ry + y) - e->mask_y;
    if (fy < 0 || fy >= e->mask_height)
      continue;
    for (x = 0; x < rw; x++) {
      gint fx = (gint) (rx + x) - e->mask_x;
      if (fx >= 0 && fx < e->mask_width)
        probs[(gsize) y * rw + x] =
            e->mask[(gsize) fy * e->mask_width + fx] / 255.0f;
    }
  }
  data = g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, probs,
      (gsize) rw * rh * sizeof (gfloat), 1);
  g_free (probs);
  s = gst_structure_new ("mask_rcnn",
      "format", G_TYPE_STRING, "segmentation_mask",
      "precision", G_TYPE_INT, DLSTREAMER_PRECISION_FP32,
      "data_buffer", G_TYPE_VARIANT, data, NULL);
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
  dims = g_value_array_new (2);
  g_value_init (&dim, G_TYPE_UINT);
  g_value_set_uint (&dim, rh);
  g_value_array_append (dims, &dim);
  g_value_set_uint (&dim, rw);
  g_value_array_append (dims, &dim);
  gst_structure_set_array (s, "dims", dims);
  g_value_array_free (dims);
  G_GNUC_END_IGNORE_DEPRECATIONS;
  g_value_unset (&dim);
  return s;
}

static void
take_strings (GstStructure * s, const gchar * field, const gchar * const *v,
    guint n)
{
  GValue array = G_VALUE_INIT, str = G_VALUE_INIT;
  guint i;

  gst_value_array_init (&array, n);
  g_value_init (&str, G_TYPE_STRING);
  for (i = 0; i < n; i++) {
    g_value_set_string (&str, v[i]);
    gst_value_array_append_value (&array, &str);
  }
  g_value_unset (&str);
  gst_structure_take_value (s, field, &array);
}

GstStructure *
gst_vision_keypoints_param (const GstVisionDetectionEntry * e, guint rx,
    guint ry, guint rw, guint rh)
{
  guint n = (guint) e->n_keypoints, i;
  gfloat *xy = g_new (gfloat, 2 * (gsize) n);
  gfloat *scores = g_new (gfloat, n);
  GValue dims = G_VALUE_INIT, dim = G_VALUE_INIT;
  GstStructure *s;

  for (i = 0; i < n; i++) {
    xy[2 * i] = (gfloat) ((e->keypoints[3 * i] - (gdouble) rx) / rw);
    xy[2 * i + 1] = (gfloat) ((e->keypoints[3 * i + 1] - (gdouble) ry) / rh);
    scores[i] = e->keypoints[3 * i + 2];
  }
  s = gst_structure_new ("keypoints",
      "format", G_TYPE_STRING, "keypoints",
      "precision", G_TYPE_INT, DLSTREAMER_PRECISION_FP32,
      "data_buffer", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, xy,
          2 * (gsize) n * sizeof (gfloat), 1),
      "confidence", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, scores,
          (gsize) n * sizeof (gfloat), 1), NULL);
  g_free (xy);
  g_free (scores);
  gst_value_array_init (&dims, 2);
  g_value_init (&dim, G_TYPE_UINT);
  g_value_set_uint (&dim, n);
  gst_value_array_append_value (&dims, &dim);
  g_value_set_uint (&dim, 2);
  gst_value_array_append_value (&dims, &dim);
  g_value_unset (&dim);
  gst_structure_take_value (s, "dims", &dims);
  if (e->keypoint_names != NULL) {
    take_strings (s, "point_names", e->keypoint_names, n);
    if (e->skeleton != NULL && e->n_skeleton > 0) {
      const gchar **ends = g_new (const gchar *, 2 * (gsize) e->n_skeleton);
      gint k;

      for (k = 0; k < 2 * e->n_skeleton; k++)
        ends[k] = e->keypoint_names[e->skeleton[k]];
      take_strings (s, "point_connections", ends, 2 * (guint) e->n_skeleton);
      g_free (ends);
    }
  }
  return s;
}

/* @n float32 values of the byte GVariant @field of @s, or NULL. */
static const gfloat *
float_bytes (const GstStructure * s, const gchar * field, gsize n)
{
  const GValue *v = gst_structure_get_value (s, field);
  GVariant *data;
  gsize size = 0;
  gconstpointer p;

  if (v == NULL || !G_VALUE_HOLDS_VARIANT (v))
    return NULL;
  data = g_value_get_variant (v);
  if (data == NULL || !g_variant_is_of_type (data, G_VARIANT_TYPE_BYTESTRING))
    return NULL;
  p = g_variant_get_fixed_array (data, &size, 1);
  return size == n * sizeof (gfloat) && n > 0 ? p : NULL;
}

gfloat *
gst_vision_keypoints_from_param (const GstStructure * s, guint rx, guint ry,
    guint rw, guint rh, guint * n)
{
  const GValue *dims = gst_structure_get_value (s, "dims");
  const gfloat *xy, *scores;
  guint k, i;
  gfloat *out;

  if (!gst_structure_has_name (s, "keypoints") || dims == NULL
      || !GST_VALUE_HOLDS_ARRAY (dims) || gst_value_array_get_size (dims) != 2
      || !G_VALUE_HOLDS_UINT (gst_value_array_get_value (dims, 0))
      || !G_VALUE_HOLDS_UINT (gst_value_array_get_value (dims, 1))
      || g_value_get_uint (gst_value_array_get_value (dims, 1)) != 2)
    return NULL;
  k = g_value_get_uint (gst_value_array_get_value (dims, 0));
  if (k == 0 || k > 65536
      || (xy = float_bytes (s, "data_buffer", 2 * (gsize) k)) == NULL)
    return NULL;
  scores = float_bytes (s, "confidence", k);
  out = g_new (gfloat, 3 * (gsize) k);
  for (i = 0; i < k; i++) {
    /* unaligned bytes: copied */
    gfloat x, y, c = NAN;

    memcpy (&x, xy + 2 * i, sizeof x);
    memcpy (&y, xy + 2 * i + 1, sizeof y);
    if (scores != NULL)
      memcpy (&c, scores + i, sizeof c);
    out[3 * i] = (gfloat) (rx + (gdouble) x * rw);
    out[3 * i + 1] = (gfloat) (ry + (gdouble) y * rh);
    out[3 * i + 2] = c;
  }
  *n = k;
  return out;
}

gfloat *
gst_vision_keypoints_of_roi (GstBuffer * buffer, gint roi_id, guint width,
    guint height, guint * n)
{
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_get_video_region_of_interest_meta_id (buffer, roi_id);
  GstVisionDetectMeta *meta;
  GstStructure *s;
  gpointer state = NULL;

  if (roi == NULL)
    return NULL;
  if (roi->w > 0 && roi->h > 0
      && (s = gst_video_region_of_interest_meta_get_param (roi,
              "keypoints")) != NULL)
    return gst_vision_keypoints_from_param (s, roi->x, roi->y, roi->w, roi->h,
        n);
  /* no param (a scale transform drops them): the companion's entry */
  while ((meta = (GstVisionDetectMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VISION_DETECT_META_API_TYPE)) != NULL) {
    guint i;

    if (meta->width == 0 || meta->height == 0)
      continue;
    for (i = 0; i < meta->detections->len; i++) {
      const GstVisionDetection *d =
          &g_array_index (meta->detections, GstVisionDetection, i);
      const gfloat *values;
      gdouble sx = (gdouble) width / meta->width;
      gdouble sy = (gdouble) height / meta->height;
      gsize n_values, k;
      gfloat *out;

      /* the ROI's integer pixels, rescaled by GStreamer as integers: the
       * tolerance of the merged reader's match */
      gdouble tol = 2.0 + 0.01 * MAX (width, height);

      if (d->roi_id != roi_id || fabs (d->x * sx - roi->x) > tol
          || fabs (d->y * sy - roi->y) > tol
          || fabs ((d->x + d->w) * sx - (roi->x + roi->w)) > tol
          || fabs ((d->y + d->h) * sy - (roi->y + roi->h)) > tol
          || (values = gst_vision_detect_meta_get_keypoints (meta, i,
                  &n_values)) == NULL || n_values < 3)
        continue;
      out = g_memdup2 (values, n_values * sizeof (gfloat));
      for (k = 0; k < n_values; k += 3) {
        out[k] = (gfloat) (out[k] * sx);
        out[k + 1] = (gfloat) (out[k + 1] * sy);
      }
      *n = (guint) (n_values / 3);
      return out;
    }
  }
  return NULL;
}

static gboolean
has_mask (const GstVisionDetectionEntry * e)
{
  return e->mask != NULL && e->mask_width > 0 && e->mask_height > 0;
}

#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
/* The mask of @e as an instance-segmentation entry related (both ways) to
 * its object-detection entry (@od_id), as GStreamer's instance-segmentation
 * decoders attach them: a GRAY8 buffer with a video meta over the engine's
 * rectangle (in frame pixels, one mask pixel per frame pixel), 1 where
 * torchvision's mask is set (p >= 0.5), 0 (the background) elsewhere. One
 * entry per detection: overlapping masks stay whole. */
static void
add_segmentation (GstElement * element, GstAnalyticsRelationMeta * relations,
    guint od_id, const GstVisionDetectionEntry * e)
{
  const gsize size = (gsize) e->mask_width * e->mask_height;
  guint region_ids[2] = { 0, 1 };
  GstAnalyticsSegmentationMtd seg;
  GstBuffer *mask;
  GstMapInfo map;
  gsize i;

  mask = gst_buffer_new_allocate (NULL, size, NULL);
  if (mask == NULL || !gst_buffer_map (mask, &map, GST_MAP_WRITE)) {
    GST_WARNING_OBJECT (element, "no memory for a %dx%d segmentation mask",
        e->mask_width, e->mask_height);
    gst_clear_buffer (&mask);
    return;
  }
  for (i = 0; i < size; i++)
    map.data[i] = e->mask[i] >= 128 ? 1 : 0;
  gst_buffer_unmap (mask, &map);
  {
    /* rows packed: a row's stride is its width (the default would round it
     * up to 4 bytes) */
    gsize offset[GST_VIDEO_MAX_PLANES] = { 0 };
    gint stride[GST_VIDEO_MAX_PLANES] = { e->mask_width };

    gst_buffer_add_video_meta_full (mask, GST_VIDEO_FRAME_FLAG_NONE,
        GST_VIDEO_FORMAT_GRAY8, e->mask_width, e->mask_height, 1, offset,
        stride);
  }
  /* the entry takes the buffer */
  if (!gst_analytics_relation_meta_add_segmentation_mtd (relations, mask,
          GST_SEGMENTATION_TYPE_INSTANCE, G_N_ELEMENTS (region_ids),
          region_ids, e->mask_x, e->mask_y, e->mask_width, e->mask_height,
          &seg)) {
    GST_WARNING_OBJECT (element, "segmentation entry refused");
    gst_buffer_unref (mask);
    return;
  }
  gst_analytics_relation_meta_set_relation (relations,
      GST_ANALYTICS_REL_TYPE_RELATE_TO, od_id, seg.id);
  gst_analytics_relation_meta_set_relation (relations,
      GST_ANALYTICS_REL_TYPE_RELATE_TO, seg.id, od_id);
}
#endif

/* The "detection" structure of one entry (the layout DL Streamer's elements
 * read), @x1 .. @y2 the clamped box. */
static GstStructure *
detection_param (const GstVisionDetectionEntry * e, gdouble x1, gdouble y1,
    gdouble x2, gdouble y2, gint width, gint height)
{
  GstStructure *s = gst_structure_new ("detection",
      "x_min", G_TYPE_DOUBLE, x1 / width,
      "y_min", G_TYPE_DOUBLE, y1 / height,
      "x_max", G_TYPE_DOUBLE, x2 / width,
      "y_max", G_TYPE_DOUBLE, y2 / height,
      "confidence", G_TYPE_DOUBLE, e->confidence,
      "label_id", G_TYPE_INT, e->label_id, NULL);
  const gchar *label = g_quark_to_string (e->label);

  /* the label whenever the class has a name (visiondetect's always have
   * one): DL Streamer's readers take its absence for "no name" */
  if (label != NULL)
    gst_structure_set (s, "label", G_TYPE_STRING, label, NULL);
  if (e->object_id > 0)
    gst_structure_set (s, "object_id", G_TYPE_INT, e->object_id, NULL);
  if (e->tracked)
    gst_structure_set (s, "tracked", G_TYPE_BOOLEAN, TRUE, NULL);
  return s;
}

void
gst_vision_detections_attach (GstElement * element, GstBuffer * buffer,
    GstVisionDetectMeta * companion, gint width, gint height,
    const GstVisionDetectionEntry * entries, guint n_entries,
    GstVisionDetectionIds * ids)
{
  static gsize debug_once = 0;
  GstVisionDetectionIds *own_ids = NULL;
  gdouble sx = 1.0, sy = 1.0;
  gint roi_id;
  guint i;
#ifdef HAVE_GST_ANALYTICS
  GstAnalyticsRelationMeta *relations = NULL;
#endif

  if (g_once_init_enter (&debug_once)) {
    GST_DEBUG_CATEGORY_INIT (gst_vision_detections_debug, "visiondetections",
        0, "visiondetect: the detections' metas");
    g_once_init_leave (&debug_once, 1);
  }
  g_return_if_fail (GST_IS_BUFFER (buffer));
  g_return_if_fail (width > 0 && height > 0);
  if (n_entries == 0)
    return;
  if (ids == NULL)
    ids = own_ids = g_new (GstVisionDetectionIds, n_entries);
  /* the companion meta may describe another size (scaled upstream of
   * visiontrack) */
  if (companion != NULL && companion->width > 0 && companion->height > 0) {
    sx = (gdouble) companion->width / width;
    sy = (gdouble) companion->height / height;
  }

  roi_id = next_roi_id (buffer);
  for (i = 0; i < n_entries; i++) {
    const GstVisionDetectionEntry *e = &entries[i];
    GstVideoRegionOfInterestMeta *roi;
    gdouble x1, y1, x2, y2;
    guint ix1, iy1, ix2, iy2;

    /* NaN compares false: such an edge becomes the frame's origin */
    x1 = isfinite (e->x1) ? CLAMP (e->x1, 0.0, width) : 0.0;
    y1 = isfinite (e->y1) ? CLAMP (e->y1, 0.0, height) : 0.0;
    x2 = isfinite (e->x2) ? CLAMP (e->x2, x1, width) : x1;
    y2 = isfinite (e->y2) ? CLAMP (e->y2, y1, height) : y1;
    ix1 = (guint) lround (x1);
    iy1 = (guint) lround (y1);
    ix2 = MAX ((guint) lround (x2), ix1);
    iy2 = MAX ((guint) lround (y2), iy1);

    ids[i].od_id = -1;
#ifdef HAVE_GST_ANALYTICS
    {
      GstAnalyticsODMtd od;

      if (relations == NULL) {
        relations = gst_buffer_get_analytics_relation_meta (buffer);
        if (relations == NULL)
          relations = gst_buffer_add_analytics_relation_meta (buffer);
      }
      if (relations != NULL && gst_analytics_relation_meta_add_od_mtd
          (relations, e->label, (gint) ix1, (gint) iy1, (gint) (ix2 - ix1),
              (gint) (iy2 - iy1), (gfloat) e->confidence, &od)
          && od.id <= G_MAXINT) {
        ids[i].od_id = (gint) od.id;
        /* the ROI meta's id is its entry's, as DL Streamer links them,
         * unless another element's ROI metas (without entries) hold it */
        if (ids[i].od_id >= roi_id)
          roi_id = ids[i].od_id;
      } else {
        GST_WARNING_OBJECT (element, "object-detection entry refused");
      }
    }
#endif
    roi = gst_buffer_add_video_region_of_interest_meta_id (buffer, e->label,
        ix1, iy1, ix2 - ix1, iy2 - iy1);
    roi->id = roi_id;
    roi->parent_id = -1;
    gst_video_region_of_interest_meta_add_param (roi,
        detection_param (e, x1, y1, x2, y2, width, height));
    if (e->object_id > 0)
      gst_video_region_of_interest_meta_add_param (roi,
          gst_structure_new ("object_id", "id", G_TYPE_INT, e->object_id,
              NULL));
    if (has_mask (e) && ix2 > ix1 && iy2 > iy1)
      gst_video_region_of_interest_meta_add_param (roi,
          mask_param (e, ix1, iy1, ix2 - ix1, iy2 - iy1));
    if (e->keypoints != NULL && e->n_keypoints > 0 && ix2 > ix1 && iy2 > iy1)
      gst_video_region_of_interest_meta_add_param (roi,
          gst_vision_keypoints_param (e, ix1, iy1, ix2 - ix1, iy2 - iy1));
    ids[i].roi_id = roi_id;

    if (companion != NULL) {
      GstVisionDetection d;

      d.x = x1 * sx;
      d.y = y1 * sy;
      d.w = (x2 - x1) * sx;
      d.h = (y2 - y1) * sy;
      d.confidence = e->confidence;
      d.label_id = e->label_id;
      d.label = e->label;
      d.roi_id = roi_id;
      d.object_id = e->object_id;
      d.tracked = e->tracked;
      if (has_mask (e) && sx == 1.0 && sy == 1.0) {
        /* the engine's rectangle and bytes, which survive a scale
         * transform (the ROI meta's params do not) */
        GBytes *mask = g_bytes_new (e->mask,
            (gsize) e->mask_width * e->mask_height);

        if (!gst_vision_detect_meta_add_detection_with_mask (companion, &d,
                e->mask_x, e->mask_y, e->mask_width, e->mask_height, mask)) {
          GST_WARNING_OBJECT (element, "mask %dx%d at (%d, %d) outside the "
              "%dx%d frame: not in the companion meta", e->mask_width,
              e->mask_height, e->mask_x, e->mask_y, width, height);
          gst_vision_detect_meta_add_detection (companion, &d);
        }
        g_bytes_unref (mask);
      } else {
        gst_vision_detect_meta_add_detection (companion, &d);
      }
      if (e->keypoints != NULL && e->n_keypoints > 0) {
        /* in the companion's frame, as its box (the ROI meta's param does
         * not survive a scale transform) */
        gfloat *points = g_memdup2 (e->keypoints,
            3 * (gsize) e->n_keypoints * sizeof (gfloat));
        gint k;

        for (k = 0; k < e->n_keypoints; k++) {
          points[3 * k] = (gfloat) (points[3 * k] * sx);
          points[3 * k + 1] = (gfloat) (points[3 * k + 1] * sy);
        }
        gst_vision_detect_meta_set_keypoints (companion,
            companion->detections->len - 1, points, 3 * (gsize) e->n_keypoints);
        g_free (points);
      }
    }
    if (roi_id < G_MAXINT)
      roi_id++;
  }
#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
  /* after every detection's entry, so that those have consecutive ids */
  for (i = 0; relations != NULL && i < n_entries; i++)
    if (ids[i].od_id >= 0 && has_mask (&entries[i]))
      add_segmentation (element, relations, (guint) ids[i].od_id, &entries[i]);
#endif
  g_free (own_ids);
}
