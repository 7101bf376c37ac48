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

  gst_buffer_unref (buffer);
  if (failures == 0)
    g_print ("all checks passed\n");
  return failures == 0 ? 0 : 1;
}
