/* visiondetect: the companion detection meta (see gstvisiondetectmeta.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisiondetectmeta.h"

GST_DEBUG_CATEGORY_STATIC (vision_detect_meta_debug);
#define GST_CAT_DEFAULT vision_detect_meta_debug

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
gst_vision_detect_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  GstVisionDetectMeta *dmeta = (GstVisionDetectMeta *) meta;

  dmeta->width = 0;
  dmeta->height = 0;
  dmeta->inference = GST_VISION_DETECT_INFERRED;
  dmeta->detections = g_array_new (FALSE, FALSE, sizeof (GstVisionDetection));
  return TRUE;
}

static void
gst_vision_detect_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  GstVisionDetectMeta *dmeta = (GstVisionDetectMeta *) meta;

  g_clear_pointer (&dmeta->detections, g_array_unref);
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
  guint i;

  if (GST_META_TRANSFORM_IS_COPY (type)) {
    /* a region copy of a video frame still holds the whole frame's detections */
  } else if (GST_VIDEO_META_TRANSFORM_IS_SCALE (type)) {
    GstVideoMetaTransform *trans = data;
    gint in_w = GST_VIDEO_INFO_WIDTH (trans->in_info);
    gint in_h = GST_VIDEO_INFO_HEIGHT (trans->in_info);

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
  return TRUE;
}

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

void
gst_vision_detect_meta_add_detection (GstVisionDetectMeta * meta,
    const GstVisionDetection * detection)
{
  g_return_if_fail (meta != NULL && detection != NULL);

  g_array_append_vals (meta->detections, detection, 1);
}

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
  }
  return "unknown";
}

static gboolean
has_roi_id (GArray * detections, guint n, gint roi_id)
{
  guint i;

  for (i = 0; i < n; i++)
    if (g_array_index (detections, GstVisionDetection, i).roi_id == roi_id)
      return TRUE;
  return FALSE;
}

/* Adds the ROI metas that no companion meta already described (the first
 * @n_companion entries of @detections). */
static void
detections_from_roi_metas (GstBuffer * buffer, guint width, guint height,
    GArray * detections, guint n_companion)
{
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;

  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
    GstStructure *s;
    GstVisionDetection d;

    if (has_roi_id (detections, n_companion, roi->id))
      continue;
    s = gst_video_region_of_interest_meta_get_param (roi,
        "detection");
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
      }
      gst_structure_get_double (s, "confidence", &d.confidence);
      gst_structure_get_int (s, "label_id", &d.label_id);
      label = gst_structure_get_string (s, "label");
      if (label != NULL)
        d.label = g_quark_from_string (label);
      gst_structure_get_int (s, "object_id", &d.object_id);
      gst_structure_get_boolean (s, "tracked", &d.tracked);
    }
    if (d.object_id <= 0) {
      GstStructure *o = gst_video_region_of_interest_meta_get_param (roi,
          "object_id");

      d.object_id = 0;
      if (o != NULL && gst_structure_get_int (o, "id", &d.object_id)
          && d.object_id < 0)
        d.object_id = 0;
    }
    g_array_append_val (detections, d);
  }
}

GArray *
gst_vision_detections_from_buffer (GstBuffer * buffer, guint width,
    guint height)
{
  GArray *detections = g_array_new (FALSE, FALSE, sizeof (GstVisionDetection));
  GstVisionDetectMeta *meta;
  gpointer state = NULL;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), detections);

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
      g_array_append_val (detections, d);
    }
  }
  detections_from_roi_metas (buffer, width, height, detections,
      detections->len);
  return detections;
}
