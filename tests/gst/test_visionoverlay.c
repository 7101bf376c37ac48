/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionoverlay: draws where the boxes are and nowhere else. Detections are put
 * on the buffers by hand (companion meta, or ROI metas only), so no engine is
 * needed. */
#include "vdtest.h"
#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
#include <math.h>
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

/* A "keypoints" ROI param as visiondetect attaches a Keypoint R-CNN's: the
 * @n points (frame pixels, @xys: x, y, score each) normalised to the ROI
 * @roi; point names and connections (pairs of names) when @names is set. */
static GstStructure *
keypoints_param (const GstVideoRegionOfInterestMeta * roi, const gfloat * xys,
    guint n, const gchar * const *names, const gchar * const *connections,
    guint n_connections)
{
  gfloat *xy = g_new (gfloat, 2 * n), *scores = g_new (gfloat, n);
  GValue dims = G_VALUE_INIT, v = G_VALUE_INIT, a = G_VALUE_INIT;
  GstStructure *s;

  for (guint i = 0; i < n; i++) {
    xy[2 * i] = (xys[3 * i] - roi->x) / roi->w;
    xy[2 * i + 1] = (xys[3 * i + 1] - roi->y) / roi->h;
    scores[i] = xys[3 * i + 2];
  }
  s = gst_structure_new ("keypoints", "format", G_TYPE_STRING, "keypoints",
      "precision", G_TYPE_INT, 10, "data_buffer", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, xy,
          2 * (gsize) n * sizeof (gfloat), 1), "confidence", G_TYPE_VARIANT,
      g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, scores,
          (gsize) n * sizeof (gfloat), 1), NULL);
  gst_value_array_init (&dims, 2);
  g_value_init (&v, G_TYPE_UINT);
  g_value_set_uint (&v, n);
  gst_value_array_append_value (&dims, &v);
  g_value_set_uint (&v, 2);
  gst_value_array_append_value (&dims, &v);
  g_value_unset (&v);
  gst_structure_take_value (s, "dims", &dims);
  if (names != NULL) {
    g_value_init (&v, G_TYPE_STRING);
    gst_value_array_init (&a, n);
    for (guint i = 0; i < n; i++) {
      g_value_set_string (&v, names[i]);
      gst_value_array_append_value (&a, &v);
    }
    gst_structure_take_value (s, "point_names", &a);
    gst_value_array_init (&a, 2 * n_connections);
    for (guint i = 0; i < 2 * n_connections; i++) {
      g_value_set_string (&v, connections[i]);
      gst_value_array_append_value (&a, &v);
    }
    gst_structure_take_value (s, "point_connections", &a);
    g_value_unset (&v);
  }
  g_free (xy);
  g_free (scores);
  return s;
}

/* Keypoints on box 0 (the model's names and skeleton: a-b, b-c): the points
 * and the a-b connection are drawn; c (score -3, under the default threshold
 * 0) and the b-c connection are not, unless keypoint-threshold is lower;
 * keypoints=false draws none of them. On the frame (RGBx) and blended (RGB). */
GST_START_TEST (test_keypoints_drawn)
{
  const gfloat xys[9] = { 60, 80, 5.0f, 120, 80, 2.0f, 90, 106, -3.0f };
  const gchar *names[3] = { "a", "b", "c" };
  const gchar *connections[4] = { "a", "b", "b", "c" };
  const GstVideoFormat formats[] = { GST_VIDEO_FORMAT_RGBx,
    GST_VIDEO_FORMAT_RGB
  };
  const gchar *props[3] = { "text=none line-width=3",
    "text=none line-width=3 keypoints=false",
    "text=none line-width=3 keypoint-threshold=-5"
  };

  for (guint run = 0; run < 6; run++) {
    guint mode = run % 3;
    GstVideoInfo info;
    GstBuffer *in = grey_frame (formats[run / 3], &info), *out;
    GstVideoFrame frame;
    gboolean on = mode != 1, low = mode == 2;

    add_boxes (in, BOXES_ROI_ONLY);
    gst_video_region_of_interest_meta_add_param
        (gst_buffer_get_video_region_of_interest_meta_id (in, 0),
        keypoints_param (gst_buffer_get_video_region_of_interest_meta_id (in,
                0), xys, 3, names, connections, 2));
    out = overlay (in, &info, props[mode]);
    fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
    fail_unless_equals_int (changed (&frame, 60, 80), on);
    fail_unless_equals_int (changed (&frame, 120, 80), on);
    /* a-b */
    fail_unless_equals_int (changed (&frame, 90, 80), on);
    /* c and b-c */
    fail_unless_equals_int (changed (&frame, 90, 106), low);
    fail_unless_equals_int (changed (&frame, 105, 93), low);
    /* between a and c: no connection */
    fail_if (changed (&frame, 75, 93));
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
  }
}

GST_END_TEST;

/* 17 keypoints of a "person" whose param names no skeleton get COCO's (left
 * shoulder 5 - right shoulder 6); the same on a "ball" get none. */
GST_START_TEST (test_keypoints_coco_skeleton)
{
  gfloat xys[3 * 17];

  /* a 5 x 4 grid, 50 x 45 pixels apart */
  for (guint i = 0; i < 17; i++) {
    xys[3 * i] = 40 + 50 * (i % 5);
    xys[3 * i + 1] = 40 + 45 * (i / 5);
    xys[3 * i + 2] = 1.0f;
  }
  for (guint run = 0; run < 2; run++) {
    GstVideoInfo info;
    GstBuffer *in = grey_frame (GST_VIDEO_FORMAT_RGBx, &info), *out;
    GstVideoRegionOfInterestMeta *roi =
        gst_buffer_add_video_region_of_interest_meta (in,
        run == 0 ? "person" : "ball", 20, 20, 280, 200);
    GstVideoFrame frame;

    roi->id = 0;
    gst_video_region_of_interest_meta_add_param (roi, keypoints_param (roi,
            xys, 17, NULL, NULL, 0));
    out = overlay (in, &info, "text=none line-width=3");
    fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
    /* the points: 5 at (40, 85), 6 at (90, 85) */
    fail_unless (changed (&frame, 40, 85));
    fail_unless (changed (&frame, 90, 85));
    fail_unless_equals_int (changed (&frame, 65, 85), run == 0);
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
  }
}

GST_END_TEST;

/* The cost of drawing one labelled box on a frame, per format that the
 * element takes: printed for comparison (no bound: machines differ). The
 * buffer goes round the harness, drawn again in place each time. */
static gdouble
ms_per_frame (GstVideoFormat format, gint width, gint height, const Box * box,
    guint frames)
{
  GstVideoInfo info;
  /* the line and the font sized alike on both sizes */
  GstHarness *h = gst_harness_new_parse ("visionoverlay line-width=4 "
      "font-desc=\"Sans Bold 20\"");
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  gint64 start;
  guint i;

  gst_video_info_set_format (&info, format, width, height);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_memset (buffer, 0, GREY, GST_VIDEO_INFO_SIZE (&info));
  meta = vdtest_add_detect_meta (buffer, width, height);
  vdtest_add_detection (meta, box->x, box->y, box->w, box->h, 0.75, 1,
      "ball", 0);
  gst_buffer_add_video_region_of_interest_meta (buffer, "ball", box->x,
      box->y, box->w, box->h)->id = 0;
  gst_harness_set_src_caps (h, gst_video_info_to_caps (&info));
  /* the first frame creates the font map */
  fail_unless_equals_int (gst_harness_push (h, buffer), GST_FLOW_OK);
  buffer = gst_harness_pull (h);
  start = g_get_monotonic_time ();
  for (i = 0; i < frames; i++) {
    fail_unless_equals_int (gst_harness_push (h, buffer), GST_FLOW_OK);
    buffer = gst_harness_pull (h);
    fail_unless (buffer != NULL);
  }
  gst_buffer_unref (buffer);
  gst_harness_teardown (h);
  return (g_get_monotonic_time () - start) / 1000.0 / frames;
}

GST_START_TEST (test_timing_1080p_one_box)
{
  const GstVideoFormat formats[] = { GST_VIDEO_FORMAT_RGB,
    GST_VIDEO_FORMAT_BGRx, GST_VIDEO_FORMAT_I420, GST_VIDEO_FORMAT_NV12
  };
  const Box one_box = { 800, 400, 300, 200, 1, "ball" };
  GstElement *e = gst_element_factory_make ("visionoverlay", NULL);
  GstCaps *sink_caps = gst_pad_get_pad_template_caps (
      gst_element_get_static_pad (e, "sink"));
  guint f;

  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    GstCaps *caps = gst_caps_new_simple ("video/x-raw", "format",
        G_TYPE_STRING, gst_video_format_to_string (formats[f]), NULL);

    if (gst_caps_can_intersect (caps, sink_caps))
      g_print ("visionoverlay, 1920x1080 %s, one labelled box: %.2f ms a "
          "frame\n", gst_video_format_to_string (formats[f]),
          ms_per_frame (formats[f], 1920, 1080, &one_box, 40));
    gst_caps_unref (caps);
  }
  gst_caps_unref (sink_caps);
  gst_object_unref (e);
}

GST_END_TEST;

/* The value a YUV frame should hold for the sRGB colour @rgb (0..255) with
 * the matrix and range of @colorimetry: Y, U, V */
static void
expected_yuv (const guint8 rgb[3], const gchar * colorimetry, gint yuv[3])
{
  GstVideoColorimetry c;
  const GstVideoFormatInfo *finfo =
      gst_video_format_get_info (GST_VIDEO_FORMAT_I420);
  gint offset[GST_VIDEO_MAX_COMPONENTS], scale[GST_VIDEO_MAX_COMPONENTS];
  gdouble kr, kb, r = rgb[0] / 255.0, g = rgb[1] / 255.0, b = rgb[2] / 255.0;
  gdouble y;

  fail_unless (gst_video_colorimetry_from_string (&c, colorimetry));
  fail_unless (gst_video_color_matrix_get_Kr_Kb (c.matrix, &kr, &kb));
  gst_video_color_range_offsets (c.range, finfo, offset, scale);
  y = kr * r + (1 - kr - kb) * g + kb * b;
  yuv[0] = (gint) lrint (offset[0] + scale[0] * y);
  yuv[1] = (gint) lrint (offset[1] + scale[1] * (b - y) / (2 * (1 - kb)));
  yuv[2] = (gint) lrint (offset[2] + scale[2] * (r - y) / (2 * (1 - kr)));
}

/* Y, U, V of pixel (x, y) of an I420 or NV12 frame */
static void
pixel_yuv (const GstVideoFrame * frame, gint x, gint y, gint yuv[3])
{
  const guint8 *luma = GST_VIDEO_FRAME_PLANE_DATA (frame, 0);
  const guint8 *p1 = GST_VIDEO_FRAME_PLANE_DATA (frame, 1);

  yuv[0] = luma[y * GST_VIDEO_FRAME_PLANE_STRIDE (frame, 0) + x];
  if (GST_VIDEO_FRAME_FORMAT (frame) == GST_VIDEO_FORMAT_NV12) {
    const guint8 *uv = p1 + (y / 2) * GST_VIDEO_FRAME_PLANE_STRIDE (frame, 1)
        + (x / 2) * 2;

    yuv[1] = uv[0];
    yuv[2] = uv[1];
  } else {
    const guint8 *p2 = GST_VIDEO_FRAME_PLANE_DATA (frame, 2);

    yuv[1] = p1[(y / 2) * GST_VIDEO_FRAME_PLANE_STRIDE (frame, 1) + x / 2];
    yuv[2] = p2[(y / 2) * GST_VIDEO_FRAME_PLANE_STRIDE (frame, 2) + x / 2];
  }
}

/* NV12 and I420 are drawn in place, without a conversion: the boxes' outlines
 * in the class colour with the matrix the caps' colorimetry names (BT.601
 * and BT.709 give Y values 6 apart for this orange), every other pixel of
 * every plane untouched (the boxes start on whole chroma samples). */
static void
check_yuv (GstVideoFormat format, const gchar * colorimetry)
{
  GstVideoInfo info;
  GstBuffer *in = grey_frame (format, &info), *out;
  GstVideoFrame frame;
  /* class 1 is the palette's second colour, #ff7f0e */
  const guint8 orange[3] = { 0xff, 0x7f, 0x0e };
  gint want[3], x, y, c;
  gchar *props;

  fail_unless (gst_video_colorimetry_from_string (&info.colorimetry,
          colorimetry));
  expected_yuv (orange, colorimetry, want);
  add_boxes (in, BOXES_COMPANION);
  props = g_strdup ("text=none line-width=4");
  out = overlay (in, &info, props);
  g_free (props);
  fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
  for (y = 0; y < HEIGHT; y++) {
    for (x = 0; x < WIDTH; x++) {
      gint band = on_band (x, y, 4), yuv[3];

      pixel_yuv (&frame, x, y, yuv);
      if (band < 0) {
        /* a chroma sample is shared by 2x2 pixels: untouched when none of
         * them is on a band */
        gboolean block_on_band = on_band (x & ~1, y & ~1, 4) >= 0
            || on_band ((x & ~1) + 1, y & ~1, 4) >= 0
            || on_band (x & ~1, (y & ~1) + 1, 4) >= 0
            || on_band ((x & ~1) + 1, (y & ~1) + 1, 4) >= 0;

        fail_unless (yuv[0] == GREY, "%s: Y of %d,%d drawn outside the boxes",
            gst_video_format_to_string (format), x, y);
        fail_unless (block_on_band || (yuv[1] == GREY && yuv[2] == GREY),
            "%s: chroma of %d,%d drawn outside the boxes",
            gst_video_format_to_string (format), x, y);
      } else if (band == 0) {
        /* Y exact to the rounding; the chroma of 2x2 blocks inside the band */
        fail_unless (abs (yuv[0] - want[0]) <= 1, "%s %s: Y of %d,%d is %d, "
            "not %d", gst_video_format_to_string (format), colorimetry, x, y,
            yuv[0], want[0]);
        if (on_band (x ^ 1, y, 4) == 0 && on_band (x, y ^ 1, 4) == 0
            && on_band (x ^ 1, y ^ 1, 4) == 0)
          for (c = 1; c < 3; c++)
            fail_unless (abs (yuv[c] - want[c]) <= 1, "%s %s: component %d "
                "of %d,%d is %d, not %d", gst_video_format_to_string (format),
                colorimetry, c, x, y, yuv[c], want[c]);
      } else {
        fail_unless (yuv[0] != GREY, "%s: %d,%d of box %d's outline not drawn",
            gst_video_format_to_string (format), x, y, band);
      }
    }
  }
  gst_video_frame_unmap (&frame);
  gst_buffer_unref (out);
}

GST_START_TEST (test_yuv_in_place)
{
  check_yuv (GST_VIDEO_FORMAT_I420, "bt601");
  check_yuv (GST_VIDEO_FORMAT_NV12, "bt601");
  check_yuv (GST_VIDEO_FORMAT_I420, "bt709");
  check_yuv (GST_VIDEO_FORMAT_NV12, "bt709");
}

GST_END_TEST;

/* Labels and masks on NV12 too: the label above the box, the mask's half
 * blended (its Y between the grey and the outline's). */
GST_START_TEST (test_yuv_labels_and_masks)
{
  GstVideoInfo info;
  GstBuffer *in = grey_frame (GST_VIDEO_FORMAT_NV12, &info), *out;
  GstVideoFrame frame;
  const Box *b = &boxes[0];
  gint x, y, yuv[3], band[3], label_pixels = 0;

  add_boxes (in, BOXES_COMPANION);
  add_mask (in);
  out = overlay (in, &info, "line-width=3 font-desc=\"Sans 10\"");
  fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
  for (y = b->y - 30; y < b->y; y++)
    for (x = b->x; x < b->x + 60; x++) {
      pixel_yuv (&frame, x, y, yuv);
      label_pixels += yuv[0] != GREY;
    }
  fail_unless (label_pixels > 100, "label not drawn: %d pixels", label_pixels);
  pixel_yuv (&frame, b->x, b->y, band);
  pixel_yuv (&frame, b->x + b->w / 4, b->y + b->h / 2, yuv);
  fail_unless (abs (yuv[0] - (GREY + band[0]) / 2) <= 2,
      "mask: Y %d, not half of %d and %d", yuv[0], GREY, band[0]);
  pixel_yuv (&frame, b->x + 3 * b->w / 4, b->y + b->h / 2, yuv);
  fail_unless (yuv[0] == GREY && yuv[1] == GREY && yuv[2] == GREY);
  gst_video_frame_unmap (&frame);
  gst_buffer_unref (out);
}

GST_END_TEST;

/* A frame visiondetect inferred, then frames it skipped (no detection on
 * them): with hold-frames=N the first N skipped frames show the inferred
 * frame's boxes, the next none; a frame it looked at and found nothing on
 * ends the hold; hold-frames=0 (the default) draws each frame's own only. */
static GstBuffer *
detector_frame (GstVideoInfo * info, GstVisionDetectInference inference,
    gboolean boxes_on_it)
{
  GstBuffer *buffer = grey_frame (GST_VIDEO_FORMAT_I420, info);
  GstVisionDetectMeta *meta;

  if (boxes_on_it) {
    add_boxes (buffer, BOXES_COMPANION);
    meta = (GstVisionDetectMeta *) gst_buffer_get_meta (buffer,
        gst_meta_get_info ("GstVisionDetectMeta")->api);
  } else {
    meta = vdtest_add_detect_meta (buffer, WIDTH, HEIGHT);
  }
  meta->inference = inference;
  return buffer;
}

static gboolean
box_drawn (GstBuffer * buffer, const GstVideoInfo * info)
{
  GstVideoFrame frame;
  gint yuv[3];

  fail_unless (gst_video_frame_map (&frame, info, buffer, GST_MAP_READ));
  pixel_yuv (&frame, boxes[0].x, boxes[0].y + boxes[0].h / 2, yuv);
  gst_video_frame_unmap (&frame);
  return yuv[0] != GREY;
}

static void
check_hold (guint hold_frames)
{
  const struct
  {
    GstVisionDetectInference inference;
    gboolean boxes_on_it;
  } frames[] = {
    {GST_VISION_DETECT_INFERRED, TRUE},
    {GST_VISION_DETECT_SKIPPED_INTERVAL, FALSE},
    {GST_VISION_DETECT_SKIPPED_LATE, FALSE},
    {GST_VISION_DETECT_SKIPPED_INTERVAL, FALSE},
    {GST_VISION_DETECT_INFERRED, TRUE},
    {GST_VISION_DETECT_SKIPPED_INTERVAL, FALSE},
    {GST_VISION_DETECT_INFERRED, FALSE},
    {GST_VISION_DETECT_SKIPPED_INTERVAL, FALSE},
  };
  gchar *launch = g_strdup_printf ("visionoverlay text=none hold-frames=%u",
      hold_frames);
  GstHarness *h = gst_harness_new_parse (launch);
  GstVideoInfo info;
  guint i, held = 0;

  g_free (launch);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_I420, WIDTH, HEIGHT);
  gst_harness_set_src_caps (h, gst_video_info_to_caps (&info));
  for (i = 0; i < G_N_ELEMENTS (frames); i++) {
    GstBuffer *out;
    gboolean want;

    if (frames[i].inference == GST_VISION_DETECT_INFERRED)
      held = 0;
    else
      held++;
    /* frame 6 found nothing: nothing to hold after it */
    want = frames[i].boxes_on_it || (i < 6 && held > 0 && held <= hold_frames);
    fail_unless_equals_int (gst_harness_push (h, detector_frame (&info,
                frames[i].inference, frames[i].boxes_on_it)), GST_FLOW_OK);
    out = gst_harness_pull (h);
    fail_unless (box_drawn (out, &info) == want, "hold-frames=%u, frame %u: "
        "box %s", hold_frames, i, want ? "not drawn" : "drawn");
    gst_buffer_unref (out);
  }
  gst_harness_teardown (h);
}

GST_START_TEST (test_hold_frames)
{
  check_hold (0);
  check_hold (1);
  check_hold (2);
  check_hold (100);
}

GST_END_TEST;

/* Only the boxes' areas are blended: on a 1920x1080 RGB frame one 300x200
 * box costs a fraction of a box as large as the frame (with a frame-sized
 * scratch surface both cost about the same, the blending of every pixel).
 * The best of five runs each: room for a machine busy with other work. */
GST_START_TEST (test_cost_of_the_box_area_only)
{
  const Box small_box = { 800, 400, 300, 200, 1, "ball" };
  const Box frame_box = { 0, 0, 1920, 1080, 1, "ball" };
  gdouble small = G_MAXDOUBLE, large = G_MAXDOUBLE;
  gint run;

  for (run = 0; run < 5; run++) {
    small = MIN (small, ms_per_frame (GST_VIDEO_FORMAT_RGB, 1920, 1080,
            &small_box, 10));
    large = MIN (large, ms_per_frame (GST_VIDEO_FORMAT_RGB, 1920, 1080,
            &frame_box, 10));
  }
  fail_unless (small < 0.5 * large, "300x200 box: %.2f ms, 1920x1080 box: "
      "%.2f ms a frame", small, large);
}

GST_END_TEST;

/* Boxes that are not numbers, infinite, enormous, empty or outside the frame
 * draw nothing and crash nothing, in each way of drawing (on the frame,
 * blended RGB, blended YUV); a good box beside them is still drawn. */
GST_START_TEST (test_bad_boxes)
{
  const GstVideoFormat formats[] = { GST_VIDEO_FORMAT_BGRx,
    GST_VIDEO_FORMAT_RGB, GST_VIDEO_FORMAT_I420, GST_VIDEO_FORMAT_NV12
  };
  const gdouble bad[][4] = {
    {NAN, 10, 20, 20}, {10, NAN, 20, 20}, {10, 10, NAN, 20},
    {INFINITY, 10, 20, 20}, {-INFINITY, -INFINITY, INFINITY, INFINITY},
    {1e30, 1e30, 1e30, 1e30}, {-1e30, -1e30, 2e30, 2e30}, {10, 10, 0, 0},
    {10, 10, -5, -5}, {WIDTH + 10, HEIGHT + 10, 20, 20}, {-50, -50, 20, 20},
  };
  guint f, i;

  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    GstVideoInfo info;
    GstBuffer *in = grey_frame (formats[f], &info), *out;
    GstVisionDetectMeta *meta = vdtest_add_detect_meta (in, WIDTH, HEIGHT);
    GstVideoFrame frame;
    const guint8 *row;

    /* the boxes come from the companion meta: the ROI metas (whole pixels)
     * have no "detection" param */
    for (i = 0; i < G_N_ELEMENTS (bad); i++) {
      gst_buffer_add_video_region_of_interest_meta (in, "bad", 0, 0, 1,
          1)->id = i;
      vdtest_add_detection (meta, bad[i][0], bad[i][1], bad[i][2], bad[i][3],
          0.5, (gint) i, "bad", i);
    }
    gst_buffer_add_video_region_of_interest_meta (in, "good", 100, 100, 50,
        50)->id = i;
    vdtest_add_detection (meta, 100, 100, 50, 50, 0.5, 1, "good", i);
    out = overlay (in, &info, "trail=5");
    fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READ));
    /* the good box's left edge, first plane (R, G, B or Y) */
    row = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame, 0)
        + 125 * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0);
    fail_unless (memcmp (row + 100 * GST_VIDEO_FRAME_COMP_PSTRIDE (&frame, 0),
            (guint8[4]) {
            GREY, GREY, GREY, GREY}, GST_VIDEO_FRAME_COMP_PSTRIDE (&frame,
                0)) != 0, "%s: the good box not drawn",
        gst_video_format_to_string (formats[f]));
    gst_video_frame_unmap (&frame);
    gst_buffer_unref (out);
  }
}

GST_END_TEST;

/* Downstream that blends (caps with the overlay composition feature, the
 * meta in its allocation answer) gets the boxes as a
 * GstVideoOverlayCompositionMeta, after an upstream overlay's rectangle, and
 * the frame untouched; blending that composition draws the boxes. Downstream
 * that takes the feature but does not say it blends gets them drawn. */
static void
check_composition_meta (gboolean downstream_blends, gboolean upstream_overlay)
{
  GstHarness *h = gst_harness_new_parse ("visionoverlay text=none "
      "line-width=3");
  GstVideoInfo info;
  GstBuffer *in = grey_frame (GST_VIDEO_FORMAT_I420, &info), *out;
  GstVideoOverlayCompositionMeta *meta;
  GstVideoFrame frame;
  GstCaps *caps;
  gint yuv[3], x, y;
  guint n_upstream = upstream_overlay ? 1 : 0;

  if (downstream_blends)
    gst_harness_add_propose_allocation_meta (h,
        GST_VIDEO_OVERLAY_COMPOSITION_META_API_TYPE, NULL);
  caps = gst_caps_new_empty_simple ("video/x-raw");
  gst_caps_set_features (caps, 0, gst_caps_features_new
      (GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY,
          GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION, NULL));
  gst_harness_set_sink_caps (h, caps);
  caps = gst_video_info_to_caps (&info);
  if (upstream_overlay) {
    /* a 4x4 white square at 0,0 from an overlay upstream */
    GstBuffer *pixels = gst_buffer_new_allocate (NULL, 4 * 4 * 4, NULL);
    GstVideoOverlayRectangle *rect;
    GstVideoOverlayComposition *composition;

    gst_buffer_memset (pixels, 0, 0xff, 4 * 4 * 4);
    gst_buffer_add_video_meta (pixels, GST_VIDEO_FRAME_FLAG_NONE,
        GST_VIDEO_OVERLAY_COMPOSITION_FORMAT_RGB, 4, 4);
    rect = gst_video_overlay_rectangle_new_raw (pixels, 0, 0, 4, 4,
        GST_VIDEO_OVERLAY_FORMAT_FLAG_NONE);
    composition = gst_video_overlay_composition_new (rect);
    gst_buffer_add_video_overlay_composition_meta (in, composition);
    gst_video_overlay_composition_unref (composition);
    gst_video_overlay_rectangle_unref (rect);
    gst_buffer_unref (pixels);
    gst_caps_set_features (caps, 0, gst_caps_features_new
        (GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY,
            GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION, NULL));
  }
  gst_harness_set_src_caps (h, caps);
  add_boxes (in, BOXES_COMPANION);
  fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  caps = gst_pad_get_current_caps (h->sinkpad);
  fail_unless (gst_caps_features_contains (gst_caps_get_features (caps, 0),
          GST_CAPS_FEATURE_META_GST_VIDEO_OVERLAY_COMPOSITION),
      "negotiated %" GST_PTR_FORMAT, caps);
  gst_caps_unref (caps);

  out = gst_buffer_make_writable (out);
  meta = gst_buffer_get_video_overlay_composition_meta (out);
  fail_unless (gst_video_frame_map (&frame, &info, out, GST_MAP_READWRITE));
  pixel_yuv (&frame, boxes[0].x, boxes[0].y + 10, yuv);
  if (downstream_blends) {
    guint i;

    fail_unless (yuv[0] == GREY, "the frame was drawn on");
    fail_unless (meta != NULL);
    fail_unless_equals_int (gst_video_overlay_composition_n_rectangles
        (meta->overlay), n_upstream + 2);
    /* each box's rectangle covers its box, no more */
    for (i = 0; i < 2; i++) {
      gint rx, ry;
      guint rw, rh;

      gst_video_overlay_rectangle_get_render_rectangle
          (gst_video_overlay_composition_get_rectangle (meta->overlay,
              n_upstream + i), &rx, &ry, &rw, &rh);
      fail_unless (rx == boxes[i].x && ry == boxes[i].y
          && (gint) rw == boxes[i].w && (gint) rh == boxes[i].h,
          "box %u's rectangle: %d,%d %ux%u", i, rx, ry, rw, rh);
    }
    fail_unless (gst_video_overlay_composition_blend (meta->overlay, &frame));
  } else {
    fail_unless (meta == NULL || gst_video_overlay_composition_n_rectangles
        (meta->overlay) == n_upstream);
  }
  for (y = 0; y < HEIGHT; y++)
    for (x = 4; x < WIDTH; x++) {
      pixel_yuv (&frame, x, y, yuv);
      fail_unless ((yuv[0] != GREY) == (on_band (x, y, 3) >= 0),
          "pixel %d,%d: Y %d", x, y, yuv[0]);
    }
  gst_video_frame_unmap (&frame);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}

GST_START_TEST (test_composition_meta)
{
  check_composition_meta (TRUE, FALSE);
  check_composition_meta (TRUE, TRUE);
  check_composition_meta (FALSE, FALSE);
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
  tcase_add_test (tc, test_keypoints_drawn);
  tcase_add_test (tc, test_keypoints_coco_skeleton);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_timing_1080p_one_box);
  tcase_add_test (tc, test_yuv_in_place);
  tcase_add_test (tc, test_yuv_labels_and_masks);
  tcase_add_test (tc, test_hold_frames);
  tcase_add_test (tc, test_bad_boxes);
  tcase_add_test (tc, test_composition_meta);
  tcase_add_test (tc, test_cost_of_the_box_area_only);
  return s;
}

GST_CHECK_MAIN (visionoverlay);
