/* visionoverlay: draws the detections of each frame (box, class name and
 * confidence) with Cairo and Pango. */

/**
 * SECTION:element-visionoverlay
 * @title: visionoverlay
 *
 * visionoverlay draws each detection found in a buffer's metadata onto the
 * frame: a box in a colour chosen per class and, above it, the class name and
 * the confidence, preceded by the object id ("#12 ball 0.93") for objects
 * visiontrack follows; boxes visiontrack predicted (no detection on that frame)
 * are dashed, and with #GstVisionOverlay:trail each tracked object draws the
 * path of its last centres. A detection with an instance mask (a Mask R-CNN's, the
 * "mask_rcnn" parameter of its #GstVideoRegionOfInterestMeta, as visiondetect and
 * DL Streamer attach it, else the companion meta's mask, which survives scaling)
 * gets its mask filled with the class colour, translucent
 * (#GstVisionOverlay:masks turns that off). It reads the detections visiondetect attaches (its companion
 * meta, which survives scaling), or any #GstVideoRegionOfInterestMeta, with the
 * "detection" parameters DL Streamer uses when present. Built against
 * GStreamer >= 1.24, it also draws any producer's #GstAnalyticsODMtd entries
 * that no ROI meta shows (GStreamer's tensor decoders attach only those),
 * with the id of the #GstAnalyticsTrackingMtd each relates to and the mask
 * of its #GstAnalyticsSegmentationMtd (1.26).
 *
 * It draws on packed RGB formats (BGRx, BGRA, RGBx, RGBA, xRGB, ARGB, xBGR, ABGR,
 * RGB, BGR); put a videoconvert in front of it for YUV video.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc pattern=ball ! videoconvert ! visiondetect ! \
 *     visionoverlay line-width=3 font-desc="Sans 14" ! videoconvert ! autovideosink
 * ]|
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "vd_config.h"

#include "gstvisionoverlay.h"
#include "gstvisiondetectmeta.h"
#include "gstvisionmask.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif

#include <math.h>
#include <string.h>

#include <cairo.h>
#include <pango/pangocairo.h>

GST_DEBUG_CATEGORY_STATIC (gst_vision_overlay_debug);
#define GST_CAT_DEFAULT gst_vision_overlay_debug

#define DEFAULT_LINE_WIDTH 0.0
#define DEFAULT_FONT_DESC NULL
#define DEFAULT_TEXT GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE
#define DEFAULT_TRAIL 0
#define DEFAULT_MASKS TRUE
/* the opacity of a filled instance mask */
#define MASK_ALPHA 0.5

enum
{
  PROP_0,
  PROP_LINE_WIDTH,
  PROP_FONT_DESC,
  PROP_TEXT,
  PROP_TRAIL,
  PROP_MASKS,
};

/* The last centres of one tracked object. */
typedef struct
{
  GArray *points;               /* gdouble x, y pairs, oldest first */
  GstVisionDetection last;      /* for the colour */
  guint64 last_frame;
} Trail;

struct _GstVisionOverlay
{
  GstVideoFilter parent;

  /* properties, protected by the object lock */
  gdouble line_width;
  gchar *font_desc;
  GstVisionOverlayText text;
  guint trail;
  gboolean masks;

  /* streaming thread: object id -> Trail, and the frames seen */
  GHashTable *trails;
  guint64 frame_count;

  /* streaming thread: the drawing surface for formats Cairo cannot draw on
   * directly, blended onto the frame afterwards */
  cairo_surface_t *scratch;

  /* streaming thread: the element's own font map and text context, created
   * at the first label; with pango_cairo_create_layout() every new streaming
   * thread (each start, and visiondetect's output thread) built Pango's
   * per-thread default font map again */
  PangoFontMap *font_map;
  PangoContext *pango;
};

#define VIDEO_FORMATS \
  "{ BGRx, BGRA, RGBx, RGBA, xRGB, ARGB, xBGR, ABGR, RGB, BGR }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS)));

#define gst_vision_overlay_parent_class parent_class
G_DEFINE_TYPE (GstVisionOverlay, gst_vision_overlay, GST_TYPE_VIDEO_FILTER);
GST_ELEMENT_REGISTER_DEFINE (visionoverlay, "visionoverlay", GST_RANK_NONE,
    GST_TYPE_VISION_OVERLAY);

#define GST_TYPE_VISION_OVERLAY_TEXT (gst_vision_overlay_text_get_type ())
static GType
gst_vision_overlay_text_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_VISION_OVERLAY_TEXT_NONE, "Boxes only", "none"},
    {GST_VISION_OVERLAY_TEXT_LABEL, "The class name", "label"},
    {GST_VISION_OVERLAY_TEXT_CONFIDENCE, "The confidence", "confidence"},
    {GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE,
        "The class name and the confidence", "label-confidence"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstVisionOverlayText", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

/* Distinct, saturated colours (Tableau 10 and a few more), picked by class id. */
static const guint8 palette[][3] = {
  {0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c}, {0xd6, 0x27, 0x28},
  {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f},
  {0xbc, 0xbd, 0x22}, {0x17, 0xbe, 0xcf}, {0xff, 0xd7, 0x00}, {0x00, 0xff, 0x7f},
};

static void
class_colour (const GstVisionDetection * d, gdouble rgb[3])
{
  guint index;

  if (d->label_id >= 0)
    index = (guint) d->label_id;
  else
    index = g_str_hash (d->label ? g_quark_to_string (d->label) : "");
  index %= G_N_ELEMENTS (palette);
  rgb[0] = palette[index][0] / 255.0;
  rgb[1] = palette[index][1] / 255.0;
  rgb[2] = palette[index][2] / 255.0;
}

static gchar *
detection_text (const GstVisionDetection * d, GstVisionOverlayText text)
{
  const gchar *label = d->label ? g_quark_to_string (d->label) : NULL;
  gboolean show_label = text == GST_VISION_OVERLAY_TEXT_LABEL
      || text == GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE;
  gboolean show_confidence = d->confidence >= 0.0
      && (text == GST_VISION_OVERLAY_TEXT_CONFIDENCE
      || text == GST_VISION_OVERLAY_TEXT_LABEL_CONFIDENCE);

  gchar *str = NULL, *with_id;

  if (label == NULL)
    show_label = FALSE;
  if (show_label && show_confidence)
    str = g_strdup_printf ("%s %.2f", label, d->confidence);
  else if (show_label)
    str = g_strdup (label);
  else if (show_confidence)
    str = g_strdup_printf ("%.2f", d->confidence);
  if (d->object_id <= 0 || text == GST_VISION_OVERLAY_TEXT_NONE)
    return str;
  with_id = str ? g_strdup_printf ("#%d %s", d->object_id, str)
      : g_strdup_printf ("#%d", d->object_id);
  g_free (str);
  return with_id;
}

static void
trail_free (gpointer data)
{
  Trail *t = data;

  g_array_unref (t->points);
  g_free (t);
}

static gboolean
trail_expired (gpointer key, gpointer value, gpointer user_data)
{
  const Trail *t = value;
  const guint64 *oldest = user_data;

  return t->last_frame < *oldest;
}

/* Adds this frame's centres of the tracked objects to their trails (at most
 * @length points each) and forgets the objects not seen for @length frames. */
static void
update_trails (GstVisionOverlay * self, GArray * detections, guint length)
{
  guint64 oldest;
  guint i;

  if (self->trails == NULL)
    self->trails = g_hash_table_new_full (NULL, NULL, NULL, trail_free);
  for (i = 0; i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);
    gdouble centre[2] = { d->x + d->w / 2, d->y + d->h / 2 };
    Trail *t;

    if (d->object_id <= 0 || !isfinite (centre[0]) || !isfinite (centre[1]))
      continue;
    t = g_hash_table_lookup (self->trails, GINT_TO_POINTER (d->object_id));
    if (t == NULL) {
      t = g_new0 (Trail, 1);
      t->points = g_array_new (FALSE, FALSE, sizeof (gdouble));
      g_hash_table_insert (self->trails, GINT_TO_POINTER (d->object_id), t);
    }
    if (t->last_frame == self->frame_count && t->points->len > 0)
      continue;                 /* the same object twice in a frame */
    g_array_append_vals (t->points, centre, 2);
    if (t->points->len > 2 * length)
      g_array_remove_range (t->points, 0, t->points->len - 2 * length);
    t->last = *d;
    t->last_frame = self->frame_count;
  }
  oldest = self->frame_count >= length ? self->frame_count - length : 0;
  g_hash_table_foreach_remove (self->trails, trail_expired, &oldest);
}

static void
draw_trails (cairo_t * cr, GHashTable * trails, gdouble line_width,
    gboolean swap_rb)
{
  GHashTableIter iter;
  gpointer value;

  if (trails == NULL)
    return;
  cairo_save (cr);
  cairo_set_line_width (cr, MAX (1.0, line_width / 2));
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap (cr, CAIRO_LINE_CAP_ROUND);
  g_hash_table_iter_init (&iter, trails);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const Trail *t = value;
    gdouble rgb[3];
    guint i;

    if (t->points->len < 4)
      continue;
    class_colour (&t->last, rgb);
    if (swap_rb)
      cairo_set_source_rgb (cr, rgb[2], rgb[1], rgb[0]);
    else
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
    for (i = 0; i < t->points->len; i += 2) {
      gdouble x = g_array_index (t->points, gdouble, i);
      gdouble y = g_array_index (t->points, gdouble, i + 1);

      if (i == 0)
        cairo_move_to (cr, x, y);
      else
        cairo_line_to (cr, x, y);
    }
    cairo_stroke (cr);
  }
  cairo_restore (cr);
}

/* Fills the instance mask of @d, if it has one (its ROI meta's in @buffer, else
 * @companion, the companion meta's), with the colour @rgb (as Cairo sees it) at
 * MASK_ALPHA, through an A8 surface over the mask's rectangle (clipped to the
 * frame), opaque where the probability is >= 0.5. */
static void
fill_mask (cairo_t * cr, GstBuffer * buffer, const GstVisionDetection * d,
    const GstVisionDetectionMask * companion, gint width, gint height,
    const gdouble rgb[3])
{
  GstVisionMask mask;
  cairo_surface_t *alpha;
  guint x0, y0, x1, y1, x, y;
  guint8 *data;
  gint stride;

  if (!gst_vision_mask_for_detection (buffer, d, companion, &mask))
    return;
  x0 = MIN (mask.x, (guint) width);
  y0 = MIN (mask.y, (guint) height);
  x1 = MIN (mask.x + mask.width, (guint) width);
  y1 = MIN (mask.y + mask.height, (guint) height);
  if (x1 > x0 && y1 > y0) {
    alpha = cairo_image_surface_create (CAIRO_FORMAT_A8, x1 - x0, y1 - y0);
    data = cairo_image_surface_get_data (alpha);
    stride = cairo_image_surface_get_stride (alpha);
    if (data != NULL) {
      cairo_surface_flush (alpha);
      for (y = y0; y < y1; y++)
        for (x = x0; x < x1; x++)
          data[(gsize) (y - y0) * stride + (x - x0)] =
              gst_vision_mask_at (&mask, x, y) ? 0xff : 0;
      cairo_surface_mark_dirty (alpha);
      cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], MASK_ALPHA);
      cairo_mask_surface (cr, alpha, x0, y0);
    }
    cairo_surface_destroy (alpha);
  }
  gst_vision_mask_clear (&mask);
}

/* Draws the detections with colours given as seen by Cairo; @swap_rb when the
 * frame's bytes hold red where Cairo puts blue. With @masks, the instance masks
 * first, under the boxes: @buffer's ROI metas', else @companion_masks' (one
 * per detection, from gst_vision_detections_from_buffer_full()). */
static void
draw_detections (cairo_t * cr, PangoContext * pango, GstBuffer * buffer,
    GArray * detections, GPtrArray * companion_masks, gint width, gint height,
    gdouble line_width, PangoFontDescription * font, GstVisionOverlayText text,
    gboolean swap_rb, gboolean masks)
{
  PangoLayout *layout = NULL;
  guint i;

  if (text != GST_VISION_OVERLAY_TEXT_NONE) {
    pango_cairo_update_context (cr, pango);
    layout = pango_layout_new (pango);
    pango_layout_set_font_description (layout, font);
  }

  for (i = 0; masks && i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);
    gdouble rgb[3];

    class_colour (d, rgb);
    if (swap_rb) {
      gdouble r = rgb[0];
      rgb[0] = rgb[2];
      rgb[2] = r;
    }
    fill_mask (cr, buffer, d, g_ptr_array_index (companion_masks, i), width,
        height, rgb);
  }

  cairo_set_line_width (cr, line_width);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_MITER);
  for (i = 0; i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);
    gdouble rgb[3], x, y, w, h;
    gchar *str;

    /* whole pixels, and the stroke inside the box: nothing is drawn outside
     * the detection's pixels but its label */
    x = CLAMP (floor (d->x + 0.5), 0, width);
    y = CLAMP (floor (d->y + 0.5), 0, height);
    w = CLAMP (floor (d->x + d->w + 0.5), x, width) - x;
    h = CLAMP (floor (d->y + d->h + 0.5), y, height) - y;
    if (w < 1 || h < 1)
      continue;

    class_colour (d, rgb);
    if (swap_rb)
      cairo_set_source_rgb (cr, rgb[2], rgb[1], rgb[0]);
    else
      cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);

    if (w <= 2 * line_width || h <= 2 * line_width) {
      cairo_rectangle (cr, x, y, w, h);
      cairo_fill (cr);
    } else {
      /* dashed: a box visiontrack predicted, not a detection */
      gdouble dash = 3 * line_width;

      if (d->tracked)
        cairo_set_dash (cr, &dash, 1, 0);
      cairo_rectangle (cr, x + line_width / 2, y + line_width / 2,
          w - line_width, h - line_width);
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }

    str = layout ? detection_text (d, text) : NULL;
    if (str != NULL) {
      PangoRectangle ink, logical;
      gdouble tx, ty, tw, th, pad = 2;
      gdouble luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];

      pango_layout_set_text (layout, str, -1);
      pango_layout_get_pixel_extents (layout, &ink, &logical);
      tw = logical.width + 2 * pad;
      th = logical.height;
      /* above the box when it fits, else inside its top edge */
      tx = x;
      ty = y - th >= 0 ? y - th : y;
      if (tx + tw > width)
        tx = MAX (0, width - tw);
      cairo_rectangle (cr, tx, ty, tw, th);
      cairo_fill (cr);
      if (luma > 0.55)
        cairo_set_source_rgb (cr, 0, 0, 0);
      else
        cairo_set_source_rgb (cr, 1, 1, 1);
      cairo_move_to (cr, tx + pad, ty);
      pango_cairo_show_layout (cr, layout);
      g_free (str);
    }
  }
  g_clear_object (&layout);
}

/* Whether Cairo's native-endian ARGB32 word matches the format's bytes, and
 * whether red and blue are exchanged. */
static gboolean
cairo_compatible (GstVideoFormat format, gboolean * swap_rb)
{
  switch (format) {
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_BGRA:
      *swap_rb = FALSE;
      return TRUE;
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_RGBA:
      *swap_rb = TRUE;
      return TRUE;
#else
    case GST_VIDEO_FORMAT_xRGB:
    case GST_VIDEO_FORMAT_ARGB:
      *swap_rb = FALSE;
      return TRUE;
    case GST_VIDEO_FORMAT_xBGR:
    case GST_VIDEO_FORMAT_ABGR:
      *swap_rb = TRUE;
      return TRUE;
#endif
    default:
      return FALSE;
  }
}

/* Blends the premultiplied ARGB32 @scratch onto a packed RGB frame. */
static void
blend_scratch (cairo_surface_t * scratch, GstVideoFrame * frame)
{
  const GstVideoFormatInfo *finfo = frame->info.finfo;
  const gint width = GST_VIDEO_FRAME_WIDTH (frame);
  const gint height = GST_VIDEO_FRAME_HEIGHT (frame);
  const gint pstride = GST_VIDEO_FRAME_COMP_PSTRIDE (frame, 0);
  const gint r_off = GST_VIDEO_FORMAT_INFO_POFFSET (finfo, GST_VIDEO_COMP_R);
  const gint g_off = GST_VIDEO_FORMAT_INFO_POFFSET (finfo, GST_VIDEO_COMP_G);
  const gint b_off = GST_VIDEO_FORMAT_INFO_POFFSET (finfo, GST_VIDEO_COMP_B);
  const gint a_off = GST_VIDEO_FORMAT_INFO_HAS_ALPHA (finfo) ?
      (gint) GST_VIDEO_FORMAT_INFO_POFFSET (finfo, GST_VIDEO_COMP_A) : -1;
  const guint8 *src = cairo_image_surface_get_data (scratch);
  const gint src_stride = cairo_image_surface_get_stride (scratch);
  guint8 *dst = GST_VIDEO_FRAME_PLANE_DATA (frame, 0);
  const gint dst_stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0);
  gint x, y;

  cairo_surface_flush (scratch);
  for (y = 0; y < height; y++) {
    const guint32 *s = (const guint32 *) (src + (gsize) y * src_stride);
    guint8 *row = dst + (gsize) y * dst_stride;

    for (x = 0; x < width; x++) {
      guint32 argb = s[x];
      guint a = argb >> 24, inv;
      guint8 *p;

      if (a == 0)
        continue;
      inv = 255 - a;
      p = row + x * pstride;
      p[r_off] = ((argb >> 16) & 0xff) + (p[r_off] * inv + 127) / 255;
      p[g_off] = ((argb >> 8) & 0xff) + (p[g_off] * inv + 127) / 255;
      p[b_off] = (argb & 0xff) + (p[b_off] * inv + 127) / 255;
      if (a_off >= 0)
        p[a_off] = a + (p[a_off] * inv + 127) / 255;
    }
  }
}

static GstFlowReturn
gst_vision_overlay_transform_frame_ip (GstVideoFilter * filter,
    GstVideoFrame * frame)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (filter);
  const gint width = GST_VIDEO_FRAME_WIDTH (frame);
  const gint height = GST_VIDEO_FRAME_HEIGHT (frame);
  GArray *detections;
  GPtrArray *companion_masks = NULL;
  PangoFontDescription *font;
  GstVisionOverlayText text;
  gdouble line_width;
  guint trail;
  gboolean swap_rb = FALSE, direct, masks;
  cairo_surface_t *surface;
  cairo_t *cr;

  detections = gst_vision_detections_from_buffer_full (frame->buffer, width,
      height, &companion_masks);
  GST_OBJECT_LOCK (self);
  trail = self->trail;
  GST_OBJECT_UNLOCK (self);
  if (trail > 0)
    update_trails (self, detections, trail);
  else
    g_clear_pointer (&self->trails, g_hash_table_unref);
  if (detections->len == 0) {
    g_array_unref (detections);
    g_ptr_array_unref (companion_masks);
    return GST_FLOW_OK;
  }

  GST_OBJECT_LOCK (self);
  line_width = self->line_width > 0 ? self->line_width :
      MAX (2.0, round (height / 240.0));
  text = self->text;
  masks = self->masks;
  font = pango_font_description_from_string (self->font_desc ?
      self->font_desc : "Sans Bold");
  GST_OBJECT_UNLOCK (self);
  if (!(pango_font_description_get_set_fields (font) & PANGO_FONT_MASK_SIZE))
    pango_font_description_set_absolute_size (font,
        MAX (9.0, height / 36.0) * PANGO_SCALE);

  direct = cairo_compatible (GST_VIDEO_FRAME_FORMAT (frame), &swap_rb)
      && GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0) % 4 == 0;
  if (direct) {
    /* with alpha: drawn pixels become opaque (Cairo's premultiplied alpha is
     * only exact on opaque video, the usual case) */
    cairo_format_t cformat = GST_VIDEO_INFO_HAS_ALPHA (&frame->info) ?
        CAIRO_FORMAT_ARGB32 : CAIRO_FORMAT_RGB24;

    surface = cairo_image_surface_create_for_data (
        GST_VIDEO_FRAME_PLANE_DATA (frame, 0), cformat, width,
        height, GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0));
  } else {
    if (self->scratch == NULL
        || cairo_image_surface_get_width (self->scratch) != width
        || cairo_image_surface_get_height (self->scratch) != height) {
      g_clear_pointer (&self->scratch, cairo_surface_destroy);
      self->scratch = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width,
          height);
    }
    surface = cairo_surface_reference (self->scratch);
  }

  cr = cairo_create (surface);
  if (!direct) {
    cairo_set_operator (cr, CAIRO_OPERATOR_CLEAR);
    cairo_paint (cr);
    cairo_set_operator (cr, CAIRO_OPERATOR_OVER);
  }
  if (trail > 0)
    draw_trails (cr, self->trails, line_width, swap_rb);
  if (text != GST_VISION_OVERLAY_TEXT_NONE && self->pango == NULL) {
    self->font_map = pango_cairo_font_map_new ();
    self->pango = pango_font_map_create_context (self->font_map);
  }
  draw_detections (cr, self->pango, frame->buffer, detections,
      companion_masks, width, height, line_width, font, text, swap_rb, masks);
  if (cairo_status (cr) != CAIRO_STATUS_SUCCESS)
    GST_WARNING_OBJECT (self, "drawing failed: %s",
        cairo_status_to_string (cairo_status (cr)));
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  if (!direct)
    blend_scratch (surface, frame);
  cairo_surface_destroy (surface);

  pango_font_description_free (font);
  g_array_unref (detections);
  g_ptr_array_unref (companion_masks);
  return GST_FLOW_OK;
}

/* Whether @buffer has a detection to draw: a ROI meta, a companion meta
 * that is not empty (visiondetect adds one to every frame it ran on), or
 * (GStreamer >= 1.24) an object-detection entry. */
static gboolean
has_detections (GstBuffer * buffer)
{
  GstVisionDetectMeta *meta;
  gpointer state = NULL;
#ifdef HAVE_GST_ANALYTICS
  GstAnalyticsRelationMeta *relations =
      gst_buffer_get_analytics_relation_meta (buffer);
  GstAnalyticsODMtd od;
  gpointer od_state = NULL;

  if (relations != NULL && gst_analytics_relation_meta_iterate (relations,
          &od_state, gst_analytics_od_mtd_get_mtd_type (), &od))
    return TRUE;
#endif

  if (gst_buffer_get_meta (buffer,
          GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE) != NULL)
    return TRUE;
  while ((meta = (GstVisionDetectMeta *)
          gst_buffer_iterate_meta_filtered (buffer, &state,
              GST_VISION_DETECT_META_API_TYPE)) != NULL)
    if (meta->detections->len > 0)
      return TRUE;
  return FALSE;
}

/* Frames without detections are not mapped at all: GstVideoFilter maps for
 * writing, which would copy memory shared with another branch of a tee. */
static GstFlowReturn
gst_vision_overlay_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);

  /* counted here: frames without metadata age the trails too */
  self->frame_count++;
  if (!has_detections (buffer))
    return GST_FLOW_OK;
  return GST_BASE_TRANSFORM_CLASS (parent_class)->transform_ip (trans, buffer);
}

static gboolean
gst_vision_overlay_stop (GstBaseTransform * trans)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);

  g_clear_pointer (&self->scratch, cairo_surface_destroy);
  g_clear_pointer (&self->trails, g_hash_table_unref);
  self->frame_count = 0;
  return TRUE;
}

static gboolean
gst_vision_overlay_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);

  /* a seek: the paths drawn before it are elsewhere in the video */
  if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP
      || GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START)
    g_clear_pointer (&self->trails, g_hash_table_unref);
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

static void
gst_vision_overlay_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LINE_WIDTH:
      self->line_width = g_value_get_double (value);
      break;
    case PROP_FONT_DESC:
      g_free (self->font_desc);
      self->font_desc = g_value_dup_string (value);
      break;
    case PROP_TEXT:
      self->text = g_value_get_enum (value);
      break;
    case PROP_TRAIL:
      self->trail = g_value_get_uint (value);
      break;
    case PROP_MASKS:
      self->masks = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_overlay_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LINE_WIDTH:
      g_value_set_double (value, self->line_width);
      break;
    case PROP_FONT_DESC:
      g_value_set_string (value, self->font_desc);
      break;
    case PROP_TEXT:
      g_value_set_enum (value, self->text);
      break;
    case PROP_TRAIL:
      g_value_set_uint (value, self->trail);
      break;
    case PROP_MASKS:
      g_value_set_boolean (value, self->masks);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_overlay_finalize (GObject * object)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (object);

  g_free (self->font_desc);
  g_clear_pointer (&self->scratch, cairo_surface_destroy);
  g_clear_pointer (&self->trails, g_hash_table_unref);
  g_clear_object (&self->pango);
  g_clear_object (&self->font_map);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_vision_overlay_class_init (GstVisionOverlayClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_PLAYING;

  gobject_class->set_property = gst_vision_overlay_set_property;
  gobject_class->get_property = gst_vision_overlay_get_property;
  gobject_class->finalize = gst_vision_overlay_finalize;

  g_object_class_install_property (gobject_class, PROP_LINE_WIDTH,
      g_param_spec_double ("line-width", "Line width",
          "Width of the box outlines in pixels (0: scaled with the frame "
          "height, at least 2)", 0.0, 100.0, DEFAULT_LINE_WIDTH, rw));
  g_object_class_install_property (gobject_class, PROP_FONT_DESC,
      g_param_spec_string ("font-desc", "Font description",
          "Pango font description of the labels, e.g. \"Sans Bold 12\" (unset: "
          "Sans Bold, sized with the frame height)", DEFAULT_FONT_DESC, rw));
  g_object_class_install_property (gobject_class, PROP_TEXT,
      g_param_spec_enum ("text", "Text",
          "What to write above each box", GST_TYPE_VISION_OVERLAY_TEXT,
          DEFAULT_TEXT, rw));
  g_object_class_install_property (gobject_class, PROP_TRAIL,
      g_param_spec_uint ("trail", "Trail",
          "Draw the path of each tracked object's (visiontrack) last this many "
          "centres; 0: none", 0, 10000, DEFAULT_TRAIL, rw));
  g_object_class_install_property (gobject_class, PROP_MASKS,
      g_param_spec_boolean ("masks", "Masks",
          "Fill each detection's instance mask (a Mask R-CNN's, on its region "
          "of interest) with the class colour, half transparent", DEFAULT_MASKS,
          rw));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision detection overlay", "Filter/Editor/Video",
      "Draws detected objects (boxes, class names, confidences) from the "
      "frames' region-of-interest metadata", "visiondetect developers");

  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_overlay_stop);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_overlay_sink_event);
  filter_class->transform_frame_ip =
      GST_DEBUG_FUNCPTR (gst_vision_overlay_transform_frame_ip);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_vision_overlay_transform_ip);

  gst_type_mark_as_plugin_api (GST_TYPE_VISION_OVERLAY_TEXT, 0);
  GST_DEBUG_CATEGORY_INIT (gst_vision_overlay_debug, "visionoverlay", 0,
      "visiondetect overlay");
}

static void
gst_vision_overlay_init (GstVisionOverlay * self)
{
  self->line_width = DEFAULT_LINE_WIDTH;
  self->font_desc = g_strdup (DEFAULT_FONT_DESC);
  self->text = DEFAULT_TEXT;
  self->trail = DEFAULT_TRAIL;
  self->masks = DEFAULT_MASKS;
}
