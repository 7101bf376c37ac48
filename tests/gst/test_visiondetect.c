/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect element tests (GstHarness), with the calibrated test model and
 * frames from make_test_model.py. vd-detect, the engine's own command-line tool,
 * is the oracle: the element must hand the engine the frame exactly as it is and
 * turn the engine's detections into metadata without loss. */
#include "vdtest.h"
#include "vd_config.h"
#include "../../gst/gstvisiondetect.h"
#ifdef HAVE_GST_ANALYTICS
#include <gst/analytics/analytics.h>
#endif
/* test only: the engine's documented YUV conversion, to build the reference */
#include "vd_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

/* Same library, same input, same thread count: the element and vd-detect run the
 * very same arithmetic, so boxes and scores agree to float rounding of the JSON
 * printing (vd-detect prints 17 significant digits; the meta stores doubles made
 * from the engine's floats). 1e-3 px and 1e-5 in score are far below any real
 * difference (a wrong stride or channel order changes boxes by pixels). */
#define BOX_TOL 1e-3
#define SCORE_TOL 1e-5
#define THREADS 2


static GArray *
reference (gint frame, gdouble threshold)
{
  gchar *name = g_strdup_printf ("frame-%d.ppm", frame);
  gchar *path = vdtest_fixture (name);
  gchar *model = vdtest_model ();
  GArray *ref = vdtest_vd_detect (model, path, threshold, THREADS);

  g_free (model);
  g_free (path);
  g_free (name);
  return ref;
}

static GstBuffer *
push_pull (GstHarness * h, GstBuffer * buffer)
{
  GstBuffer *out;

  fail_unless_equals_int (gst_harness_push (h, gst_buffer_ref (buffer)),
      GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  return out;
}

/* The output of a GAP copy of @frame, visiondetect's interval set to 1 first
 * (a GAP buffer is never inferred, whatever the interval). */
static GstBuffer *
push_gap (GstHarness * h, GstBuffer * frame)
{
  GstBuffer *gap, *out;

  g_object_set (gst_harness_find_element (h, "visiondetect"), "interval", 1,
      NULL);
  gap = gst_buffer_copy (frame);
  GST_BUFFER_FLAG_SET (gap, GST_BUFFER_FLAG_GAP);
  out = push_pull (h, gap);
  gst_buffer_unref (gap);
  return out;
}

static guint
n_detections (GstBuffer * buffer)
{
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (buffer);

  return meta ? meta->detections->len : 0;
}

/* The companion meta equals vd-detect's detections one by one, and every ROI
 * meta agrees with it. @keep: label ids kept by a class filter (NULL: all);
 * @scale: frame size / vd-detect's frame size. */
static void
check_same_detections (GstBuffer * buffer, GArray * ref, const gboolean * keep,
    gdouble scale, gdouble box_tol)
{
  GstVisionDetectMeta *meta = vdtest_get_detect_meta (buffer);
  guint i, j = 0, n_ref = 0;

  for (i = 0; i < ref->len; i++)
    if (keep == NULL || keep[g_array_index (ref, VdTestDetection, i).label])
      n_ref++;
  fail_unless (n_ref > 0, "nothing to compare: vd-detect found nothing");
  fail_unless (meta != NULL, "no GstVisionDetectMeta on the buffer");
  fail_unless_equals_int (meta->detections->len, n_ref);
  fail_unless_equals_int (vdtest_count_roi_metas (buffer), n_ref);
#ifdef HAVE_GST_ANALYTICS
  {
    GstAnalyticsRelationMeta *relations =
        gst_buffer_get_analytics_relation_meta (buffer);
    GstAnalyticsMtd od;
    gpointer state = NULL;
    guint n_od = 0;

    fail_unless (relations != NULL, "no GstAnalyticsRelationMeta");
    while (gst_analytics_relation_meta_iterate (relations, &state,
            gst_analytics_od_mtd_get_mtd_type (), &od))
      n_od++;
    fail_unless_equals_int (n_od, n_ref);
  }
#endif

  for (i = 0; i < ref->len; i++) {
    const VdTestDetection *r = &g_array_index (ref, VdTestDetection, i);
    const GstVisionDetection *d;
    GstVideoRegionOfInterestMeta *roi;
    GstStructure *s;
    gdouble v;
    gint label_id;

    if (keep != NULL && !keep[r->label])
      continue;
    d = &g_array_index (meta->detections, GstVisionDetection, j++);
    fail_unless_equals_int (d->label_id, r->label);
    fail_unless_equals_string (g_quark_to_string (d->label), r->label_name);
    fail_unless (fabs (d->confidence - r->score) <= SCORE_TOL,
        "detection %u: confidence %f, vd-detect %f", i, d->confidence,
        r->score);
    fail_unless (fabs (d->x - r->x1 * scale) <= box_tol
        && fabs (d->y - r->y1 * scale) <= box_tol
        && fabs (d->x + d->w - r->x2 * scale) <= box_tol
        && fabs (d->y + d->h - r->y2 * scale) <= box_tol,
        "detection %u: box %f,%f,%f,%f, vd-detect %f,%f,%f,%f (x%g)", i, d->x,
        d->y, d->x + d->w, d->y + d->h, r->x1, r->y1, r->x2, r->y2, scale);

    roi = gst_buffer_get_video_region_of_interest_meta_id (buffer, d->roi_id);
    fail_unless (roi != NULL, "no ROI meta with id %d", d->roi_id);
    fail_unless_equals_string (g_quark_to_string (roi->roi_type),
        r->label_name);
    fail_unless (fabs (roi->x - d->x) <= 1.0 && fabs (roi->y - d->y) <= 1.0
        && fabs (roi->w - d->w) <= 1.0 && fabs (roi->h - d->h) <= 1.0);
    s = gst_video_region_of_interest_meta_get_param (roi, "detection");
    fail_unless (s != NULL, "ROI meta without a \"detection\" param");
    fail_unless (gst_structure_get_double (s, "confidence", &v));
    fail_unless (fabs (v - r->score) <= SCORE_TOL);
    fail_unless (gst_structure_get_int (s, "label_id", &label_id));
    fail_unless_equals_int (label_id, r->label);
    fail_unless_equals_string (gst_structure_get_string (s, "label"),
        r->label_name);
    fail_unless (gst_structure_get_double (s, "x_min", &v));
    fail_unless (fabs (v * meta->width - d->x) <= 1e-6 * meta->width);
    fail_unless (gst_structure_get_double (s, "y_max", &v));
    fail_unless (fabs (v * meta->height - (d->y + d->h)) <=
        1e-6 * meta->height);
#ifdef HAVE_GST_ANALYTICS
    {
      /* the object-detection entry with the ROI meta's id (DL Streamer's
       * link): its class, box and confidence */
      GstAnalyticsRelationMeta *relations =
          gst_buffer_get_analytics_relation_meta (buffer);
      GstAnalyticsODMtd od;
      gint ox, oy, ow, oh;
      gfloat conf;

      fail_unless (gst_analytics_relation_meta_get_od_mtd (relations,
              roi->id, &od), "no object-detection entry with id %d", roi->id);
      fail_unless_equals_string (g_quark_to_string
          (gst_analytics_od_mtd_get_obj_type (&od)), r->label_name);
      fail_unless (gst_analytics_od_mtd_get_location (&od, &ox, &oy, &ow, &oh,
              &conf));
      fail_unless (abs (ox - (gint) roi->x) <= 1
          && abs (oy - (gint) roi->y) <= 1 && abs (ow - (gint) roi->w) <= 1
          && abs (oh - (gint) roi->h) <= 1,
          "entry %d,%d %dx%d, ROI meta %u,%u %ux%u", ox, oy, ow, oh, roi->x,
          roi->y, roi->w, roi->h);
      fail_unless (fabs (conf - r->score) <= SCORE_TOL);
    }
#endif
  }
}

/* ------------------------------------------------------------------------ */

GST_START_TEST (test_matches_vd_detect)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.05);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.05 device=cpu");
  GstBuffer *out;

  /* a comparison of two short lists proves little: the model is calibrated */
  fail_unless (ref->len >= 20, "vd-detect found only %u detections", ref->len);

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  check_same_detections (out, ref, NULL, 1.0, BOX_TOL);

  gst_buffer_unref (out);
  gst_harness_teardown (h);
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

#ifdef HAVE_GST_ANALYTICS
/* A relation meta from upstream with entries of its own (classifications of
 * the whole frame): the object-detection entries follow them and each ROI
 * meta takes its entry's id, not the next free ROI id. */
GST_START_TEST (test_analytics_after_upstream_entries)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.05);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.05 device=cpu");
  GstAnalyticsRelationMeta *relations;
  GstVideoRegionOfInterestMeta *roi;
  gpointer state = NULL;
  GstBuffer *in, *out;
  guint k;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  in = gst_buffer_copy (frame);
  relations = gst_buffer_add_analytics_relation_meta (in);
  for (k = 0; k < 3; k++) {
    GstAnalyticsClsMtd cls;

    fail_unless (gst_analytics_relation_meta_add_one_cls_mtd (relations, 0.5f,
            g_quark_from_string ("scene"), &cls));
  }
  out = push_pull (h, in);
  gst_buffer_unref (in);
  check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (out, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL)
    fail_unless (roi->id >= 3, "ROI meta %d: not its entry's id", roi->id);

  gst_buffer_unref (out);
  gst_harness_teardown (h);
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* GStreamer's own reader of object-detection entries, objectdetectionoverlay
 * (gst-plugins-bad >= 1.24, labels off), draws visiondetect's detections:
 * every pixel it changes is within 2 pixels of a detection's outline (its
 * 2-pixel stroke, anti-aliased), and every outline has changed pixels along
 * its top edge. */
GST_START_TEST (test_analytics_gstreamer_overlay)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.3 device=cpu ! "
      "objectdetectionoverlay draw-labels=false");
  GstVideoRegionOfInterestMeta *roi;
  GstMapInfo in_map, out_map;
  gpointer state = NULL;
  GstBuffer *out;
  guint x, y, n_changed = 0, n_rois = 0;
  const gsize stride = GST_VIDEO_INFO_PLANE_STRIDE (&info, 0);

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  fail_unless (gst_buffer_map (frame, &in_map, GST_MAP_READ));
  fail_unless (gst_buffer_map (out, &out_map, GST_MAP_READ));
  for (y = 0; y < (guint) GST_VIDEO_INFO_HEIGHT (&info); y++)
    for (x = 0; x < (guint) GST_VIDEO_INFO_WIDTH (&info); x++) {
      gboolean near = FALSE;

      if (memcmp (in_map.data + y * stride + 3 * x,
              out_map.data + y * stride + 3 * x, 3) == 0)
        continue;
      n_changed++;
      state = NULL;
      while (!near && (roi = (GstVideoRegionOfInterestMeta *)
              gst_buffer_iterate_meta_filtered (out, &state,
                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
        gint l = roi->x, t = roi->y, r = roi->x + roi->w, b = roi->y + roi->h;
        gint px = x, py = y;
        gboolean in_x = px >= l - 2 && px <= r + 2;
        gboolean in_y = py >= t - 2 && py <= b + 2;

        near = (in_y && (abs (px - l) <= 2 || abs (px - r) <= 2))
            || (in_x && (abs (py - t) <= 2 || abs (py - b) <= 2));
      }
      fail_unless (near, "pixel %u,%u changed, on no detection's outline", x,
          y);
    }
  state = NULL;
  while ((roi = (GstVideoRegionOfInterestMeta *)
          gst_buffer_iterate_meta_filtered (out, &state,
              GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
    guint changed = 0;

    y = MIN (roi->y, (guint) GST_VIDEO_INFO_HEIGHT (&info) - 1);
    for (x = roi->x; x < roi->x + roi->w; x++)
      if (memcmp (in_map.data + y * stride + 3 * x,
              out_map.data + y * stride + 3 * x, 3) != 0)
        changed++;
    fail_unless (changed >= roi->w / 2, "detection at %u,%u %ux%u: %u of its "
        "top edge's pixels drawn", roi->x, roi->y, roi->w, roi->h, changed);
    n_rois++;
  }
  fail_unless (n_rois > 0 && n_changed > 0);
  gst_buffer_unmap (frame, &in_map);
  gst_buffer_unmap (out, &out_map);

  gst_buffer_unref (out);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;
#endif

static GstBuffer *
detect_through (const gchar * chain, GstBuffer * frame, gdouble threshold,
    GstVideoInfo * out_info)
{
  gchar *model = vdtest_model ();
  gchar *launch = g_strdup_printf ("%s ! visiondetect model=\"%s\" threads=%d "
      "threshold=%g device=cpu", chain, model, THREADS, threshold);
  GstHarness *h = gst_harness_new_parse (launch);
  GstBuffer *out;
  GstCaps *caps;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  caps = gst_pad_get_current_caps (h->sinkpad);
  fail_unless (gst_video_info_from_caps (out_info, caps));
  gst_caps_unref (caps);
  gst_harness_teardown (h);
  g_free (launch);
  g_free (model);
  return out;
}

/* The RGB-family formats hold the same pixels as RGB: exactly the same
 * detections as vd-detect on the RGB frame. */
GST_START_TEST (test_rgb_formats)
{
  const gchar *formats[] = { "RGB", "BGR", "RGBA", "BGRA", "RGBx", "BGRx" };
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.3);
  guint f;

  fail_unless (ref->len >= 5, "vd-detect found only %u detections", ref->len);
  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    gchar *chain = g_strdup_printf ("videoconvert ! video/x-raw,format=%s",
        formats[f]);
    GstVideoInfo out_info;
    GstBuffer *out = detect_through (chain, frame, 0.3, &out_info);

    fail_unless_equals_string (gst_video_format_to_string
        (GST_VIDEO_INFO_FORMAT (&out_info)), formats[f]);
    check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
    gst_buffer_unref (out);
    g_free (chain);
  }
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* The RGB image the engine sees for a 4:2:0 frame: its documented conversion
 * (common/vd_math.h: nearest chroma sample, Q16 fixed point, the caps'
 * matrix and range). */
static void
yuv_frame_to_ppm (GstBuffer * buffer, const GstVideoInfo * info,
    const gchar * path)
{
  GstVideoFrame frame;
  vd_math_yuv_coeffs coeffs;
  gint matrix, x, y;
  GString *ppm;
  gboolean nv12 = GST_VIDEO_INFO_FORMAT (info) == GST_VIDEO_FORMAT_NV12;

  switch (info->colorimetry.matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT709:
      matrix = VD_MATH_MATRIX_BT709;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
      matrix = VD_MATH_MATRIX_BT2020;
      break;
    default:
      matrix = VD_MATH_MATRIX_BT601;
      break;
  }
  coeffs = vd_math_yuv_coeffs_for (matrix,
      info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255);
  fail_unless (gst_video_frame_map (&frame, info, buffer, GST_MAP_READ));
  ppm = g_string_new (NULL);
  g_string_append_printf (ppm, "P6\n%d %d\n255\n",
      GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info));
  for (y = 0; y < GST_VIDEO_INFO_HEIGHT (info); y++) {
    const guint8 *luma = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame, 0)
        + y * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 0);
    const guint8 *u = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame, 1)
        + (y / 2) * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 1);
    const guint8 *v = nv12 ? u + 1 :
        (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&frame, 2)
        + (y / 2) * GST_VIDEO_FRAME_PLANE_STRIDE (&frame, 2);

    for (x = 0; x < GST_VIDEO_INFO_WIDTH (info); x++) {
      gint cx = nv12 ? (x / 2) * 2 : x / 2;
      unsigned char rgb[3];

      vd_math_yuv_to_rgb (&coeffs, luma[x], u[cx], v[cx], rgb);
      g_string_append_len (ppm, (const gchar *) rgb, 3);
    }
  }
  gst_video_frame_unmap (&frame);
  fail_unless (g_file_set_contents (path, ppm->str, ppm->len, NULL));
  g_string_free (ppm, TRUE);
}

/* NV12 and I420 in several colorimetries: the element hands the engine the
 * planes, strides, matrix and range of the caps. The engine's conversion is
 * its own (tested in tests/engine); here the same conversion of the frame the
 * element saw, given to vd-detect as RGB, must give exactly the element's
 * detections: any mix-up of planes, strides, matrix or range changes them. (A
 * comparison with the RGB frame before conversion is meaningless with this
 * random calibrated model: a change of one grey level in a few pixels already
 * changes its detections completely.) */
GST_START_TEST (test_yuv_formats)
{
  const struct
  {
    const gchar *format, *colorimetry;
  } cases[] = {
    {"NV12", "bt601"},
    {"NV12", "bt709"},
    {"NV12", "1:4:0:0"},        /* BT.601 matrix, full range (JPEG) */
    {"I420", "bt709"},
  };
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *ppm = g_build_filename (dir, "yuv.ppm", NULL);
  gchar *model = vdtest_model ();
  guint c;

  for (c = 0; c < G_N_ELEMENTS (cases); c++) {
    gchar *chain = g_strdup_printf ("videoconvert ! video/x-raw,format=%s,"
        "colorimetry=%s", cases[c].format, cases[c].colorimetry);
    GstVideoInfo out_info;
    GstBuffer *out = detect_through (chain, frame, 0.3, &out_info);
    GstVideoColorimetry want;
    GArray *ref;

    fail_unless_equals_string (gst_video_format_to_string
        (GST_VIDEO_INFO_FORMAT (&out_info)), cases[c].format);
    fail_unless (gst_video_colorimetry_from_string (&want,
            cases[c].colorimetry));
    fail_unless (out_info.colorimetry.matrix == want.matrix
        && out_info.colorimetry.range == want.range, "%s: colorimetry %s",
        cases[c].colorimetry,
        gst_video_colorimetry_to_string (&out_info.colorimetry));
    yuv_frame_to_ppm (out, &out_info, ppm);
    ref = vdtest_vd_detect (model, ppm, 0.3, THREADS);
    GST_INFO ("%s %s: %u detections", cases[c].format, cases[c].colorimetry,
        ref->len);
    check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
    g_array_unref (ref);
    gst_buffer_unref (out);
    g_free (chain);
  }
  g_unlink (ppm);
  g_rmdir (dir);
  g_free (ppm);
  g_free (dir);
  g_free (model);
  gst_buffer_unref (frame);
}

GST_END_TEST;

static gchar *
bundled_model (void)
{
  gchar *path = g_build_filename (g_getenv ("VD_TEST_SRCDIR"), "models",
      "visiondetect-shapes.safetensors", NULL);

  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
    g_clear_pointer (&path, g_free);
  return path;
}

/* With a trained model (the bundled one), detections do not hinge on single
 * grey levels: the same frame in NV12 and I420 (chroma at quarter resolution,
 * 8-bit YUV) must give the same confident detections as in RGB: same class,
 * IoU >= 0.9, confidence within 0.05. Skipped while there is no bundled model. */
GST_START_TEST (test_yuv_matches_rgb_trained_model)
{
  const gchar *sources[] = {
    "videotestsrc pattern=ball num-buffers=1",
    "videotestsrc pattern=ball num-buffers=1 foreground-color=0xffff4040 "
        "background-color=0xff203060",
  };
  const gchar *formats[] = { "RGB", "NV12", "I420" };
  gchar *model = bundled_model ();
  guint s, f;

  if (model == NULL) {
    GST_INFO ("no bundled model: skipped");
    return;
  }
  for (s = 0; s < G_N_ELEMENTS (sources); s++) {
    GArray *ref = NULL;

    for (f = 0; f < G_N_ELEMENTS (formats); f++) {
      gchar *launch = g_strdup_printf ("videoconvert ! video/x-raw,format=%s ! "
          "visiondetect model=\"%s\" threads=%d threshold=0.5", formats[f],
          model, THREADS);
      gchar *src =
          g_strdup_printf
          ("%s ! capsfilter caps=video/x-raw,format=RGB,width=640,"
          "height=480,framerate=30/1", sources[s]);
      GstHarness *h = gst_harness_new_parse (launch);
      GstVisionDetectMeta *meta;
      GstBuffer *out;
      guint i, j;

      gst_harness_add_src_parse (h, src, FALSE);
      fail_unless_equals_int (gst_harness_push_from_src (h), GST_FLOW_OK);
      out = gst_harness_pull (h);
      meta = vdtest_get_detect_meta (out);
      fail_unless (meta != NULL && meta->detections->len > 0,
          "%s, %s: nothing found", sources[s], formats[f]);
      if (ref == NULL) {
        ref = g_array_copy (meta->detections);
      } else {
        fail_unless_equals_int (meta->detections->len, ref->len);
        for (i = 0; i < ref->len; i++) {
          const GstVisionDetection *r =
              &g_array_index (ref, GstVisionDetection, i);
          gboolean matched = FALSE;

          for (j = 0; j < meta->detections->len && !matched; j++) {
            const GstVisionDetection *d =
                &g_array_index (meta->detections, GstVisionDetection, j);

            matched = d->label_id == r->label_id
                && fabs (d->confidence - r->confidence) <= 0.05
                && vdtest_iou (d->x, d->y, d->w, d->h, r->x, r->y, r->w,
                r->h) >= 0.9;
          }
          fail_unless (matched, "%s, %s: RGB's %s %.3f at %.1f,%.1f not found",
              sources[s], formats[f], g_quark_to_string (r->label),
              r->confidence, r->x, r->y);
        }
      }
      gst_buffer_unref (out);
      gst_harness_teardown (h);
      g_free (src);
      g_free (launch);
    }
    g_array_unref (ref);
  }
  g_free (model);
}

GST_END_TEST;

GST_START_TEST (test_timestamps_flags_pixels_pass_through)
{
  const GstBufferFlags flags = GST_BUFFER_FLAG_DISCONT |
      GST_BUFFER_FLAG_DELTA_UNIT | GST_BUFFER_FLAG_MARKER;
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "interval=2");
  GstMapInfo in_map, out_map;
  guint i;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  gst_buffer_map (frame, &in_map, GST_MAP_READ);
  for (i = 0; i < 2; i++) {
    GstBuffer *in = gst_buffer_copy_deep (frame);
    GstBuffer *out;

    GST_BUFFER_PTS (in) = (i + 1) * 33 * GST_MSECOND;
    GST_BUFFER_DTS (in) = i * 33 * GST_MSECOND;
    GST_BUFFER_DURATION (in) = 33 * GST_MSECOND;
    GST_BUFFER_OFFSET (in) = 100 + i;
    GST_BUFFER_OFFSET_END (in) = 101 + i;
    GST_BUFFER_FLAG_SET (in, flags);
    fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
    out = gst_harness_pull (h);
    fail_unless_equals_uint64 (GST_BUFFER_PTS (out),
        (i + 1) * 33 * GST_MSECOND);
    fail_unless_equals_uint64 (GST_BUFFER_DTS (out), i * 33 * GST_MSECOND);
    fail_unless_equals_uint64 (GST_BUFFER_DURATION (out), 33 * GST_MSECOND);
    fail_unless_equals_uint64 (GST_BUFFER_OFFSET (out), 100 + i);
    fail_unless_equals_uint64 (GST_BUFFER_OFFSET_END (out), 101 + i);
    fail_unless ((GST_BUFFER_FLAGS (out) & flags) == flags);
    gst_buffer_map (out, &out_map, GST_MAP_READ);
    fail_unless (out_map.size == in_map.size
        && memcmp (out_map.data, in_map.data, in_map.size) == 0,
        "the pixels changed");
    gst_buffer_unmap (out, &out_map);
    gst_buffer_unref (out);
  }
  gst_buffer_unmap (frame, &in_map);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

GST_START_TEST (test_gap_and_interval)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "interval=3");
  GstBuffer *out;
  guint i;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (i = 0; i < 7; i++) {
    out = push_pull (h, frame);
    /* the companion meta says which frames inference ran on (visiontrack
     * predicts boxes on the others) */
    if (i % 3 == 0)
      fail_unless (n_detections (out) > 0 && vdtest_get_detect_meta
          (out)->inference == GST_VISION_DETECT_INFERRED,
          "frame %u: no detections", i);
    else
      fail_unless (n_detections (out) == 0 && vdtest_count_roi_metas (out) == 0
          && vdtest_get_detect_meta (out)->inference ==
          GST_VISION_DETECT_SKIPPED_INTERVAL,
          "frame %u: detections on a skipped frame", i);
    gst_buffer_unref (out);
  }
  /* frame 7, on the inference schedule once interval=1: the stream's first
   * GAP buffer has nothing to be compared with, and is inferred */
  out = push_gap (h, frame);
  fail_unless (n_detections (out) > 0 && vdtest_get_detect_meta
      (out)->inference == GST_VISION_DETECT_INFERRED);
  gst_buffer_unref (out);

  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* A GAP copy (its memory, or its bytes in memory of its own) of the last
 * inferred frame carries that frame's detections in every form, marked
 * repeated, without an inference; a GAP buffer whose pixels differ, by one
 * byte, is inferred like any frame. */
static GstBuffer *
push_gap_of (GstHarness * h, GstBuffer * frame, gboolean deep, gsize poke)
{
  GstBuffer *gap = deep ? gst_buffer_copy_deep (frame) :
      gst_buffer_copy (frame), *out;

  if (poke != G_MAXSIZE) {
    guint8 byte;

    gst_buffer_extract (gap, poke, &byte, 1);
    byte ^= 0x01;
    gst_buffer_fill (gap, poke, &byte, 1);
  }
  GST_BUFFER_FLAG_SET (gap, GST_BUFFER_FLAG_GAP);
  out = push_pull (h, gap);
  gst_buffer_unref (gap);
  return out;
}

/* push_gap_of()'s output, checked: its inference status @want and, with @ref,
 * vd-detect's detections of @ref in every form */
static GstBuffer *
push_gap_expect (GstHarness * h, GstBuffer * frame, gboolean deep, gsize poke,
    GstVisionDetectInference want, GArray * ref)
{
  GstBuffer *out = push_gap_of (h, frame, deep, poke);

  fail_unless_equals_int (vdtest_inference_of (out), want);
  if (ref != NULL)
    check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
  return out;
}

GST_START_TEST (test_gap_repeats)
{
  GstVideoInfo info;
  GstBuffer *a = vdtest_load_frame (0, &info);
  GstBuffer *b = vdtest_load_frame (1, &info);
  GArray *ref_a = reference (0, 0.5);
  GstHarness *h = vdtest_new_detect (THREADS, "");
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  guint64 inferred, repeated, inferred_before;
  GstBuffer *out, *first;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  first = push_pull (h, a);
  check_same_detections (first, ref_a, NULL, 1.0, BOX_TOL);
  /* the stream's first GAP buffer: nothing kept to compare with yet */
  gst_buffer_unref (push_gap_expect (h, a, FALSE, G_MAXSIZE,
          GST_VISION_DETECT_INFERRED, NULL));
  g_object_get (detect, "frames-inferred", &inferred_before, NULL);
  fail_unless_equals_uint64 (inferred_before, 2);

  /* duplicates, sharing the memory and in memory of their own: repeated */
  out = push_gap_expect (h, a, FALSE, G_MAXSIZE, GST_VISION_DETECT_REPEATED,
      ref_a);
  fail_unless (vdtest_same_detections (out, first));
  gst_buffer_unref (out);
  gst_buffer_unref (push_gap_expect (h, a, TRUE, G_MAXSIZE,
          GST_VISION_DETECT_REPEATED, ref_a));
  g_object_get (detect, "frames-inferred", &inferred, "frames-repeated",
      &repeated, NULL);
  fail_unless_equals_uint64 (inferred, inferred_before);
  fail_unless_equals_uint64 (repeated, 2);

  /* one byte changed, first and last byte of the frame: inferred */
  gst_buffer_unref (push_gap_expect (h, a, TRUE, 0,
          GST_VISION_DETECT_INFERRED, NULL));
  gst_buffer_unref (push_gap_expect (h, a, TRUE, gst_buffer_get_size (a) - 1,
          GST_VISION_DETECT_INFERRED, NULL));

  /* another frame, then a GAP buffer of the first one: inferred, and its
   * detections are the first frame's own; a GAP copy of that repeats it */
  out = push_pull (h, b);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  fail_if (vdtest_same_detections (out, first), "frame-1 answers as frame-0");
  gst_buffer_unref (out);
  gst_buffer_unref (push_gap_expect (h, a, TRUE, G_MAXSIZE,
          GST_VISION_DETECT_INFERRED, ref_a));
  gst_buffer_unref (push_gap_expect (h, a, FALSE, G_MAXSIZE,
          GST_VISION_DETECT_REPEATED, ref_a));
  g_object_get (detect, "frames-inferred", &inferred, "frames-repeated",
      &repeated, NULL);
  fail_unless_equals_uint64 (inferred, inferred_before + 4);
  fail_unless_equals_uint64 (repeated, 3);

  /* gap-frames=skip: a duplicate passes without inference or detections */
  gst_util_set_object_arg (G_OBJECT (detect), "gap-frames", "skip");
  out = push_gap_expect (h, a, FALSE, G_MAXSIZE, GST_VISION_DETECT_SKIPPED_GAP,
      NULL);
  fail_unless (n_detections (out) == 0 && vdtest_count_roi_metas (out) == 0);
  gst_buffer_unref (out);

  gst_buffer_unref (first);
  gst_harness_teardown (h);
  g_array_unref (ref_a);
  gst_buffer_unref (a);
  gst_buffer_unref (b);
}

GST_END_TEST;

GST_START_TEST (test_class_filter)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.05);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.05");
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBus *bus = gst_bus_new ();
  gboolean keep[5] = { FALSE, FALSE, FALSE, FALSE, FALSE };
  guint count[5] = { 0, 0, 0, 0, 0 };
  const gchar *names[5] = { NULL, NULL, NULL, NULL, NULL };
  gint a = 0, b = 0, c;
  gchar *upper, *classes, *id;
  GstMessage *msg;
  GstBuffer *out;
  guint i;

  /* the two most frequent classes of this frame (the model is random) */
  for (i = 0; i < ref->len; i++) {
    const VdTestDetection *r = &g_array_index (ref, VdTestDetection, i);

    fail_unless (r->label >= 1 && r->label <= 4);
    count[r->label]++;
    names[r->label] = r->label_name;
  }
  for (c = 1; c <= 4; c++) {
    if (a == 0 || count[c] > count[a]) {
      b = a;
      a = c;
    } else if (b == 0 || count[c] > count[b]) {
      b = c;
    }
  }
  fail_unless (count[a] > 0 && count[b] > 0 && count[a] + count[b] < ref->len,
      "the frame has too few classes to filter");

  gst_element_set_bus (detect, bus);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);

  /* names, case-insensitive, set while playing */
  upper = g_ascii_strup (names[a], -1);
  classes = g_strdup_printf (" %s , %s", upper, names[b]);
  g_object_set (detect, "classes", classes, NULL);
  keep[a] = keep[b] = TRUE;
  out = push_pull (h, frame);
  check_same_detections (out, ref, keep, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  /* an id */
  id = g_strdup_printf ("%d", b);
  g_object_set (detect, "classes", id, NULL);
  keep[a] = FALSE;
  out = push_pull (h, frame);
  check_same_detections (out, ref, keep, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  /* an unknown name is a warning naming it */
  g_object_set (detect, "classes", "zebra,ball", NULL);
  out = push_pull (h, frame);
  gst_buffer_unref (out);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  fail_unless (msg != NULL, "no warning about an unknown class");
  {
    GError *err = NULL;

    gst_message_parse_warning (msg, &err, NULL);
    fail_unless (strstr (err->message, "zebra") != NULL, "%s", err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);

  /* empty: every class again */
  g_object_set (detect, "classes", "", NULL);
  out = push_pull (h, frame);
  check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);
  fail_unless (gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING) == NULL,
      "a warning for classes=\"\"");

  /* entries that name nothing keep every class, with a warning */
  g_object_set (detect, "classes", " , ,,", NULL);
  out = push_pull (h, frame);
  check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  fail_unless (msg != NULL, "no warning for classes that name nothing");
  {
    GError *err = NULL;

    gst_message_parse_warning (msg, &err, NULL);
    fail_unless (strstr (err->message, "name no class") != NULL, "%s",
        err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);

  g_free (id);
  g_free (classes);
  g_free (upper);
  gst_element_set_bus (detect, NULL);
  gst_object_unref (bus);
  gst_object_unref (detect);
  gst_harness_teardown (h);
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

GST_START_TEST (test_thresholds_while_playing)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.05);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.05");
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstVisionDetectMeta *meta;
  GstBuffer *out;
  guint i, n_high = 0;
  gfloat high;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  check_same_detections (out, ref, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  /* the median score: the engine keeps scores strictly above the threshold */
  high = (gfloat) g_array_index (ref, VdTestDetection, ref->len / 2).score;
  for (i = 0; i < ref->len; i++)
    n_high += (gfloat) g_array_index (ref, VdTestDetection, i).score > high;
  fail_unless (n_high > 0 && n_high < ref->len);
  g_object_set (detect, "threshold", high, NULL);
  out = push_pull (h, frame);
  meta = vdtest_get_detect_meta (out);
  fail_unless (meta != NULL);
  fail_unless_equals_int (meta->detections->len, n_high);
  for (i = 0; i < meta->detections->len; i++)
    fail_unless (g_array_index (meta->detections, GstVisionDetection,
            i).confidence > high);
  gst_buffer_unref (out);

  g_object_set (detect, "threshold", 0.05f, "max-detections", 3, NULL);
  out = push_pull (h, frame);
  fail_unless_equals_int (n_detections (out), 3);
  gst_buffer_unref (out);

  gst_object_unref (detect);
  gst_harness_teardown (h);
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

GST_START_TEST (test_resolution_change)
{
  GstVideoInfo info;
  GstBuffer *frame0 = vdtest_load_frame (0, &info);
  GstBuffer *frame1 = vdtest_load_frame (1, &info);
  GArray *ref0 = reference (0, 0.3);
  GArray *ref1 = reference (1, 0.3);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.3");
  GstBuffer *out;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame0);
  check_same_detections (out, ref0, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_400);
  out = push_pull (h, frame1);
  fail_unless_equals_int (vdtest_get_detect_meta (out)->width, 400);
  check_same_detections (out, ref1, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame0);
  check_same_detections (out, ref0, NULL, 1.0, BOX_TOL);
  gst_buffer_unref (out);

  gst_harness_teardown (h);
  g_array_unref (ref0);
  g_array_unref (ref1);
  gst_buffer_unref (frame0);
  gst_buffer_unref (frame1);
}

GST_END_TEST;

/* The companion meta survives videoscale and videoconvert with every field,
 * rescaled; the standard ROI metas are rescaled too (without their params, as
 * GStreamer's own transform drops them). */
/* visiondetect, then a videoscale that letterboxes 4:3 into 1:1 (add-borders,
 * its default): the companion meta is dropped (its transform cannot tell a
 * letterbox from a stretch in GStreamer 1.22) rather than stretched onto the
 * wrong place; visionjson and visionoverlay then read GStreamer's ROI metas,
 * which GStreamer's own transform stretched (docs/metadata.md says so). */
GST_START_TEST (test_videoscale_letterbox_drops_meta)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  gchar *launch = vdtest_detect_launch (THREADS, "threshold=0.3 ! "
      "videoscale add-borders=true ! capsfilter "
      "caps=video/x-raw,width=320,height=320,pixel-aspect-ratio=1/1");
  GList *outs = vdtest_run_pipeline (launch, VDTEST_CAPS_320, &frame, 1);

  fail_unless (vdtest_count_roi_metas (outs->data) > 0,
      "nothing was detected: the test proves nothing");
  fail_unless (vdtest_get_detect_meta (outs->data) == NULL,
      "the companion meta survived a letterbox");
  g_list_free_full (outs, (GDestroyNotify) gst_buffer_unref);
  g_free (launch);
  gst_buffer_unref (frame);
}

GST_END_TEST;

GST_START_TEST (test_detections_survive_videoscale)
{
  const struct
  {
    const gchar *chain;
    gdouble scale;
  } cases[] = {
    {"videoscale ! capsfilter caps=video/x-raw,width=640,height=480", 2.0},
    {"videoconvert ! video/x-raw,format=I420 ! videoscale ! "
          "capsfilter caps=video/x-raw,width=160,height=120", 0.5},
  };
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GArray *ref = reference (0, 0.3);
  guint c;

  for (c = 0; c < G_N_ELEMENTS (cases); c++) {
    gchar *launch = vdtest_detect_launch (THREADS, "threshold=0.3 ! %s",
        cases[c].chain);
    GstBuffer *out;
    GList *outs = vdtest_run_pipeline (launch, VDTEST_CAPS_320, &frame, 1);
    GstVisionDetectMeta *meta;
    GstVideoRegionOfInterestMeta *roi;
    gpointer state = NULL;

    out = outs->data;
    meta = vdtest_get_detect_meta (out);
    fail_unless (meta != NULL, "%s: the detections were lost", cases[c].chain);
    fail_unless_equals_int (meta->width, (gint) (320 * cases[c].scale));
    fail_unless_equals_int (meta->height, (gint) (240 * cases[c].scale));
    /* the box is exact; the ROI metas are whole pixels of the new size */
    fail_unless_equals_int (meta->detections->len, ref->len);
    fail_unless_equals_int (vdtest_count_roi_metas (out), ref->len);
    while ((roi = (GstVideoRegionOfInterestMeta *)
            gst_buffer_iterate_meta_filtered (out, &state,
                GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) != NULL) {
      guint i;
      gboolean found = FALSE;

      for (i = 0; i < meta->detections->len && !found; i++) {
        const GstVisionDetection *d =
            &g_array_index (meta->detections, GstVisionDetection, i);

        found = d->roi_id == roi->id
            && fabs (roi->x - d->x) <= 1.0 + cases[c].scale
            && fabs (roi->w - d->w) <= 1.0 + cases[c].scale;
      }
      fail_unless (found, "ROI meta %d was not rescaled with the frame",
          roi->id);
    }
    {
      /* confidence, label and id kept; boxes scaled */
      guint i;

      for (i = 0; i < ref->len; i++) {
        const VdTestDetection *r = &g_array_index (ref, VdTestDetection, i);
        const GstVisionDetection *d =
            &g_array_index (meta->detections, GstVisionDetection, i);

        fail_unless_equals_string (g_quark_to_string (d->label), r->label_name);
        fail_unless (fabs (d->confidence - r->score) <= SCORE_TOL);
      }
    }
    {
      guint i;

      for (i = 0; i < ref->len; i++) {
        const VdTestDetection *r = &g_array_index (ref, VdTestDetection, i);
        const GstVisionDetection *d =
            &g_array_index (meta->detections, GstVisionDetection, i);
        gdouble s = cases[c].scale;

        fail_unless (fabs (d->x - r->x1 * s) <= BOX_TOL * s
            && fabs (d->y + d->h - r->y2 * s) <= BOX_TOL * s,
            "box %u not rescaled by %g", i, s);
      }
    }
    g_list_free_full (outs, (GDestroyNotify) gst_buffer_unref);
    g_free (launch);
  }
  g_array_unref (ref);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* The latency is known from the caps on (a warm-up inference), before the
 * first frame, and stays of that order while frames run. */
GST_START_TEST (test_latency_before_first_frame)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, NULL);
  GstClockTime warm, later;
  guint i;

  fail_unless_equals_uint64 (gst_harness_query_latency (h), 0);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  /* the caps event is handled when it is pushed */
  warm = gst_harness_query_latency (h);
  fail_unless (warm > 0 && warm < 60 * GST_SECOND,
      "latency %" GST_TIME_FORMAT, GST_TIME_ARGS (warm));
  for (i = 0; i < 4; i++) {
    GstBuffer *out = push_pull (h, frame);

    fail_unless (n_detections (out) > 0);
    gst_buffer_unref (out);
  }
  later = gst_harness_query_latency (h);
  fail_unless (later >= warm && later < 10 * warm, "latency %" GST_TIME_FORMAT
      " after %" GST_TIME_FORMAT, GST_TIME_ARGS (later), GST_TIME_ARGS (warm));

  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* late-frames=drop: frames that downstream reports as too late are dropped
 * whole (QoS). */
GST_START_TEST (test_qos_drop)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "late-frames=drop");
  GstBuffer *out;
  guint i;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (i = 0; i < 2; i++) {
    fail_unless_equals_int (gst_harness_push (h, vdtest_timed_copy (frame,
                i * 33 * GST_MSECOND)), GST_FLOW_OK);
    gst_buffer_unref (gst_harness_pull (h));
  }
  /* downstream: 10 s late at 0.1 s */
  fail_unless (gst_harness_push_upstream_event (h,
          gst_event_new_qos (GST_QOS_TYPE_UNDERFLOW, 2.0, 10 * GST_SECOND,
              100 * GST_MSECOND)));
  fail_unless_equals_int (gst_harness_push (h, vdtest_timed_copy (frame,
              1 * GST_SECOND)), GST_FLOW_OK);
  /* a frame after the late period passes: the next out, the late one is gone */
  fail_unless_equals_int (gst_harness_push (h, vdtest_timed_copy (frame,
              30 * GST_SECOND)), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), 30 * GST_SECOND);
  fail_unless (n_detections (out) > 0);
  fail_unless (GST_BUFFER_FLAG_IS_SET (out, GST_BUFFER_FLAG_DISCONT));
  gst_buffer_unref (out);
  fail_unless_equals_int (gst_harness_buffers_in_queue (h), 0);

  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* late-frames=skip-inference (the default): a frame downstream reports as
 * late passes, without inference, and says so. */
GST_START_TEST (test_qos_skip_inference)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, NULL);
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBuffer *out;
  guint64 skipped, inferred;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, vdtest_timed_copy (frame, 0));
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  gst_buffer_unref (out);
  fail_unless (gst_harness_push_upstream_event (h,
          gst_event_new_qos (GST_QOS_TYPE_UNDERFLOW, 2.0, 10 * GST_SECOND,
              100 * GST_MSECOND)));
  out = push_pull (h, vdtest_timed_copy (frame, 1 * GST_SECOND));
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), 1 * GST_SECOND);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_SKIPPED_LATE);
  fail_unless (n_detections (out) == 0 && vdtest_count_roi_metas (out) == 0);
  gst_buffer_unref (out);
  out = push_pull (h, vdtest_timed_copy (frame, 30 * GST_SECOND));
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  fail_unless (n_detections (out) > 0);
  gst_buffer_unref (out);
  g_object_get (detect, "frames-skipped-late", &skipped, "frames-inferred",
      &inferred, NULL);
  fail_unless_equals_uint64 (skipped, 1);
  fail_unless_equals_uint64 (inferred, 2);

  gst_object_unref (detect);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* Live: a frame whose inference would end after its deadline (its running
 * time + the upstream latency + ours) passes on time without inference. The
 * test clock says how late each frame is. */
GST_START_TEST (test_live_deadline)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, NULL);
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBuffer *out;
  guint64 skipped;

  gst_harness_use_testclock (h);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  /* the harness's source is live: the element learns it from this query */
  fail_unless (gst_harness_query_latency (h) > 0);
  gst_element_set_base_time (detect, 0);

  /* now = 10 s: a frame of 0 s is far behind */
  fail_unless (gst_harness_set_time (h, 10 * GST_SECOND));
  out = push_pull (h, vdtest_timed_copy (frame, 0));
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_SKIPPED_LATE);
  fail_unless (n_detections (out) == 0);
  gst_buffer_unref (out);
  /* a frame of 10 s has its whole latency ahead */
  out = push_pull (h, vdtest_timed_copy (frame, 10 * GST_SECOND));
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  fail_unless (n_detections (out) > 0);
  gst_buffer_unref (out);
  g_object_get (detect, "frames-skipped-late", &skipped, NULL);
  fail_unless_equals_uint64 (skipped, 1);

  /* late-frames=drop does not look at the clock */
  g_object_set (detect, "late-frames", GST_VISION_DETECT_LATE_DROP, NULL);
  out = push_pull (h, vdtest_timed_copy (frame, 1 * GST_SECOND));
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  gst_buffer_unref (out);

  gst_object_unref (detect);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* Holds the element's output: its thread stops at the first frame until
 * released, so nothing behind that frame is collected and no room comes in
 * the engine. */
typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean released;
} OutputGate;

typedef struct
{
  GstHarness *h;
  GstBuffer *buffer;
} PushJob;

static GstPadProbeReturn
hold_output (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  OutputGate *gate = data;

  g_mutex_lock (&gate->lock);
  while (!gate->released)
    g_cond_wait (&gate->cond, &gate->lock);
  g_mutex_unlock (&gate->lock);
  return GST_PAD_PROBE_REMOVE;
}

static gpointer
push_frame (gpointer data)
{
  PushJob *job = data;

  return GINT_TO_POINTER (gst_harness_push (job->h, job->buffer));
}

/* Live, max-in-flight=1: a frame on time when it arrives, that waits for room
 * in the engine until after its deadline (the frame ahead is collected only
 * once the pushes before it are done: here held), passes without inference;
 * judged again after the wait, not on the engine's estimate from before it.
 * Times in the element's latency L (1.5 inferences from the warm-up; a loaded
 * machine's is longer): the frames are due 4 L ahead, when each is on time
 * with the engine's estimate (about 2 L for the third), and the output is
 * held 8 L, past the third's deadline even if L triples meanwhile. */
GST_START_TEST (test_live_deadline_after_wait)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "max-in-flight=1");
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstPad *src = gst_element_get_static_pad (detect, "src");
  OutputGate gate = { 0 };
  GstClock *clock;
  GstClockTime latency, ahead;
  PushJob third = { h, NULL };
  GstBuffer *out;
  GThread *pusher;
  guint64 skipped;
  gint i;

  g_mutex_init (&gate.lock);
  g_cond_init (&gate.cond);
  gst_harness_use_systemclock (h);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  /* also tells the element its upstream is live */
  latency = gst_harness_query_latency (h);
  fail_unless (latency > 0);
  clock = gst_element_get_clock (detect);
  fail_unless (clock != NULL);
  gst_element_set_base_time (detect, gst_clock_get_time (clock));
  ahead = 4 * latency;

  gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_BUFFER, hold_output, &gate, NULL);
  /* the first is collected, then held on its way out; the second is in the
   * engine, and stays there uncollected behind it */
  for (i = 0; i < 2; i++)
    fail_unless_equals_int (gst_harness_push (h, vdtest_timed_copy (frame,
                ahead + i * 33 * GST_MSECOND)), GST_FLOW_OK);
  /* the third is on time when it arrives, then waits for the second to be
   * collected */
  third.buffer = vdtest_timed_copy (frame, ahead + 66 * GST_MSECOND);
  pusher = g_thread_new ("push", push_frame, &third);
  g_usleep (8 * latency / GST_USECOND);
  g_mutex_lock (&gate.lock);
  gate.released = TRUE;
  g_cond_broadcast (&gate.cond);
  g_mutex_unlock (&gate.lock);
  fail_unless_equals_int (GPOINTER_TO_INT (g_thread_join (pusher)),
      GST_FLOW_OK);

  for (i = 0; i < 3; i++) {
    out = gst_harness_pull (h);
    fail_unless (out != NULL);
    fail_unless_equals_int (vdtest_inference_of (out), i < 2 ?
        GST_VISION_DETECT_INFERRED : GST_VISION_DETECT_SKIPPED_LATE);
    gst_buffer_unref (out);
  }
  g_object_get (detect, "frames-skipped-late", &skipped, NULL);
  fail_unless_equals_uint64 (skipped, 1);

  gst_object_unref (clock);
  gst_object_unref (src);
  gst_object_unref (detect);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
  g_cond_clear (&gate.cond);
  g_mutex_clear (&gate.lock);
}

GST_END_TEST;

/* Every frame carries the companion meta, saying whether it was inferred. */
GST_START_TEST (test_inference_status)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "interval=3");
  GstBuffer *out;
  guint i;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (i = 0; i < 4; i++) {
    out = push_pull (h, frame);
    fail_unless_equals_int (vdtest_inference_of (out), i % 3 == 0 ?
        GST_VISION_DETECT_INFERRED : GST_VISION_DETECT_SKIPPED_INTERVAL);
    gst_buffer_unref (out);
  }
  /* the first GAP buffer is inferred (test_gap_repeats), the next repeats it */
  out = push_gap (h, frame);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  gst_buffer_unref (out);
  out = push_gap (h, frame);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_REPEATED);
  gst_buffer_unref (out);

  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* A flushing seek starts the interval again: its first frame is inferred. */
GST_START_TEST (test_flush_resets_interval)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstHarness *h = vdtest_new_detect (THREADS, "interval=3");
  GstSegment segment;
  GstBuffer *out;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  gst_buffer_unref (out);
  out = push_pull (h, frame);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_SKIPPED_INTERVAL);
  gst_buffer_unref (out);

  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  gst_segment_init (&segment, GST_FORMAT_TIME);
  fail_unless (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  out = push_pull (h, frame);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  fail_unless (n_detections (out) > 0);
  gst_buffer_unref (out);

  gst_harness_teardown (h);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* Runs 12 frames (alternately @frames[0] and @frames[1], every second one
 * inferred) through an element with @max_in_flight, then EOS; returns the
 * output buffers, checked for order and inference status. */
static GPtrArray *
run_in_flight (GstBuffer ** frames, guint max_in_flight)
{
  gchar *extra = g_strdup_printf ("threshold=0.3 interval=2 max-in-flight=%u",
      max_in_flight);
  GstHarness *h = vdtest_new_detect (THREADS, extra);
  GPtrArray *outs = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_buffer_unref);
  GstEvent *event;
  guint i;

  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (i = 0; i < 12; i++)
    fail_unless_equals_int (gst_harness_push (h,
            vdtest_timed_copy (frames[(i / 2) % 2], i * 33 * GST_MSECOND)),
        GST_FLOW_OK);
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  for (i = 0; i < 12; i++) {
    GstBuffer *out = gst_harness_pull (h);

    fail_unless (out != NULL);
    fail_unless_equals_uint64 (GST_BUFFER_PTS (out), i * 33 * GST_MSECOND);
    fail_unless_equals_int (vdtest_inference_of (out), i % 2 == 0 ?
        GST_VISION_DETECT_INFERRED : GST_VISION_DETECT_SKIPPED_INTERVAL);
    if (i % 2 == 1)
      fail_unless (n_detections (out) == 0);
    g_ptr_array_add (outs, out);
  }
  /* EOS after the last frame */
  while ((event = gst_harness_try_pull_event (h)) != NULL) {
    gboolean eos = GST_EVENT_TYPE (event) == GST_EVENT_EOS;

    gst_event_unref (event);
    if (eos)
      break;
  }
  fail_unless (event != NULL, "no EOS after the frames");
  gst_harness_teardown (h);
  g_free (extra);
  return outs;
}

/* @frame (RGB 320x240) cropped by hand to @w x @h at @x, @y */
static GstBuffer *
crop_by_hand (GstBuffer * frame, gint x, gint y, gint w, gint h)
{
  GstVideoInfo in_info, out_info;
  GstVideoFrame in, out;
  GstBuffer *cropped;
  gint row;

  gst_video_info_set_format (&in_info, GST_VIDEO_FORMAT_RGB, 320, 240);
  gst_video_info_set_format (&out_info, GST_VIDEO_FORMAT_RGB, w, h);
  cropped = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&out_info),
      NULL);
  fail_unless (gst_video_frame_map (&in, &in_info, frame, GST_MAP_READ));
  fail_unless (gst_video_frame_map (&out, &out_info, cropped, GST_MAP_WRITE));
  for (row = 0; row < h; row++)
    memcpy ((guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&out, 0) +
        row * GST_VIDEO_FRAME_PLANE_STRIDE (&out, 0),
        (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&in, 0) +
        (y + row) * GST_VIDEO_FRAME_PLANE_STRIDE (&in, 0) + 3 * x, 3 * w);
  gst_video_frame_unmap (&out);
  gst_video_frame_unmap (&in);
  return cropped;
}

/* videocrop upstream, and a sink that takes GstVideoMeta and GstVideoCropMeta
 * or one that takes neither: visiondetect refuses the crop meta in the
 * allocation query, so videocrop crops for real in both cases, and the
 * detections are exactly those of a frame cropped by hand, in its pixels. */
GST_START_TEST (test_crop_meta_refused)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstBuffer *cropped = crop_by_hand (frame, 80, 0, 240, 180);
  GstHarness *h = vdtest_new_detect (THREADS, "threshold=0.05 device=cpu");
  GstBuffer *ref;
  guint sink;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=240,"
      "height=180,framerate=30/1");
  ref = push_pull (h, cropped);
  gst_harness_teardown (h);
  fail_unless (n_detections (ref) > 0, "nothing to compare");

  for (sink = 0; sink < 2; sink++) {
    gchar *model = vdtest_model ();
    gchar *launch = g_strdup_printf ("videocrop left=80 bottom=60 ! "
        "visiondetect model=\"%s\" threads=%d threshold=0.05 device=cpu",
        model, THREADS);
    GstBuffer *out;
    GstCaps *caps;

    h = gst_harness_new_parse (launch);
    if (sink == 1) {
      gst_harness_add_propose_allocation_meta (h, GST_VIDEO_META_API_TYPE,
          NULL);
      gst_harness_add_propose_allocation_meta (h,
          GST_VIDEO_CROP_META_API_TYPE, NULL);
    }
    gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
    out = push_pull (h, frame);
    caps = gst_pad_get_current_caps (h->sinkpad);
    fail_unless (gst_video_info_from_caps (&info, caps));
    gst_caps_unref (caps);
    fail_unless_equals_int (GST_VIDEO_INFO_WIDTH (&info), 240);
    fail_unless_equals_int (GST_VIDEO_INFO_HEIGHT (&info), 180);
    fail_unless (vdtest_same_detections (out, ref),
        "sink %u: %u detections, not those of the cropped frame (%u)", sink,
        n_detections (out), n_detections (ref));
    fail_unless (gst_buffer_get_video_crop_meta (out) == NULL,
        "sink %u: upstream passed a crop meta", sink);
    fail_unless_equals_int (vdtest_get_detect_meta (out)->width, 240);
    gst_buffer_unref (out);
    gst_harness_teardown (h);
    g_free (launch);
    g_free (model);
  }

  gst_buffer_unref (ref);
  gst_buffer_unref (cropped);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* With frames in flight, every frame leaves in order with its own detections,
 * the same as one frame at a time, and EOS waits for them. */
GST_START_TEST (test_frames_in_flight)
{
  GstVideoInfo info;
  GstBuffer *frames[2];
  GArray *ref = reference (0, 0.3);
  GPtrArray *one, *three;
  guint i;

  frames[0] = vdtest_load_frame (0, &info);
  /* another picture: the left half black */
  frames[1] = gst_buffer_copy_deep (frames[0]);
  for (i = 0; i < 240; i++)
    gst_buffer_memset (frames[1], i * 320 * 3, 0, 160 * 3);

  one = run_in_flight (frames, 1);
  three = run_in_flight (frames, 3);
  /* the two pictures differ in what is found: a mix-up would show */
  fail_unless (!vdtest_same_detections (g_ptr_array_index (one, 0),
          g_ptr_array_index (one, 2)));
  for (i = 0; i < 12; i += 2) {
    if ((i / 2) % 2 == 0)
      check_same_detections (g_ptr_array_index (three, i), ref, NULL, 1.0,
          BOX_TOL);
    fail_unless (vdtest_same_detections (g_ptr_array_index (one, i),
            g_ptr_array_index (three, i)), "frame %u differs in flight", i);
  }

  g_ptr_array_unref (one);
  g_ptr_array_unref (three);
  g_array_unref (ref);
  gst_buffer_unref (frames[0]);
  gst_buffer_unref (frames[1]);
}

GST_END_TEST;

GST_START_TEST (test_labels_file)
{
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *labels = g_build_filename (dir, "labels.txt", NULL);
  gchar *wrong = g_build_filename (dir, "wrong.txt", NULL);
  gchar *launch, *model = vdtest_model (), *error;
  GstHarness *h;
  GstBuffer *out;
  GstVisionDetectMeta *meta;
  GstVideoRegionOfInterestMeta *roi;
  guint i;

  fail_unless (g_file_set_contents (labels, "sphere\ncube\npyramid\ndonut\n",
          -1, NULL));
  fail_unless (g_file_set_contents (wrong, "a\nb\n", -1, NULL));

  launch = g_strdup_printf ("labels=\"%s\" threshold=0.3", labels);
  h = vdtest_new_detect (THREADS, launch);
  g_free (launch);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  out = push_pull (h, frame);
  meta = vdtest_get_detect_meta (out);
  fail_unless (meta != NULL && meta->detections->len > 0);
  for (i = 0; i < meta->detections->len; i++) {
    const GstVisionDetection *d =
        &g_array_index (meta->detections, GstVisionDetection, i);
    const gchar *want[] = { NULL, "sphere", "cube", "pyramid", "donut" };

    fail_unless_equals_string (g_quark_to_string (d->label), want[d->label_id]);
    roi = gst_buffer_get_video_region_of_interest_meta_id (out, d->roi_id);
    fail_unless_equals_string (g_quark_to_string (roi->roi_type),
        want[d->label_id]);
  }
  gst_buffer_unref (out);
  gst_harness_teardown (h);

  /* a labels file that does not fit the model is an error naming it */
  launch = g_strdup_printf ("videotestsrc num-buffers=1 ! video/x-raw,"
      "width=64,height=48 ! visiondetect model=\"%s\" labels=\"%s\" ! "
      "fakesink", model, wrong);
  error = vdtest_pipeline_error (launch);
  fail_unless (error != NULL);
  fail_unless (strstr (error, wrong) != NULL && strstr (error, "2 names"),
      "%s", error);
  g_free (error);
  g_free (launch);

  /* names that would corrupt the metadata or the JSON are errors naming the
   * line: invalid UTF-8, a NUL byte (which would shift the names after it),
   * control characters, an absurd length */
  {
    static const struct
    {
      const gchar *contents;
      gssize length;
      const gchar *reason;
    } bad[] = {
      {"sphere\ncu\xff" "be\npyramid\ndonut\n", -1,
          "line 2 is not a usable class name: it is not valid UTF-8"},
      {"sphere\ncube\0junk\npyramid\ndonut\n", 31,
          "line 2 contains a NUL byte"},
      {"sphere\ncube\npyr\x01mid\ndonut\n", -1,
          "line 3 is not a usable class name: it contains the control "
            "character U+0001"},
      {"sphere\ncube\npyramid\ndo\tnut\n", -1, "line 4"},
    };
    gchar *bad_path = g_build_filename (dir, "bad.txt", NULL);
    GString *huge = g_string_new ("sphere\ncube\npyramid\n");

    for (i = 0; i < G_N_ELEMENTS (bad) + 1; i++) {
      const gchar *contents = i < G_N_ELEMENTS (bad) ? bad[i].contents : NULL;
      gssize length = i < G_N_ELEMENTS (bad) ? bad[i].length : -1;
      const gchar *reason = i < G_N_ELEMENTS (bad) ? bad[i].reason :
          "line 4 is not a usable class name: it is 300 bytes long";

      if (contents == NULL) {
        while (huge->len < strlen ("sphere\ncube\npyramid\n") + 300)
          g_string_append_c (huge, 'x');
        g_string_append_c (huge, '\n');
        contents = huge->str;
      }
      fail_unless (g_file_set_contents (bad_path, contents, length, NULL));
      launch = g_strdup_printf ("videotestsrc num-buffers=1 ! video/x-raw,"
          "width=64,height=48 ! visiondetect model=\"%s\" labels=\"%s\" ! "
          "fakesink", model, bad_path);
      error = vdtest_pipeline_error (launch);
      fail_unless (error != NULL, "labels file %u accepted", i);
      fail_unless (strstr (error, bad_path) != NULL
          && strstr (error, reason) != NULL, "%u: %s", i, error);
      fail_unless (g_utf8_validate (error, -1, NULL));
      g_free (error);
      g_free (launch);
    }
    g_string_free (huge, TRUE);
    g_unlink (bad_path);
    g_free (bad_path);
  }

  g_unlink (labels);
  g_unlink (wrong);
  g_rmdir (dir);
  g_free (labels);
  g_free (wrong);
  g_free (dir);
  g_free (model);
  gst_buffer_unref (frame);
}

GST_END_TEST;

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

static gchar *
start_error (const gchar * props)
{
  gchar *launch = g_strdup_printf ("videotestsrc num-buffers=1 ! "
      "video/x-raw,width=64,height=48 ! visiondetect %s ! fakesink", props);
  gchar *error = vdtest_pipeline_error (launch);

  g_free (launch);
  return error;
}

GST_START_TEST (test_missing_model)
{
  gchar *error = start_error ("model=/nonexistent/dir/model.safetensors");

  fail_unless (error != NULL, "no error for a missing model");
  fail_unless (strstr (error, "/nonexistent/dir/model.safetensors") != NULL
      && strstr (error, "does not exist") != NULL, "%s", error);
  g_free (error);
}

GST_END_TEST;

static void
check_corrupt (const gchar * name, const gchar * contents, gssize length,
    const gchar * expected_reason)
{
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, name, NULL);
  gchar *props = g_strdup_printf ("model=\"%s\"", path);
  gchar *error, *prefix;

  fail_unless (g_file_set_contents (path, contents, length, NULL));
  error = start_error (props);
  fail_unless (error != NULL, "no error for %s", name);
  /* "Could not load model "<path>": <the engine's reason>" */
  prefix = g_strdup_printf ("Could not load model \"%s\": ", path);
  fail_unless (g_str_has_prefix (error, prefix), "%s", error);
  fail_unless (strlen (error) > strlen (prefix) + 5, "no reason: %s", error);
  if (expected_reason != NULL)
    fail_unless (strstr (error, expected_reason) != NULL,
        "expected \"%s\" in: %s", expected_reason, error);
  GST_INFO ("%s: %s", name, error);
  g_free (prefix);
  g_free (error);
  g_unlink (path);
  g_rmdir (dir);
  g_free (props);
  g_free (path);
  g_free (dir);
}

GST_START_TEST (test_corrupt_model)
{
  gchar *model = vdtest_model ();
  gchar *contents;
  gsize length;

  check_corrupt ("empty.safetensors", "", 0, NULL);
  check_corrupt ("text.safetensors", "this is not a model file\n", -1, NULL);
  fail_unless (g_file_get_contents (model, &contents, &length, NULL));
  /* the header and half the tensors */
  check_corrupt ("truncated.safetensors", contents, length / 2, NULL);
  g_free (contents);
  g_free (model);
}

GST_END_TEST;

GST_START_TEST (test_default_model)
{
  gchar *error;

  /* $VISIONDETECT_MODEL names the model when the property is unset */
  g_setenv ("VISIONDETECT_MODEL", "/nonexistent/env-model.safetensors", TRUE);
  error = start_error ("");
  fail_unless (error != NULL);
  fail_unless (strstr (error, "/nonexistent/env-model.safetensors") != NULL,
      "%s", error);
  g_free (error);

  {
    gchar *model = vdtest_model ();

    g_setenv ("VISIONDETECT_MODEL", model, TRUE);
    error = start_error ("");
    fail_unless (error == NULL, "%s", error);
    g_free (model);
  }

  /* without it, the plugin of the build tree (its engine library is the build
   * tree's) finds the copy of the bundled model the build placed; where the
   * model is missing, the error lists every place looked in (the engine's
   * test_default_model_path and tests/model/test_readme_examples.sh) */
  g_setenv ("VISIONDETECT_MODEL", "", TRUE);
  error = start_error ("");
  fail_unless (error == NULL, "the bundled model does not start: %s", error);
  g_free (error);
}

GST_END_TEST;

GST_START_TEST (test_invalid_device)
{
  gchar *model = vdtest_model ();
  gchar *props = g_strdup_printf ("model=\"%s\" device=gpu7", model);
  gchar *error = start_error (props);

  fail_unless (error != NULL);
  fail_unless (strstr (error, "gpu7") != NULL, "%s", error);
  g_free (error);
  g_free (props);
  g_free (model);
}

GST_END_TEST;

/* precision=bf16 runs where the engine runs bf16 (vd-detect --info says whether it
 * does on this CPU, ONEDNN_MAX_CPU_ISA included) and is otherwise an element error
 * naming bf16 and the missing processor feature (on aarch64, where it is always
 * refused, what oneDNN gives bf16 there and what runs it on x86). meson runs this
 * case again with oneDNN capped at AVX2, where it must be refused. */
GST_START_TEST (test_bf16_precision)
{
  gchar *model = vdtest_model ();
  gchar *props =
      g_strdup_printf ("model=\"%s\" device=cpu precision=bf16", model);
  gchar *argv[] =
      { (gchar *) g_getenv ("VD_TEST_VD_DETECT"), (gchar *) "--info",
    (gchar *) "--model", model, (gchar *) "--device", (gchar *) "cpu",
    (gchar *) "--precision", (gchar *) "bf16", NULL
  };
  gchar *out = NULL, *err = NULL;
  gint status = -1;
  gchar *error;

  fail_unless (argv[0] != NULL);
  fail_unless (g_spawn_sync (NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
          &out, &err, &status, NULL));
  error = start_error (props);
  if (g_spawn_check_wait_status (status, NULL)) {
    GST_INFO ("bf16 runs here: %s", out);
    fail_unless (error == NULL,
        "bf16 runs in vd-detect but not in the element: %s", error);
  } else {
#if defined(__aarch64__)
    fail_unless (strstr (err,
            "precision bf16 has no oneDNN kernel on this aarch64 CPU") != NULL,
        "%s", err);
#else
    fail_unless (strstr (err,
            "precision bf16 needs a CPU with AVX512_BF16") != NULL, "%s", err);
#endif
    fail_unless (error != NULL,
        "bf16 refused by vd-detect, not by the element");
    fail_unless (strstr (error, "bf16") != NULL
        && strstr (error, "AVX512_BF16") != NULL, "%s", error);
  }
  if (g_strcmp0 (g_getenv ("VD_TEST_EXPECT_BF16"), "refused") == 0)
    fail_unless (error != NULL, "bf16 not refused with ONEDNN_MAX_CPU_ISA=%s",
        g_getenv ("ONEDNN_MAX_CPU_ISA"));
  g_free (error);
  g_free (out);
  g_free (err);
  g_free (props);
  g_free (model);
}

GST_END_TEST;

/* precision=int8: an uncalibrated model is an element error saying so (or, on a
 * CPU without VNNI, naming VNNI); a model calibrated by vd-detect --calibrate
 * runs where vd-detect runs it in int8, and is refused naming VNNI (on XNNPACK's
 * layers: the dot product) elsewhere.
 * The oneDNN-capped run of this case (no VNNI) must refuse both. */
GST_START_TEST (test_int8_precision)
{
  gchar *model = vdtest_model ();
  gchar *dir = g_dir_make_tmp ("vdtest-int8-XXXXXX", NULL);
  gchar *frame = g_build_filename (dir, "frame.ppm", NULL);
  gchar *calibrated = g_build_filename (dir, "calibrated.safetensors", NULL);
  gchar *props =
      g_strdup_printf ("model=\"%s\" device=cpu precision=int8", model);
  gchar *props_calibrated =
      g_strdup_printf ("model=\"%s\" device=cpu precision=int8", calibrated);
  const gchar *vd_detect = g_getenv ("VD_TEST_VD_DETECT");
  gchar *calibrate[] = { (gchar *) vd_detect, (gchar *) "--model", model,
    (gchar *) "--calibrate", calibrated, frame, NULL
  };
  gchar *info[] = { (gchar *) vd_detect, (gchar *) "--info",
    (gchar *) "--model", calibrated, (gchar *) "--device", (gchar *) "cpu",
    (gchar *) "--precision", (gchar *) "int8", NULL
  };
  GString *ppm = g_string_new ("P6\n64 48\n255\n");
  gchar *out = NULL, *err = NULL, *error;
  gint status = -1;
  gboolean runs;

  fail_unless (vd_detect != NULL);
  for (gint i = 0; i < 64 * 48 * 3; i++)
    g_string_append_c (ppm, (gchar) ((i * 7) % 251));
  fail_unless (g_file_set_contents (frame, ppm->str, ppm->len, NULL));

  /* a model without calibration */
  error = start_error (props);
  fail_unless (error != NULL, "int8 ran a model without calibration");
  fail_unless (strstr (error, "int8") != NULL && (strstr (error,
              "calibrat") != NULL
          || strstr (error, "VNNI") != NULL), "%s", error);
  g_free (error);

  /* calibrated */
  fail_unless (g_spawn_sync (NULL, calibrate, NULL, G_SPAWN_DEFAULT, NULL, NULL,
          NULL, &err, &status, NULL));
  fail_unless (g_spawn_check_wait_status (status, NULL), "%s", err);
  g_free (err);
  fail_unless (g_spawn_sync (NULL, info, NULL, G_SPAWN_DEFAULT, NULL, NULL,
          &out, &err, &status, NULL));
  runs = g_spawn_check_wait_status (status, NULL);
  error = start_error (props_calibrated);
  if (runs) {
    GST_INFO ("int8 runs here: %s", out);
    fail_unless (error == NULL,
        "int8 runs in vd-detect but not in the element: %s", error);
  } else {
    /* oneDNN's layers without VNNI, or XNNPACK's without the dot product */
    fail_unless (strstr (err, "precision int8 needs a CPU with VNNI") != NULL
        || strstr (err, "dot product") != NULL, "%s", err);
    fail_unless (error != NULL && (strstr (error, "VNNI") != NULL
            || strstr (error, "dot product") != NULL), "%s", error);
  }
  if (g_strcmp0 (g_getenv ("VD_TEST_EXPECT_INT8"), "refused") == 0)
    fail_unless (!runs && error != NULL, "int8 not refused with "
        "ONEDNN_MAX_CPU_ISA=%s", g_getenv ("ONEDNN_MAX_CPU_ISA"));
  g_free (error);
  g_free (out);
  g_free (err);
  g_string_free (ppm, TRUE);
  g_unlink (calibrated);
  g_unlink (frame);
  g_rmdir (dir);
  g_free (props_calibrated);
  g_free (props);
  g_free (calibrated);
  g_free (frame);
  g_free (dir);
  g_free (model);
}

GST_END_TEST;

/* A frame the element cannot read is a flow error with a message, not a crash. */
GST_START_TEST (test_bad_frame_is_flow_error)
{
  GstHarness *h = vdtest_new_detect (THREADS, NULL);
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBus *bus = gst_bus_new ();
  GstMessage *msg;
  GError *err = NULL;

  gst_element_set_bus (detect, bus);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  fail_unless_equals_int (gst_harness_push (h, gst_buffer_new_allocate (NULL,
              100, NULL)), GST_FLOW_ERROR);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL);
  gst_message_parse_error (msg, &err, NULL);
  fail_unless (strstr (err->message, "frame 0") != NULL, "%s", err->message);
  g_error_free (err);
  gst_message_unref (msg);

  gst_element_set_bus (detect, NULL);
  gst_object_unref (bus);
  gst_object_unref (detect);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* ------------------------------------------------------------------------ */
/* Properties                                                                */

GST_START_TEST (test_properties)
{
  GstElement *detect = gst_element_factory_make ("visiondetect", NULL);
  gchar *model, *device, *classes, *labels;
  gint precision, max_detections, threads;
  gfloat threshold, iou;
  guint interval, max_in_flight;
  gint late_frames;
  gboolean qos;

  fail_unless (detect != NULL);
  g_object_get (detect, "model", &model, "device", &device, "precision",
      &precision, "threshold", &threshold, "iou-threshold", &iou,
      "max-detections", &max_detections, "interval", &interval, "classes",
      &classes, "labels", &labels, "threads", &threads, "qos", &qos, NULL);
  fail_unless (model == NULL);
  fail_unless_equals_string (device, "auto");
  fail_unless_equals_int (precision, 0);
  fail_unless (threshold == 0.5f && iou == -1.0f);
  fail_unless_equals_int (max_detections, 0);
  fail_unless_equals_int (interval, 1);
  fail_unless (classes == NULL && labels == NULL);
  fail_unless_equals_int (threads, 0);
  /* late frames are skipped by the element, not dropped by the base class */
  fail_unless (!qos);
  g_object_get (detect, "max-in-flight", &max_in_flight, "late-frames",
      &late_frames, NULL);
  fail_unless_equals_int (max_in_flight, 1);
  fail_unless_equals_int (late_frames, GST_VISION_DETECT_LATE_SKIP_INFERENCE);
  gst_util_set_object_arg (G_OBJECT (detect), "late-frames", "drop");
  g_object_get (detect, "qos", &qos, NULL);
  fail_unless (qos);
  g_free (device);

  gst_util_set_object_arg (G_OBJECT (detect), "precision", "fp16");
  g_object_set (detect, "model", "/m.safetensors", "device", "cuda:1",
      "threshold", 0.25f, "iou-threshold", 0.4f, "max-detections", 7,
      "interval", 5u, "classes", "a,b", "labels", "/l.txt", "threads", 3,
      "qos", FALSE, NULL);
  g_object_get (detect, "model", &model, "device", &device, "precision",
      &precision, "threshold", &threshold, "iou-threshold", &iou,
      "max-detections", &max_detections, "interval", &interval, "classes",
      &classes, "labels", &labels, "threads", &threads, "qos", &qos, NULL);
  fail_unless_equals_string (model, "/m.safetensors");
  fail_unless_equals_string (device, "cuda:1");
  fail_unless_equals_int (precision, 2);
  fail_unless (threshold == 0.25f && iou == 0.4f);
  fail_unless_equals_int (max_detections, 7);
  fail_unless_equals_int (interval, 5);
  fail_unless_equals_string (classes, "a,b");
  fail_unless_equals_string (labels, "/l.txt");
  fail_unless_equals_int (threads, 3);
  fail_unless (!qos);
  g_free (model);
  g_free (device);
  g_free (classes);
  g_free (labels);
  gst_object_unref (detect);
}

GST_END_TEST;

/* device=auto on the CPU: the warning names the engine's reason (a build
 * without CUDA, no device, a driver error, ...), not one fixed sentence */
GST_START_TEST (test_cpu_fallback_reason)
{
  GstElement *detect = gst_element_factory_make ("visiondetect", NULL);
  GstBus *bus = gst_bus_new ();
  gchar *model = vdtest_model ();
  GstMessage *msg;
  GError *err = NULL;
  gchar *debug = NULL;

  g_object_set (detect, "model", model, "threads", THREADS, NULL);
  gst_element_set_bus (detect, bus);
  fail_unless (gst_element_set_state (detect, GST_STATE_PAUSED) !=
      GST_STATE_CHANGE_FAILURE);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  if (msg == NULL) {
    /* on a GPU: no fallback, nothing to say */
    GST_INFO ("running on CUDA: no fallback warning");
  } else {
    gst_message_parse_warning (msg, &err, &debug);
    fail_unless (g_str_has_prefix (err->message, "No usable CUDA device ("),
        "%s", err->message);
    /* the engine's reason, between the parentheses: the CUDA runtime's words,
     * or that the build has no CUDA backend; each names CUDA */
    fail_unless (strstr (err->message, "): running on the CPU") != NULL
        && strstr (err->message + strlen ("No usable CUDA device ("), "CUDA")
        != NULL, "%s", err->message);
    g_error_free (err);
    g_free (debug);
    gst_message_unref (msg);
  }
  fail_unless_equals_int (gst_element_set_state (detect, GST_STATE_NULL),
      GST_STATE_CHANGE_SUCCESS);
  gst_element_set_bus (detect, NULL);
  gst_object_unref (bus);
  gst_object_unref (detect);
  g_free (model);
}

GST_END_TEST;

/* model and device cannot change once started: a warning, the value is kept */
GST_START_TEST (test_model_locked_while_running)
{
  GstHarness *h = vdtest_new_detect (THREADS, NULL);
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBus *bus = gst_bus_new ();
  gchar *model = vdtest_model (), *now;
  GstMessage *msg;
  GError *err = NULL;

  gst_element_set_bus (detect, bus);
  g_object_set (detect, "model", "/other.safetensors", NULL);
  g_object_get (detect, "model", &now, NULL);
  fail_unless_equals_string (now, model);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  fail_unless (msg != NULL, "no warning");
  gst_message_parse_warning (msg, &err, NULL);
  fail_unless (strstr (err->message, "\"model\"") != NULL, "%s", err->message);
  g_error_free (err);
  gst_message_unref (msg);

  g_object_set (detect, "device", "cuda", NULL);
  g_free (now);
  g_object_get (detect, "device", &now, NULL);
  fail_unless_equals_string (now, "auto");

  g_free (now);
  g_free (model);
  gst_element_set_bus (detect, NULL);
  gst_object_unref (bus);
  gst_object_unref (detect);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* Model sharing: every element of the process that runs the same file shares
 * one loaded model; the INFO log says which happened. */
typedef struct
{
  gint loaded, shared;
} LoadCounts;

static void
count_model_loads (GstDebugCategory * category, GstDebugLevel level,
    const gchar * file, const gchar * function, gint line, GObject * object,
    GstDebugMessage * message, gpointer user_data)
{
  LoadCounts *counts = user_data;
  const gchar *text = gst_debug_message_get (message);

  if (level != GST_LEVEL_INFO
      || strcmp (gst_debug_category_get_name (category), "visiondetect") != 0)
    return;
  if (g_str_has_prefix (text, "loaded model "))
    g_atomic_int_inc (&counts->loaded);
  else if (g_str_has_prefix (text, "sharing the loaded model "))
    g_atomic_int_inc (&counts->shared);
}

static GstElement *
start_paused (const gchar * launch)
{
  GstElement *pipeline = gst_parse_launch (launch, NULL);

  fail_unless (pipeline != NULL, "%s", launch);
  fail_unless (gst_element_set_state (pipeline, GST_STATE_PAUSED) !=
      GST_STATE_CHANGE_FAILURE);
  fail_unless (gst_element_get_state (pipeline, NULL, NULL,
          30 * GST_SECOND) == GST_STATE_CHANGE_SUCCESS, "%s", launch);
  return pipeline;
}

static void
stop (GstElement * pipeline)
{
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
}

GST_START_TEST (test_model_shared_between_elements)
{
  gchar *model = vdtest_model (), *contents;
  gchar *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  gchar *copy = g_build_filename (dir, "shared.safetensors", NULL);
  gsize length;
  LoadCounts counts = { 0, 0 };
  gchar *two, *one;
  GstElement *a, *b;

  fail_unless (g_file_get_contents (model, &contents, &length, NULL));
  fail_unless (g_file_set_contents (copy, contents, length, NULL));
  two = g_strdup_printf ("videotestsrc num-buffers=2 "
      "! video/x-raw,format=RGB,width=160,height=120 ! tee name=t "
      "t. ! queue ! visiondetect model=\"%s\" ! fakesink "
      "t. ! queue ! visiondetect model=\"%s\" ! fakesink", copy, copy);
  one = g_strdup_printf ("videotestsrc num-buffers=2 "
      "! video/x-raw,format=RGB,width=160,height=120 "
      "! visiondetect model=\"%s\" ! fakesink", copy);
  gst_debug_set_threshold_for_name ("visiondetect", GST_LEVEL_INFO);
  gst_debug_add_log_function (count_model_loads, &counts, NULL);

  /* two elements, one load */
  a = start_paused (two);
  fail_unless (counts.loaded == 1 && counts.shared == 1,
      "two elements: %d loads, %d shared", counts.loaded, counts.shared);
  /* a third element while they run: shared too */
  b = start_paused (one);
  fail_unless (counts.loaded == 1 && counts.shared == 2,
      "third element: %d loads, %d shared", counts.loaded, counts.shared);
  stop (b);
  stop (a);

  /* the last user gone, the model is gone: the next start loads it again */
  a = start_paused (one);
  fail_unless (counts.loaded == 2 && counts.shared == 2,
      "after release: %d loads, %d shared", counts.loaded, counts.shared);
  /* the file rewritten while in use: the new file is loaded, not the old
   * model reused */
  fail_unless (g_file_set_contents (copy, contents, length, NULL));
  b = start_paused (one);
  fail_unless (counts.loaded == 3 && counts.shared == 2,
      "rewritten file: %d loads, %d shared", counts.loaded, counts.shared);
  stop (b);
  stop (a);

  fail_unless (gst_debug_remove_log_function (count_model_loads) == 1);
  gst_debug_set_threshold_for_name ("visiondetect", GST_LEVEL_WARNING);
  g_unlink (copy);
  g_rmdir (dir);
  g_free (one);
  g_free (two);
  g_free (contents);
  g_free (copy);
  g_free (dir);
  g_free (model);
}

GST_END_TEST;

/* A copy of the test model with every value of @tensor set to NaN, in a new
 * temporary directory (*@dir); returns its path. */
static gchar *
nan_model (const gchar * tensor, gchar ** dir)
{
  gchar *model = vdtest_model (), *contents = NULL, *path;
  gsize length = 0;
  guint64 header_len = 0;
  JsonParser *parser = json_parser_new ();
  JsonObject *entry;
  JsonArray *span;
  const gchar *dtype;
  gint64 begin, end, i;
  gint b;

  fail_unless (g_file_get_contents (model, &contents, &length, NULL));
  for (b = 7; b >= 0; b--)
    header_len = (header_len << 8) | (guint8) contents[b];
  fail_unless (json_parser_load_from_data (parser, contents + 8,
          (gssize) header_len, NULL));
  entry = json_object_get_object_member (json_node_get_object
      (json_parser_get_root (parser)), tensor);
  fail_unless (entry != NULL, "no tensor %s", tensor);
  dtype = json_object_get_string_member (entry, "dtype");
  span = json_object_get_array_member (entry, "data_offsets");
  begin = json_array_get_int_element (span, 0);
  end = json_array_get_int_element (span, 1);
  if (g_strcmp0 (dtype, "F32") == 0) {
    for (i = begin; i + 4 <= end; i += 4) {
      gfloat nan = NAN;

      memcpy (contents + 8 + header_len + i, &nan, 4);
    }
  } else {
    fail_unless (g_strcmp0 (dtype, "F16") == 0
        || g_strcmp0 (dtype, "BF16") == 0, "%s is %s", tensor, dtype);
    for (i = begin; i + 2 <= end; i += 2) {
      /* a quiet NaN in either (little-endian) */
      guint16 nan = g_strcmp0 (dtype, "F16") == 0 ? 0x7e00 : 0x7fc0;

      memcpy (contents + 8 + header_len + i, &nan, 2);
    }
  }
  *dir = g_dir_make_tmp ("vdtest-XXXXXX", NULL);
  path = g_build_filename (*dir, "nan.safetensors", NULL);
  fail_unless (g_file_set_contents (path, contents, (gssize) length, NULL));
  g_object_unref (parser);
  g_free (contents);
  g_free (model);
  return path;
}

/* Pushes @n frames through visiondetect with @model on the CPU; returns the
 * warnings posted, as one string (messages separated by newlines). */
static gchar *
warnings_of_run (const gchar * model, gint n)
{
  gchar *launch = g_strdup_printf ("visiondetect model=\"%s\" device=cpu "
      "threads=%d", model, THREADS);
  GstHarness *h = gst_harness_new_parse (launch);
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  GstBus *bus = gst_bus_new ();
  GString *warnings = g_string_new ("");
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_frame (0, &info);
  GstMessage *msg;
  gint i;

  gst_element_set_bus (detect, bus);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (i = 0; i < n; i++)
    gst_buffer_unref (push_pull (h, frame));
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING)) != NULL) {
    GError *err = NULL;

    gst_message_parse_warning (msg, &err, NULL);
    g_string_append_printf (warnings, "%s\n", err->message);
    g_error_free (err);
    gst_message_unref (msg);
  }
  gst_element_set_bus (detect, NULL);
  gst_object_unref (bus);
  gst_object_unref (detect);
  gst_harness_teardown (h);
  gst_buffer_unref (frame);
  g_free (launch);
  return g_string_free (warnings, FALSE);
}

/* NaN in the model's outputs (here: every RPN objectness logit) is one
 * warning that says so, not silence and not one per frame; a sound model
 * gets none. */
GST_START_TEST (test_nonfinite_warning)
{
  gchar *model = vdtest_model (), *dir = NULL;
  gchar *poisoned = nan_model ("rpn.head.cls_logits.weight", &dir);
  gchar *clean = warnings_of_run (model, 2);
  gchar *warnings = warnings_of_run (poisoned, 3);
  const gchar *first = strstr (warnings, "infinite or NaN value(s)");

  fail_unless_equals_string (clean, "");
  fail_unless (first != NULL, "no warning about NaN: \"%s\"", warnings);
  fail_unless (strstr (first + 1, "infinite or NaN value(s)") == NULL,
      "warned more than once: %s", warnings);
  fail_unless (strstr (warnings, "precision=fp32") != NULL, "%s", warnings);
  GST_INFO ("%s", warnings);
  g_unlink (poisoned);
  g_rmdir (dir);
  g_free (clean);
  g_free (warnings);
  g_free (poisoned);
  g_free (dir);
  g_free (model);
}

GST_END_TEST;

static Suite *
visiondetect_suite (void)
{
  Suite *s = suite_create ("visiondetect");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 300);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_missing_model);
  tcase_add_test (tc, test_corrupt_model);
  tcase_add_test (tc, test_default_model);
  tcase_add_test (tc, test_gap_repeats);
  tcase_add_test (tc, test_invalid_device);
  tcase_add_test (tc, test_bf16_precision);
  tcase_add_test (tc, test_int8_precision);
  tcase_add_test (tc, test_model_locked_while_running);
  tcase_add_test (tc, test_model_shared_between_elements);
  tcase_add_test (tc, test_bad_frame_is_flow_error);
  tcase_add_test (tc, test_matches_vd_detect);
#ifdef HAVE_GST_ANALYTICS
  tcase_add_test (tc, test_analytics_after_upstream_entries);
  /* where gst-plugins-bad's analyticsoverlay plugin is installed
   * (tests/gst/with-gstreamer.sh builds it) */
  {
    GstElementFactory *overlay =
        gst_element_factory_find ("objectdetectionoverlay");

    if (overlay != NULL) {
      tcase_add_test (tc, test_analytics_gstreamer_overlay);
      gst_object_unref (overlay);
    } else {
      g_printerr ("objectdetectionoverlay not installed: "
          "test_analytics_gstreamer_overlay not run\n");
    }
  }
#endif
  tcase_add_test (tc, test_rgb_formats);
  tcase_add_test (tc, test_yuv_formats);
  tcase_add_test (tc, test_yuv_matches_rgb_trained_model);
  tcase_add_test (tc, test_timestamps_flags_pixels_pass_through);
  tcase_add_test (tc, test_gap_and_interval);
  tcase_add_test (tc, test_class_filter);
  tcase_add_test (tc, test_thresholds_while_playing);
  tcase_add_test (tc, test_resolution_change);
  tcase_add_test (tc, test_detections_survive_videoscale);
  tcase_add_test (tc, test_cpu_fallback_reason);
  tcase_add_test (tc, test_latency_before_first_frame);
  tcase_add_test (tc, test_qos_drop);
  tcase_add_test (tc, test_qos_skip_inference);
  tcase_add_test (tc, test_live_deadline);
  tcase_add_test (tc, test_live_deadline_after_wait);
  tcase_add_test (tc, test_inference_status);
  tcase_add_test (tc, test_flush_resets_interval);
  tcase_add_test (tc, test_crop_meta_refused);
  tcase_add_test (tc, test_videoscale_letterbox_drops_meta);
  tcase_add_test (tc, test_frames_in_flight);
  tcase_add_test (tc, test_labels_file);
  tcase_add_test (tc, test_nonfinite_warning);
  return s;
}

GST_CHECK_MAIN (visiondetect);
