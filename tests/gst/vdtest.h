/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the element tests: the fixtures (model, frames), vd-detect's
 * results for comparison, and access to visiondetect's companion meta by its
 * registered name (the tests do not link the plugin). */
#ifndef VDTEST_H
#define VDTEST_H

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <gst/video/video.h>
#include <json-glib/json-glib.h>

#include <gst/visiondetect/gstvisiondetectmeta.h>

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

/* The caps of the test frames (frame-<i>.ppm: 320x240) and of a larger size. */
#define VDTEST_CAPS_320 \
    "video/x-raw,format=RGB,width=320,height=240,framerate=30/1"
#define VDTEST_CAPS_400 \
    "video/x-raw,format=RGB,width=400,height=300,framerate=30/1"

/* The fixture frame-<@index>.ppm as vdtest_load_ppm gives it. */
GstBuffer *vdtest_load_frame (gint index, GstVideoInfo * info);

/* A copy of @frame at @pts, 33 ms long. */
GstBuffer *vdtest_timed_copy (GstBuffer * frame, GstClockTime pts);

/* "visiondetect model=<the test model> threads=@threads <extra>", the extra
 * properties and downstream elements formatted from @extra_format. */
gchar *vdtest_detect_launch (gint threads, const gchar * extra_format, ...)
    G_GNUC_PRINTF (2, 3);

/* A "visiondetect model=<the test model> threads=@threads <@extra>" harness. */
GstHarness *vdtest_new_detect (gint threads, const gchar * extra);

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
/* The inference status in @buffer's companion meta; fails the test without
 * one. */
GstVisionDetectInference vdtest_inference_of (GstBuffer * buffer);
/* Whether the companion metas of @a and @b (both required) hold the same frame
 * size and every field of every detection the same, and the buffers as many
 * ROI metas. */
gboolean vdtest_same_detections (GstBuffer * a, GstBuffer * b);

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

/* A COCO uncompressed RLE segmentation ({"size": [h, w], "counts": column-major
 * runs of 0 and 1, from 0}) decoded into a @width x @height frame of 0 and 1
 * (g_free it); fails the test unless it has that size and its runs cover it
 * exactly. */
guint8 *vdtest_decode_rle (JsonObject * segmentation, guint width,
    guint height);

/* A copy of the pixels of @buffer, mapped as a packed RGB @width x @height
 * frame, and its row stride (*@stride); g_free it. */
guint8 *vdtest_frame_bytes (GstBuffer * buffer, guint width, guint height,
    gint * stride);

G_END_DECLS

#endif /* VDTEST_H */
