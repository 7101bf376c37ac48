/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Instance masks in the companion meta (GstVisionDetectMeta), through its
 * public API (linked: libgstvisiondetectmeta-1.0): adding and reading them,
 * bad masks refused, copies sharing the bytes, the bytes freed with the last
 * buffer, the scale transform's nearest-neighbour resampling checked pixel by
 * pixel against the definition (output pixel (X, Y) takes the input pixel
 * under its centre), gst_vision_detections_from_buffer_full()'s matching, and
 * videoscale followed by visionjson and visionoverlay (the ROI meta's params
 * are gone there: the companion's masks are drawn and written). No engine
 * needed. */
#include "vdtest.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define W 64
#define H 48
/* the mask's rectangle: partly outside the detection's box */
#define MX 5
#define MY 7
#define MW 23
#define MH 17

/* A pattern with values on both sides of 128, every row and column different. */
static guint8
pattern (guint i, guint j)
{
  return (guint8) ((i * 37 + j * 101 + (i * j) % 7) % 256);
}

static GBytes *
pattern_bytes (guint w, guint h)
{
  guint8 *data = g_malloc ((gsize) w * h);

  for (guint j = 0; j < h; j++)
    for (guint i = 0; i < w; i++)
      data[(gsize) j * w + i] = pattern (i, j);
  return g_bytes_new_take (data, (gsize) w * h);
}

static GstVisionDetection
detection (gdouble x, gdouble y, gdouble w, gdouble h, gint roi_id)
{
  GstVisionDetection d;

  memset (&d, 0, sizeof (d));
  d.x = x;
  d.y = y;
  d.w = w;
  d.h = h;
  d.confidence = 0.75;
  d.label_id = 1;
  d.label = g_quark_from_string ("ball");
  d.roi_id = roi_id;
  return d;
}

/* An RGB frame of W x H with one detection with the pattern mask and its ROI
 * meta (id 0, no params), and a second without a mask (id 1). */
static GstBuffer *
frame_with_mask (void)
{
  GstVideoInfo info;
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  GstVisionDetection d;
  GstVideoRegionOfInterestMeta *roi;
  GBytes *mask = pattern_bytes (MW, MH);

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, W, H);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_memset (buffer, 0, 0x40, GST_VIDEO_INFO_SIZE (&info));
  meta = gst_buffer_add_vision_detect_meta (buffer, W, H);
  d = detection (6.0, 8.0, 20.0, 14.0, 0);
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d, MX,
          MY, MW, MH, mask));
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "ball", 6, 8,
      20, 14);
  roi->id = 0;
  d = detection (40.0, 30.0, 10.0, 10.0, 1);
  gst_vision_detect_meta_add_detection (meta, &d);
  roi = gst_buffer_add_video_region_of_interest_meta (buffer, "ball", 40, 30,
      10, 10);
  roi->id = 1;
  g_bytes_unref (mask);
  return buffer;
}

/* The mask's bytes as a full frame (0 outside its rectangle). */
static guint8 *
full_frame (const guint8 * data, guint x, guint y, guint w, guint h,
    guint fw, guint fh)
{
  guint8 *frame = g_malloc0 ((gsize) fw * fh);

  fail_unless (x + w <= fw && y + h <= fh, "rectangle outside the frame");
  for (guint j = 0; j < h; j++)
    memcpy (frame + (gsize) (y + j) * fw + x, data + (gsize) j * w, w);
  return frame;
}

/* The pattern mask resampled from W x H to @ow x @oh by the definition, as a
 * full frame; and the tight rectangle of the output pixels whose centre falls
 * in the input rectangle. */
static guint8 *
expected_scaled (guint ow, guint oh, guint * rx, guint * ry, guint * rw,
    guint * rh)
{
  guint8 *frame = g_malloc0 ((gsize) ow * oh);
  guint x0 = ow, x1 = 0, y0 = oh, y1 = 0;

  for (guint Y = 0; Y < oh; Y++)
    for (guint X = 0; X < ow; X++) {
      guint sx = (guint) floor ((X + 0.5) * W / ow);
      guint sy = (guint) floor ((Y + 0.5) * H / oh);

      if (sx < MX || sx >= MX + MW || sy < MY || sy >= MY + MH)
        continue;
      frame[(gsize) Y * ow + X] = pattern (sx - MX, sy - MY);
      x0 = MIN (x0, X);
      x1 = MAX (x1, X + 1);
      y0 = MIN (y0, Y);
      y1 = MAX (y1, Y + 1);
    }
  *rx = x0;
  *ry = y0;
  *rw = x1 > x0 ? x1 - x0 : 0;
  *rh = y1 > y0 ? y1 - y0 : 0;
  return frame;
}

/* @meta's mask of detection 0 is the pattern resampled to @ow x @oh. */
static void
check_scaled_mask (const GstVisionDetectMeta * meta, guint ow, guint oh)
{
  guint x = 0, y = 0, w = 0, h = 0, ex, ey, ew, eh;
  const guint8 *data;
  guint8 *got, *want;
  guint n_in = 0;

  fail_unless (meta != NULL, "the detections were dropped");
  fail_unless_equals_int (meta->width, ow);
  fail_unless_equals_int (meta->height, oh);
  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta), 2);
  data = gst_vision_detect_meta_get_mask_data (meta, 0, &x, &y, &w, &h);
  fail_unless (data != NULL, "the mask was dropped");
  want = expected_scaled (ow, oh, &ex, &ey, &ew, &eh);
  fail_unless (x == ex && y == ey && w == ew && h == eh,
      "%ux%u: rectangle (%u, %u) %ux%u, expected (%u, %u) %ux%u", ow, oh, x, y,
      w, h, ex, ey, ew, eh);
  got = full_frame (data, x, y, w, h, ow, oh);
  for (guint Y = 0; Y < oh; Y++)
    for (guint X = 0; X < ow; X++) {
      fail_unless (got[(gsize) Y * ow + X] == want[(gsize) Y * ow + X],
          "%ux%u: pixel (%u, %u) is %u, expected %u", ow, oh, X, Y,
          got[(gsize) Y * ow + X], want[(gsize) Y * ow + X]);
      n_in += want[(gsize) Y * ow + X] >= 128;
    }
  fail_unless (n_in > 0);
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 1, NULL, NULL, NULL,
          NULL) == NULL);
  g_free (got);
  g_free (want);
}

GST_START_TEST (test_add_get)
{
  GstBuffer *buffer = frame_with_mask ();
  GstVisionDetectMeta *meta = gst_buffer_get_vision_detect_meta (buffer);
  GstVisionDetection d = detection (1, 1, 2, 2, 5), out;
  GBytes *mask = pattern_bytes (MW, MH), *got;
  guint x = 99, y = 99, w = 99, h = 99;
  const guint8 *data;
  gsize size = 0;

  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta), 2);
  fail_unless (gst_vision_detect_meta_get_detection (meta, 0, &out));
  fail_unless (out.x == 6.0 && out.w == 20.0 && out.roi_id == 0);
  data = gst_vision_detect_meta_get_mask_data (meta, 0, &x, &y, &w, &h);
  fail_unless (data != NULL);
  fail_unless (x == MX && y == MY && w == MW && h == MH);
  for (guint j = 0; j < MH; j++)
    for (guint i = 0; i < MW; i++)
      fail_unless_equals_int (data[j * MW + i], pattern (i, j));
  /* the bindings' accessor: the same bytes */
  x = y = w = h = 99;
  got = gst_vision_detect_meta_get_mask (meta, 0, &x, &y, &w, &h);
  fail_unless (got != NULL && g_bytes_get_data (got, &size) == data);
  fail_unless (size == MW * MH && x == MX && y == MY && w == MW && h == MH);
  g_bytes_unref (got);
  /* no mask: NULL, out arguments untouched */
  x = 99;
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 1, &x, NULL, NULL,
          NULL) == NULL && x == 99);
  fail_unless (gst_vision_detect_meta_get_mask (meta, 1, NULL, NULL, NULL,
          NULL) == NULL);
  fail_unless (gst_vision_detect_meta_get_mask (meta, 2, NULL, NULL, NULL,
          NULL) == NULL);

  /* refused: the wrong number of bytes, a rectangle outside the frame */
  fail_if (gst_vision_detect_meta_add_detection_with_mask (meta, &d, MX, MY,
          MW, MH + 1, mask));
  fail_if (gst_vision_detect_meta_add_detection_with_mask (meta, &d, W - MW + 1,
          MY, MW, MH, mask));
  fail_if (gst_vision_detect_meta_add_detection_with_mask (meta, &d, MX,
          G_MAXUINT - 2, MW, MH, mask));
  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta), 2);
  /* a NULL mask or an empty rectangle: a detection without a mask */
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d, 0, 0,
          0, 0, NULL));
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d, 0, 0,
          0, 3, mask));
  /* after detections without masks, one with: the right index */
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d,
          W - MW, H - MH, MW, MH, mask));
  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta), 5);
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 2, NULL, NULL, NULL,
          NULL) == NULL);
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 3, NULL, NULL, NULL,
          NULL) == NULL);
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 4, &x, &y, NULL,
          NULL) == g_bytes_get_data (mask, NULL));
  fail_unless (x == W - MW && y == H - MH);
  g_bytes_unref (mask);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

static gboolean mask_freed;

static void
on_mask_freed (gpointer data)
{
  mask_freed = TRUE;
  g_free (data);
}

/* A copy shares the bytes; they are freed with the last buffer holding them. */
GST_START_TEST (test_copy_and_free)
{
  GstVideoInfo info;
  GstBuffer *buffer, *copy;
  GstVisionDetectMeta *meta;
  GstVisionDetection d = detection (6, 8, 20, 14, 0);
  guint8 *data = g_malloc (MW * MH);
  GBytes *mask;
  const guint8 *shared;

  for (guint j = 0; j < MH; j++)
    for (guint i = 0; i < MW; i++)
      data[j * MW + i] = pattern (i, j);
  mask = g_bytes_new_with_free_func (data, MW * MH, on_mask_freed, data);
  mask_freed = FALSE;
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, W, H);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  meta = gst_buffer_add_vision_detect_meta (buffer, W, H);
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d, MX,
          MY, MW, MH, mask));
  g_bytes_unref (mask);
  fail_if (mask_freed);

  copy = gst_buffer_copy (buffer);
  meta = gst_buffer_get_vision_detect_meta (copy);
  fail_unless (meta != NULL);
  shared = gst_vision_detect_meta_get_mask_data (meta, 0, NULL, NULL, NULL,
      NULL);
  fail_unless (shared == data, "the copy did not share the bytes");
  gst_buffer_unref (buffer);
  fail_if (mask_freed);
  gst_buffer_unref (copy);
  fail_unless (mask_freed, "the mask was not freed with the last buffer");
}

GST_END_TEST;

static GstVisionDetectMeta *
scale_transform (GstBuffer * src, GstBuffer * dest, guint ow, guint oh)
{
  GstVideoInfo in, out;
  GstVideoMetaTransform trans = { &in, &out };
  GstMeta *meta = (GstMeta *) gst_buffer_get_vision_detect_meta (src);

  gst_video_info_set_format (&in, GST_VIDEO_FORMAT_RGB, W, H);
  gst_video_info_set_format (&out, GST_VIDEO_FORMAT_RGB, ow, oh);
  fail_unless (meta->info->transform_func (dest, meta, src,
          gst_video_meta_transform_scale_get_quark (), &trans));
  return gst_buffer_get_vision_detect_meta (dest);
}

/* The scale transform: 2x, 1.75x, 0.625x, 0.375x, checked pixel by pixel. */
GST_START_TEST (test_scale_transform)
{
  const guint sizes[][2] = { {128, 96}, {112, 84}, {40, 30}, {24, 18} };
  GstBuffer *src = frame_with_mask ();

  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++) {
    GstBuffer *dest = gst_buffer_new ();

    check_scaled_mask (scale_transform (src, dest, sizes[k][0], sizes[k][1]),
        sizes[k][0], sizes[k][1]);
    gst_buffer_unref (dest);
  }
  gst_buffer_unref (src);
}

GST_END_TEST;

/* A mask whose pixels all fall between output pixel centres: dropped, the
 * detection kept. */
GST_START_TEST (test_scale_drops_vanishing_mask)
{
  GstVideoInfo info;
  GstBuffer *src, *dest = gst_buffer_new ();
  GstVisionDetectMeta *meta;
  GstVisionDetection d = detection (10, 10, 4, 4, 0);
  GBytes *mask = pattern_bytes (1, 1);

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, W, H);
  src = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  meta = gst_buffer_add_vision_detect_meta (src, W, H);
  /* 64 -> 16: output column X samples 4 X + 2; column 13 is never sampled */
  fail_unless (gst_vision_detect_meta_add_detection_with_mask (meta, &d, 13,
          13, 1, 1, mask));
  meta = scale_transform (src, dest, 16, 12);
  fail_unless_equals_int (gst_vision_detect_meta_get_n_detections (meta), 1);
  fail_unless (gst_vision_detect_meta_get_mask_data (meta, 0, NULL, NULL, NULL,
          NULL) == NULL);
  g_bytes_unref (mask);
  gst_buffer_unref (src);
  gst_buffer_unref (dest);
}

GST_END_TEST;

/* videoscale calls the same transform (1.5x). */
GST_START_TEST (test_videoscale)
{
  GstBuffer *in = frame_with_mask ();
  GList *out = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=96,height=72",
      "video/x-raw,format=RGB,width=64,height=48,framerate=30/1", &in, 1);

  fail_unless_equals_int (g_list_length (out), 1);
  check_scaled_mask (gst_buffer_get_vision_detect_meta (out->data), 96, 72);
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
}

GST_END_TEST;

/* gst_vision_detections_from_buffer_full: the mask of the entry matched to each
 * ROI meta, resampled when the meta describes another size; none where the
 * ROI meta is not the entry's (another id or box). */
GST_START_TEST (test_from_buffer_full)
{
  GstBuffer *buffer = frame_with_mask ();
  GstVideoRegionOfInterestMeta *roi;
  GPtrArray *masks = NULL;
  GArray *dets;
  const GstVisionDetectionMask *m;
  guint8 *want, *got;
  guint ex, ey, ew, eh;

  dets = gst_vision_detections_from_buffer_full (buffer, W, H, &masks);
  fail_unless_equals_int (dets->len, 2);
  fail_unless_equals_int (masks->len, 2);
  m = g_ptr_array_index (masks, 0);
  fail_unless (m != NULL && m->x == MX && m->y == MY && m->width == MW
      && m->height == MH);
  fail_unless (g_bytes_get_data (m->data, NULL) ==
      gst_vision_detect_meta_get_mask_data (gst_buffer_get_vision_detect_meta
          (buffer), 0, NULL, NULL, NULL, NULL));
  fail_unless (gst_vision_detection_mask_get_data (m) == m->data);
  fail_unless_equals_int (gst_vision_detection_mask_at (m, MX, MY),
      pattern (0, 0) >= 128);
  fail_unless_equals_int (gst_vision_detection_mask_at (m, MX + 3, MY + 2),
      pattern (3, 2) >= 128);
  fail_if (gst_vision_detection_mask_at (m, MX - 1, MY));
  fail_if (gst_vision_detection_mask_at (m, MX + MW, MY));
  fail_unless (g_ptr_array_index (masks, 1) == NULL);
  g_array_unref (dets);
  g_ptr_array_unref (masks);

  /* the frame (and its ROI metas) at 2x, the meta still describing 1x: the
   * mask resampled as the scale transform does */
  for (guint id = 0; id < 2; id++) {
    roi = gst_buffer_get_video_region_of_interest_meta_id (buffer, id);
    roi->x *= 2;
    roi->y *= 2;
    roi->w *= 2;
    roi->h *= 2;
  }
  dets = gst_vision_detections_from_buffer_full (buffer, 2 * W, 2 * H, &masks);
  m = g_ptr_array_index (masks, 0);
  fail_unless (m != NULL);
  want = expected_scaled (2 * W, 2 * H, &ex, &ey, &ew, &eh);
  fail_unless (m->x == ex && m->y == ey && m->width == ew && m->height == eh);
  got = full_frame (g_bytes_get_data (m->data, NULL), m->x, m->y, m->width,
      m->height, 2 * W, 2 * H);
  fail_unless (memcmp (got, want, 4 * W * H) == 0);
  g_free (got);
  g_free (want);
  g_array_unref (dets);
  g_ptr_array_unref (masks);

  /* the ROI meta of id 0 moved far from the entry: no longer its detection */
  roi = gst_buffer_get_video_region_of_interest_meta_id (buffer, 0);
  roi->x = 80;
  roi->y = 60;
  dets = gst_vision_detections_from_buffer_full (buffer, 2 * W, 2 * H, &masks);
  fail_unless_equals_int (masks->len, dets->len);
  for (guint i = 0; i < masks->len; i++)
    fail_unless (g_ptr_array_index (masks, i) == NULL);
  g_array_unref (dets);
  g_ptr_array_unref (masks);
  gst_buffer_unref (buffer);
}

GST_END_TEST;

/* videoscale ! visionjson: the ROI meta lost its params, the segmentation is
 * the companion's resampled mask (>= 128), the other detection has none. */
GST_START_TEST (test_json_after_videoscale)
{
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, "out.jsonl", NULL);
  gchar *description = g_strdup_printf ("videoscale ! capsfilter "
      "caps=video/x-raw,width=112,height=84 ! visionjson location=\"%s\"",
      path);
  GstBuffer *in = frame_with_mask ();
  JsonParser *parser = json_parser_new ();
  JsonArray *objects;
  JsonObject *o;
  gchar *contents = NULL;
  guint8 *want, *got;
  guint ex, ey, ew, eh;
  GList *out;

  out = vdtest_run_pipeline (description, "video/x-raw,format=RGB,width=64,"
      "height=48,framerate=30/1", &in, 1);
  fail_unless_equals_int (g_list_length (out), 1);
  fail_unless (gst_video_region_of_interest_meta_get_param
      (gst_buffer_get_video_region_of_interest_meta_id (out->data, 0),
          "mask_rcnn") == NULL);
  fail_unless (g_file_get_contents (path, &contents, NULL, NULL));
  fail_unless (json_parser_load_from_data (parser, contents, -1, NULL));
  objects = json_object_get_array_member (json_node_get_object
      (json_parser_get_root (parser)), "objects");
  fail_unless_equals_int (json_array_get_length (objects), 2);
  o = json_array_get_object_element (objects, 0);
  fail_unless (json_object_has_member (o, "segmentation"),
      "no segmentation after videoscale");
  got = vdtest_decode_rle (json_object_get_object_member (o, "segmentation"),
      112, 84);
  want = expected_scaled (112, 84, &ex, &ey, &ew, &eh);
  for (guint i = 0; i < 112 * 84; i++)
    fail_unless_equals_int (got[i], want[i] >= 128);
  fail_if (json_object_has_member (json_array_get_object_element (objects, 1),
          "segmentation"));

  g_free (got);
  g_free (want);
  g_list_free_full (out, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
  g_object_unref (parser);
  g_free (contents);
  g_unlink (path);
  g_rmdir (dir);
  g_free (path);
  g_free (description);
  g_free (dir);
}

GST_END_TEST;

/* videoscale ! visionoverlay (2x): with masks the pixels of the companion's
 * resampled mask (>= 128) change, outside the box's one-pixel outline, and
 * nothing else does. */
GST_START_TEST (test_overlay_after_videoscale)
{
  const gchar *caps =
      "video/x-raw,format=RGB,width=64,height=48,framerate=30/1";
  GstBuffer *in = frame_with_mask ();
  GList *with = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=128,height=96 ! visionoverlay text=none "
      "line-width=1 masks=true", caps, &in, 1);
  GList *without = vdtest_run_pipeline ("videoscale ! "
      "capsfilter caps=video/x-raw,width=128,height=96 ! visionoverlay text=none "
      "line-width=1 masks=false", caps, &in, 1);
  guint8 *a, *b, *want;
  guint ex, ey, ew, eh, n_drawn = 0;
  gint stride;
  /* the boxes at 2x: (12, 16) 40x28 and (80, 60) 20x20 */
  const guint boxes[2][4] = { {12, 16, 40, 28}, {80, 60, 20, 20} };

  fail_unless_equals_int (g_list_length (with), 1);
  fail_unless_equals_int (g_list_length (without), 1);
  a = vdtest_frame_bytes (with->data, 128, 96, &stride);
  b = vdtest_frame_bytes (without->data, 128, 96, &stride);
  want = expected_scaled (128, 96, &ex, &ey, &ew, &eh);
  for (guint y = 0; y < 96; y++)
    for (guint x = 0; x < 128; x++) {
      gboolean outline = FALSE, differs;

      for (guint k = 0; k < 2; k++) {
        gboolean in_box = x >= boxes[k][0] && x < boxes[k][0] + boxes[k][2]
            && y >= boxes[k][1] && y < boxes[k][1] + boxes[k][3];

        outline |= in_box && (x == boxes[k][0] || y == boxes[k][1]
            || x == boxes[k][0] + boxes[k][2] - 1
            || y == boxes[k][1] + boxes[k][3] - 1);
      }
      differs = memcmp (a + (gsize) y * stride + 3 * x,
          b + (gsize) y * stride + 3 * x, 3) != 0;
      if (outline) {
        fail_if (differs, "(%u, %u): the outline changed with masks", x, y);
        continue;
      }
      fail_unless_equals_int (differs, want[y * 128 + x] >= 128);
      n_drawn += differs;
    }
  fail_unless (n_drawn > 0);

  g_free (a);
  g_free (b);
  g_free (want);
  g_list_free_full (with, (GDestroyNotify) gst_buffer_unref);
  g_list_free_full (without, (GDestroyNotify) gst_buffer_unref);
  gst_buffer_unref (in);
}

GST_END_TEST;

static Suite *
meta_masks_suite (void)
{
  Suite *s = suite_create ("meta-masks");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_add_get);
  tcase_add_test (tc, test_copy_and_free);
  tcase_add_test (tc, test_scale_transform);
  tcase_add_test (tc, test_scale_drops_vanishing_mask);
  tcase_add_test (tc, test_videoscale);
  tcase_add_test (tc, test_from_buffer_full);
  tcase_add_test (tc, test_json_after_videoscale);
  tcase_add_test (tc, test_overlay_after_videoscale);
  return s;
}

GST_CHECK_MAIN (meta_masks);
