/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect with a Mask R-CNN (the engine tests' tiny mask fixture,
 * $VD_TEST_MASK_MODEL, engine/MASKRCNN.md): every ROI meta carries DL Streamer's
 * instance-segmentation param ("mask_rcnn": format "segmentation_mask",
 * precision FP32, dims [h, w], the probabilities in "data_buffer") over its
 * rectangle, and its values are the engine's mask for the same frame
 * (vd-detect --json, each byte / 255, 0 outside the engine's rectangle). A model
 * without masks ($VD_TEST_SOAK_MODEL) adds no such param. Built against
 * GStreamer >= 1.26, each mask is also an instance-segmentation entry of the
 * analytics relation meta, related to its detection's object-detection
 * entry. */
#include "vdtest.h"
#include "vd_config.h"

#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define W 64
#define H 48

static guint8 *
frame_pixels (void)
{
  guint8 *pixels = g_malloc ((gsize) W * H * 3);
  guint32 state = 99;

  for (gint i = 0; i < W * H * 3; i++) {
    state = state * 1664525u + 1013904223u;
    pixels[i] = (guint8) ((i * 7 % 256) / 2 + (state >> 26));
  }
  return pixels;
}

static gchar *
write_ppm (const guint8 * pixels)
{
  gchar *path = g_build_filename (g_getenv ("VD_TEST_WORKDIR"),
      "mask-frame.ppm", NULL);
  GString *ppm = g_string_new (NULL);

  g_string_append_printf (ppm, "P6\n%d %d\n255\n", W, H);
  g_string_append_len (ppm, (const gchar *) pixels, (gssize) W * H * 3);
  fail_unless (g_file_set_contents (path, ppm->str, ppm->len, NULL));
  g_string_free (ppm, TRUE);
  return path;
}

/* vd-detect --json's detections of @ppm (every candidate: threshold 0). */
static JsonParser *
engine_reference (const gchar * model, const gchar * ppm, JsonArray ** dets)
{
  const gchar *argv[] = { g_getenv ("VD_TEST_VD_DETECT"), "--model", model,
    "--device", "cpu", "--threads", "2", "--threshold", "0", "--json", ppm,
    NULL
  };
  gchar *out = NULL;
  gint status = 0;
  JsonParser *parser = json_parser_new ();

  fail_unless (g_spawn_sync (NULL, (gchar **) argv, NULL, 0, NULL, NULL, &out,
          NULL, &status, NULL));
  fail_unless (g_spawn_check_wait_status (status, NULL));
  fail_unless (json_parser_load_from_data (parser, out, -1, NULL));
  *dets = json_object_get_array_member (json_node_get_object
      (json_parser_get_root (parser)), "detections");
  g_free (out);
  return parser;
}

/* The mask model ($VD_TEST_MASK_MODEL), the test frame and vd-detect's
 * detections of it (written as a PPM): what the mask tests compare with. */
typedef struct
{
  const gchar *model;
  guint8 *pixels;
  gchar *ppm;
  JsonParser *parser;
  JsonArray *dets;
} MaskReference;

static void
mask_reference_init (MaskReference * ref)
{
  ref->model = g_getenv ("VD_TEST_MASK_MODEL");
  ref->pixels = frame_pixels ();
  ref->ppm = write_ppm (ref->pixels);
  ref->dets = NULL;
  fail_unless (ref->model != NULL);
  ref->parser = engine_reference (ref->model, ref->ppm, &ref->dets);
}

static void
mask_reference_clear (MaskReference * ref)
{
  g_object_unref (ref->parser);
  g_free (ref->ppm);
  g_free (ref->pixels);
}

/* The output buffer of "visiondetect model=@model threads=2 threshold=0
 * device=cpu [! @tail]" for one W x H RGB frame of @pixels. */
static GstBuffer *
detect_through (const gchar * model, const guint8 * pixels, const gchar * tail)
{
  gchar *launch = g_strdup_printf ("visiondetect model=\"%s\" threads=2 "
      "threshold=0 device=cpu%s%s", model, tail ? " ! " : "", tail ? tail : "");
  GstHarness *h = gst_harness_new_parse (launch);
  GstBuffer *out;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=64,"
      "height=48,framerate=30/1");
  fail_unless_equals_int (gst_harness_push (h,
          gst_buffer_new_memdup (pixels, (gsize) W * H * 3)), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  gst_harness_teardown (h);
  g_free (launch);
  return out;
}

static GstBuffer *
detect_frame (const gchar * model, const guint8 * pixels)
{
  return detect_through (model, pixels, NULL);
}

GST_START_TEST (test_roi_mask_params)
{
  MaskReference truth;
  GstBuffer *out;
  gpointer state = NULL;
  GstMeta *meta;
  guint n = 0, n_masked_pixels = 0, n_empty = 0;

  mask_reference_init (&truth);
  fail_unless (json_array_get_length (truth.dets) > 0);
  out = detect_frame (truth.model, truth.pixels);

  while ((meta = gst_buffer_iterate_meta_filtered (out, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
    GstVideoRegionOfInterestMeta *roi = (GstVideoRegionOfInterestMeta *) meta;
    GstStructure *s = gst_video_region_of_interest_meta_get_param (roi,
        "mask_rcnn");
    JsonObject *ref, *rm;
    const GValue *dims;
    GVariant *data = NULL;
    gint precision = 0;
    const gfloat *probs;
    gsize size = 0;
    gint mx, my, mw, mh;
    guchar *bytes;
    gsize n_bytes = 0;

    fail_unless (n < json_array_get_length (truth.dets));
    ref = json_array_get_object_element (truth.dets, n);
    rm = json_object_get_object_member (ref, "mask");
    fail_unless (rm != NULL);
    if (roi->w == 0 || roi->h == 0) {
      /* a box under half a pixel: an empty rectangle, nothing to cover */
      fail_unless (s == NULL);
      n++;
      n_empty++;
      continue;
    }
    fail_unless (s != NULL, "ROI %u has no mask_rcnn param", n);
    fail_unless_equals_string (gst_structure_get_string (s, "format"),
        "segmentation_mask");
    fail_unless (gst_structure_get_int (s, "precision", &precision));
    fail_unless_equals_int (precision, 10);
    /* gst_structure_set_array's GST_TYPE_ARRAY, read back as DL Streamer does */
    dims = gst_structure_get_value (s, "dims");
    fail_unless (dims != NULL && GST_VALUE_HOLDS_ARRAY (dims));
    G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
    {
      GValueArray *a = NULL;
      fail_unless (gst_structure_get_array (s, "dims", &a));
      fail_unless_equals_int (a->n_values, 2);
      fail_unless_equals_int (g_value_get_uint (&a->values[0]), roi->h);
      fail_unless_equals_int (g_value_get_uint (&a->values[1]), roi->w);
      g_value_array_free (a);
    }
    G_GNUC_END_IGNORE_DEPRECATIONS;
    fail_unless (gst_structure_get (s, "data_buffer", G_TYPE_VARIANT, &data,
            NULL));
    probs = g_variant_get_fixed_array (data, &size, 1);
    fail_unless_equals_int (size, (gsize) roi->w * roi->h * sizeof (gfloat));

    /* the engine's mask over the ROI's rectangle */
    mx = json_object_get_int_member (rm, "x");
    my = json_object_get_int_member (rm, "y");
    mw = json_object_get_int_member (rm, "width");
    mh = json_object_get_int_member (rm, "height");
    bytes = g_base64_decode (json_object_get_string_member (rm, "data"),
        &n_bytes);
    fail_unless_equals_int (n_bytes, (gsize) mw * mh);
    for (guint y = 0; y < roi->h; y++)
      for (guint x = 0; x < roi->w; x++) {
        gint fx = (gint) (roi->x + x) - mx, fy = (gint) (roi->y + y) - my;
        gfloat expected = (fx >= 0 && fx < mw && fy >= 0 && fy < mh)
            ? bytes[(gsize) fy * mw + fx] / 255.0f : 0.0f;
        fail_unless (probs[(gsize) y * roi->w + x] == expected,
            "ROI %u pixel (%u, %u): %g, the engine's %g", n, x, y,
            probs[(gsize) y * roi->w + x], expected);
        n_masked_pixels += expected >= 0.5f;
      }
    g_free (bytes);
    g_variant_unref (data);
    n++;
  }
  fail_unless_equals_int (n, json_array_get_length (truth.dets));
  fail_unless (n_empty < n);
  /* not all empty: the comparison saw both sides of 0.5 */
  fail_unless (n_masked_pixels > 0);

  gst_buffer_unref (out);
  mask_reference_clear (&truth);
}

GST_END_TEST;

/* The engine's masks of @dets (vd-detect --json) as full W x H frames of
 * bytes, one per detection (0 outside each rectangle). */
static guint8 **
engine_masks (JsonArray * dets)
{
  guint n = json_array_get_length (dets);
  guint8 **frames = g_new0 (guint8 *, n + 1);

  for (guint i = 0; i < n; i++) {
    JsonObject *rm = json_object_get_object_member
        (json_array_get_object_element (dets, i), "mask");
    gint mx = json_object_get_int_member (rm, "x");
    gint my = json_object_get_int_member (rm, "y");
    gint mw = json_object_get_int_member (rm, "width");
    gint mh = json_object_get_int_member (rm, "height");
    gsize n_bytes = 0;
    guchar *bytes = g_base64_decode (json_object_get_string_member (rm,
            "data"), &n_bytes);

    fail_unless_equals_int (n_bytes, (gsize) mw * mh);
    fail_unless (mx >= 0 && my >= 0 && mx + mw <= W && my + mh <= H);
    frames[i] = g_malloc0 ((gsize) W * H);
    for (gint y = 0; y < mh; y++)
      memcpy (frames[i] + (gsize) (my + y) * W + mx, bytes + (gsize) y * mw,
          mw);
    g_free (bytes);
  }
  return frames;
}

/* Whether output pixel (@x, @y) of a W x H frame scaled to @ow x @oh is in
 * the object of @mask (a full frame): the input pixel under its centre has
 * a byte >= 128. */
static gboolean
scaled_mask_at (const guint8 * mask, guint x, guint y, guint ow, guint oh)
{
  guint sx = (guint) floor ((x + 0.5) * W / ow);
  guint sy = (guint) floor ((y + 0.5) * H / oh);

  return mask[(gsize) sy * W + sx] >= 128;
}

/* The companion meta carries each detection's mask: the engine's rectangle and
 * bytes, exactly. */
GST_START_TEST (test_companion_masks)
{
  MaskReference truth;
  GstBuffer *out;
  GstVisionDetectMeta *meta;
  guint n_masks = 0;

  mask_reference_init (&truth);
  out = detect_frame (truth.model, truth.pixels);
  meta = gst_buffer_get_vision_detect_meta (out);
  fail_unless (meta != NULL);
  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta),
      json_array_get_length (truth.dets));
  for (guint i = 0; i < json_array_get_length (truth.dets); i++) {
    JsonObject *rm = json_object_get_object_member
        (json_array_get_object_element (truth.dets, i), "mask");
    guint mw = json_object_get_int_member (rm, "width");
    guint mh = json_object_get_int_member (rm, "height");
    guint x = 0, y = 0, w = 0, h = 0;
    const guint8 *data = gst_vision_detect_meta_get_mask_data (meta, i, &x,
        &y, &w, &h);
    gsize n_bytes = 0;
    guchar *bytes;

    if (mw == 0 || mh == 0) {
      fail_unless (data == NULL);
      continue;
    }
    fail_unless (data != NULL, "detection %u has no mask", i);
    fail_unless_equals_int (x, json_object_get_int_member (rm, "x"));
    fail_unless_equals_int (y, json_object_get_int_member (rm, "y"));
    fail_unless_equals_int (w, mw);
    fail_unless_equals_int (h, mh);
    bytes = g_base64_decode (json_object_get_string_member (rm, "data"),
        &n_bytes);
    fail_unless (n_bytes == (gsize) w * h && memcmp (bytes, data, n_bytes) == 0,
        "detection %u: not the engine's mask", i);
    g_free (bytes);
    n_masks++;
  }
  fail_unless (n_masks > 0);

  gst_buffer_unref (out);
  mask_reference_clear (&truth);
}

GST_END_TEST;

static GstBuffer *
run_after_videoscale (const gchar * model, const guint8 * pixels, guint ow,
    guint oh, const gchar * tail)
{
  gchar *chain = g_strdup_printf ("videoscale ! capsfilter caps=video/x-raw,"
      "width=%u,height=%u ! %s", ow, oh, tail);
  GstBuffer *out = detect_through (model, pixels, chain);

  g_free (chain);
  return out;
}

/* visiondetect ! videoscale (1.5x) ! visionjson: the ROI metas lost their
 * masks, the JSON still has each detection's segmentation: the engine's mask
 * resampled by nearest neighbour, >= 128. */
GST_START_TEST (test_json_after_videoscale)
{
  MaskReference truth;
  const guint ow = 96, oh = 72;
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, "out.jsonl", NULL);
  gchar *tail = g_strdup_printf ("visionjson location=\"%s\"", path);
  JsonArray *objects;
  JsonParser *json = json_parser_new ();
  guint8 **masks;
  gchar *contents = NULL;
  GstBuffer *out;
  gpointer state = NULL;
  GstMeta *meta;
  guint n_in = 0, n_segmented = 0;

  mask_reference_init (&truth);
  masks = engine_masks (truth.dets);
  out = run_after_videoscale (truth.model, truth.pixels, ow, oh, tail);
  while ((meta = gst_buffer_iterate_meta_filtered (out, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)))
    fail_unless (gst_video_region_of_interest_meta_get_param (
            (GstVideoRegionOfInterestMeta *) meta, "mask_rcnn") == NULL,
        "a ROI meta kept its mask through videoscale: nothing to check");

  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  fail_unless (json_parser_load_from_data (json, contents, -1, NULL));
  objects = json_object_get_array_member (json_node_get_object
      (json_parser_get_root (json)), "objects");
  fail_unless_equals_int (json_array_get_length (objects),
      json_array_get_length (truth.dets));
  for (guint i = 0; i < json_array_get_length (objects); i++) {
    JsonObject *o = json_array_get_object_element (objects, i);
    gboolean any = FALSE;
    guint8 *frame;

    /* the JSON's objects are the ROI metas, in the engine's order */
    fail_unless_equals_int (json_object_get_int_member (o, "id"), i);
    for (guint y = 0; y < oh && !any; y++)
      for (guint x = 0; x < ow && !any; x++)
        any = scaled_mask_at (masks[i], x, y, ow, oh);
    if (!json_object_has_member (o, "segmentation")) {
      /* only a mask with no pixel left at the new size */
      fail_if (any, "object %u lost its segmentation", i);
      continue;
    }
    frame = vdtest_decode_rle (json_object_get_object_member (o,
            "segmentation"), ow, oh);
    for (guint y = 0; y < oh; y++)
      for (guint x = 0; x < ow; x++) {
        gboolean want = scaled_mask_at (masks[i], x, y, ow, oh);

        fail_unless_equals_int (frame[y * ow + x], want);
        n_in += want;
      }
    g_free (frame);
    n_segmented++;
  }
  fail_unless (n_segmented > 0 && n_in > 0);

  gst_buffer_unref (out);
  g_strfreev ((gchar **) masks);
  g_object_unref (json);
  g_free (contents);
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (tail);
  g_free (dir);
  mask_reference_clear (&truth);
}

GST_END_TEST;

/* visiondetect ! videoscale (2x) ! visionoverlay: with masks=true against
 * masks=false, the pixels that change are exactly those of the engine's masks
 * resampled (>= 128), except under the boxes' one-pixel outlines (drawn over
 * the masks in both). */
GST_START_TEST (test_overlay_after_videoscale)
{
  MaskReference truth;
  const guint ow = 128, oh = 96;
  guint8 **masks, *a, *b, *outline;
  GstBuffer *with, *without;
  GArray *boxes;
  gint stride;
  guint n_drawn = 0, n_union = 0;

  mask_reference_init (&truth);
  masks = engine_masks (truth.dets);
  with = run_after_videoscale (truth.model, truth.pixels, ow, oh,
      "visionoverlay text=none line-width=1 masks=true");
  without = run_after_videoscale (truth.model, truth.pixels, ow, oh,
      "visionoverlay text=none line-width=1 masks=false");
  a = vdtest_frame_bytes (with, ow, oh, &stride);
  b = vdtest_frame_bytes (without, ow, oh, &stride);

  /* the boxes as visionoverlay rounds them; a box of 2 pixels or less across
   * is filled */
  outline = g_malloc0 ((gsize) ow * oh);
  boxes = gst_vision_detections_from_buffer (with, ow, oh);
  for (guint i = 0; i < boxes->len; i++) {
    const GstVisionDetection *d = &g_array_index (boxes, GstVisionDetection, i);
    gint x0 = CLAMP (floor (d->x + 0.5), 0, ow);
    gint y0 = CLAMP (floor (d->y + 0.5), 0, oh);
    gint x1 = CLAMP (floor (d->x + d->w + 0.5), x0, ow);
    gint y1 = CLAMP (floor (d->y + d->h + 0.5), y0, oh);
    gboolean filled = x1 - x0 <= 2 || y1 - y0 <= 2;

    for (gint y = y0; y < y1; y++)
      for (gint x = x0; x < x1; x++)
        if (filled || x == x0 || y == y0 || x == x1 - 1 || y == y1 - 1)
          outline[y * ow + x] = 1;
  }
  g_array_unref (boxes);

  for (guint y = 0; y < oh; y++)
    for (guint x = 0; x < ow; x++) {
      gboolean in_mask = FALSE, differs;

      for (guint i = 0; masks[i] != NULL && !in_mask; i++)
        in_mask = scaled_mask_at (masks[i], x, y, ow, oh);
      differs = memcmp (a + (gsize) y * stride + 3 * x,
          b + (gsize) y * stride + 3 * x, 3) != 0;
      if (outline[y * ow + x]) {
        fail_if (differs, "(%u, %u): an outline changed with masks", x, y);
        continue;
      }
      fail_unless (differs == in_mask, "(%u, %u): %s, but %s", x, y,
          in_mask ? "in a mask" : "in no mask", differs ? "drawn" : "not drawn");
      n_drawn += differs;
      n_union += in_mask;
    }
  fail_unless (n_drawn > 0);
  GST_INFO ("%u mask pixels drawn", n_drawn);

  g_free (outline);
  g_free (a);
  g_free (b);
  gst_buffer_unref (with);
  gst_buffer_unref (without);
  g_strfreev ((gchar **) masks);
  mask_reference_clear (&truth);
}

GST_END_TEST;

GST_START_TEST (test_no_mask_without_mask_head)
{
  const gchar *model = g_getenv ("VD_TEST_SOAK_MODEL");
  guint8 *pixels = frame_pixels ();
  GstBuffer *out;
  gpointer state = NULL;
  GstMeta *meta;
  guint n = 0;

  fail_unless (model != NULL);
  out = detect_frame (model, pixels);
  while ((meta = gst_buffer_iterate_meta_filtered (out, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
    fail_unless (gst_video_region_of_interest_meta_get_param (
            (GstVideoRegionOfInterestMeta *) meta, "mask_rcnn") == NULL);
    n++;
  }
  fail_unless (n > 0);
  gst_buffer_unref (out);
  g_free (pixels);
}

GST_END_TEST;

#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
/* Each mask is a GstAnalyticsSegmentationMtd related both ways to the
 * object-detection entry the ROI meta's id names: the engine's rectangle,
 * a GRAY8 buffer with a video meta of its size, 1 where the engine's byte is
 * >= 128 (torchvision's p >= 0.5), 0 elsewhere; regions 0 and 1. */
GST_START_TEST (test_analytics_segmentation)
{
  const gchar *model = g_getenv ("VD_TEST_MASK_MODEL");
  guint8 *pixels = frame_pixels ();
  GstBuffer *out;
  GstVisionDetectMeta *meta;
  GstAnalyticsRelationMeta *relations;
  GstAnalyticsMtd any;
  gpointer state = NULL;
  guint n_masks = 0, n_entries = 0, n_set = 0, n_clear = 0;

  fail_unless (model != NULL);
  out = detect_frame (model, pixels);
  meta = gst_buffer_get_vision_detect_meta (out);
  relations = gst_buffer_get_analytics_relation_meta (out);
  fail_unless (meta != NULL && relations != NULL);
  for (guint i = 0; i < gst_vision_detect_meta_get_n_detections (meta); i++) {
    const GstVisionDetection *d =
        &g_array_index (meta->detections, GstVisionDetection, i);
    guint x = 0, y = 0, w = 0, h = 0;
    const guint8 *data = gst_vision_detect_meta_get_mask_data (meta, i, &x,
        &y, &w, &h);
    GstAnalyticsODMtd od;
    GstAnalyticsSegmentationMtd seg, back;
    GstVideoMeta *vmeta;
    GstBuffer *mask;
    GstMapInfo map;
    gint sx, sy;
    guint sw, sh;
    gpointer rel_state = NULL;
    gsize index;

    fail_unless (gst_analytics_relation_meta_get_od_mtd (relations,
            d->roi_id, &od), "detection %u: no object-detection entry", i);
    if (data == NULL) {
      fail_if (gst_analytics_relation_meta_get_direct_related (relations,
              od.id, GST_ANALYTICS_REL_TYPE_RELATE_TO,
              gst_analytics_segmentation_mtd_get_mtd_type (), &rel_state,
              &seg));
      continue;
    }
    n_masks++;
    fail_unless (gst_analytics_relation_meta_get_direct_related (relations,
            od.id, GST_ANALYTICS_REL_TYPE_RELATE_TO,
            gst_analytics_segmentation_mtd_get_mtd_type (), &rel_state, &seg),
        "detection %u: no segmentation entry", i);
    rel_state = NULL;
    fail_unless (gst_analytics_relation_meta_get_direct_related (relations,
            seg.id, GST_ANALYTICS_REL_TYPE_RELATE_TO,
            gst_analytics_od_mtd_get_mtd_type (), &rel_state, &back));
    fail_unless_equals_int (back.id, od.id);
    fail_unless_equals_int (gst_analytics_segmentation_mtd_get_region_count
        (&seg), 2);
    fail_unless_equals_int (gst_analytics_segmentation_mtd_get_region_id (&seg,
            0), 0);
    fail_unless_equals_int (gst_analytics_segmentation_mtd_get_region_id (&seg,
            1), 1);
    fail_unless (gst_analytics_segmentation_mtd_get_region_index (&seg, &index,
            1) && index == 1);

    mask = gst_analytics_segmentation_mtd_get_mask (&seg, &sx, &sy, &sw, &sh);
    fail_unless (mask != NULL);
    fail_unless (sx == (gint) x && sy == (gint) y && sw == w && sh == h,
        "detection %u: entry at %d,%d %ux%u, the mask at %u,%u %ux%u", i, sx,
        sy, sw, sh, x, y, w, h);
    vmeta = gst_buffer_get_video_meta (mask);
    fail_unless (vmeta != NULL);
    fail_unless_equals_int (vmeta->format, GST_VIDEO_FORMAT_GRAY8);
    fail_unless_equals_int (vmeta->width, w);
    fail_unless_equals_int (vmeta->height, h);
    /* packed rows, as the buffer holds them */
    fail_unless_equals_int (vmeta->n_planes, 1);
    fail_unless_equals_int (vmeta->offset[0], 0);
    fail_unless_equals_int (vmeta->stride[0], w);
    fail_unless (gst_buffer_map (mask, &map, GST_MAP_READ));
    fail_unless_equals_int (map.size, (gsize) w * h);
    for (gsize p = 0; p < map.size; p++) {
      fail_unless_equals_int (map.data[p], data[p] >= 128 ? 1 : 0);
      if (map.data[p])
        n_set++;
      else
        n_clear++;
    }
    gst_buffer_unmap (mask, &map);
    gst_buffer_unref (mask);
  }
  while (gst_analytics_relation_meta_iterate (relations, &state,
          gst_analytics_segmentation_mtd_get_mtd_type (), &any))
    n_entries++;
  fail_unless (n_masks > 0);
  fail_unless_equals_int (n_entries, n_masks);
  /* both values occur: a threshold at the wrong place would show */
  fail_unless (n_set > 0 && n_clear > 0);

  gst_buffer_unref (out);
  g_free (pixels);
}

GST_END_TEST;
#endif

static Suite *
visiondetect_masks_suite (void)
{
  Suite *s = suite_create ("visiondetect-masks");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_roi_mask_params);
  tcase_add_test (tc, test_companion_masks);
  tcase_add_test (tc, test_json_after_videoscale);
  tcase_add_test (tc, test_overlay_after_videoscale);
  tcase_add_test (tc, test_no_mask_without_mask_head);
#ifdef HAVE_GST_ANALYTICS_SEGMENTATION
  tcase_add_test (tc, test_analytics_segmentation);
#endif
  return s;
}

GST_CHECK_MAIN (visiondetect_masks);
