/* Helpers shared by the element tests: the fixtures (model, frames), vd-detect's
 * results for comparison, and access to visiondetect's companion meta by its
 * registered name (the tests do not link the plugin). */
#ifndef VDTEST_H
#define VDTEST_H

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <gst/video/video.h>

#include "../../gst/gstvisiondetectmeta.h"

G_BEGIN_DECLS

/* One detection as vd-detect prints it (original-frame pixels). */
typedef struct
{
  gdouble x1, y1, x2, y2;
  gdouble score;
  gint label;
  gchar label_name[64];
} VdTestDetection;

/* $VD_TEST_FIXTURES/<name>; aborts the test when the file is missing */
gchar *vdtest_fixture (const gchar * name);
/* the test model (gst-test-model.safetensors) */
gchar *vdtest_model (void);

/* A packed RGB buffer of a binary PPM, with GStreamer's default stride (rows
 * rounded up to 4 bytes) and a GstVideoMeta; fills @info. */
GstBuffer *vdtest_load_ppm (const gchar * path, GstVideoInfo * info);

/* Runs vd-detect --device cpu --threads N --threshold T --json on @ppm and returns
 * its detections in its order (score descending). */
GArray *vdtest_vd_detect (const gchar * model, const gchar * ppm,
    gdouble threshold, gint threads);

/* The companion meta, through its registered names. The plugin must be loaded
 * (vdtest_load_plugin). */
void vdtest_load_plugin (void);
GType vdtest_detect_meta_api (void);
GstVisionDetectMeta *vdtest_get_detect_meta (GstBuffer * buffer);
GstVisionDetectMeta *vdtest_add_detect_meta (GstBuffer * buffer, guint width,
    guint height);
void vdtest_add_detection (GstVisionDetectMeta * meta, gdouble x, gdouble y,
    gdouble w, gdouble h, gdouble confidence, gint label_id,
    const gchar * label, gint roi_id);
guint vdtest_count_roi_metas (GstBuffer * buffer);

/* Pushes @buffer through a "appsrc ! <description> ! appsink" pipeline with @caps
 * and returns the output buffers (all of them until EOS), or fails the test on an
 * error message. */
GList *vdtest_run_pipeline (const gchar * description, const gchar * caps,
    GstBuffer ** buffers, guint n_buffers);

/* A GstBus error of a pipeline that fails to start, as "message\ndebug", or NULL
 * when it reached EOS. */
gchar *vdtest_pipeline_error (const gchar * launch);

/* Bounding box / intersection over union of two x, y, w, h boxes. */
gdouble vdtest_iou (gdouble ax, gdouble ay, gdouble aw, gdouble ah,
    gdouble bx, gdouble by, gdouble bw, gdouble bh);

G_END_DECLS

#endif /* VDTEST_H */
