/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's streaming: each frame mapped for the engine and submitted
 * (or passed without inference: interval, gap, late), its result collected by
 * the scheduler's output thread (helpers/scheduler.c, which keeps the order,
 * the latency model and the late-frame policy) and encoded as metas; the
 * warm-up of a new frame size. The element itself (properties, caps, start
 * and stop, events) is gstvisiondetect.c. */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisiondetectprivate.h"

#include <string.h>

static gboolean
fill_image (const GstVideoFrame * frame, vd_image * image)
{
  const GstVideoInfo *info = &frame->info;
  guint i;

  memset (image, 0, sizeof (*image));
  switch (GST_VIDEO_FRAME_FORMAT (frame)) {
    case GST_VIDEO_FORMAT_RGB:
      image->format = VD_FORMAT_RGB;
      break;
    case GST_VIDEO_FORMAT_BGR:
      image->format = VD_FORMAT_BGR;
      break;
    case GST_VIDEO_FORMAT_RGBA:
      image->format = VD_FORMAT_RGBA;
      break;
    case GST_VIDEO_FORMAT_BGRA:
      image->format = VD_FORMAT_BGRA;
      break;
    case GST_VIDEO_FORMAT_RGBx:
      image->format = VD_FORMAT_RGBX;
      break;
    case GST_VIDEO_FORMAT_BGRx:
      image->format = VD_FORMAT_BGRX;
      break;
    case GST_VIDEO_FORMAT_NV12:
      image->format = VD_FORMAT_NV12;
      break;
    case GST_VIDEO_FORMAT_I420:
      image->format = VD_FORMAT_I420;
      break;
    default:
      return FALSE;
  }
  image->width = GST_VIDEO_FRAME_WIDTH (frame);
  image->height = GST_VIDEO_FRAME_HEIGHT (frame);
  for (i = 0; i < GST_VIDEO_FRAME_N_PLANES (frame) && i < 3; i++) {
    image->planes[i] = GST_VIDEO_FRAME_PLANE_DATA (frame, i);
    image->strides[i] = GST_VIDEO_FRAME_PLANE_STRIDE (frame, i);
  }
  switch (info->colorimetry.matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT709:
    case GST_VIDEO_COLOR_MATRIX_SMPTE240M:
      image->matrix = VD_COLOR_MATRIX_BT709;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
      image->matrix = VD_COLOR_MATRIX_BT2020;
      break;
    default:
      image->matrix = VD_COLOR_MATRIX_BT601;
      break;
  }
  image->full_range = info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  return TRUE;
}

/* The detections of @result that the element keeps (its class filter), in
 * every form, through the one writer visiontrack shares; and the companion
 * meta, on every frame, with whether the frame was inferred. */
static void
attach_detections (GstVisionDetect * self, const GstVisionDetectFrame * f,
    const vd_result * result)
{
  GstVisionDetectionEntry *entries;
  GstVisionDetectMeta *meta;
  guint n = 0;
  gint i;

  /* every frame says whether it was looked at, with or without detections */
  meta = gst_buffer_add_vision_detect_meta (f->frame.buffer, f->frame.width,
      f->frame.height);
  meta->inference = f->frame.inference;
  if (result == NULL || result->n_detections <= 0)
    return;

  entries = g_new0 (GstVisionDetectionEntry, result->n_detections);
  for (i = 0; i < result->n_detections; i++) {
    const vd_detection *det = &result->detections[i];
    GstVisionDetectionEntry *e = &entries[n];

    if (det->label <= 0 || det->label >= self->num_classes)
      continue;
    if (f->keep_class != NULL && !f->keep_class[det->label])
      continue;
    e->x1 = det->x1;
    e->y1 = det->y1;
    e->x2 = det->x2;
    e->y2 = det->y2;
    e->confidence = det->score;
    e->label_id = det->label;
    e->label = g_quark_from_string (self->class_names[det->label]);
    e->mask = det->mask;
    e->mask_x = det->mask_x;
    e->mask_y = det->mask_y;
    e->mask_width = det->mask_width;
    e->mask_height = det->mask_height;
    /* vd_keypoint is three floats: x, y, score */
    G_STATIC_ASSERT (sizeof (vd_keypoint) == 3 * sizeof (gfloat));
    e->keypoints = (const gfloat *) det->keypoints;
    e->n_keypoints = det->n_keypoints;
    e->keypoint_names = (const gchar * const *) self->keypoint_names;
    e->n_skeleton = vd_model_keypoint_skeleton (self->model, &e->skeleton);
    n++;
  }
  gst_vision_detections_attach (GST_ELEMENT (self), f->frame.buffer, meta,
      f->frame.width, f->frame.height, entries, n, NULL);
  g_free (entries);
}

/* the latency to report rose: downstream asks again */
static void
post_latency (gpointer user_data, GstClockTime inference_time,
    GstClockTime latency)
{
  GstVisionDetect *self = user_data;

  GST_INFO_OBJECT (self, "inference takes %" GST_TIME_FORMAT
      ", reporting a latency of %" GST_TIME_FORMAT,
      GST_TIME_ARGS (inference_time), GST_TIME_ARGS (latency));
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_latency (GST_OBJECT (self)));
}

/* After a batch returned by the engine: one warning the first time graph
 * capture is found failing (frames then cost several times more), an info
 * when it works again, and one warning the first time a frame has infinite or
 * NaN activations (fp16 overflow, corrupt weights: too few detections). */
static void
report_engine_status (GstVisionDetect * self, const vd_result * result,
    const gchar * when)
{
  vd_run_status status;

  vd_context_run_status (self->ctx, &status);
  if (status.graphs == VD_GRAPHS_RETRYING && !self->warned_graphs) {
    self->warned_graphs = TRUE;
    GST_ELEMENT_WARNING (self, RESOURCE, FAILED,
        ("CUDA graph capture failed (%s): frames run eagerly, several times "
            "slower, and capture is tried again after %d frame(s), then "
            "after twice as many each time it fails (at most %d)",
            status.graphs_reason, status.graph_retry_frames,
            VD_GRAPH_RETRY_MAX_FRAMES),
        ("%" G_GUINT64_FORMAT " capture failure(s) so far, %s",
            status.graph_failures, when));
  } else if (status.graphs == VD_GRAPHS_ACTIVE && self->warned_graphs) {
    self->warned_graphs = FALSE;
    GST_ELEMENT_INFO (self, RESOURCE, FAILED,
        ("CUDA graph capture works again: frames are replayed"),
        ("after %" G_GUINT64_FORMAT " capture failure(s), %s",
            status.graph_failures, when));
  }
  if (result != NULL && result->n_nonfinite > 0 && !self->warned_nonfinite) {
    self->warned_nonfinite = TRUE;
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("The model produced %d infinite or NaN value(s), %s (%s): its "
            "detections are unreliable; with precision fp16 an activation "
            "above 65504 overflows (try precision=fp32), otherwise the "
            "weights may be corrupt", result->n_nonfinite, when,
            vd_precision_name (vd_context_precision (self->ctx))),
        ("counted in the RPN head and box head outputs; warned once"));
  }
}

/* The scheduler's engine: the element's own context (vd_submit, then
 * vd_collect in order) or its stream of the shared engine. */
static GstVisionSchedulerStatus
collect (gpointer user_data, GstVisionFrame * frame, GstClockTime * engine_time,
    GError ** error)
{
  GstVisionDetect *self = user_data;
  GstVisionDetectFrame *f = (GstVisionDetectFrame *) frame;
  vd_stage_time stages[16];
  gdouble ms = 0.0;
  gchar when[48];
  gint n, k;

  if (f->request != NULL) {
    GstVisionBatchStatus status;
    GstClockTime batch_time;
    guint batch_frames;

    status = gst_vision_batcher_wait (self->batch_client, f->request,
        &f->result, &batch_time, &batch_frames, error);
    f->have_result = status != GST_VISION_BATCH_FAILED;
    if (status == GST_VISION_BATCH_CANCELLED)
      return GST_VISION_SCHEDULER_CANCELLED;
    if (status != GST_VISION_BATCH_DONE)
      return GST_VISION_SCHEDULER_FAILED;
    /* the latency follows the time of a batch, what a frame waits for */
    *engine_time = batch_time;
    GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT ": %d detections, "
        "in a batch of %u (%" GST_TIME_FORMAT ")", frame->index,
        f->result.n_detections, batch_frames, GST_TIME_ARGS (batch_time));
    return GST_VISION_SCHEDULER_DONE;
  }

  if (!vd_collect (self->ctx, &f->result, 1, error))
    return GST_VISION_SCHEDULER_FAILED;
  f->have_result = TRUE;
  /* the engine's own time for the frame (the stages follow each other) */
  n = vd_context_stage_times (self->ctx, stages, 16);
  for (k = 0; k < n; k++)
    ms += stages[k].ms;
  if (n > 0)
    *engine_time = (GstClockTime) (ms * GST_MSECOND);
  GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT ": %d detections",
      frame->index, f->result.n_detections);
  g_snprintf (when, sizeof (when), "at frame %" G_GUINT64_FORMAT, frame->index);
  report_engine_status (self, &f->result, when);
  return GST_VISION_SCHEDULER_DONE;
}

/* The result of the last inferred frame pushed, for the GAP buffers that
 * repeat it: taken from @f, which no longer frees it. */
static void
keep_result (GstVisionDetect * self, GstVisionDetectFrame * f)
{
  if (self->have_last_result)
    vd_result_clear (&self->last_result);
  self->last_result = f->result;
  self->have_last_result = TRUE;
  self->last_result_id = f->inferred_id;
  f->have_result = FALSE;
  memset (&f->result, 0, sizeof (f->result));
}

static GstFlowReturn
push (gpointer user_data, GstVisionFrame * frame)
{
  GstVisionDetect *self = user_data;
  GstVisionDetectFrame *f = (GstVisionDetectFrame *) frame;
  GstBuffer *buffer;

  if (frame->inference == GST_VISION_DETECT_INFERRED) {
    attach_detections (self, f, &f->result);
    keep_result (self, f);
  } else if (frame->inference == GST_VISION_DETECT_REPEATED) {
    /* the frames are pushed in order: the frame it repeats was the last
     * inferred one pushed, unless a flush dropped that one */
    if (self->have_last_result && self->last_result_id == f->inferred_id) {
      attach_detections (self, f, &self->last_result);
      GST_OBJECT_LOCK (self);
      self->n_repeated++;
      GST_OBJECT_UNLOCK (self);
    } else {
      GST_DEBUG_OBJECT (self, "frame %" G_GUINT64_FORMAT ": the inferred "
          "frame it repeats was not pushed", frame->index);
      frame->inference = GST_VISION_DETECT_SKIPPED_GAP;
      attach_detections (self, f, NULL);
    }
  } else {
    attach_detections (self, f, NULL);
  }
  buffer = frame->buffer;
  frame->buffer = NULL;
  return gst_pad_push (GST_BASE_TRANSFORM_SRC_PAD (self), buffer);
}

static void
failed (gpointer user_data, GstVisionFrame * f, const GError * err)
{
  GstVisionDetect *self = user_data;

  GST_ELEMENT_ERROR (self, STREAM, FAILED,
      ("Detection failed on frame %" G_GUINT64_FORMAT " (%dx%d): %s",
          f->index, f->width, f->height, err->message),
      ("engine error code %d", err->code));
}

/* the scheduler's lock held, which guards @batch_client */
static void
cancel (gpointer user_data)
{
  GstVisionDetect *self = user_data;

  if (self->batch_client != NULL)
    gst_vision_batcher_client_cancel (self->batch_client);
}

static void
frame_free (gpointer user_data, GstVisionFrame * frame)
{
  GstVisionDetectFrame *f = (GstVisionDetectFrame *) frame;

  if (f->have_result)
    vd_result_clear (&f->result);
  g_clear_pointer (&f->request, gst_vision_batch_request_unref);
  gst_clear_buffer (&frame->buffer);
  g_clear_pointer (&f->keep_class, g_rc_box_release);
  g_free (f);
}

const GstVisionSchedulerEngine gst_vision_detect_scheduler_engine = {
  collect, push, failed, cancel, post_latency, frame_free,
};

/* A frame at the size and format of the caps, run twice: the first run creates
 * the engine's primitives for the size, the second is a typical inference, which
 * sets the latency before the first frame. Nothing in flight. */
gboolean
gst_vision_detect_warm_up (GstVisionDetect * self, const GstVideoInfo * info)
{
  GstBuffer *buffer = gst_buffer_new_allocate (NULL, info->size, NULL);
  GstClockTime start = 0, elapsed = 0;
  GstVideoFrame frame;
  GError *err = NULL;
  vd_image image;
  gboolean ok = TRUE;
  gfloat threshold, iou_threshold;
  gint run, max_detections;

  GST_OBJECT_LOCK (self);
  threshold = self->threshold;
  iou_threshold = self->iou_threshold;
  max_detections = self->max_detections;
  GST_OBJECT_UNLOCK (self);

  if (buffer != NULL)
    gst_buffer_memset (buffer, 0, 0x80, info->size);
  if (buffer == NULL || !gst_video_frame_map (&frame, info, buffer,
          GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
        ("Could not allocate a %dx%d frame", GST_VIDEO_INFO_WIDTH (info),
            GST_VIDEO_INFO_HEIGHT (info)), (NULL));
    gst_clear_buffer (&buffer);
    return FALSE;
  }
  fill_image (&frame, &image);
  for (run = 0; run < 2 && ok; run++) {
    vd_result result;

    if (self->batch_client != NULL) {
      GstVisionBatchRequest *request;
      GstVisionBatchStatus status;
      guint batch_frames;

      /* through the shared engine (which takes the mapping), alone: not
       * waiting for other streams' frames; the latency follows the time of
       * the real batches afterwards */
      if (run > 0 && !gst_video_frame_map (&frame, info, buffer, GST_MAP_READ))
        break;
      fill_image (&frame, &image);
      request = gst_vision_batcher_submit (self->batch_client, &frame, &image,
          threshold, iou_threshold, max_detections, TRUE);
      status = gst_vision_batcher_wait (self->batch_client, request, &result,
          &elapsed, &batch_frames, &err);
      gst_vision_batch_request_unref (request);
      ok = status != GST_VISION_BATCH_FAILED;
      vd_result_clear (&result);
      if (status == GST_VISION_BATCH_CANCELLED) {
        /* flushing or stopping */
        gst_buffer_unref (buffer);
        return TRUE;
      }
      continue;
    }
    start = gst_util_get_timestamp ();
    ok = vd_detect (self->ctx, &image, 1, &result, &err);
    elapsed = gst_util_get_timestamp () - start;
    if (ok) {
      /* grey frames: the model's own overflow shows here already */
      report_engine_status (self, &result, "warming up");
      vd_result_clear (&result);
    }
  }
  if (self->batch_client == NULL)
    gst_video_frame_unmap (&frame);
  gst_buffer_unref (buffer);
  if (!ok) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Detection failed on a %dx%d %s frame: %s",
            GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info),
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (info)),
            err->message), ("engine error code %d, warming up", err->code));
    g_clear_error (&err);
    return FALSE;
  }

  GST_INFO_OBJECT (self, "warm-up at %dx%d: %" GST_TIME_FORMAT,
      GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info),
      GST_TIME_ARGS (elapsed));
  /* a new size: its own typical time, not the average of the old one */
  gst_vision_scheduler_warmed_up (&self->sched, elapsed);
  return TRUE;
}

/* Whether inference would make the frame at running time @rt late (see
 * gst_vision_scheduler_would_be_late), with the clock's running time now. */
static gboolean
would_be_late (GstVisionDetect * self, GstClockTime rt)
{
  GstClock *clock;
  GstClockTime now = GST_CLOCK_TIME_NONE, clock_time, base_time;

  GST_OBJECT_LOCK (self);
  clock = GST_ELEMENT_CLOCK (self) ? gst_object_ref (GST_ELEMENT_CLOCK (self))
      : NULL;
  base_time = GST_ELEMENT_CAST (self)->base_time;
  GST_OBJECT_UNLOCK (self);
  if (clock != NULL) {
    clock_time = gst_clock_get_time (clock);
    gst_object_unref (clock);
    if (GST_STATE (self) == GST_STATE_PLAYING && clock_time >= base_time)
      now = clock_time - base_time;
  }
  return gst_vision_scheduler_would_be_late (&self->sched, rt, now);
}

/* Whether the GAP buffer of @df shows the pixels of the last inferred frame
 * (a frame rate converter's duplicate), which it then repeats. A GAP buffer
 * says its content does not matter; a duplicate's still is the picture the
 * viewer sees, and videorate's share the memory of the frame they repeat. So
 * the pixels decide, compared byte for byte with the copy kept of the
 * inferred frame: one read of the frame, far less than an inference. The
 * first GAP buffer of a stream has nothing to be compared with and is
 * inferred; from then on the inferred frames are copied. */
static gboolean
repeats_last_frame (GstVisionDetect * self, GstVisionDetectFrame * df)
{
  GstVideoFrame frame;
  GstClockTime start;
  gboolean same;

  self->seen_gap = TRUE;
  if (self->last_frame.format == GST_VIDEO_FORMAT_UNKNOWN)
    return FALSE;
  if (!gst_video_frame_map (&frame, &self->info, df->frame.buffer,
          GST_MAP_READ))
    return FALSE;
  start = gst_util_get_timestamp ();
  same = gst_vision_frame_copy_equal (&self->last_frame, &frame);
  gst_video_frame_unmap (&frame);
  GST_LOG_OBJECT (self, "GAP frame %" G_GUINT64_FORMAT " %s inferred frame %"
      G_GUINT64_FORMAT " (compared in %" GST_TIME_FORMAT ")",
      df->frame.index, same ? "repeats" : "differs from", self->last_frame_id,
      GST_TIME_ARGS (gst_util_get_timestamp () - start));
  if (same)
    df->inferred_id = self->last_frame_id;
  return same;
}

/* What the GAP buffers are compared with and what they repeat, forgotten:
 * stop(), with no frame in flight. */
void
gst_vision_detect_forget_last_frame (GstVisionDetect * self)
{
  gst_vision_frame_copy_clear (&self->last_frame);
  self->last_frame_id = 0;
  self->n_inferred_ids = 0;
  self->seen_gap = FALSE;
  if (self->have_last_result)
    vd_result_clear (&self->last_result);
  self->have_last_result = FALSE;
  self->last_result_id = 0;
}

/* late-frames=skip-inference: @f passes on time without inference */
static void
skip_late (GstVisionDetect * self, GstVisionFrame * f, const gchar * when)
{
  f->inference = GST_VISION_DETECT_SKIPPED_LATE;
  GST_OBJECT_LOCK (self);
  self->n_skipped_late++;
  GST_OBJECT_UNLOCK (self);
  GST_DEBUG_OBJECT (self, "frame %" G_GUINT64_FORMAT " would be late%s: "
      "passed without inference", f->index, when);
}

GstFlowReturn
gst_vision_detect_generate_output (GstBaseTransform * trans,
    GstBuffer ** outbuf)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  GstBuffer *buffer = trans->queued_buf;
  gboolean thresholds_changed, classes_changed;
  gfloat threshold, iou_threshold;
  gint max_detections;
  gchar *classes = NULL;
  guint interval;
  GstVisionDetectLateFrames late_frames;
  GstVisionDetectGapFrames gap_frames;
  GstVisionDetectFrame *df;
  GstVisionFrame *f;
  GstFlowReturn ret;
  guint64 frame_index;
  GstClockTime rt;

  *outbuf = NULL;
  if (buffer == NULL)
    return GST_FLOW_OK;
  trans->queued_buf = NULL;

  if (G_UNLIKELY (!self->have_info || (self->ctx == NULL
              && self->batch_client == NULL))) {
    gst_buffer_unref (buffer);
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("frame before caps or before the engine started"));
    return GST_FLOW_NOT_NEGOTIATED;
  }

  ret = gst_vision_scheduler_flow (&self->sched);
  if (ret != GST_FLOW_OK) {
    gst_buffer_unref (buffer);
    return ret;
  }

  GST_OBJECT_LOCK (self);
  interval = self->interval;
  late_frames = self->late_frames;
  gap_frames = self->gap_frames;
  thresholds_changed = self->thresholds_changed;
  threshold = self->threshold;
  iou_threshold = self->iou_threshold;
  max_detections = self->max_detections;
  self->thresholds_changed = FALSE;
  classes_changed = self->classes_changed;
  if (classes_changed)
    classes = g_strdup (self->classes);
  self->classes_changed = FALSE;
  GST_OBJECT_UNLOCK (self);

  /* a shared engine takes them with every frame */
  if (thresholds_changed && self->ctx != NULL)
    vd_context_set_thresholds (self->ctx, threshold, iou_threshold,
        max_detections);
  if (classes_changed) {
    g_clear_pointer (&self->keep_class, g_rc_box_release);
    self->keep_class = gst_vision_detect_resolve_classes (self, classes);
    g_free (classes);
  }

  /* in place: the metas need a writable buffer (a shallow copy when it is
   * shared; the pixels are never copied) */
  buffer = gst_buffer_make_writable (buffer);
  if (self->pending_discont) {
    GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    self->pending_discont = FALSE;
  }

  rt = gst_segment_to_running_time (&trans->segment, GST_FORMAT_TIME,
      GST_BUFFER_PTS (buffer));
  df = g_new0 (GstVisionDetectFrame, 1);
  f = &df->frame;
  f->buffer = buffer;
  f->index = frame_index = self->frame_count++;
  f->width = GST_VIDEO_INFO_WIDTH (&self->info);
  f->height = GST_VIDEO_INFO_HEIGHT (&self->info);
  df->keep_class = self->keep_class ? g_rc_box_acquire (self->keep_class) :
      NULL;
  if (interval > 1 && frame_index % interval != 0)
    f->inference = GST_VISION_DETECT_SKIPPED_INTERVAL;
  else if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_GAP)
      && gap_frames == GST_VISION_DETECT_GAP_SKIP)
    f->inference = GST_VISION_DETECT_SKIPPED_GAP;
  else if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_GAP)
      && repeats_last_frame (self, df))
    f->inference = GST_VISION_DETECT_REPEATED;
  else if (late_frames == GST_VISION_DETECT_LATE_SKIP_INFERENCE
      && would_be_late (self, rt))
    skip_late (self, f, "");

  if (f->inference == GST_VISION_DETECT_INFERRED) {
    gboolean waited = FALSE;

    /* room in the engine */
    ret = gst_vision_scheduler_wait_room (&self->sched, &waited);
    if (ret != GST_FLOW_OK) {
      frame_free (self, f);
      return ret;
    }
    /* the room came when the frame ahead was collected, which follows the
     * pushes before it (a synchronised sink holds each until its time), not
     * the engine's estimate: late now, the frame passes without inference */
    if (waited && late_frames == GST_VISION_DETECT_LATE_SKIP_INFERENCE
        && would_be_late (self, rt))
      skip_late (self, f, " after waiting for the engine");
  }

  if (f->inference == GST_VISION_DETECT_INFERRED) {
    GstVideoFrame frame;
    vd_image image;
    GError *err = NULL;
    gboolean ok;

    /* read only: the frame passes unchanged; the engine copies what it reads */
    if (!gst_video_frame_map (&frame, &self->info, buffer, GST_MAP_READ)) {
      frame_free (self, f);
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Could not map video frame %" G_GUINT64_FORMAT, frame_index),
          (NULL));
      return GST_FLOW_ERROR;
    }
    if (!fill_image (&frame, &image)) {
      gst_video_frame_unmap (&frame);
      frame_free (self, f);
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
          ("Unsupported video format %s",
              gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->info))),
          (NULL));
      return GST_FLOW_NOT_NEGOTIATED;
    }
    df->inferred_id = ++self->n_inferred_ids;
    /* kept for the GAP buffers after it, once the stream has them */
    if (self->seen_gap) {
      if (gst_vision_frame_copy_store (&self->last_frame, &frame))
        self->last_frame_id = df->inferred_id;
      else
        GST_WARNING_OBJECT (self, "no memory to keep frame %" G_GUINT64_FORMAT
            ": GAP buffers after it are inferred", frame_index);
    }
    f->submitted = gst_util_get_timestamp ();
    if (self->batch_client != NULL) {
      /* the shared engine takes the mapping; a frame it refuses fails when
       * its result is collected, alone */
      df->request = gst_vision_batcher_submit (self->batch_client, &frame,
          &image, threshold, iou_threshold, max_detections, FALSE);
      ok = TRUE;
    } else {
      ok = vd_submit (self->ctx, &image, 1, &err);
      gst_video_frame_unmap (&frame);
    }
    if (!ok) {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Detection failed on frame %" G_GUINT64_FORMAT " (%dx%d %s): %s",
              frame_index, image.width, image.height,
              gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->info)),
              err->message), ("engine error code %d", err->code));
      g_clear_error (&err);
      frame_free (self, f);
      return GST_FLOW_ERROR;
    }
    GST_OBJECT_LOCK (self);
    self->n_inferred++;
    GST_OBJECT_UNLOCK (self);
  }

  gst_vision_scheduler_queue (&self->sched, f);
  return GST_FLOW_OK;
}
