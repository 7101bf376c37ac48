/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's instance, shared by the element (gstvisiondetect.c) and its
 * streaming (gstvisiondetectstream.c); not installed. */
#ifndef __GST_VISION_DETECT_PRIVATE_H__
#define __GST_VISION_DETECT_PRIVATE_H__

#include "vd_config.h"

#include "gstvisiondetect.h"
#include "gstvisiondetectmeta.h"
#include "helpers/batcher.h"
#include "helpers/detections.h"
#include "helpers/framecopy.h"
#include "helpers/scheduler.h"

#include <gst/video/video.h>
#include <visiondetect/vd.h>

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN (gst_vision_detect_debug);
#define GST_CAT_DEFAULT gst_vision_detect_debug

/* A frame between the streaming thread and the output thread. */
typedef struct
{
  GstVisionFrame frame;
  gboolean *keep_class;         /* a reference (g_rc_box) or NULL: every class */
  GstVisionBatchRequest *request;       /* shared engine: the frame's, or NULL */
  vd_result result;             /* collected, when @have_result */
  gboolean have_result;
  /* INFERRED: the frame's number among the inferred frames (from 1);
   * REPEATED: that of the inferred frame whose pixels it repeats */
  guint64 inferred_id;
} GstVisionDetectFrame;

struct _GstVisionDetect
{
  GstBaseTransform parent;

  /* properties, protected by the object lock */
  gchar *model_path;
  gchar *device;
  GstVisionDetectPrecision precision;
  gfloat threshold;
  gfloat iou_threshold;
  gint max_detections;
  guint interval;
  gchar *classes;
  gchar *labels_path;
  gint threads;
  guint max_in_flight;
  GstVisionDetectLateFrames late_frames;
  GstVisionDetectGapFrames gap_frames;
  guint batch_size;
  GstClockTime batch_timeout;
  gboolean thresholds_changed;  /* set by the property setters, read when streaming */
  gboolean classes_changed;
  gboolean started;             /* between start() and stop() */

  /* streaming state: created in start(), released in stop(); only the streaming
   * thread touches it in between */
  vd_model *model;
  vd_context *ctx;              /* batch-size 1: the element's own engine */
  /* batch-size > 1: the shared engine instead of @ctx (set and cleared under
   * the object lock and the scheduler's lock, so that the getters and the
   * cancelling threads may read it) */
  GstVisionBatcherClient *batch_client;
  gchar **class_names;          /* num_classes names: the model's or the labels file's */
  gchar **keypoint_names;       /* the model's keypoint names, or NULL */
  gint num_classes;
  gboolean *keep_class;         /* num_classes flags (g_rc_box); NULL keeps every class */
  GstVideoInfo info;
  gboolean have_info;
  guint64 frame_count;
  gboolean pending_discont;     /* a frame was dropped: mark the next one */
  /* GAP buffers that repeat the last inferred frame carry its detections:
   * once the stream has had a GAP buffer, each inferred frame's pixels are
   * kept (@last_frame, inferred frame number @last_frame_id) to compare the
   * next GAP buffers with */
  guint64 n_inferred_ids;
  gboolean seen_gap;
  GstVisionFrameCopy last_frame;
  guint64 last_frame_id;
  /* the output thread's: the last inferred frame pushed and its result (from
   * start() to stop(), when no frame is in flight) */
  vd_result last_result;
  gboolean have_last_result;
  guint64 last_result_id;

  /* Frames in order, each passed downstream by the scheduler's output thread
   * once the engine's result for it (if it was submitted) is collected; the
   * latency model and the late-frame policy. */
  GstVisionScheduler sched;

  /* the engine's warnings, posted once per start(): by the output thread, or
   * by the streaming thread with nothing in flight (warm-up) */
  gboolean warned_graphs;       /* graph capture failing (the info when back) */
  gboolean warned_nonfinite;

  /* under the object lock: */
  guint64 n_inferred, n_skipped_late, n_repeated;
};

/* gstvisiondetectstream.c */
extern const GstVisionSchedulerEngine gst_vision_detect_scheduler_engine;
gboolean gst_vision_detect_warm_up (GstVisionDetect * self,
    const GstVideoInfo * info);
GstFlowReturn gst_vision_detect_generate_output (GstBaseTransform * trans,
    GstBuffer ** outbuf);
void gst_vision_detect_forget_last_frame (GstVisionDetect * self);

/* gstvisiondetect.c */
gboolean *gst_vision_detect_resolve_classes (GstVisionDetect * self,
    const gchar * classes);

G_END_DECLS

#endif /* __GST_VISION_DETECT_PRIVATE_H__ */
