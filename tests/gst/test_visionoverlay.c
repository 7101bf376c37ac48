/* visionoverlay: draws where the boxes are and nowhere else. Detections are put
 * on the buffers by hand (companion meta, or ROI metas only), so no engine is
 * needed. */
#include "vdtest.h"
#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
#include <stdlib.h>
#include <string.h>

#define WIDTH 320
#define HEIGHT 240
#define GREY 0x80

typedef struct
{
  gint x, y, w, h;
  gint label_id;
  const gchar *label;
} Box;

static const Box boxes[] = {
  {40, 60, 100, 60, 1, "ball"},
  {200, 120, 80, 90, 2, "box"},
};

static GstBuffer *
grey_frame (GstVideoFormat format, GstVideoInfo * info)
{
  GstBuffer *buffer;

  gst_video_info_set_format (info, format, WIDTH, HEIGHT);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (info), NULL);
  gst_buffer_memset (buffer, 0, GREY, GST_VIDEO_INFO_SIZE (info));
  return buffer;
}

/* where add_boxes() puts the boxes */
typedef enum
{
  BOXES_ROI_ONLY,
  BOXES_COMPANION,              /* and their ROI metas */
  BOXES_ANALYTICS_ONLY,         /* another producer's object-detection entries */
} BoxesSource;

static void
add_boxes (GstBuffer * buffer, BoxesSource source)
{
  GstVisionDetectMeta *meta = source == BOXES_COMPANION ?
      vdtest_add_detect_meta (buffer, WIDTH, HEIGHT) : NULL;
  guint i;

#ifdef HAVE_GST_ANALYTICS
  if (source == BOXES_ANALYTICS_ONLY) {
    GstAnalyticsRelationMeta *relations =
        gst_buffer_add_analytics_relation_meta (buffer);
    GstAnalyticsODMtd od;

    for (i = 0; i < G_N_ELEMENTS (boxes); i++)
      fail_unless (gst_analytics_relation_meta_add_od_mtd (relations,
              g_quark_from_string (boxes[i].label), boxes[i].x, boxes[i].y,
              boxes[i].w, boxes[i].h, 0.75f, &od));
    return;
  }
#endif
  fail_unless (source != BOXES_ANALYTICS_ONLY);
  for (i = 0; i < G_N_ELEMENTS (boxes); i++) {
    const Box *b = &boxes[i];
    GstVideoRegionOfInterestMeta *roi =
        gst_buffer_add_video_region_of_interest_meta (buffer, b->label,
        b->x, b->y, b->w, b->h);

    roi->id = i;
    gst_video_region_of_interest_meta_add_param (roi,
        gst_structure_new ("detection", "x_min", G_TYPE_DOUBLE,
            (gdouble) b->x / WIDTH, "y_min", G_TYPE_DOUBLE,
            (gdouble) b->y / HEIGHT, "x_max", G_TYPE_DOUBLE,
            (gdouble) (b->x + b->w) / WIDTH, "y_max", G_TYPE_DOUBLE,
            (gdouble) (b->y + b->h) / HEIGHT, "confidence", G_TYPE_DOUBLE,
            0.75, "label_id", G_TYPE_INT, b->label_id, "label", G_TYPE_STRING,
            b->label, NULL));
    if (meta)
      vdtest_add_detection (meta, b->x, b->y, b->w, b->h, 0.75, b->label_id,
          b->label, i);
  }
}

static GstBuffer *
overlay (GstBuffer * buffer, const GstVideoInfo * info, const gchar * props)
{
  gchar *launch = g_strdup_printf ("visionoverlay %s", props);
  GstHarness *h = gst_harness_new_parse (launch);
  GstCaps *caps = gst_video_info_to_caps (info);
  GstBuffer *out;

  gst_harness_set_src_caps (h, caps);
  fail_unless_equals_int (gst_harness_push (h, buffer), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  gst_harness_teardown (h);
  g_free (launch);
  return out;
}

/* the pixel's R, G, B, whatever the packed format */
static void
pixel_rgb (const GstVideoFrame * frame, gint x, gint y, guint8 rgb[3])
{
  const guint8 *p = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (frame, 0)
      + y * GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0)
      + x * GST_VIDEO_FRAME_COMP_PSTRIDE (frame, 0);
  gint c;

  for (c = 0; c < 3; c++)
    rgb[c] = p[GST_VIDEO_FRAME_COMP_POFFSET (frame, c)];
}

static gboolean
changed (const GstVideoFrame * frame, gint x, gint y)
{
  guint8 rgb[3];

  pixel_rgb (frame, x, y, rgb);
  return rgb[0] != GREY || rgb[1] != GREY || rgb[2] != GREY;
}

/* which box's outline band (line width @lw) the pixel is on, or -1 */
static gint
on_band (gint x, gint y, gint lw)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (boxes); i++) {
    const Box *b = &boxes[i];
    gboolean inside = x >= b->x && x < b->x + b->w && y >= b->y
        && y < b->y + b->h;
    gboolean interior = x >= b->x + lw && x < b->x + b->w - lw
        && y >= b->y + lw && y < b->y + b->h - lw;

    if (inside && !interior)
      return i;
  }
  return -1;
}

/* in the label area: above the box (the text's height at most @th) */
static gboolean
in_label_area (gint x, gint y, gint th)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (boxes); i++) {
    const Box *b = &boxes[i];

    if (x >= b->x && x < MIN (WIDTH, b->x + 160) && y >= b->y - th
        && y < b->y)
      return TRUE;
  }
  return FALSE;
}

static void
check_boxes_only (GstVideoFormat format, BoxesSource source)
{
  GstVideoInfo info;
  GstBuffer *in = grey_frame (format, &info);
  GstBuffer *out;
  GstVideoFrame frame;
  guint8 colour[2][3];
  gint x, y;

  add_boxes (in, source);
  out = overlay (in, &info, "text=none line-width=3");
  fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
  for (y = 0; y < HEIGHT; y++) {
    for (x = 0; x < WIDTH; x++) {
      gint band = on_band (x, y, 3);

      if (band < 0)
        fail_unless (!changed (&frame, x, y), "%s: pixel %d,%d drawn outside "
            "the boxes", gst_video_format_to_string (format), x, y);
      else
        fail_unless (changed (&frame, x, y), "%s: pixel %d,%d of box %d's "
            "outline not drawn", gst_video_format_to_string (format), x, y,
            band);
    }
  }
  /* one colour per box, different classes in different colours, and the
   * right channel order (the same colour in every format) */
  for (x = 0; x < 2; x++) {
    pixel_rgb (&frame, boxes[x].x + 1, boxes[x].y + boxes[x].h / 2, colour[x]);
    for (y = 0; y < boxes[x].w; y++) {
      guint8 rgb[3];

      pixel_rgb (&frame, boxes[x].x + y, boxes[x].y + 1, rgb);
      fail_unless (memcmp (rgb, colour[x], 3) == 0);
    }
  }
  /* an analytics entry has no label id: its colour is its class name's */
  if (source == BOXES_ANALYTICS_ONLY) {
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
    return;
  }
  fail_unless (memcmp (colour[0], colour[1], 3) != 0);
  /* class 1 is the palette's second colour, #ff7f0e */
  fail_unless (colour[0][0] == 0xff && colour[0][1] == 0x7f
      && colour[0][2] == 0x0e, "%s: class 1 drawn as %02x%02x%02x",
      gst_video_format_to_string (format), colour[0][0], colour[0][1],
      colour[0][2]);
  gst_video_frame_unmap (&frame);
  gst_buffer_unref (out);
}

GST_START_TEST (test_boxes_where_detections_are)
{
  const GstVideoFormat formats[] = {
    GST_VIDEO_FORMAT_BGRx, GST_VIDEO_FORMAT_BGRA, GST_VIDEO_FORMAT_RGBx,
    GST_VIDEO_FORMAT_RGBA, GST_VIDEO_FORMAT_xRGB, GST_VIDEO_FORMAT_ARGB,
    GST_VIDEO_FORMAT_xBGR, GST_VIDEO_FORMAT_ABGR, GST_VIDEO_FORMAT_RGB,
    GST_VIDEO_FORMAT_BGR,
  };
  guint f;

  for (f = 0; f < G_N_ELEMENTS (formats); f++)
    check_boxes_only (formats[f], BOXES_COMPANION);
}

GST_END_TEST;

GST_START_TEST (test_roi_metas_only)
{
  check_boxes_only (GST_VIDEO_FORMAT_BGRx, BOXES_ROI_ONLY);
  check_boxes_only (GST_VIDEO_FORMAT_RGB, BOXES_ROI_ONLY);
}

GST_END_TEST;

#ifdef HAVE_GST_ANALYTICS
/* Another producer's object-detection entries alone (GStreamer's tensor
 * decoders attach only those) are drawn as ours are. */
GST_START_TEST (test_analytics_entries_only)
{
  check_boxes_only (GST_VIDEO_FORMAT_BGRx, BOXES_ANALYTICS_ONLY);
  check_boxes_only (GST_VIDEO_FORMAT_RGB, BOXES_ANALYTICS_ONLY);
}

GST_END_TEST;
#endif

GST_START_TEST (test_labels_above_boxes)
{
  const GstVideoFormat formats[] = { GST_VIDEO_FORMAT_BGRx,
    GST_VIDEO_FORMAT_RGB
  };
  guint f, i;

  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    GstVideoInfo info;
    GstBuffer *in = grey_frame (formats[f], &info);
    GstBuffer *out;
    GstVideoFrame frame;
    gint x, y;
    guint label_pixels[2] = { 0, 0 };

    add_boxes (in, BOXES_COMPANION);
    out = overlay (in, &info, "line-width=2 font-desc=\"Sans 10\"");
    fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
    for (y = 0; y < HEIGHT; y++) {
      for (x = 0; x < WIDTH; x++) {
        if (!changed (&frame, x, y))
          continue;
        fail_unless (on_band (x, y, 2) >= 0 || in_label_area (x, y, 30),
            "pixel %d,%d drawn away from the boxes and their labels", x, y);
        for (i = 0; i < 2; i++)
          if (y < boxes[i].y && y >= boxes[i].y - 30 && x >= boxes[i].x
              && x < boxes[i].x + 160)
            label_pixels[i]++;
      }
    }
    /* a label of "ball 0.75" in a 10 pt font covers some hundreds of pixels */
    fail_unless (label_pixels[0] > 100 && label_pixels[1] > 100,
        "labels not drawn: %u, %u pixels", label_pixels[0], label_pixels[1]);
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
  }
}

GST_END_TEST;

GST_START_TEST (test_no_detections_no_change)
{
  GstVideoInfo info;
  GstBuffer *in = grey_frame (GST_VIDEO_FORMAT_BGRx, &info);
  GstBuffer *out = overlay (in, &info, "");
  GstVideoFrame frame;
  gint x, y;

  fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
  for (y = 0; y < HEIGHT; y++)
    for (x = 0; x < WIDTH; x++)
      fail_unless (!changed (&frame, x, y));
  gst_video_frame_unmap (&frame);
  gst_buffer_unref (out);
}

GST_END_TEST;

/* A frame visiondetect ran on and found nothing carries an empty companion
 * meta: it is not mapped either (its read-only memory, mapped for writing,
 * would be replaced by a copy) */
GST_START_TEST (test_empty_meta_not_mapped)
{
  const gsize size = WIDTH * HEIGHT * 4;
  guint8 *pixels = g_malloc0 (size);
  GstBuffer *in = gst_buffer_new ();
  GstHarness *h = gst_harness_new ("visionoverlay");
  GstMemory *memory = gst_memory_new_wrapped (GST_MEMORY_FLAG_READONLY,
      pixels, size, 0, size, pixels, g_free);
  GstBuffer *out;

  gst_buffer_append_memory (in, memory);
  vdtest_add_detect_meta (in, WIDTH, HEIGHT);
  gst_harness_set_src_caps_str (h, "video/x-raw,format=BGRx,width=320,"
      "height=240,framerate=25/1");
  fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  fail_unless (gst_buffer_n_memory (out) == 1
      && gst_buffer_peek_memory (out, 0) == memory, "the frame was mapped");
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* An instance mask ("mask_rcnn" ROI param, as visiondetect attaches it) over box
 * 0: its left half in the object, the right half not. */
static void
add_mask (GstBuffer * buffer)
{
  const Box *b = &boxes[0];
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_get_video_region_of_interest_meta_id (buffer, 0);
  gfloat *probs = g_new (gfloat, b->w * b->h);
  GValue dims = G_VALUE_INIT, v = G_VALUE_INIT;
  GstStructure *s;

  for (gint y = 0; y < b->h; y++)
    for (gint x = 0; x < b->w; x++)
      probs[y * b->w + x] = x < b->w / 2 ? 0.75f : 0.25f;
  s = gst_structure_new ("mask_rcnn", "format", G_TYPE_STRING,
      "segmentation_mask", "precision", G_TYPE_INT, 10, "data_buffer",
      G_TYPE_VARIANT, g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, probs,
          (gsize) b->w * b->h * sizeof (gfloat), 1), NULL);
  gst_value_array_init (&dims, 2);
  g_value_init (&v, G_TYPE_UINT);
  g_value_set_uint (&v, b->h);
  gst_value_array_append_value (&dims, &v);
  g_value_set_uint (&v, b->w);
  gst_value_array_append_value (&dims, &v);
  gst_structure_take_value (s, "dims", &dims);
  g_value_unset (&v);
  gst_video_region_of_interest_meta_add_param (roi, s);
  g_free (probs);
}

/* The mask is filled, translucent: inside the box's outline, the object's half
 * is a blend of the frame and the class colour (neither the grey nor the
 * outline's opaque colour), the other half untouched; masks=false fills
 * nothing. */
GST_START_TEST (test_masks_filled)
{
  const Box *b = &boxes[0];
  const gint lw = 3;

  /* Cairo drawing on the frame (RGBx), with red and blue exchanged (BGRx), on
   * a scratch surface blended afterwards (RGB) */
  const GstVideoFormat formats[] = { GST_VIDEO_FORMAT_RGBx,
    GST_VIDEO_FORMAT_BGRx, GST_VIDEO_FORMAT_RGB
  };

  for (gint run = 0; run < 6; run++) {
    gint on = run % 2;
    GstVideoInfo info;
    GstBuffer *in = grey_frame (formats[run / 2], &info), *out;
    GstVideoFrame frame;
    guint8 band[3];
    gint filled = 0, untouched = 0;

    add_boxes (in, BOXES_COMPANION);
    add_mask (in);
    out = overlay (in, &info, on ? "text=none line-width=3" :
        "text=none line-width=3 masks=false");
    fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
    pixel_rgb (&frame, b->x, b->y, band); /* the outline: the class colour */
    for (gint y = b->y + lw; y < b->y + b->h - lw; y++)
      for (gint x = b->x + lw; x < b->x + b->w - lw; x++) {
        guint8 rgb[3];
        gboolean object = x - b->x < b->w / 2;

        pixel_rgb (&frame, x, y, rgb);
        if (on && object) {
          for (gint c = 0; c < 3; c++)
            fail_unless (abs ((gint) rgb[c] - (GREY + band[c]) / 2) <= 2,
                "(%d, %d) channel %d: %d, not half of %d and %d", x, y, c,
                rgb[c], GREY, band[c]);
          filled++;
        } else {
          fail_if (changed (&frame, x, y), "(%d, %d) changed", x, y);
          untouched++;
        }
      }
    fail_unless (on ? filled > 0 : filled == 0);
    fail_unless (untouched > 0);
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
  }
}

GST_END_TEST;

GST_START_TEST (test_properties)
{
  GstElement *e = gst_element_factory_make ("visionoverlay", NULL);
  gdouble lw;
  gchar *font;
  gint text;

  fail_unless (e != NULL);
  g_object_get (e, "line-width", &lw, "font-desc", &font, "text", &text, NULL);
  fail_unless (lw == 0.0 && font == NULL && text == 3);
  {
    gboolean masks = FALSE;
    g_object_get (e, "masks", &masks, NULL);
    fail_unless (masks);
    g_object_set (e, "masks", FALSE, NULL);
    g_object_get (e, "masks", &masks, NULL);
    fail_if (masks);
  }
  gst_util_set_object_arg (G_OBJECT (e), "text", "label");
  g_object_set (e, "line-width", 4.5, "font-desc", "Serif 20", NULL);
  g_object_get (e, "line-width", &lw, "font-desc", &font, "text", &text, NULL);
  fail_unless (lw == 4.5 && text == 1);
  fail_unless_equals_string (font, "Serif 20");
  g_free (font);
  gst_object_unref (e);
}

GST_END_TEST;

static Suite *
visionoverlay_suite (void)
{
  Suite *s = suite_create ("visionoverlay");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_boxes_where_detections_are);
  tcase_add_test (tc, test_roi_metas_only);
#ifdef HAVE_GST_ANALYTICS
  tcase_add_test (tc, test_analytics_entries_only);
#endif
  tcase_add_test (tc, test_labels_above_boxes);
  tcase_add_test (tc, test_no_detections_no_change);
  tcase_add_test (tc, test_empty_meta_not_mapped);
  tcase_add_test (tc, test_masks_filled);
  tcase_add_test (tc, test_properties);
  return s;
}

GST_CHECK_MAIN (visionoverlay);
