/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A C application of the detection meta, built against the installed library
 * through its pkg-config file (test_meta_pkgconfig.sh): writes a meta as
 * visiondetect does and reads it back through the public accessors, NULL and
 * out-of-range arguments included. Exits 0 when every check holds. */
#include <gst/visiondetect/gstvisiondetectmeta.h>

#include <string.h>

static int failures = 0;

#define CHECK(cond) G_STMT_START { \
  if (!(cond)) { \
    g_printerr ("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    failures++; \
  } } G_STMT_END

int
main (int argc, char **argv)
{
  GstBuffer *buffer;
  GstVisionDetectMeta *meta;
  GstVisionDetection in = { 0 }, out;
  GstVisionDetection *copy;

  gst_init (&argc, &argv);
  /* the argument checks below are meant to fail: warnings, not aborts */
  g_log_set_always_fatal (G_LOG_FATAL_MASK);

  buffer = gst_buffer_new ();
  CHECK (gst_buffer_get_vision_detect_meta (buffer) == NULL);
  meta = gst_buffer_add_vision_detect_meta (buffer, 640, 480);
  CHECK (meta != NULL);
  meta->inference = GST_VISION_DETECT_SKIPPED_LATE;
  in.x = 10.25;
  in.y = 20.5;
  in.w = 30.0;
  in.h = 40.75;
  in.confidence = 0.875;
  in.label_id = 3;
  in.label = g_quark_from_static_string ("circle");
  in.roi_id = 7;
  in.object_id = 42;
  in.tracked = TRUE;
  gst_vision_detect_meta_add_detection (meta, &in);

  meta = gst_buffer_get_vision_detect_meta (buffer);
  CHECK (meta != NULL);
  CHECK (gst_vision_detect_meta_get_width (meta) == 640);
  CHECK (gst_vision_detect_meta_get_height (meta) == 480);
  CHECK (gst_vision_detect_meta_get_inference (meta) ==
      GST_VISION_DETECT_SKIPPED_LATE);
  CHECK (strcmp (gst_vision_detect_inference_name
          (gst_vision_detect_meta_get_inference (meta)), "late") == 0);
  CHECK (gst_vision_detect_meta_get_n_detections (meta) == 1);
  memset (&out, 0, sizeof (out));
  CHECK (gst_vision_detect_meta_get_detection (meta, 0, &out));
  CHECK (out.x == in.x && out.y == in.y && out.w == in.w && out.h == in.h);
  CHECK (out.confidence == in.confidence && out.label_id == in.label_id);
  CHECK (out.roi_id == in.roi_id && out.object_id == in.object_id);
  CHECK (out.tracked == in.tracked);
  CHECK (g_strcmp0 (gst_vision_detection_get_label (&out), "circle") == 0);

  copy = gst_vision_detection_copy (&out);
  CHECK (copy != NULL && copy->object_id == 42);
  gst_vision_detection_free (copy);
  CHECK (G_TYPE_IS_BOXED (GST_TYPE_VISION_DETECTION));
  CHECK (GST_VISION_DETECT_META_API_TYPE != 0);
  CHECK (GST_VISION_DETECT_META_INFO != NULL);

  /* bad arguments: refused, nothing crashes, @out untouched */
  memset (&out, 0, sizeof (out));
  CHECK (!gst_vision_detect_meta_get_detection (meta, 1, &out));
  CHECK (out.object_id == 0);
  CHECK (!gst_vision_detect_meta_get_detection (meta, 0, NULL));
  CHECK (!gst_vision_detect_meta_get_detection (NULL, 0, &out));
  CHECK (gst_vision_detect_meta_get_n_detections (NULL) == 0);
  CHECK (gst_vision_detect_meta_get_width (NULL) == 0);
  CHECK (gst_vision_detect_meta_get_height (NULL) == 0);
  CHECK (gst_buffer_get_vision_detect_meta (NULL) == NULL);
  CHECK (gst_vision_detection_get_label (NULL) == NULL);
  gst_vision_detection_free (NULL);

  /* an instance mask: 3x2 bytes at (5, 7), shared with the meta */
  {
    static const guint8 pixels[6] = { 0, 127, 128, 255, 200, 1 };
    GBytes *bytes = g_bytes_new_static (pixels, sizeof (pixels));
    GstVisionDetectionMask *mask;
    GPtrArray *masks = NULL;
    GArray *detections;
    const guint8 *data;
    guint x = 0, y = 0, w = 0, h = 0;

    CHECK (gst_vision_detect_meta_add_detection_with_mask (meta, &in, 5, 7, 3,
            2, bytes));
    CHECK (!gst_vision_detect_meta_add_detection_with_mask (meta, &in, 5, 7, 3,
            3, bytes));
    CHECK (gst_vision_detect_meta_get_n_detections (meta) == 2);
    CHECK (gst_vision_detect_meta_get_mask_data (meta, 0, NULL, NULL, NULL,
            NULL) == NULL);
    data = gst_vision_detect_meta_get_mask_data (meta, 1, &x, &y, &w, &h);
    CHECK (data == pixels && x == 5 && y == 7 && w == 3 && h == 2);
    g_bytes_unref (bytes);
    bytes = gst_vision_detect_meta_get_mask (meta, 1, NULL, NULL, NULL, NULL);
    CHECK (bytes != NULL && g_bytes_get_size (bytes) == 6);
    g_bytes_unref (bytes);
    /* no ROI meta on the buffer: no detection, no mask */
    detections = gst_vision_detections_from_buffer_full (buffer, 640, 480,
        &masks);
    CHECK (detections->len == 0 && masks != NULL && masks->len == 0);
    g_array_unref (detections);
    g_ptr_array_unref (masks);
    CHECK (G_TYPE_IS_BOXED (GST_TYPE_VISION_DETECTION_MASK));
    mask = g_new0 (GstVisionDetectionMask, 1);
    mask->x = 5;
    mask->y = 7;
    mask->width = 3;
    mask->height = 2;
    mask->data = g_bytes_new_static (pixels, sizeof (pixels));
    CHECK (!gst_vision_detection_mask_at (mask, 5, 7));
    CHECK (gst_vision_detection_mask_at (mask, 7, 7));
    CHECK (gst_vision_detection_mask_at (mask, 5, 8));
    CHECK (!gst_vision_detection_mask_at (mask, 8, 7));
    CHECK (gst_vision_detection_mask_get_data (mask) == mask->data);
    gst_vision_detection_mask_free (gst_vision_detection_mask_copy (mask));
    gst_vision_detection_mask_free (mask);
  }

  /* keypoints: two on detection 1, copied; bad lengths and indices refused */
  {
    const gfloat points[6] = { 10.0f, 12.0f, 0.5f, 20.0f, 22.0f, -1.0f };
    const gfloat *got;
    gsize n = 99;

    CHECK (gst_vision_detect_meta_get_keypoints (meta, 1, &n) == NULL
        && n == 0);
    CHECK (gst_vision_detect_meta_set_keypoints (meta, 1, points, 6));
    CHECK (!gst_vision_detect_meta_set_keypoints (meta, 1, points, 5));
    CHECK (!gst_vision_detect_meta_set_keypoints (meta, 2, points, 6));
    CHECK (!gst_vision_detect_meta_set_keypoints (NULL, 0, points, 6));
    got = gst_vision_detect_meta_get_keypoints (meta, 1, &n);
    CHECK (got != NULL && got != points && n == 6 && got[4] == 22.0f);
    CHECK (gst_vision_detect_meta_get_keypoints (meta, 2, &n) == NULL
        && n == 0);
    CHECK (gst_vision_detect_meta_set_keypoints (meta, 1, NULL, 0));
    CHECK (gst_vision_detect_meta_get_keypoints (meta, 1, &n) == NULL);
  }

  gst_buffer_unref (buffer);
  if (failures == 0)
    g_print ("all checks passed\n");
  return failures == 0 ? 0 : 1;
}
