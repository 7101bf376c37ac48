/* visiondetect with a Mask R-CNN (the engine tests' tiny mask fixture,
 * $VD_TEST_MASK_MODEL, engine/MASKRCNN.md): every ROI meta carries DL Streamer's
 * instance-segmentation param ("mask_rcnn": format "segmentation_mask",
 * precision FP32, dims [h, w], the probabilities in "data_buffer") over its
 * rectangle, and its values are the engine's mask for the same frame
 * (vd-detect --json, each byte / 255, 0 outside the engine's rectangle). A model
 * without masks ($VD_TEST_SOAK_MODEL) adds no such param. */
#include "vdtest.h"

#include <json-glib/json-glib.h>
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

static GstBuffer *
detect_frame (const gchar * model, const guint8 * pixels)
{
  gchar *launch = g_strdup_printf ("visiondetect model=\"%s\" threads=2 "
      "threshold=0 device=cpu", model);
  GstHarness *h = gst_harness_new_parse (launch);
  GstBuffer *in, *out;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=64,"
      "height=48,framerate=30/1");
  in = gst_buffer_new_memdup (pixels, (gsize) W * H * 3);
  fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  gst_harness_teardown (h);
  g_free (launch);
  return out;
}

GST_START_TEST (test_roi_mask_params)
{
  const gchar *model = g_getenv ("VD_TEST_MASK_MODEL");
  guint8 *pixels = frame_pixels ();
  gchar *ppm = write_ppm (pixels);
  JsonArray *dets = NULL;
  JsonParser *parser;
  GstBuffer *out;
  gpointer state = NULL;
  GstMeta *meta;
  guint n = 0, n_masked_pixels = 0, n_empty = 0;

  fail_unless (model != NULL);
  parser = engine_reference (model, ppm, &dets);
  fail_unless (json_array_get_length (dets) > 0);
  out = detect_frame (model, pixels);

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

    fail_unless (n < json_array_get_length (dets));
    ref = json_array_get_object_element (dets, n);
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
  fail_unless_equals_int (n, json_array_get_length (dets));
  fail_unless (n_empty < n);
  /* not all empty: the comparison saw both sides of 0.5 */
  fail_unless (n_masked_pixels > 0);

  gst_buffer_unref (out);
  g_object_unref (parser);
  g_free (ppm);
  g_free (pixels);
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

static Suite *
visiondetect_masks_suite (void)
{
  Suite *s = suite_create ("visiondetect-masks");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_roi_mask_params);
  tcase_add_test (tc, test_no_mask_without_mask_head);
  return s;
}

GST_CHECK_MAIN (visiondetect_masks);
