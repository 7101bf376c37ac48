/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plugin's process-wide shared engines ("batchers"): visiondetect elements
 * of a process with batch-size > 1 that run the same loaded model on the same
 * device, precision and thread count share one vd_context, and their frames run
 * together in batches.
 *
 * Key: the vd_model (one per model file identity, from modelcache.h),
 * the requested device type and index, the precision and the CPU threads.
 * Thresholds (score, NMS IoU, max detections) are not part of the key: they are
 * carried by every frame, and a batch only holds frames with equal thresholds,
 * frame size and pixel format (the engine applies one setting to a whole batch,
 * and a batched backend wants one tensor shape), so elements with different
 * thresholds or frame sizes share the context but not their batches.
 *
 * Batches: the engine's dispatcher thread takes the oldest waiting frame and the
 * later ones that may join it, up to the largest batch-size among the elements
 * sharing the engine, and submits them when the batch is full, when one of its
 * frames has waited its own element's batch-timeout, or at once when no element
 * can add a frame (each waits with max-in-flight frames outstanding, or is at
 * EOS). Two batches at most are in the engine (one running, one copied and
 * queued); a collector thread takes the results and hands each frame's to its
 * element. When a batch fails, its frames run again one by one, so that one
 * stream's bad frame fails only that frame.
 *
 * Threads: every function may be called from any thread; one client's
 * functions from one thread at a time, except gst_vision_batcher_client_cancel()
 * and gst_vision_batcher_client_mean_batch_size(), which any thread may call at
 * any time the client exists. */
#ifndef __GST_VISION_BATCHER_H__
#define __GST_VISION_BATCHER_H__

#include <gst/gst.h>
#include <gst/video/video.h>
#include <visiondetect/vd.h>

G_BEGIN_DECLS

typedef struct _GstVisionBatcherClient GstVisionBatcherClient;
typedef struct _GstVisionBatchRequest GstVisionBatchRequest;

typedef enum
{
  GST_VISION_BATCH_DONE,        /* the result is in */
  GST_VISION_BATCH_FAILED,      /* the frame's inference failed (error set) */
  GST_VISION_BATCH_CANCELLED,   /* gst_vision_batcher_client_cancel() */
} GstVisionBatchStatus;

/* Joins (creating it on first use) the shared engine of @model and @params'
 * device, device_index, precision and n_threads; @params' thresholds are
 * ignored (each frame carries its own). The client asks for batches of up to
 * @batch_size frames (the engine uses the largest of its clients' sizes), each
 * of its frames waiting at most @timeout (ns) for others before its batch
 * runs, with @max_in_flight of its frames outstanding at most (the caller
 * enforces it; the engine uses it to tell when waiting is pointless).
 * *@created says whether this call created the engine. Returns NULL with
 * @error set when the engine's context cannot be created (the engine's
 * error). Free with gst_vision_batcher_client_free(). */
GstVisionBatcherClient *gst_vision_batcher_client_new (vd_model * model,
    const vd_context_params * params, guint batch_size, GstClockTime timeout,
    guint max_in_flight, gboolean * created, GError ** error);

/* Cancels the client's outstanding frames, leaves the engine and releases it
 * (the engine goes with its last client, after its running batch). Returns
 * at once unless it is the last client. */
void gst_vision_batcher_client_free (GstVisionBatcherClient * client);

/* The shared context, for its getters only (device, precision, description,
 * fallback reason): never run or configure it. Valid while the client is. */
const vd_context *gst_vision_batcher_client_context (GstVisionBatcherClient *
    client);

/* Queues one frame. @frame is mapped for reading; the engine takes it (and
 * unmaps it, dropping the buffer reference the mapping holds, before the
 * frame's result is returned, so that the caller's buffer is writable again).
 * @image is the view of @frame to run. The thresholds are the vd_context
 * ones (negative: the model's). @alone: the frame runs in a batch of its
 * own, at once, outside the engine's statistics (a warm-up). Returns the
 * request (free with gst_vision_batch_request_unref()); never fails: a frame
 * the engine refuses fails in gst_vision_batcher_wait(). */
GstVisionBatchRequest *gst_vision_batcher_submit (GstVisionBatcherClient *
    client, GstVideoFrame * frame, const vd_image * image,
    gfloat score_threshold, gfloat nms_threshold, gint max_detections,
    gboolean alone);

/* Waits until @request is done or cancelled. On GST_VISION_BATCH_DONE,
 * *@result holds its detections (release with vd_result_clear()),
 * *@batch_time the engine's time for the frame's whole batch and
 * *@batch_frames the batch's size; on GST_VISION_BATCH_FAILED @error is set.
 * Waiting again returns GST_VISION_BATCH_CANCELLED. */
GstVisionBatchStatus gst_vision_batcher_wait (GstVisionBatcherClient * client,
    GstVisionBatchRequest * request, vd_result * result,
    GstClockTime * batch_time, guint * batch_frames, GError ** error);

void gst_vision_batch_request_unref (GstVisionBatchRequest * request);

/* Cancels every frame of the client not yet returned by
 * gst_vision_batcher_wait(): waiting ones leave the queue at once, running
 * ones finish and their results are dropped; a wait on any of them returns
 * GST_VISION_BATCH_CANCELLED at once. Frames submitted afterwards run. */
void gst_vision_batcher_client_cancel (GstVisionBatcherClient * client);

/* TRUE: the client will send no frame for a while (EOS); the engine stops
 * waiting for it to fill a batch until its next frame. */
void gst_vision_batcher_client_set_idle (GstVisionBatcherClient * client,
    gboolean idle);

/* Frames per batch the shared engine ran since it was created (0 before its
 * first batch). */
gdouble gst_vision_batcher_client_mean_batch_size (GstVisionBatcherClient *
    client);

G_END_DECLS

#endif /* __GST_VISION_BATCHER_H__ */
