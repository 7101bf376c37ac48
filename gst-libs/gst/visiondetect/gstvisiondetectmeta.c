/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect: the companion detection meta (see gstvisiondetectmeta.h),
 * built into libgstvisiondetectmeta-1.0, which the plugin links to. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisiondetectmeta.h"
#include "gstvisionanalytics.h"

#include <math.h>

GST_DEBUG_CATEGORY_STATIC (vision_detect_meta_debug);
#define GST_CAT_DEFAULT vision_detect_meta_debug

/**
 * gst_vision_detection_copy:
 * @detection: a detection
 *
 * Returns: (transfer full): a copy of @detection, to free with
 *     gst_vision_detection_free()
 */
GstVisionDetection *
gst_vision_detection_copy (const GstVisionDetection * detection)
{
  GstVisionDetection *copy;

  g_return_val_if_fail (detection != NULL, NULL);

  copy = g_new (GstVisionDetection, 1);
  *copy = *detection;
  return copy;
}

/**
 * gst_vision_detection_free:
 * @detection: (transfer full) (nullable): a detection from
 *     gst_vision_detection_copy()
 */
void
gst_vision_detection_free (GstVisionDetection * detection)
{
  g_free (detection);
}

G_DEFINE_BOXED_TYPE (GstVisionDetection, gst_vision_detection,
    gst_vision_detection_copy, gst_vision_detection_free);

/**
 * gst_vision_detection_get_label:
 * @detection: a detection
 *
 * The class name of @detection (its @label quark as a string).
 *
 * Returns: (transfer none) (nullable): the label, valid for the life of the
 *     process (a quark's string); %NULL when the detection has none
 */
const gchar *
gst_vision_detection_get_label (const GstVisionDetection * detection)
{
  g_return_val_if_fail (detection != NULL, NULL);

  return g_quark_to_string (detection->label);
}

/**
 * gst_vision_detection_mask_copy:
 * @mask: a mask
 *
 * Returns: (transfer full): a copy of @mask sharing its data (immutable), to
 *     free with gst_vision_detection_mask_free()
 */
GstVisionDetectionMask *
gst_vision_detection_mask_copy (const GstVisionDetectionMask * mask)
{
  GstVisionDetectionMask *copy;

  g_return_val_if_fail (mask != NULL, NULL);

  copy = g_new (GstVisionDetectionMask, 1);
  *copy = *mask;
  if (copy->data != NULL)
    g_bytes_ref (copy->data);
  return copy;
}

/**
 * gst_vision_detection_mask_free:
 * @mask: (transfer full) (nullable): a mask from
 *     gst_vision_detection_mask_copy() or
 *     gst_vision_detections_from_buffer_full()
 */
void
gst_vision_detection_mask_free (GstVisionDetectionMask * mask)
{
  if (mask == NULL)
    return;
  g_clear_pointer (&mask->data, g_bytes_unref);
  g_free (mask);
}

G_DEFINE_BOXED_TYPE (GstVisionDetectionMask, gst_vision_detection_mask,
    gst_vision_detection_mask_copy, gst_vision_detection_mask_free);

/**
 * gst_vision_detection_mask_get_data:
 * @mask: a mask
 *
 * Returns: (transfer none) (nullable): the @mask->width x @mask->height bytes
 *     of @mask, row-major (see #GstVisionDetectionMask)
 */
GBytes *
gst_vision_detection_mask_get_data (const GstVisionDetectionMask * mask)
{
  g_return_val_if_fail (mask != NULL, NULL);

  return mask->data;
}

/**
 * gst_vision_detection_mask_at:
 * @mask: a mask
 * @x: a column of the frame
 * @y: a row of the frame
 *
 * Returns: whether frame pixel (@x, @y) belongs to the object: inside the
 *     mask's rectangle with a byte >= 128 (probability >= 0.5)
 */
gboolean
gst_vision_detection_mask_at (const GstVisionDetectionMask * mask, guint x,
    guint y)
{
  const guint8 *bytes;

  g_return_val_if_fail (mask != NULL, FALSE);

  if (mask->data == NULL || x < mask->x || y < mask->y
      || x - mask->x >= mask->width || y - mask->y >= mask->height)
    return FALSE;
  bytes = g_bytes_get_data (mask->data, NULL);
  return bytes[(gsize) (y - mask->y) * mask->width + (x - mask->x)] >= 128;
}

static void
mask_clear (gpointer data)
{
  GstVisionDetectionMask *mask = data;

  g_clear_pointer (&mask->data, g_bytes_unref);
}

/* The first output pixel whose centre maps to input pixel @v or later, for a
 * nearest-neighbour resize of @in pixels to @out: output pixel X samples
 * input pixel floor((2 X + 1) @in / (2 @out)). */
static guint64
first_output_pixel (guint64 v, guint64 in, guint64 out)
{
  return MIN ((2 * v * out + in - 1) / in / 2, out);
}

/* @mask, in an @in_w x @in_h frame, resampled by nearest neighbour for the
 * frame scaled to @out_w x @out_h (see the header): the output pixels whose
 * centre falls in the rectangle, each with the byte under its centre. @out's
 * data is NULL when no output pixel's centre falls in it. */
static void
scale_mask (const GstVisionDetectionMask * mask, guint in_w, guint in_h,
    guint out_w, guint out_h, GstVisionDetectionMask * out)
{
  const guint8 *src = g_bytes_get_data (mask->data, NULL);
  guint x0 = first_output_pixel (mask->x, in_w, out_w);
  guint x1 = first_output_pixel ((guint64) mask->x + mask->width, in_w, out_w);
  guint y0 = first_output_pixel (mask->y, in_h, out_h);
  guint y1 = first_output_pixel ((guint64) mask->y + mask->height, in_h, out_h);
  guint *cols;
  guint8 *dst;
  guint x, y;

  out->x = x0;
  out->y = y0;
  out->width = x1 - x0;
  out->height = y1 - y0;
  out->data = NULL;
  if (out->width == 0 || out->height == 0)
    return;
  cols = g_new (guint, out->width);
  for (x = x0; x < x1; x++)
    cols[x - x0] = (guint) (((2 * (guint64) x + 1) * in_w) / (2 * (guint64)
            out_w)) - mask->x;
  dst = g_malloc ((gsize) out->width * out->height);
  for (y = y0; y < y1; y++) {
    guint sy = (guint) (((2 * (guint64) y + 1) * in_h) / (2 * (guint64)
            out_h)) - mask->y;
    const guint8 *row = src + (gsize) sy * mask->width;
    guint8 *drow = dst + (gsize) (y - y0) * out->width;

    for (x = 0; x < out->width; x++)
      drow[x] = row[cols[x]];
  }
  g_free (cols);
  out->data = g_bytes_new_take (dst, (gsize) out->width * out->height);
}

/* @meta's mask of detection @index, or NULL. */
static const GstVisionDetectionMask *
mask_entry (const GstVisionDetectMeta * meta, guint index)
{
  const GstVisionDetectionMask *mask;

  if (meta->masks == NULL || index >= meta->masks->len
      || index >= meta->detections->len)
    return NULL;
  mask = &g_array_index (meta->masks, GstVisionDetectionMask, index);
  return mask->data != NULL ? mask : NULL;
}

static void
keypoints_clear (gpointer data)
{
  if (data != NULL)
    g_bytes_unref (data);
}

/* @meta's keypoints of detection @index (a GBytes of 3 n floats), or NULL. */
static GBytes *
keypoints_entry (const GstVisionDetectMeta * meta, guint index)
{
  if (meta->keypoints == NULL || index >= meta->keypoints->len)
    return NULL;
  return g_ptr_array_index (meta->keypoints, index);
}

/* Gives detection @index of @meta the keypoints @points (referenced). */
static void
set_keypoints_entry (GstVisionDetectMeta * meta, guint index, GBytes * points)
{
  if (meta->keypoints == NULL)
    meta->keypoints = g_ptr_array_new_with_free_func (keypoints_clear);
  if (meta->keypoints->len <= index)
    g_ptr_array_set_size (meta->keypoints, index + 1);
  keypoints_clear (g_ptr_array_index (meta->keypoints, index));
  g_ptr_array_index (meta->keypoints, index) = g_bytes_ref (points);
}

/* Gives detection @index (the last one added) of @meta the mask @mask (its
 * data referenced). */
static void
set_mask_entry (GstVisionDetectMeta * meta, guint index,
    const GstVisionDetectionMask * mask)
{
  GstVisionDetectionMask *entry;

  if (meta->masks == NULL) {
    meta->masks = g_array_new (FALSE, TRUE, sizeof (GstVisionDetectionMask));
    g_array_set_clear_func (meta->masks, mask_clear);
  }
  if (meta->masks->len <= index)
    g_array_set_size (meta->masks, index + 1);
  entry = &g_array_index (meta->masks, GstVisionDetectionMask, index);
  mask_clear (entry);
  *entry = *mask;
  entry->data = g_bytes_ref (mask->data);
}

/**
 * gst_vision_detect_meta_api_get_type:
 *
 * Returns: the API type of #GstVisionDetectMeta
 */
GType
gst_vision_detect_meta_api_get_type (void)
{
  static GType type = 0;
  /* "size" makes videoscale/videoconvertscale call our transform with a scale
   * request instead of dropping the meta. It also makes GStreamer 1.22's
   * videoflip, videocrop and videobox drop it without calling the transform
   * (they keep only metas tagged "video" alone): the 1.22 transform data
   * could not say how they move the picture anyway (only the scale transform
   * exists, with the two frame infos). */
  static const gchar *tags[] = { GST_META_TAG_VIDEO_STR,
    GST_META_TAG_VIDEO_SIZE_STR, NULL
  };

  if (g_once_init_enter (&type)) {
    GType api = gst_meta_api_type_register ("GstVisionDetectMetaAPI", tags);
    g_once_init_leave (&type, api);
  }
  return type;
}

static gboolean
gst_vision_detect_meta_init (GstMeta * meta, gpointer params,
    GstBuffer * buffer)
{
  GstVisionDetectMeta *dmeta = (GstVisionDetectMeta *) meta;

  dmeta->width = 0;
  dmeta->height = 0;
  dmeta->inference = GST_VISION_DETECT_INFERRED;
  dmeta->detections = g_array_new (FALSE, FALSE, sizeof (GstVisionDetection));
  /* created with the first mask, the first keypoints */
  dmeta->masks = NULL;
  dmeta->keypoints = NULL;
  return TRUE;
}

static void
gst_vision_detect_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  GstVisionDetectMeta *dmeta = (GstVisionDetectMeta *) meta;

  g_clear_pointer (&dmeta->detections, g_array_unref);
  g_clear_pointer (&dmeta->masks, g_array_unref);
  g_clear_pointer (&dmeta->keypoints, g_ptr_array_unref);
}

/* Whether scaling @in to @out keeps the display aspect ratio, to within one
 * output pixel. GStreamer 1.22 tells a meta's scale transform only the two
 * frame infos (GstVideoMetaTransform: in_info, out_info), not where the
 * picture lands: when the aspect ratio changes, videoscale/videoconvertscale
 * with add-borders=true (their default) letterbox the picture, with
 * add-borders=false they stretch it, and the infos are the same for both.
 * The borders are computed as videoconvertscale computes them. */
static gboolean
scale_keeps_aspect (const GstVideoInfo * in, const GstVideoInfo * out)
{
  gint dar_n, dar_d, n, d;
  gint64 picture;

  if (in->par_n <= 0 || in->par_d <= 0 || out->par_n <= 0 || out->par_d <= 0)
    return FALSE;
  if (!gst_util_fraction_multiply (in->width, in->height, in->par_n,
          in->par_d, &dar_n, &dar_d)
      || !gst_util_fraction_multiply (dar_n, dar_d, out->par_d, out->par_n,
          &n, &d) || n <= 0 || d <= 0)
    return FALSE;
  /* the picture's height at the output width, else its width at the output
   * height: a border of one pixel or less moves nothing by more than one */
  picture = gst_util_uint64_scale_int (out->width, d, n);
  if (picture <= out->height)
    return out->height - picture <= 1;
  picture = gst_util_uint64_scale_int (out->height, n, d);
  return out->width - picture <= 1;
}

static gboolean
gst_vision_detect_meta_transform (GstBuffer * dest, GstMeta * meta,
    GstBuffer * buffer, GQuark type, gpointer data)
{
  GstVisionDetectMeta *smeta = (GstVisionDetectMeta *) meta;
  GstVisionDetectMeta *dmeta;
  gdouble sx = 1.0, sy = 1.0;
  guint width = smeta->width, height = smeta->height;
  gint in_w = 0, in_h = 0;
  gboolean scale = FALSE;
  guint i;

  if (GST_META_TRANSFORM_IS_COPY (type)) {
    /* a region copy of a video frame still holds the whole frame's detections */
  } else if (GST_VIDEO_META_TRANSFORM_IS_SCALE (type)) {
    GstVideoMetaTransform *trans = data;

    in_w = GST_VIDEO_INFO_WIDTH (trans->in_info);
    in_h = GST_VIDEO_INFO_HEIGHT (trans->in_info);
    width = GST_VIDEO_INFO_WIDTH (trans->out_info);
    height = GST_VIDEO_INFO_HEIGHT (trans->out_info);
    if (in_w <= 0 || in_h <= 0)
      return FALSE;
    if (!scale_keeps_aspect (trans->in_info, trans->out_info)) {
      /* letterboxed or stretched: no way to know which, so no boxes rather
       * than wrong ones */
      GST_DEBUG ("dropping %u detections: %dx%d -> %ux%u changes the display "
          "aspect ratio", smeta->detections->len, in_w, in_h, width, height);
      return FALSE;
    }
    sx = (gdouble) width / in_w;
    sy = (gdouble) height / in_h;
    scale = TRUE;
    GST_DEBUG ("scaling %u detections %dx%d -> %ux%u",
        smeta->detections->len, in_w, in_h, width, height);
  } else {
    return FALSE;
  }

  dmeta = gst_buffer_add_vision_detect_meta (dest, width, height);
  if (dmeta == NULL)
    return FALSE;
  dmeta->inference = smeta->inference;
  for (i = 0; i < smeta->detections->len; i++) {
    GstVisionDetection d =
        g_array_index (smeta->detections, GstVisionDetection, i);

    d.x *= sx;
    d.w *= sx;
    d.y *= sy;
    d.h *= sy;
    g_array_append_val (dmeta->detections, d);
  }
  for (i = 0; i < smeta->detections->len; i++) {
    const GstVisionDetectionMask *mask = mask_entry (smeta, i);
    GstVisionDetectionMask scaled;

    if (mask == NULL)
      continue;
    if (!scale) {
      /* the bytes are immutable: shared */
      set_mask_entry (dmeta, i, mask);
      continue;
    }
    scale_mask (mask, in_w, in_h, width, height, &scaled);
    if (scaled.data != NULL) {
      set_mask_entry (dmeta, i, &scaled);
      g_bytes_unref (scaled.data);
    }
  }
  for (i = 0; i < smeta->detections->len; i++) {
    GBytes *points = keypoints_entry (smeta, i);
    const gfloat *src;
    gfloat *moved;
    gsize size, k;

    if (points == NULL)
      continue;
    if (!scale) {
      /* the values are immutable: shared */
      set_keypoints_entry (dmeta, i, points);
      continue;
    }
    /* continuous coordinates, as the boxes: x * sx, y * sy, same score */
    src = g_bytes_get_data (points, &size);
    moved = g_memdup2 (src, size);
    for (k = 0; k < size / sizeof (gfloat); k += 3) {
      moved[k] = (gfloat) (moved[k] * sx);
      moved[k + 1] = (gfloat) (moved[k + 1] * sy);
    }
    points = g_bytes_new_take (moved, size);
    set_keypoints_entry (dmeta, i, points);
    g_bytes_unref (points);
  }
  return TRUE;
}

/**
 * gst_vision_detect_meta_get_info:
 *
 * Returns: (transfer none): the #GstMetaInfo of #GstVisionDetectMeta
 */
const GstMetaInfo *
gst_vision_detect_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *mi = gst_meta_register (GST_VISION_DETECT_META_API_TYPE,
        "GstVisionDetectMeta", sizeof (GstVisionDetectMeta),
        gst_vision_detect_meta_init, gst_vision_detect_meta_free,
        gst_vision_detect_meta_transform);

    GST_DEBUG_CATEGORY_INIT (vision_detect_meta_debug, "visiondetectmeta", 0,
        "visiondetect companion meta");
    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) mi);
  }
  return info;
}

/**
 * gst_buffer_get_vision_detect_meta:
 * @buffer: a buffer
 *
 * The first #GstVisionDetectMeta of @buffer (several visiondetect elements
 * in a row each add their own: iterate with gst_buffer_iterate_meta_filtered()
 * and %GST_VISION_DETECT_META_API_TYPE to see them all).
 *
 * Returns: (transfer none) (nullable): the meta, valid while @buffer is, or
 *     %NULL when @buffer has none
 */
GstVisionDetectMeta *
gst_buffer_get_vision_detect_meta (GstBuffer * buffer)
{
  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);

  return (GstVisionDetectMeta *) gst_buffer_get_meta (buffer,
      GST_VISION_DETECT_META_API_TYPE);
}

/**
 * gst_buffer_add_vision_detect_meta:
 * @buffer: a writable buffer
 * @width: width of the frame the boxes will refer to
 * @height: height of the frame the boxes will refer to
 *
 * Attaches a new #GstVisionDetectMeta with no detection, status
 * %GST_VISION_DETECT_INFERRED.
 *
 * Returns: (transfer none) (nullable): the meta, owned by @buffer
 */
GstVisionDetectMeta *
gst_buffer_add_vision_detect_meta (GstBuffer * buffer, guint width,
    guint height)
{
  GstVisionDetectMeta *meta;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);

  meta = (GstVisionDetectMeta *) gst_buffer_add_meta (buffer,
      GST_VISION_DETECT_META_INFO, NULL);
  if (meta == NULL)
    return NULL;
  meta->width = width;
  meta->height = height;
  return meta;
}

/**
 * gst_vision_detect_meta_add_detection:
 * @meta: a meta
 * @detection: the detection, copied
 */
void
gst_vision_detect_meta_add_detection (GstVisionDetectMeta * meta,
    const GstVisionDetection * detection)
{
  g_return_if_fail (meta != NULL && detection != NULL);

  g_array_append_vals (meta->detections, detection, 1);
}

/**
 * gst_vision_detect_meta_add_detection_with_mask:
 * @meta: a meta
 * @detection: the detection, copied
 * @x: left column of the mask's rectangle, in pixels of the meta's frame
 * @y: top row of the rectangle
 * @width: width of the rectangle and of @mask
 * @height: height of the rectangle and of @mask
 * @mask: (nullable): @width x @height bytes, row-major, round(255 p) of each
 *     pixel's probability (see #GstVisionDetectionMask), referenced (not
 *     copied: it must not change afterwards)
 *
 * Adds @detection with its instance mask. A %NULL @mask or an empty
 * rectangle adds @detection without a mask.
 *
 * Returns: %TRUE when @detection was added; %FALSE (nothing added) when
 *     @mask does not hold @width x @height bytes or the rectangle is not
 *     inside the @meta's @width x @height frame
 */
gboolean
gst_vision_detect_meta_add_detection_with_mask (GstVisionDetectMeta * meta,
    const GstVisionDetection * detection, guint x, guint y, guint width,
    guint height, GBytes * mask)
{
  GstVisionDetectionMask entry;

  g_return_val_if_fail (meta != NULL && detection != NULL, FALSE);

  if (mask == NULL || width == 0 || height == 0) {
    g_array_append_vals (meta->detections, detection, 1);
    return TRUE;
  }
  if (g_bytes_get_size (mask) != (guint64) width * height
      || (guint64) x + width > meta->width
      || (guint64) y + height > meta->height) {
    GST_DEBUG ("refusing a %ux%u mask at (%u, %u) of %" G_GSIZE_FORMAT
        " bytes in a %ux%u frame", width, height, x, y,
        g_bytes_get_size (mask), meta->width, meta->height);
    return FALSE;
  }
  g_array_append_vals (meta->detections, detection, 1);
  entry.x = x;
  entry.y = y;
  entry.width = width;
  entry.height = height;
  entry.data = mask;
  set_mask_entry (meta, meta->detections->len - 1, &entry);
  return TRUE;
}

/**
 * gst_vision_detect_meta_set_keypoints:
 * @meta: a meta
 * @index: 0 .. gst_vision_detect_meta_get_n_detections() - 1
 * @keypoints: (array length=n_values) (nullable): x, y and score of each
 *     keypoint, one after the other (x, y in pixels of the meta's frame,
 *     continuous coordinates as the boxes; score as the model gives it),
 *     copied
 * @n_values: number of floats in @keypoints: 3 per keypoint
 *
 * Gives detection @index its keypoints (a Keypoint R-CNN's), replacing any it
 * had; %NULL or @n_values 0 removes them. A scale transform moves them with
 * the boxes; the point names and the skeleton are the model's, on the ROI
 * meta's "keypoints" param.
 *
 * Returns: %TRUE when set; %FALSE (nothing changed) when @index is out of
 *     range or @n_values is not a multiple of 3
 */
gboolean
gst_vision_detect_meta_set_keypoints (GstVisionDetectMeta * meta, guint index,
    const gfloat * keypoints, gsize n_values)
{
  GBytes *points;

  g_return_val_if_fail (meta != NULL, FALSE);

  if (index >= meta->detections->len || n_values % 3 != 0
      || (keypoints == NULL && n_values > 0)) {
    GST_DEBUG ("refusing %" G_GSIZE_FORMAT " keypoint values for detection "
        "%u of %u", n_values, index, meta->detections->len);
    return FALSE;
  }
  if (n_values == 0) {
    if (keypoints_entry (meta, index) != NULL) {
      keypoints_clear (g_ptr_array_index (meta->keypoints, index));
      g_ptr_array_index (meta->keypoints, index) = NULL;
    }
    return TRUE;
  }
  points = g_bytes_new (keypoints, n_values * sizeof (gfloat));
  set_keypoints_entry (meta, index, points);
  g_bytes_unref (points);
  return TRUE;
}

/**
 * gst_vision_detect_meta_get_keypoints:
 * @meta: a meta
 * @index: 0 .. gst_vision_detect_meta_get_n_detections() - 1
 * @n_values: (out): number of floats returned, 3 per keypoint (0 without
 *     keypoints)
 *
 * The keypoints of detection @index: x, y and score of each, one after the
 * other, in pixels of the meta's frame.
 *
 * Returns: (transfer none) (array length=n_values) (nullable): the values,
 *     owned by @meta; %NULL when the detection has no keypoints or @index is
 *     out of range
 */
const gfloat *
gst_vision_detect_meta_get_keypoints (const GstVisionDetectMeta * meta,
    guint index, gsize * n_values)
{
  GBytes *points;
  gsize size = 0;
  const gfloat *values;

  g_return_val_if_fail (meta != NULL && n_values != NULL, NULL);

  *n_values = 0;
  points = keypoints_entry (meta, index);
  if (points == NULL || index >= meta->detections->len)
    return NULL;
  values = g_bytes_get_data (points, &size);
  *n_values = size / sizeof (gfloat);
  return values;
}

/**
 * gst_vision_detect_meta_get_mask_data: (skip)
 * @meta: a meta
 * @index: 0 .. gst_vision_detect_meta_get_n_detections() - 1
 * @x: (out) (optional): left column of the mask's rectangle
 * @y: (out) (optional): top row of the rectangle
 * @width: (out) (optional): width of the rectangle and of the mask
 * @height: (out) (optional): height of the rectangle and of the mask
 *
 * The instance mask of detection @index, for C: @width x @height bytes,
 * row-major, byte (i, j) for frame pixel (@x + i, @y + j) (see
 * #GstVisionDetectionMask). The out arguments are untouched when it returns
 * %NULL.
 *
 * Returns: (transfer none) (nullable): the bytes, valid while @meta is;
 *     %NULL when the detection has no mask or @index is out of range
 */
const guint8 *
gst_vision_detect_meta_get_mask_data (const GstVisionDetectMeta * meta,
    guint index, guint * x, guint * y, guint * width, guint * height)
{
  const GstVisionDetectionMask *mask;

  g_return_val_if_fail (meta != NULL, NULL);

  mask = mask_entry (meta, index);
  if (mask == NULL)
    return NULL;
  if (x != NULL)
    *x = mask->x;
  if (y != NULL)
    *y = mask->y;
  if (width != NULL)
    *width = mask->width;
  if (height != NULL)
    *height = mask->height;
  return g_bytes_get_data (mask->data, NULL);
}

/**
 * gst_vision_detect_meta_get_width:
 * @meta: a meta
 *
 * Returns: the width of the frame the boxes refer to (0 for a %NULL @meta)
 */
guint
gst_vision_detect_meta_get_width (const GstVisionDetectMeta * meta)
{
  g_return_val_if_fail (meta != NULL, 0);

  return meta->width;
}

/**
 * gst_vision_detect_meta_get_height:
 * @meta: a meta
 *
 * Returns: the height of the frame the boxes refer to (0 for a %NULL @meta)
 */
guint
gst_vision_detect_meta_get_height (const GstVisionDetectMeta * meta)
{
  g_return_val_if_fail (meta != NULL, 0);

  return meta->height;
}

/**
 * gst_vision_detect_meta_get_inference:
 * @meta: a meta
 *
 * Returns: whether the detector looked at the frame
 */
GstVisionDetectInference
gst_vision_detect_meta_get_inference (const GstVisionDetectMeta * meta)
{
  g_return_val_if_fail (meta != NULL, GST_VISION_DETECT_INFERRED);

  return meta->inference;
}

/**
 * gst_vision_detect_meta_get_n_detections:
 * @meta: a meta
 *
 * Returns: the number of detections of @meta (0 for a %NULL @meta)
 */
guint
gst_vision_detect_meta_get_n_detections (const GstVisionDetectMeta * meta)
{
  g_return_val_if_fail (meta != NULL, 0);

  return meta->detections->len;
}

/**
 * gst_vision_detect_meta_get_detection:
 * @meta: a meta
 * @index: 0 .. gst_vision_detect_meta_get_n_detections() - 1 (by descending
 *     score)
 * @detection: (out caller-allocates): where the detection is copied
 *
 * Returns: %TRUE with @detection set; %FALSE (@detection untouched) when
 *     @index is out of range or an argument is %NULL
 */
gboolean
gst_vision_detect_meta_get_detection (const GstVisionDetectMeta * meta,
    guint index, GstVisionDetection * detection)
{
  g_return_val_if_fail (meta != NULL, FALSE);
  g_return_val_if_fail (detection != NULL, FALSE);
  g_return_val_if_fail (index < meta->detections->len, FALSE);

  *detection = g_array_index (meta->detections, GstVisionDetection, index);
  return TRUE;
}

/**
 * gst_vision_detect_meta_get_mask:
 * @meta: a meta
 * @index: 0 .. gst_vision_detect_meta_get_n_detections() - 1
 * @x: (out) (optional): left column of the mask's rectangle
 * @y: (out) (optional): top row of the rectangle
 * @width: (out) (optional): width of the rectangle and of the mask
 * @height: (out) (optional): height of the rectangle and of the mask
 *
 * The instance mask of detection @index (see #GstVisionDetectionMask and
 * gst_vision_detect_meta_get_mask_data()). The out arguments are untouched
 * when it returns %NULL.
 *
 * Returns: (transfer full) (nullable): @width x @height bytes, row-major;
 *     %NULL when the detection has no mask or @index is out of range
 */
GBytes *
gst_vision_detect_meta_get_mask (const GstVisionDetectMeta * meta,
    guint index, guint * x, guint * y, guint * width, guint * height)
{
  const GstVisionDetectionMask *mask;

  g_return_val_if_fail (meta != NULL, NULL);

  if (gst_vision_detect_meta_get_mask_data (meta, index, x, y, width,
          height) == NULL)
    return NULL;
  mask = mask_entry (meta, index);
  return g_bytes_ref (mask->data);
}

/**
 * gst_vision_detect_inference_name:
 * @inference: an inference status
 *
 * Returns: (transfer none): "inferred", "interval", "late", "gap",
 *     "repeated" (visionjson's names), or "unknown"
 */
const gchar *
gst_vision_detect_inference_name (GstVisionDetectInference inference)
{
  switch (inference) {
    case GST_VISION_DETECT_INFERRED:
      return "inferred";
    case GST_VISION_DETECT_SKIPPED_INTERVAL:
      return "interval";
    case GST_VISION_DETECT_SKIPPED_LATE:
      return "late";
    case GST_VISION_DETECT_SKIPPED_GAP:
      return "gap";
    case GST_VISION_DETECT_REPEATED:
      return "repeated";
  }
  return "unknown";
}

/* The companion entry that describes @roi: the same ROI id and, within
 * rounding and rescaling, the same box (a foreign ROI meta may reuse an id);
 * each entry describes one ROI meta at most. */
static gint
companion_entry (GArray * companion, GArray * used,
    const GstVideoRegionOfInterestMeta * roi, guint width, guint height)
{
  /* the ROI's integer pixels: rounded, then rescaled by GStreamer as integers */
  const gdouble tol = 2.0 + 0.01 * MAX (width, height);
  guint i;

  for (i = 0; i < companion->len; i++) {
    GstVisionDetection *c = &g_array_index (companion, GstVisionDetection, i);

    if (g_array_index (used, gboolean, i) || c->roi_id != roi->id)
      continue;
    if (fabs (c->x - roi->x) <= tol && fabs (c->y - roi->y) <= tol
        && fabs (c->x + c->w - (roi->x + roi->w)) <= tol
        && fabs (c->y + c->h - (roi->y + roi->h)) <= tol) {
      g_array_index (used, gboolean, i) = TRUE;
      return (gint) i;
    }
  }
  return -1;
}

/* Every companion entry of @buffer, in pixels of a @width x @height frame;
 * with @masks, their masks in the same frame (a GstVisionDetectionMask or
 * NULL for each entry). */
static GArray *
companion_entries (GstBuffer * buffer, guint width, guint height,
    GPtrArray * masks)
{
  GArray *entries = g_array_new (FALSE, FALSE, sizeof (GstVisionDetection));
  GstVisionDetectMeta *meta;
  gpointer state = NULL;

  /* several visiondetect elements in a row each add their own meta */
  while ((meta = (GstVisionDetectMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VISION_DETECT_META_API_TYPE)) != NULL) {
    gdouble sx = 1.0, sy = 1.0;
    guint i;

    if (meta->width > 0 && meta->height > 0) {
      sx = (gdouble) width / meta->width;
      sy = (gdouble) height / meta->height;
    }
    for (i = 0; i < meta->detections->len; i++) {
      GstVisionDetection d =
          g_array_index (meta->detections, GstVisionDetection, i);

      d.x *= sx;
      d.w *= sx;
      d.y *= sy;
      d.h *= sy;
      g_array_append_val (entries, d);
      if (masks != NULL) {
        const GstVisionDetectionMask *mask = mask_entry (meta, i);
        GstVisionDetectionMask *m = NULL;

        if (mask != NULL && (sx != 1.0 || sy != 1.0)) {
          /* as the scale transform would have resampled it */
          m = g_new (GstVisionDetectionMask, 1);
          scale_mask (mask, meta->width, meta->height, width, height, m);
          if (m->data == NULL)
            g_clear_pointer (&m, g_free);
        } else if (mask != NULL) {
          m = gst_vision_detection_mask_copy (mask);
        }
        g_ptr_array_add (masks, m);
      }
    }
  }
  return entries;
}

#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
/* The mask of the segmentation entry @od relates to (RELATE_TO, as GStreamer's
 * instance-segmentation decoders and visiondetect relate them), over its
 * rectangle clipped to the @width x @height frame: each frame pixel takes the
 * mask pixel under its centre (the mask may have another resolution than the
 * rectangle), in the object where that value is not 0 (the background). NULL
 * without one, or when the mask buffer does not hold what its video meta
 * says. */
static GstVisionDetectionMask *
od_mask (GstAnalyticsRelationMeta * relations, GstAnalyticsODMtd * od,
    guint width, guint height)
{
  GstAnalyticsSegmentationMtd seg;
  GstVisionDetectionMask *mask = NULL;
  gpointer state = NULL;
  GstVideoMeta *vmeta;
  GstBuffer *buffer;
  GstMapInfo map;
  gint lx, ly, x0, y0, x1, y1, fx, fy;
  guint lw, lh, bpp;
  guint8 *bytes;

  if (!gst_analytics_relation_meta_get_direct_related (relations, od->id,
          GST_ANALYTICS_REL_TYPE_RELATE_TO,
          gst_analytics_segmentation_mtd_get_mtd_type (), &state, &seg))
    return NULL;
  buffer = gst_analytics_segmentation_mtd_get_mask (&seg, &lx, &ly, &lw, &lh);
  if (buffer == NULL)
    return NULL;
  vmeta = gst_buffer_get_video_meta (buffer);
  bpp = vmeta == NULL ? 0 : vmeta->format == GST_VIDEO_FORMAT_GRAY8 ? 1 :
      vmeta->format == GST_VIDEO_FORMAT_GRAY16_LE
      || vmeta->format == GST_VIDEO_FORMAT_GRAY16_BE ? 2 : 0;
  if (bpp == 0 || vmeta->width == 0 || vmeta->height == 0 || lw == 0
      || lh == 0 || lw > G_MAXINT || lh > G_MAXINT
      || !gst_buffer_map (buffer, &map, GST_MAP_READ)) {
    gst_buffer_unref (buffer);
    return NULL;
  }
  x0 = CLAMP (lx, 0, (gint) width);
  y0 = CLAMP (ly, 0, (gint) height);
  x1 = (gint) CLAMP ((gint64) lx + lw, 0, (gint64) width);
  y1 = (gint) CLAMP ((gint64) ly + lh, 0, (gint64) height);
  if (x1 > x0 && y1 > y0 && vmeta->stride[0] >= 0
      && (gsize) vmeta->stride[0] >= (gsize) vmeta->width * bpp
      && vmeta->offset[0] + (gsize) vmeta->stride[0] * (vmeta->height - 1)
      + (gsize) vmeta->width * bpp <= map.size) {
    bytes = g_malloc ((gsize) (x1 - x0) * (y1 - y0));
    for (fy = y0; fy < y1; fy++) {
      guint my = MIN ((guint) (((fy - ly) + 0.5) * vmeta->height / lh),
          vmeta->height - 1);
      const guint8 *row = map.data + vmeta->offset[0] +
          (gsize) vmeta->stride[0] * my;

      for (fx = x0; fx < x1; fx++) {
        guint mx = MIN ((guint) (((fx - lx) + 0.5) * vmeta->width / lw),
            vmeta->width - 1);
        gboolean set = bpp == 1 ? row[mx] != 0 :
            (row[2 * mx] | row[2 * mx + 1]) != 0;

        bytes[(gsize) (fy - y0) * (x1 - x0) + (fx - x0)] = set ? 255 : 0;
      }
    }
    mask = g_new (GstVisionDetectionMask, 1);
    mask->x = x0;
    mask->y = y0;
    mask->width = x1 - x0;
    mask->height = y1 - y0;
    mask->data = g_bytes_new_take (bytes, (gsize) mask->width * mask->height);
  }
  gst_buffer_unmap (buffer, &map);
  gst_buffer_unref (buffer);
  return mask;
}
#endif

#ifdef HAVE_GST_ANALYTICS
/* The object-detection entries of @buffer's analytics relation meta that no
 * ROI meta shows (another element's detector, e.g. GStreamer's own tensor
 * decoders), each with the id of the tracking entry it relates to; not those
 * of a companion entry (visiondetect's and visiontrack's: their ROI meta was
 * removed or relabelled downstream, and the ROI metas are the truth). */
static void
append_analytics_detections (GstBuffer * buffer, guint width, guint height,
    GArray * detections, GPtrArray * masks)
{
  GstAnalyticsRelationMeta *relations =
      gst_buffer_get_analytics_relation_meta (buffer);
  GstAnalyticsODMtd od;
  gpointer state = NULL;

  if (relations == NULL)
    return;
  while (gst_analytics_relation_meta_iterate (relations, &state,
          gst_analytics_od_mtd_get_mtd_type (), &od)) {
    GstAnalyticsTrackingMtd trk;
    gpointer rel_state = NULL;
    GstVisionDetection d;
    gint x, y, w, h;
    gfloat confidence;
    guint64 tracking_id;

    if (!gst_analytics_od_mtd_get_location (&od, &x, &y, &w, &h, &confidence)
        || w <= 0 || h <= 0 || gst_vision_od_has_roi (buffer, &od)
        || gst_vision_od_has_companion (buffer, &od, width, height))
      continue;
    d.x = x;
    d.y = y;
    d.w = w;
    d.h = h;
    d.confidence = confidence;
    d.label_id = -1;
    d.label = gst_analytics_od_mtd_get_obj_type (&od);
    d.roi_id = -1;
    d.object_id = 0;
    d.tracked = FALSE;
    if (gst_analytics_relation_meta_get_direct_related (relations, od.id,
            GST_ANALYTICS_REL_TYPE_RELATE_TO,
            gst_analytics_tracking_mtd_get_mtd_type (), &rel_state, &trk)
        && gst_analytics_tracking_mtd_get_info (&trk, &tracking_id, NULL,
            NULL, NULL) && tracking_id > 0 && tracking_id <= G_MAXINT)
      d.object_id = (gint) tracking_id;
    g_array_append_val (detections, d);
    if (masks != NULL) {
#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
      g_ptr_array_add (masks, od_mask (relations, &od, width, height));
#else
      g_ptr_array_add (masks, NULL);
#endif
    }
  }
}
#endif

static GArray *
detections_from_buffer (GstBuffer * buffer, guint width, guint height,
    GPtrArray * masks)
{
  GArray *detections = g_array_new (FALSE, FALSE, sizeof (GstVisionDetection));
  GArray *companion, *used;
  GPtrArray *companion_masks = NULL;
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;

  if (masks != NULL)
    companion_masks = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_vision_detection_mask_free);
  companion = companion_entries (buffer, width, height, companion_masks);
  used = g_array_new (FALSE, TRUE, sizeof (gboolean));
  g_array_set_size (used, companion->len);

  /* The ROI metas are the truth: what downstream elements changed on them (a
   * classifier's label, a tracker's id) or removed wins. The companion entry
   * of the same detection gives only what the ROI meta lost (its parameters,
   * dropped by GStreamer's own scale transform) or never had. */
  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
    GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
        "detection");
    gint ci = companion_entry (companion, used, roi, width, height);
    const GstVisionDetection *c = ci >= 0 ?
        &g_array_index (companion, GstVisionDetection, ci) : NULL;
    gboolean have_box = FALSE, have_confidence = FALSE, have_label_id = FALSE,
        have_object_id = FALSE, have_tracked = FALSE;
    GstVisionDetection d;

    d.x = roi->x;
    d.y = roi->y;
    d.w = roi->w;
    d.h = roi->h;
    d.confidence = -1.0;
    d.label_id = -1;
    d.label = roi->roi_type;
    d.roi_id = roi->id;
    d.object_id = 0;
    d.tracked = FALSE;

    if (s != NULL) {
      gdouble x_min, y_min, x_max, y_max;
      const gchar *label;

      /* the normalised box is exact; the ROI's integer pixels are rounded */
      if (gst_structure_get (s, "x_min", G_TYPE_DOUBLE, &x_min,
              "y_min", G_TYPE_DOUBLE, &y_min, "x_max", G_TYPE_DOUBLE, &x_max,
              "y_max", G_TYPE_DOUBLE, &y_max, NULL)) {
        d.x = x_min * width;
        d.y = y_min * height;
        d.w = (x_max - x_min) * width;
        d.h = (y_max - y_min) * height;
        have_box = TRUE;
      }
      have_confidence = gst_structure_get_double (s, "confidence",
          &d.confidence);
      have_label_id = gst_structure_get_int (s, "label_id", &d.label_id);
      label = gst_structure_get_string (s, "label");
      if (label != NULL)
        d.label = g_quark_from_string (label);
      have_object_id = gst_structure_get_int (s, "object_id", &d.object_id)
          && d.object_id > 0;
      have_tracked = gst_structure_get_boolean (s, "tracked", &d.tracked);
    }
    if (!have_object_id) {
      GstStructure *o = gst_video_region_of_interest_meta_get_param (roi,
          "object_id");

      d.object_id = 0;
      have_object_id = o != NULL && gst_structure_get_int (o, "id",
          &d.object_id) && d.object_id > 0;
      if (!have_object_id)
        d.object_id = 0;
    }
    if (c != NULL) {
      if (!have_box) {
        d.x = c->x;
        d.y = c->y;
        d.w = c->w;
        d.h = c->h;
      }
      if (!have_confidence)
        d.confidence = c->confidence;
      if (!have_label_id)
        d.label_id = c->label_id;
      if (!have_object_id)
        d.object_id = c->object_id;
      if (!have_tracked)
        d.tracked = c->tracked;
    }
    g_array_append_val (detections, d);
    if (masks != NULL) {
      /* moved out: each entry describes one ROI meta at most */
      g_ptr_array_add (masks, ci >= 0 ?
          g_ptr_array_index (companion_masks, ci) : NULL);
      if (ci >= 0)
        g_ptr_array_index (companion_masks, ci) = NULL;
    }
  }
  g_array_unref (used);
  g_array_unref (companion);
  if (companion_masks != NULL)
    g_ptr_array_unref (companion_masks);
#ifdef HAVE_GST_ANALYTICS
  append_analytics_detections (buffer, width, height, detections, masks);
#endif
  return detections;
}

GArray *
gst_vision_detections_from_buffer (GstBuffer * buffer, guint width,
    guint height)
{
  g_return_val_if_fail (GST_IS_BUFFER (buffer),
      g_array_new (FALSE, FALSE, sizeof (GstVisionDetection)));

  return detections_from_buffer (buffer, width, height, NULL);
}

/**
 * gst_vision_detections_from_buffer_full:
 * @buffer: a video buffer
 * @width: the buffer's frame width
 * @height: the buffer's frame height
 * @masks: (out) (transfer container) (element-type GstVisionDetectionMask):
 *     where a new array is returned, parallel to the detections: the mask of
 *     the #GstVisionDetectMeta entry matched to each ROI meta (as
 *     gst_vision_detections_from_buffer() matches them), in pixels of the
 *     @width x @height frame (resampled as the scale transform does when the
 *     meta describes another size), for an analytics object-detection entry
 *     the mask of the segmentation entry it relates to (GStreamer >= 1.26:
 *     nearest mask pixel, non-zero values set, clipped to the frame), or
 *     %NULL where there is none
 *
 * gst_vision_detections_from_buffer() with the companion meta's instance
 * masks. A ROI meta's own mask (DL Streamer's "mask_rcnn" param, which
 * visiondetect also attaches) is not read here: visionoverlay and visionjson
 * use it when present and this mask only when the ROI meta has none (a
 * scale transform dropped it).
 *
 * Returns: (transfer container) (element-type GstVisionDetection): a new array.
 */
GArray *
gst_vision_detections_from_buffer_full (GstBuffer * buffer, guint width,
    guint height, GPtrArray ** masks)
{
  g_return_val_if_fail (masks != NULL, NULL);
  *masks = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_vision_detection_mask_free);
  g_return_val_if_fail (GST_IS_BUFFER (buffer),
      g_array_new (FALSE, FALSE, sizeof (GstVisionDetection)));

  return detections_from_buffer (buffer, width, height, *masks);
}
