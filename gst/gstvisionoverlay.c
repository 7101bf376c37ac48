/* SPDX-License-Identifier: LGPL-2.1-or-later */
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
 * (#GstVisionOverlay:masks turns that off). A detection with keypoints (a
 * Keypoint R-CNN's, the "keypoints" parameter of its ROI meta, else the
 * companion meta's, which survive scaling) gets them drawn as discs in the
 * class colour, joined by the skeleton's connections: those the model file
 * names, else COCO's 17-point skeleton for 17 keypoints of a "person"
 * (#GstVisionOverlay:keypoints turns that off,
 * #GstVisionOverlay:keypoint-threshold hides low-scored points). It reads the detections visiondetect attaches (its companion
 * meta, which survives scaling), or any #GstVideoRegionOfInterestMeta, with the
 * "detection" parameters DL Streamer uses when present. Built against
 * GStreamer >= 1.24, it also draws any producer's #GstAnalyticsODMtd entries
 * that no ROI meta shows (GStreamer's tensor decoders attach only those),
 * with the id of the #GstAnalyticsTrackingMtd each relates to and the mask
 * of its #GstAnalyticsSegmentationMtd (1.26).
 *
 * It draws on packed RGB formats (BGRx, BGRA, RGBx, RGBA, xRGB, ARGB, xBGR, ABGR,
 * RGB, BGR) and on NV12 and I420, in place: Cairo draws straight onto the
 * frames it shares a layout with (BGRx, BGRA, RGBx, RGBA on little-endian
 * machines); for the others each box, label, mask and trail is drawn onto a
 * surface of its own area and blended there with GStreamer's
 * #GstVideoOverlayComposition blending, for YUV frames in the colours of the
 * caps' colorimetry (BT.601, BT.709, ...; limited or full range).
 *
 * When downstream blends overlays itself (a compositor, a sink drawing in
 * hardware: its caps take the meta:GstVideoOverlayComposition feature and
 * its allocation answer lists #GstVideoOverlayCompositionMeta), nothing is
 * drawn on the frame: the same ARGB rectangles travel in a
 * #GstVideoOverlayCompositionMeta, after those of an overlay upstream, as
 * textoverlay and objectdetectionoverlay do.
 *
 * With #GstVisionOverlay:hold-frames, the frames visiondetect skipped
 * (interval > 1, or late frames of a live source; its companion meta says
 * which) show the last inferred frame's detections again, so that boxes do
 * not blink, unless they carry detections of their own (visiontrack's
 * predicted boxes).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc pattern=ball ! videoconvert ! visiondetect ! \
 *     visionoverlay line-width=3 font-desc="Sans 14" ! videoconvert ! autovideosink
 * ]|
 * |[
 * gst-launch-1.0 filesrc location=in.mp4 ! decodebin ! videoconvert ! \
 *     visiondetect interval=3 ! visionoverlay hold-frames=2 ! x264enc ! \
 *     mp4mux ! filesink location=out.mp4
 * ]|
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "vd_config.h"

#include "gstvisionoverlay.h"
#include "gstvisiondetectmeta.h"
#include "helpers/mask.h"
#include "helpers/detections.h"

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
#define DEFAULT_HOLD_FRAMES 0
#define DEFAULT_KEYPOINTS TRUE
#define DEFAULT_KEYPOINT_THRESHOLD 0.0
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
  PROP_HOLD_FRAMES,
  PROP_KEYPOINTS,
  PROP_KEYPOINT_THRESHOLD,
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
  gboolean keypoints;
  gdouble keypoint_threshold;

  /* streaming thread: object id -> Trail, and the frames seen */
  GHashTable *trails;
  guint64 frame_count;

  guint hold_frames;

  /* streaming thread: what the frame being drawn shows (its detections, or
   * the held ones), for transform_frame_ip */
  GArray *detections;
  GPtrArray *companion_masks;
  GPtrArray *poses;
  gboolean draw_trails;

  /* streaming thread: the last inferred frame's detections and masks, and on
   * how many skipped frames since they were drawn again */
  GArray *held;
  GPtrArray *held_masks;
  GPtrArray *held_poses;
  guint held_for;

  /* streaming thread: whether downstream takes the overlay composition meta
   * (asked at the first frame drawn after each negotiation) */
  gboolean downstream_blends;
  gboolean blends_checked;

  /* streaming thread: the element's own font map and text context, created
   * at the first label; with pango_cairo_create_layout() every new streaming
   * thread (each start, and visiondetect's output thread) built Pango's
   * per-thread default font map again */
  PangoFontMap *font_map;
  PangoContext *pango;
};

#define VIDEO_FORMATS \
  "{ BGRx, BGRA, RGBx, RGBA, xRGB, ARGB, xBGR, ABGR, RGB, BGR, NV12, I420 }"

/* with the overlay composition feature: downstream may blend (then the
 * boxes travel as a GstVideoOverlayCompositionMeta) */
#define VIDEO_CAPS GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS) "; " \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES (GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY \
      ", " GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION, VIDEO_FORMATS)

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (VIDEO_CAPS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (VIDEO_CAPS));

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
  {0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c}, {0xd6, 0x27,
      0x28},
  {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f,
      0x7f},
  {0xbc, 0xbd, 0x22}, {0x17, 0xbe, 0xcf}, {0xff, 0xd7, 0x00}, {0x00, 0xff,
      0x7f},
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

/* The area a drawing covers on the frame, in whole pixels (empty: w or h 0). */
typedef struct
{
  gint x, y, w, h;
} Area;

static void
area_union (Area * a, gdouble x0, gdouble y0, gdouble x1, gdouble y1,
    gint width, gint height)
{
  gint ax0, ay0, ax1, ay1;

  /* clamped before the conversion: a box a tracker predicted far away */
  if (!(x1 > x0 && y1 > y0))
    return;                     /* empty, or not numbers */
  ax0 = (gint) CLAMP (floor (x0), 0, width);
  ay0 = (gint) CLAMP (floor (y0), 0, height);
  ax1 = (gint) CLAMP (ceil (x1), 0, width);
  ay1 = (gint) CLAMP (ceil (y1), 0, height);
  if (ax1 <= ax0 || ay1 <= ay0)
    return;
  if (a->w > 0 && a->h > 0) {
    ax0 = MIN (ax0, a->x);
    ay0 = MIN (ay0, a->y);
    ax1 = MAX (ax1, a->x + a->w);
    ay1 = MAX (ay1, a->y + a->h);
  }
  a->x = ax0;
  a->y = ay0;
  a->w = ax1 - ax0;
  a->h = ay1 - ay0;
}

/* What one detection draws, laid out once for either way of drawing it (onto
 * the frame, or onto a surface of its own area). */
typedef struct
{
  gdouble rgb[3];               /* as Cairo sees it */
  gdouble x, y, w, h;           /* the box, whole pixels inside the frame */
  gboolean tracked;
  gchar *text;                  /* NULL: no label */
  gdouble tx, ty, tw, th;       /* the label's background */
  Area area;                    /* all of it */
} BoxDrawing;

static void
box_drawing_clear (BoxDrawing * b)
{
  g_clear_pointer (&b->text, g_free);
}

/* Lays out detection @d: FALSE when its box has no whole pixel in the frame. */
static gboolean
box_drawing_init (BoxDrawing * b, const GstVisionDetection * d,
    PangoLayout * layout, GstVisionOverlayText text, gint width, gint height,
    gboolean swap_rb)
{
  memset (b, 0, sizeof (*b));
  /* whole pixels, and the stroke inside the box: nothing is drawn outside
   * the detection's pixels but its label */
  b->x = CLAMP (floor (d->x + 0.5), 0, width);
  b->y = CLAMP (floor (d->y + 0.5), 0, height);
  b->w = CLAMP (floor (d->x + d->w + 0.5), b->x, width) - b->x;
  b->h = CLAMP (floor (d->y + d->h + 0.5), b->y, height) - b->y;
  if (!(b->w >= 1 && b->h >= 1))
    return FALSE;               /* empty, outside, or not numbers */
  class_colour (d, b->rgb);
  if (swap_rb) {
    gdouble r = b->rgb[0];
    b->rgb[0] = b->rgb[2];
    b->rgb[2] = r;
  }
  b->tracked = d->tracked;
  area_union (&b->area, b->x, b->y, b->x + b->w, b->y + b->h, width, height);

  b->text = layout ? detection_text (d, text) : NULL;
  if (b->text != NULL) {
    PangoRectangle ink, logical;
    const gdouble pad = 2;

    pango_layout_set_text (layout, b->text, -1);
    pango_layout_get_pixel_extents (layout, &ink, &logical);
    b->tw = logical.width + 2 * pad;
    b->th = logical.height;
    /* above the box when it fits, else inside its top edge */
    b->tx = b->x;
    b->ty = b->y - b->th >= 0 ? b->y - b->th : b->y;
    if (b->tx + b->tw > width)
      b->tx = MAX (0, width - b->tw);
    area_union (&b->area, b->tx, b->ty, b->tx + b->tw, b->ty + b->th, width,
        height);
  }
  return TRUE;
}

static void
draw_box (cairo_t * cr, PangoLayout * layout, const BoxDrawing * b,
    gdouble line_width)
{
  cairo_set_source_rgb (cr, b->rgb[0], b->rgb[1], b->rgb[2]);
  if (b->w <= 2 * line_width || b->h <= 2 * line_width) {
    cairo_rectangle (cr, b->x, b->y, b->w, b->h);
    cairo_fill (cr);
  } else {
    /* dashed: a box visiontrack predicted, not a detection */
    gdouble dash = 3 * line_width;

    cairo_set_line_width (cr, line_width);
    cairo_set_line_join (cr, CAIRO_LINE_JOIN_MITER);
    if (b->tracked)
      cairo_set_dash (cr, &dash, 1, 0);
    cairo_rectangle (cr, b->x + line_width / 2, b->y + line_width / 2,
        b->w - line_width, b->h - line_width);
    cairo_stroke (cr);
    cairo_set_dash (cr, NULL, 0, 0);
  }

  if (b->text != NULL) {
    const gdouble pad = 2;
    gdouble luma = 0.299 * b->rgb[0] + 0.587 * b->rgb[1] + 0.114 * b->rgb[2];

    cairo_rectangle (cr, b->tx, b->ty, b->tw, b->th);
    cairo_fill (cr);
    if (luma > 0.55)
      cairo_set_source_rgb (cr, 0, 0, 0);
    else
      cairo_set_source_rgb (cr, 1, 1, 1);
    pango_layout_set_text (layout, b->text, -1);
    cairo_move_to (cr, b->tx + pad, b->ty);
    pango_cairo_show_layout (cr, layout);
  }
}

/* The rectangle of @mask inside the frame. */
static Area
mask_area (const GstVisionMask * mask, gint width, gint height)
{
  Area a = { 0, 0, 0, 0 };

  area_union (&a, mask->x, mask->y, (gdouble) mask->x + mask->width,
      (gdouble) mask->y + mask->height, width, height);
  return a;
}

/* Fills @mask over @area (mask_area()) with the colour @rgb (as Cairo sees
 * it) at MASK_ALPHA, through an A8 surface, opaque where the probability is
 * >= 0.5. */
static void
fill_mask (cairo_t * cr, const GstVisionMask * mask, const Area * area,
    const gdouble rgb[3])
{
  cairo_surface_t *alpha;
  guint8 *data;
  gint stride, x, y;

  alpha = cairo_image_surface_create (CAIRO_FORMAT_A8, area->w, area->h);
  data = cairo_image_surface_get_data (alpha);
  stride = cairo_image_surface_get_stride (alpha);
  if (data != NULL) {
    cairo_surface_flush (alpha);
    for (y = 0; y < area->h; y++)
      for (x = 0; x < area->w; x++)
        data[(gsize) y * stride + x] = gst_vision_mask_at (mask,
            area->x + x, area->y + y) ? 0xff : 0;
    cairo_surface_mark_dirty (alpha);
    cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], MASK_ALPHA);
    cairo_mask_surface (cr, alpha, area->x, area->y);
  }
  cairo_surface_destroy (alpha);
}

/* COCO's person skeleton (person_keypoints' "skeleton", 0-based), for a model
 * file that names no skeleton when the labels are COCO's: 17 keypoints on a
 * "person". */
static const gint coco_skeleton[19][2] = {
  {15, 13}, {13, 11}, {16, 14}, {14, 12}, {11, 12}, {5, 11}, {6, 12}, {5, 6},
  {5, 7}, {6, 8}, {7, 9}, {8, 10}, {1, 2}, {0, 1}, {0, 2}, {1, 3}, {2, 4},
  {3, 5}, {4, 6}
};

/* One detection's keypoints as drawn: n [x, y, score] in frame pixels and
 * the skeleton's pairs of 0-based keypoint indices. */
typedef struct
{
  guint n;
  gfloat *points;
  guint n_pairs;
  gint *pairs;
} Pose;

static void
pose_free (gpointer data)
{
  Pose *p = data;

  if (p == NULL)
    return;
  g_free (p->points);
  g_free (p->pairs);
  g_free (p);
}

/* The index of @name in the string array @names, or -1. */
static gint
name_index (const GValue * names, const gchar * name)
{
  guint i;

  for (i = 0; name != NULL && i < gst_value_array_get_size (names); i++) {
    const GValue *v = gst_value_array_get_value (names, i);

    if (G_VALUE_HOLDS_STRING (v) && g_strcmp0 (g_value_get_string (v),
            name) == 0)
      return (gint) i;
  }
  return -1;
}

/* The keypoints of detection @d of @buffer (gst_vision_keypoints_of_roi():
 * its ROI meta's "keypoints" param, else the companion's) with the skeleton
 * the param names ("point_connections" by "point_names"), else COCO's for
 * 17 keypoints of a "person"; NULL without keypoints. */
static Pose *
pose_for_detection (GstBuffer * buffer, const GstVisionDetection * d,
    gint width, gint height)
{
  GstVideoRegionOfInterestMeta *roi;
  const GstStructure *param = NULL;
  const GValue *names, *connections;
  Pose *p;
  guint n = 0, i;
  gfloat *points;

  if (d->roi_id < 0 || (points = gst_vision_keypoints_of_roi (buffer,
              d->roi_id, width, height, &n)) == NULL)
    return NULL;
  p = g_new0 (Pose, 1);
  p->n = n;
  p->points = points;
  roi = gst_buffer_get_video_region_of_interest_meta_id (buffer, d->roi_id);
  if (roi != NULL)
    param = gst_video_region_of_interest_meta_get_param (roi, "keypoints");
  names = param ? gst_structure_get_value (param, "point_names") : NULL;
  connections = param ?
      gst_structure_get_value (param, "point_connections") : NULL;
  if (names != NULL && connections != NULL && GST_VALUE_HOLDS_ARRAY (names)
      && GST_VALUE_HOLDS_ARRAY (connections)) {
    guint m = gst_value_array_get_size (connections) / 2;

    p->pairs = g_new (gint, 2 * (gsize) MAX (m, 1));
    for (i = 0; i < m; i++) {
      const GValue *a = gst_value_array_get_value (connections, 2 * i);
      const GValue *b = gst_value_array_get_value (connections, 2 * i + 1);
      gint ia = G_VALUE_HOLDS_STRING (a) ?
          name_index (names, g_value_get_string (a)) : -1;
      gint ib = G_VALUE_HOLDS_STRING (b) ?
          name_index (names, g_value_get_string (b)) : -1;

      if (ia < 0 || ib < 0 || (guint) ia >= n || (guint) ib >= n)
        continue;
      p->pairs[2 * p->n_pairs] = ia;
      p->pairs[2 * p->n_pairs + 1] = ib;
      p->n_pairs++;
    }
  } else if (n == 17 && d->label != 0
      && g_strcmp0 (g_quark_to_string (d->label), "person") == 0) {
    p->n_pairs = G_N_ELEMENTS (coco_skeleton);
    p->pairs = g_memdup2 (coco_skeleton, sizeof (coco_skeleton));
  }
  return p;
}

/* Whether keypoint @i of @p is drawn: its score at least @threshold (a
 * keypoint without score always is), its position a number. */
static gboolean
pose_point_shown (const Pose * p, guint i, gdouble threshold)
{
  gfloat score = p->points[3 * i + 2];

  return isfinite (p->points[3 * i]) && isfinite (p->points[3 * i + 1])
      && (isnan (score) || score >= threshold);
}

/* The extent of what @p draws: its shown points with @radius around them. */
static Area
pose_area (const Pose * p, gdouble threshold, gdouble radius, gint width,
    gint height)
{
  Area a = { 0, 0, 0, 0 };
  guint i;

  for (i = 0; i < p->n; i++) {
    gdouble x = p->points[3 * i], y = p->points[3 * i + 1];

    if (pose_point_shown (p, i, threshold))
      area_union (&a, x - radius, y - radius, x + radius, y + radius, width,
          height);
  }
  return a;
}

/* Draws @p's skeleton (the connections between shown points, in @rgb, as
 * wide as the boxes' outlines) and its shown points over it (discs of
 * @radius in @rgb, outlined in black or white, as the labels' text). */
static void
draw_pose (cairo_t * cr, const Pose * p, const gdouble rgb[3],
    gdouble line_width, gdouble radius, gdouble threshold)
{
  gdouble luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
  gdouble contrast = luma > 0.55 ? 0.0 : 1.0;
  guint i;

  cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width (cr, line_width);
  cairo_set_line_cap (cr, CAIRO_LINE_CAP_ROUND);
  for (i = 0; i < p->n_pairs; i++) {
    guint a = (guint) p->pairs[2 * i], b = (guint) p->pairs[2 * i + 1];

    if (!pose_point_shown (p, a, threshold)
        || !pose_point_shown (p, b, threshold))
      continue;
    cairo_move_to (cr, p->points[3 * a], p->points[3 * a + 1]);
    cairo_line_to (cr, p->points[3 * b], p->points[3 * b + 1]);
  }
  cairo_stroke (cr);
  for (i = 0; i < p->n; i++) {
    if (!pose_point_shown (p, i, threshold))
      continue;
    cairo_new_sub_path (cr);
    cairo_arc (cr, p->points[3 * i], p->points[3 * i + 1], radius, 0, 2 * G_PI);
  }
  cairo_set_source_rgb (cr, contrast, contrast, contrast);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width (cr, MAX (1.0, line_width / 2));
  cairo_stroke (cr);
}

/* The trails' extent, with the line's half width around it. */
static Area
trails_area (GHashTable * trails, gdouble line_width, gint width, gint height)
{
  Area a = { 0, 0, 0, 0 };
  GHashTableIter iter;
  gpointer value;
  gdouble half = MAX (1.0, line_width / 2) / 2 + 1;

  if (trails == NULL)
    return a;
  g_hash_table_iter_init (&iter, trails);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const Trail *t = value;
    guint i;

    if (t->points->len < 4)
      continue;
    for (i = 0; i < t->points->len; i += 2) {
      gdouble x = g_array_index (t->points, gdouble, i);
      gdouble y = g_array_index (t->points, gdouble, i + 1);

      area_union (&a, x - half, y - half, x + half, y + half, width, height);
    }
  }
  return a;
}

/* Where the drawings go: the frame itself (@frame_cr), or else a new ARGB
 * surface per drawing, covering only its area, each an overlay rectangle
 * added to @composition. */
typedef struct
{
  cairo_t *frame_cr;
  GstVideoOverlayComposition *composition;
  gint x_align, y_align;        /* the frame's chroma subsampling */
  gint width, height;
  gboolean failed;
} Canvas;

/* @area (in, out) is widened to whole chroma samples: blend_rectangle() then
 * blends it onto a view of the frame that starts there. */
static cairo_t *
canvas_begin (Canvas * canvas, Area * area)
{
  cairo_surface_t *surface;
  cairo_t *cr;
  gint x1, y1;

  if (canvas->frame_cr != NULL) {
    cairo_save (canvas->frame_cr);
    return canvas->frame_cr;
  }
  x1 = MIN (canvas->width, GST_ROUND_UP_N (area->x + area->w, canvas->x_align));
  y1 = MIN (canvas->height, GST_ROUND_UP_N (area->y + area->h,
          canvas->y_align));
  area->x = GST_ROUND_DOWN_N (area->x, canvas->x_align);
  area->y = GST_ROUND_DOWN_N (area->y, canvas->y_align);
  area->w = x1 - area->x;
  area->h = y1 - area->y;
  surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, area->w, area->h);
  cr = cairo_create (surface);
  cairo_surface_destroy (surface);
  cairo_translate (cr, -area->x, -area->y);
  return cr;
}

/* Premultiplied ARGB in native-endian words: BGRA bytes on little-endian
 * machines, ARGB on big-endian ones, what GstVideoOverlayRectangle takes */
static void
canvas_end (Canvas * canvas, cairo_t * cr, const Area * area)
{
  cairo_surface_t *surface;
  GstVideoOverlayRectangle *rectangle;
  GstBuffer *pixels;
  gsize offset[GST_VIDEO_MAX_PLANES] = { 0, };
  gint stride[GST_VIDEO_MAX_PLANES] = { 0, };

  if (cairo_status (cr) != CAIRO_STATUS_SUCCESS)
    canvas->failed = TRUE;
  if (canvas->frame_cr != NULL) {
    cairo_restore (cr);
    return;
  }
  surface = cairo_surface_reference (cairo_get_target (cr));
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  if (cairo_surface_status (surface) != CAIRO_STATUS_SUCCESS
      || cairo_image_surface_get_data (surface) == NULL) {
    canvas->failed = TRUE;
    cairo_surface_destroy (surface);
    return;
  }
  stride[0] = cairo_image_surface_get_stride (surface);
  pixels = gst_buffer_new_wrapped_full (GST_MEMORY_FLAG_READONLY,
      cairo_image_surface_get_data (surface), (gsize) stride[0] * area->h, 0,
      (gsize) stride[0] * area->h, surface,
      (GDestroyNotify) cairo_surface_destroy);
  gst_buffer_add_video_meta_full (pixels, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_OVERLAY_COMPOSITION_FORMAT_RGB, area->w, area->h, 1, offset,
      stride);
  rectangle = gst_video_overlay_rectangle_new_raw (pixels, area->x, area->y,
      area->w, area->h, GST_VIDEO_OVERLAY_FORMAT_FLAG_PREMULTIPLIED_ALPHA);
  gst_buffer_unref (pixels);
  if (canvas->composition == NULL)
    canvas->composition = gst_video_overlay_composition_new (rectangle);
  else
    gst_video_overlay_composition_add_rectangle (canvas->composition,
        rectangle);
  gst_video_overlay_rectangle_unref (rectangle);
}

/* Draws the trails, the instance masks (under the boxes: @buffer's ROI
 * metas', else @companion_masks', one per detection) and the boxes with their
 * labels onto @canvas, colours as Cairo sees them; @swap_rb when the frame's
 * bytes hold red where Cairo puts blue. */
static void
draw_all (GstVisionOverlay * self, Canvas * canvas, GstBuffer * buffer,
    GArray * detections, GPtrArray * companion_masks, GPtrArray * poses,
    gint width, gint height, gdouble line_width, PangoFontDescription * font,
    GstVisionOverlayText text, gboolean swap_rb, gboolean masks,
    gdouble keypoint_threshold, gboolean trails)
{
  PangoLayout *layout = NULL;
  cairo_t *cr;
  guint i;

  if (trails) {
    Area a = trails_area (self->trails, line_width, width, height);

    if (a.w > 0 && a.h > 0) {
      cr = canvas_begin (canvas, &a);
      draw_trails (cr, self->trails, line_width, swap_rb);
      canvas_end (canvas, cr, &a);
    }
  }

  for (i = 0; masks && i < detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (detections, GstVisionDetection, i);
    GstVisionMask mask;
    gdouble rgb[3];
    Area a, drawn;

    if (!gst_vision_mask_for_detection (buffer, d,
            g_ptr_array_index (companion_masks, i), &mask))
      continue;
    a = mask_area (&mask, width, height);
    if (a.w > 0 && a.h > 0) {
      class_colour (d, rgb);
      if (swap_rb) {
        gdouble r = rgb[0];
        rgb[0] = rgb[2];
        rgb[2] = r;
      }
      drawn = a;
      cr = canvas_begin (canvas, &drawn);
      fill_mask (cr, &mask, &a, rgb);
      canvas_end (canvas, cr, &drawn);
    }
    gst_vision_mask_clear (&mask);
  }

  /* the keypoints and their skeleton, over the masks, under the boxes and
   * their labels */
  for (i = 0; poses != NULL && i < poses->len && i < detections->len; i++) {
    const Pose *p = g_ptr_array_index (poses, i);
    gdouble radius = MAX (2.0, line_width);
    gdouble rgb[3];
    Area a;

    if (p == NULL)
      continue;
    a = pose_area (p, keypoint_threshold, radius + line_width, width, height);
    if (a.w <= 0 || a.h <= 0)
      continue;
    class_colour (&g_array_index (detections, GstVisionDetection, i), rgb);
    if (swap_rb) {
      gdouble r = rgb[0];
      rgb[0] = rgb[2];
      rgb[2] = r;
    }
    cr = canvas_begin (canvas, &a);
    draw_pose (cr, p, rgb, line_width, radius, keypoint_threshold);
    canvas_end (canvas, cr, &a);
  }

  if (text != GST_VISION_OVERLAY_TEXT_NONE) {
    if (self->pango == NULL) {
      /* laid out as on any image surface: the same on the frame and on an
       * overlay rectangle */
      cairo_surface_t *probe =
          cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
      cairo_t *probe_cr = cairo_create (probe);

      self->font_map = pango_cairo_font_map_new ();
      self->pango = pango_font_map_create_context (self->font_map);
      pango_cairo_update_context (probe_cr, self->pango);
      cairo_destroy (probe_cr);
      cairo_surface_destroy (probe);
    }
    layout = pango_layout_new (self->pango);
    pango_layout_set_font_description (layout, font);
  }
  for (i = 0; i < detections->len; i++) {
    BoxDrawing b;

    if (!box_drawing_init (&b, &g_array_index (detections, GstVisionDetection,
                i), layout, text, width, height, swap_rb))
      continue;
    cr = canvas_begin (canvas, &b.area);
    draw_box (cr, layout, &b, line_width);
    canvas_end (canvas, cr, &b.area);
    box_drawing_clear (&b);
  }
  g_clear_object (&layout);
}

/* The rectangles of @composition in AYUV (non-premultiplied) with the matrix
 * and range of @info, a YUV frame's: GStreamer's own blending converts ARGB
 * rectangles with BT.709 whatever the frame says, and BT.601 video (every SD
 * stream) would get other colours than the class's. */
static GstVideoOverlayComposition *
composition_to_ayuv (GstVideoOverlayComposition * composition,
    const GstVideoInfo * info)
{
  GstVideoOverlayComposition *ayuv = NULL;
  const GstVideoFormatInfo *ayuv_info =
      gst_video_format_get_info (GST_VIDEO_FORMAT_AYUV);
  gint offsets[GST_VIDEO_MAX_COMPONENTS], scales[GST_VIDEO_MAX_COMPONENTS];
  gdouble kr, kb;
  guint n, i;

  if (!gst_video_color_matrix_get_Kr_Kb (info->colorimetry.matrix, &kr, &kb)) {
    kr = 0.299;                 /* unknown: BT.601 */
    kb = 0.114;
  }
  gst_video_color_range_offsets (info->colorimetry.range, ayuv_info, offsets,
      scales);

  for (n = 0; n < gst_video_overlay_composition_n_rectangles (composition); n++) {
    GstVideoOverlayRectangle *argb_rect =
        gst_video_overlay_composition_get_rectangle (composition, n);
    GstVideoOverlayRectangle *rect;
    GstBuffer *argb, *pixels;
    GstVideoMeta *vmeta;
    GstMapInfo src, dst;
    gint x, y;
    guint w, h;

    argb = gst_video_overlay_rectangle_get_pixels_unscaled_raw (argb_rect,
        GST_VIDEO_OVERLAY_FORMAT_FLAG_PREMULTIPLIED_ALPHA);
    vmeta = gst_buffer_get_video_meta (argb);
    gst_video_overlay_rectangle_get_render_rectangle (argb_rect, &x, &y, &w,
        &h);
    pixels = gst_buffer_new_allocate (NULL, (gsize) w * h * 4, NULL);
    if (pixels == NULL || !gst_buffer_map (argb, &src, GST_MAP_READ)) {
      gst_clear_buffer (&pixels);
      continue;
    }
    gst_buffer_map (pixels, &dst, GST_MAP_WRITE);
    for (i = 0; i < h; i++) {
      const guint32 *s = (const guint32 *) (src.data + vmeta->offset[0]
          + (gsize) i * vmeta->stride[0]);
      guint8 *p = dst.data + (gsize) i * w * 4;
      guint j;

      for (j = 0; j < w; j++, p += 4) {
        guint32 word = s[j];
        guint a = word >> 24;
        gdouble r, g, b, luma;

        if (a == 0) {
          memset (p, 0, 4);
          continue;
        }
        /* premultiplied, 0..255 -> 0..1 */
        r = ((word >> 16) & 0xff) / (gdouble) a;
        g = ((word >> 8) & 0xff) / (gdouble) a;
        b = (word & 0xff) / (gdouble) a;
        luma = kr * r + (1 - kr - kb) * g + kb * b;
        p[0] = a;
        p[1] = CLAMP (lrint (offsets[0] + scales[0] * luma), 0, 255);
        p[2] = CLAMP (lrint (offsets[1] + scales[1] * (b - luma) /
                (2 * (1 - kb))), 0, 255);
        p[3] = CLAMP (lrint (offsets[2] + scales[2] * (r - luma) /
                (2 * (1 - kr))), 0, 255);
      }
    }
    gst_buffer_unmap (pixels, &dst);
    gst_buffer_unmap (argb, &src);
    gst_buffer_add_video_meta (pixels, GST_VIDEO_FRAME_FLAG_NONE,
        GST_VIDEO_OVERLAY_COMPOSITION_FORMAT_YUV, w, h);
    rect = gst_video_overlay_rectangle_new_raw (pixels, x, y, w, h,
        GST_VIDEO_OVERLAY_FORMAT_FLAG_NONE);
    gst_buffer_unref (pixels);
    if (ayuv == NULL)
      ayuv = gst_video_overlay_composition_new (rect);
    else
      gst_video_overlay_composition_add_rectangle (ayuv, rect);
    gst_video_overlay_rectangle_unref (rect);
  }
  return ayuv;
}

/* Blends @rectangle with GStreamer's blending onto a view of @frame that
 * covers only the rectangle: gst_video_blend() converts every row it touches
 * across the whole frame's width, six times the work for a box a sixth as
 * wide. The rectangle starts on whole chroma samples (canvas_begin()). */
static gboolean
blend_rectangle (GstVideoFrame * frame, GstVideoOverlayRectangle * rectangle)
{
  const GstVideoFormatInfo *finfo = frame->info.finfo;
  GstVideoOverlayRectangle *at_origin;
  GstVideoOverlayComposition *composition;
  GstVideoOverlayFormatFlags flags;
  GstVideoFrame view;
  GstBuffer *pixels;
  gint x, y;
  guint w, h, p, c;
  gboolean ret;

  flags = gst_video_overlay_rectangle_get_flags (rectangle);
  gst_video_overlay_rectangle_get_render_rectangle (rectangle, &x, &y, &w, &h);
  if (x < 0 || y < 0 || x + w > (guint) GST_VIDEO_FRAME_WIDTH (frame)
      || y + h > (guint) GST_VIDEO_FRAME_HEIGHT (frame)
      || x % (1 << GST_VIDEO_FORMAT_INFO_W_SUB (finfo, 1)) != 0
      || y % (1 << GST_VIDEO_FORMAT_INFO_H_SUB (finfo, 1)) != 0) {
    /* not one of ours: the whole frame's rows */
    composition = gst_video_overlay_composition_new (rectangle);
    ret = gst_video_overlay_composition_blend (composition, frame);
    gst_video_overlay_composition_unref (composition);
    return ret;
  }

  view = *frame;
  view.info.width = w;
  view.info.height = h;
  for (p = 0; p < GST_VIDEO_FRAME_N_PLANES (frame); p++) {
    for (c = 0; c < GST_VIDEO_FORMAT_INFO_N_COMPONENTS (finfo); c++)
      if (GST_VIDEO_FORMAT_INFO_PLANE (finfo, c) == p)
        break;
    view.data[p] = (guint8 *) frame->data[p]
        + (gsize) GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT (finfo, c, y)
        * GST_VIDEO_FRAME_PLANE_STRIDE (frame, p)
        + GST_VIDEO_FORMAT_INFO_SCALE_WIDTH (finfo, c, x)
        * GST_VIDEO_FORMAT_INFO_PSTRIDE (finfo, c);
  }
  pixels = gst_video_overlay_rectangle_get_pixels_unscaled_raw (rectangle,
      flags);
  at_origin = gst_video_overlay_rectangle_new_raw (pixels, 0, 0, w, h, flags);
  composition = gst_video_overlay_composition_new (at_origin);
  ret = gst_video_overlay_composition_blend (composition, &view);
  gst_video_overlay_composition_unref (composition);
  gst_video_overlay_rectangle_unref (at_origin);
  return ret;
}

/* Draws what the frame shows (self->detections, the trails): onto @frame
 * when there is one, else into a composition of ARGB overlay rectangles in
 * the coordinates of the @info frame, returned (NULL when nothing is
 * drawn). */
static GstVideoOverlayComposition *
render (GstVisionOverlay * self, const GstVideoInfo * info, GstBuffer * buffer,
    GstVideoFrame * frame)
{
  const gint width = GST_VIDEO_INFO_WIDTH (info);
  const gint height = GST_VIDEO_INFO_HEIGHT (info);
  GstVideoOverlayComposition *composition = NULL;
  PangoFontDescription *font;
  GstVisionOverlayText text;
  gdouble line_width;
  gboolean swap_rb = FALSE, masks;
  gdouble keypoint_threshold;
  Canvas canvas = { NULL, NULL, 1, 1, width, height, FALSE };
  cairo_surface_t *surface = NULL;
  guint i;

  GST_OBJECT_LOCK (self);
  line_width = self->line_width > 0 ? self->line_width :
      MAX (2.0, round (height / 240.0));
  text = self->text;
  masks = self->masks;
  keypoint_threshold = self->keypoint_threshold;
  font = pango_font_description_from_string (self->font_desc ?
      self->font_desc : "Sans Bold");
  GST_OBJECT_UNLOCK (self);
  if (!(pango_font_description_get_set_fields (font) & PANGO_FONT_MASK_SIZE))
    pango_font_description_set_absolute_size (font,
        MAX (9.0, height / 36.0) * PANGO_SCALE);

  /* Cairo draws on the formats it shares directly; the others get an overlay
   * rectangle per drawing, the size of what it draws, blended by GStreamer */
  if (frame == NULL) {
    /* downstream blends: in frame coordinates, colours as they are */
  } else if (cairo_compatible (GST_VIDEO_FRAME_FORMAT (frame), &swap_rb)
      && GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0) % 4 == 0) {
    /* with alpha: drawn pixels become opaque (Cairo's premultiplied alpha is
     * only exact on opaque video, the usual case) */
    cairo_format_t cformat = GST_VIDEO_INFO_HAS_ALPHA (&frame->info) ?
        CAIRO_FORMAT_ARGB32 : CAIRO_FORMAT_RGB24;

    surface =
        cairo_image_surface_create_for_data (GST_VIDEO_FRAME_PLANE_DATA (frame,
            0), cformat, width, height, GST_VIDEO_FRAME_PLANE_STRIDE (frame,
            0));
    canvas.frame_cr = cairo_create (surface);
  } else {
    swap_rb = FALSE;
    canvas.x_align = 1 << GST_VIDEO_FORMAT_INFO_W_SUB (frame->info.finfo, 1);
    canvas.y_align = 1 << GST_VIDEO_FORMAT_INFO_H_SUB (frame->info.finfo, 1);
  }

  draw_all (self, &canvas, buffer, self->detections,
      self->companion_masks, self->poses, width, height, line_width, font,
      text, swap_rb, masks, keypoint_threshold, self->draw_trails);

  if (canvas.frame_cr != NULL) {
    cairo_destroy (canvas.frame_cr);
    cairo_surface_flush (surface);
    cairo_surface_destroy (surface);
  }
  if (canvas.composition != NULL && frame == NULL) {
    composition = canvas.composition;
  } else if (canvas.composition != NULL) {
    GstVideoOverlayComposition *blended = canvas.composition;

    if (GST_VIDEO_INFO_IS_YUV (&frame->info))
      blended = composition_to_ayuv (canvas.composition, &frame->info);
    for (i = 0; blended != NULL
        && i < gst_video_overlay_composition_n_rectangles (blended); i++)
      if (!blend_rectangle (frame,
              gst_video_overlay_composition_get_rectangle (blended, i)))
        canvas.failed = TRUE;
    if (blended != canvas.composition && blended != NULL)
      gst_video_overlay_composition_unref (blended);
    gst_video_overlay_composition_unref (canvas.composition);
  }
  if (canvas.failed)
    GST_WARNING_OBJECT (self, "drawing failed");

  pango_font_description_free (font);
  return composition;
}

static GstFlowReturn
gst_vision_overlay_transform_frame_ip (GstVideoFilter * filter,
    GstVideoFrame * frame)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (filter);

  render (self, &frame->info, frame->buffer, frame);
  return GST_FLOW_OK;
}

/* Whether the negotiated output caps carry the overlay composition feature
 * and downstream's allocation answer lists the meta: then it blends (a
 * compositor, a sink drawing in hardware) and visionoverlay attaches what it
 * would have drawn. Otherwise it draws, with or without the feature in the
 * caps (the meta is optional on each buffer). */
static gboolean
downstream_blends (GstVisionOverlay * self)
{
  GstPad *srcpad = GST_BASE_TRANSFORM_SRC_PAD (self);
  GstCaps *caps = gst_pad_get_current_caps (srcpad);
  GstCapsFeatures *features;
  GstQuery *query;
  gboolean ret = FALSE;

  if (caps == NULL)
    return FALSE;
  features = gst_caps_get_features (caps, 0);
  if (features != NULL && gst_caps_features_contains (features,
          GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION)) {
    query = gst_query_new_allocation (caps, FALSE);
    if (gst_pad_peer_query (srcpad, query))
      ret = gst_query_find_allocation_meta (query,
          GST_VIDEO_OVERLAY_COMPOSITION_META_API_TYPE, NULL);
    gst_query_unref (query);
  }
  gst_caps_unref (caps);
  GST_DEBUG_OBJECT (self, "downstream %s", ret ? "blends: attaching the "
      "overlay composition meta" : "does not blend: drawing");
  return ret;
}

/* Adds @composition (transfer full) to @buffer's overlay composition meta,
 * after the rectangles already there (an upstream overlay's). */
static void
attach_composition (GstBuffer * buffer,
    GstVideoOverlayComposition * composition)
{
  GstVideoOverlayCompositionMeta *meta =
      gst_buffer_get_video_overlay_composition_meta (buffer);

  if (meta != NULL) {
    GstVideoOverlayComposition *merged =
        gst_video_overlay_composition_copy (meta->overlay);
    guint i;

    for (i = 0; i < gst_video_overlay_composition_n_rectangles (composition);
        i++)
      gst_video_overlay_composition_add_rectangle (merged,
          gst_video_overlay_composition_get_rectangle (composition, i));
    gst_buffer_remove_meta (buffer, (GstMeta *) meta);
    gst_video_overlay_composition_unref (composition);
    composition = merged;
  }
  gst_buffer_add_video_overlay_composition_meta (buffer, composition);
  gst_video_overlay_composition_unref (composition);
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

/* Whether visiondetect skipped @buffer (its companion meta says so); a
 * repeated frame carries the detections of the frame it repeats. */
static gboolean
skipped_by_detector (GstBuffer * buffer)
{
  GstVisionDetectMeta *meta = gst_buffer_get_vision_detect_meta (buffer);

  return meta != NULL && meta->inference != GST_VISION_DETECT_INFERRED
      && meta->inference != GST_VISION_DETECT_REPEATED;
}

static void
clear_held (GstVisionOverlay * self)
{
  g_clear_pointer (&self->held, g_array_unref);
  g_clear_pointer (&self->held_masks, g_ptr_array_unref);
  g_clear_pointer (&self->held_poses, g_ptr_array_unref);
  self->held_for = 0;
}

/* Frames without anything to draw are not mapped at all: GstVideoFilter maps
 * for writing, which would copy memory shared with another branch of a tee.
 * With hold-frames, a frame visiondetect skipped shows the last inferred
 * frame's detections, unless it carries its own (visiontrack's predictions). */
static GstFlowReturn
gst_vision_overlay_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);
  GstVideoInfo *info = &GST_VIDEO_FILTER (trans)->in_info;
  GstFlowReturn ret;
  guint trail, hold_frames, i;
  gboolean keypoints;

  GST_OBJECT_LOCK (self);
  trail = self->trail;
  hold_frames = self->hold_frames;
  keypoints = self->keypoints;
  GST_OBJECT_UNLOCK (self);

  /* counted here: frames without metadata age the trails too */
  self->frame_count++;
  if (trail == 0)
    g_clear_pointer (&self->trails, g_hash_table_unref);

  if (has_detections (buffer)) {
    self->detections = gst_vision_detections_from_buffer_full (buffer,
        GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info),
        &self->companion_masks);
    /* the keypoints, read once per frame (and held with the detections) */
    self->poses = g_ptr_array_new_full (self->detections->len, pose_free);
    for (i = 0; keypoints && i < self->detections->len; i++)
      g_ptr_array_add (self->poses, pose_for_detection (buffer,
              &g_array_index (self->detections, GstVisionDetection, i),
              GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info)));
    if (trail > 0)
      update_trails (self, self->detections, trail);
    self->draw_trails = trail > 0;
    if (!skipped_by_detector (buffer)) {
      clear_held (self);
      if (hold_frames > 0) {
        self->held = g_array_ref (self->detections);
        self->held_masks = g_ptr_array_ref (self->companion_masks);
        self->held_poses = g_ptr_array_ref (self->poses);
      }
    }
  } else if (skipped_by_detector (buffer) && self->held != NULL
      && self->held_for < hold_frames) {
    self->held_for++;
    self->detections = g_array_ref (self->held);
    self->companion_masks = g_ptr_array_ref (self->held_masks);
    self->poses = g_ptr_array_ref (self->held_poses);
    self->draw_trails = FALSE;
  } else {
    /* looked at and nothing found, not from visiondetect, or held long
     * enough */
    clear_held (self);
    return GST_FLOW_OK;
  }

  if (!self->blends_checked) {
    self->downstream_blends = downstream_blends (self);
    self->blends_checked = TRUE;
  }
  ret = GST_FLOW_OK;
  if (self->detections->len == 0 && !self->draw_trails) {
    /* nothing */
  } else if (self->downstream_blends) {
    GstVideoOverlayComposition *composition = render (self, info, buffer,
        NULL);

    if (composition != NULL)
      attach_composition (buffer, composition);
  } else {
    ret = GST_BASE_TRANSFORM_CLASS (parent_class)->transform_ip (trans, buffer);
  }
  g_clear_pointer (&self->detections, g_array_unref);
  g_clear_pointer (&self->companion_masks, g_ptr_array_unref);
  g_clear_pointer (&self->poses, g_ptr_array_unref);
  return ret;
}

/* Downstream of plain system-memory video: the same with the overlay
 * composition feature first (downstream blends, when it says so in the
 * allocation query), then without. Upstream of caps with the feature: the
 * same without it too (the meta is added here). */
static GstCaps *
gst_vision_overlay_transform_caps (GstBaseTransform * trans,
    GstPadDirection direction, GstCaps * caps, GstCaps * filter)
{
  const gchar *meta = GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION;
  GstCaps *result = gst_caps_new_empty ();
  guint i;

  for (i = 0; i < gst_caps_get_size (caps); i++) {
    const GstStructure *s = gst_caps_get_structure (caps, i);
    GstCapsFeatures *f = gst_caps_get_features (caps, i);
    GstCapsFeatures *other;

    if (f != NULL && gst_caps_features_is_any (f)) {
      result = gst_caps_merge_structure_full (result, gst_structure_copy (s),
          gst_caps_features_copy (f));
      continue;
    }
    other = f ? gst_caps_features_copy (f) :
        gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY, NULL);
    if (direction == GST_PAD_SINK && !gst_caps_features_contains (other, meta)
        && gst_caps_features_contains (other,
            GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY)) {
      gst_caps_features_add (other, meta);
      result = gst_caps_merge_structure_full (result, gst_structure_copy (s),
          other);
      other = NULL;
    } else if (direction == GST_PAD_SRC
        && gst_caps_features_contains (other, meta)) {
      gst_caps_features_remove (other, meta);
    } else {
      g_clear_pointer (&other, gst_caps_features_free);
    }
    result = gst_caps_merge_structure_full (result, gst_structure_copy (s),
        f ? gst_caps_features_copy (f) : NULL);
    if (other != NULL)
      result = gst_caps_merge_structure_full (result, gst_structure_copy (s),
          other);
  }
  if (filter != NULL) {
    GstCaps *filtered = gst_caps_intersect_full (filter, result,
        GST_CAPS_INTERSECT_FIRST);

    gst_caps_unref (result);
    result = filtered;
  }
  GST_DEBUG_OBJECT (trans, "%s caps %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
      direction == GST_PAD_SINK ? "sink" : "src", caps, result);
  return result;
}

static gboolean
gst_vision_overlay_set_info (GstVideoFilter * filter, GstCaps * incaps,
    GstVideoInfo * in_info, GstCaps * outcaps, GstVideoInfo * out_info)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (filter);

  /* new caps: downstream asked again, the held boxes (another size) gone */
  self->blends_checked = FALSE;
  clear_held (self);
  return TRUE;
}

static gboolean
gst_vision_overlay_stop (GstBaseTransform * trans)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);

  g_clear_pointer (&self->trails, g_hash_table_unref);
  clear_held (self);
  self->frame_count = 0;
  self->blends_checked = FALSE;
  return TRUE;
}

static gboolean
gst_vision_overlay_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionOverlay *self = GST_VISION_OVERLAY (trans);

  /* a seek: the paths drawn before it are elsewhere in the video */
  if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP
      || GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START) {
    g_clear_pointer (&self->trails, g_hash_table_unref);
    clear_held (self);
  }
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
    case PROP_KEYPOINTS:
      self->keypoints = g_value_get_boolean (value);
      break;
    case PROP_KEYPOINT_THRESHOLD:
      self->keypoint_threshold = g_value_get_double (value);
      break;
    case PROP_HOLD_FRAMES:
      self->hold_frames = g_value_get_uint (value);
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
    case PROP_KEYPOINTS:
      g_value_set_boolean (value, self->keypoints);
      break;
    case PROP_KEYPOINT_THRESHOLD:
      g_value_set_double (value, self->keypoint_threshold);
      break;
    case PROP_HOLD_FRAMES:
      g_value_set_uint (value, self->hold_frames);
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
  g_clear_pointer (&self->trails, g_hash_table_unref);
  clear_held (self);
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
  g_object_class_install_property (gobject_class, PROP_HOLD_FRAMES,
      g_param_spec_uint ("hold-frames", "Hold frames",
          "On frames visiondetect skipped (interval > 1, late frames) that "
          "carry no detections of their own, draw the last inferred frame's "
          "detections again, on at most this many frames in a row, so that "
          "boxes do not blink; 0: draw only each frame's own", 0, G_MAXUINT,
          DEFAULT_HOLD_FRAMES, rw));
  g_object_class_install_property (gobject_class, PROP_KEYPOINTS,
      g_param_spec_boolean ("keypoints", "Keypoints",
          "Draw each detection's keypoints (a Keypoint R-CNN's) and the "
          "skeleton's connections between them: those the model file names, "
          "else COCO's for 17 keypoints of a person", DEFAULT_KEYPOINTS, rw));
  g_object_class_install_property (gobject_class, PROP_KEYPOINT_THRESHOLD,
      g_param_spec_double ("keypoint-threshold", "Keypoint threshold",
          "Draw only the keypoints whose score (the model's: a Keypoint "
          "R-CNN's heatmap logit) is at least this, and the connections "
          "between two of them", -G_MAXDOUBLE, G_MAXDOUBLE,
          DEFAULT_KEYPOINT_THRESHOLD, rw));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision detection overlay", "Filter/Editor/Video",
      "Draws detected objects (boxes, class names, confidences) from the "
      "frames' region-of-interest metadata", "visiondetect developers");

  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_overlay_stop);
  trans_class->transform_caps =
      GST_DEBUG_FUNCPTR (gst_vision_overlay_transform_caps);
  filter_class->set_info = GST_DEBUG_FUNCPTR (gst_vision_overlay_set_info);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_overlay_sink_event);
  filter_class->transform_frame_ip =
      GST_DEBUG_FUNCPTR (gst_vision_overlay_transform_frame_ip);
  trans_class->transform_ip =
      GST_DEBUG_FUNCPTR (gst_vision_overlay_transform_ip);

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
  self->hold_frames = DEFAULT_HOLD_FRAMES;
  self->keypoints = DEFAULT_KEYPOINTS;
  self->keypoint_threshold = DEFAULT_KEYPOINT_THRESHOLD;
}
