/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's frame scheduler: the frames between the streaming thread and
 * the element's output thread, in order, the latency model and the late-frame
 * policy. It knows nothing of the model: the element hands it an engine
 * (GstVisionSchedulerEngine), which collects each submitted frame's result
 * and pushes the frame; the tests hand it a fake one.
 *
 * Threads: the streaming thread queues (gst_vision_scheduler_wait_room,
 * gst_vision_scheduler_queue) and drains; the scheduler's output thread
 * collects and pushes; the flushing and QoS calls come from any thread. */
#ifndef GST_VISION_SCHEDULER_H
#define GST_VISION_SCHEDULER_H

#include <gst/gst.h>

#include "gstvisiondetectmeta.h"

G_BEGIN_DECLS

/* A frame on its way through the element: owned by the scheduler once
 * queued, released with the engine's frame_free. An engine embeds it first in
 * its own structure for what it keeps per frame. */
typedef struct
{
  GstBuffer *buffer;            /* NULL once pushed */
  guint64 index;
  GstVisionDetectInference inference;   /* INFERRED: submitted to the engine */
  gint width, height;
  GstClockTime submitted;       /* monotonic time it went to the engine */
} GstVisionFrame;

typedef enum
{
  GST_VISION_SCHEDULER_DONE,
  GST_VISION_SCHEDULER_FAILED,
  GST_VISION_SCHEDULER_CANCELLED,       /* flushing or stopping: dropped */
} GstVisionSchedulerStatus;

/* What the scheduler asks of the engine, all with the user data given to
 * gst_vision_scheduler_init(). */
typedef struct
{
  /* Output thread, nothing locked: waits for the result of @frame (submitted)
   * and keeps it in the frame. *@engine_time: the engine's own time for the
   * frame (or its batch), GST_CLOCK_TIME_NONE when it does not say (then the
   * time since it could start on the frame counts). FAILED sets @error. */
  GstVisionSchedulerStatus (*collect) (gpointer user_data,
      GstVisionFrame * frame, GstClockTime * engine_time, GError ** error);
  /* Output thread, nothing locked: @frame leaves (its metas, then the push of
   * its buffer, which the callee takes); returns the push's flow. */
  GstFlowReturn (*push) (gpointer user_data, GstVisionFrame * frame);
  /* Output thread, nothing locked: the engine failed on @frame while the
   * stream was running: the error message. */
  void (*failed) (gpointer user_data, GstVisionFrame * frame,
      const GError * error);
  /* Any thread, the scheduler's lock held: the frames waiting in the engine
   * leave it (collect returns CANCELLED for them). May be NULL. */
  void (*cancel) (gpointer user_data);
  /* Nothing locked: the latency to report rose to @latency (the engine's
   * typical time @inference_time): a latency message. */
  void (*latency_raised) (gpointer user_data, GstClockTime inference_time,
      GstClockTime latency);
  /* Releases @frame: its buffer (when not pushed), what the engine keeps. */
  void (*frame_free) (gpointer user_data, GstVisionFrame * frame);
} GstVisionSchedulerEngine;

/* The latency model: the engine's time per frame as a moving average, with
 * its mean deviation, and the latency that follows (see
 * gst_vision_scheduler_wanted_latency). */
typedef struct
{
  gboolean shared;              /* a shared, batching engine */
  GstClockTime batch_timeout;   /* shared: how long a frame waits for others */
  guint max_in_flight;
  GstClockTime inference_time;  /* moving average of the engine's time */
  GstClockTime inference_dev;   /* moving average of its deviation from that */
  guint n_inferences;
  GstClockTime latency;         /* what the element reports */
} GstVisionLatencyModel;

/* Members are private: the element embeds the scheduler. Under @lock unless
 * said otherwise. */
typedef struct
{
  GMutex lock;
  GCond cond;
  const GstVisionSchedulerEngine *engine;
  gpointer user_data;
  GstObject *owner;             /* for the log */
  GstDebugCategory *category;
  GstClockTime (*monotonic) (void);     /* gst_util_get_timestamp; tests: theirs */

  GQueue pending;               /* GstVisionFrame, in order */
  guint n_submitted;            /* of @pending, submitted and not yet collected */
  gboolean pushing;             /* the output thread holds a frame not yet pushed */
  gboolean flushing;            /* drop everything: flush, or going to READY */
  gboolean quit;
  GstFlowReturn output_ret;     /* of the last push (or the engine's failure) */
  GThread *output_thread;
  GstClockTime engine_free_at;  /* monotonic time the submitted frames end (estimate) */
  GstClockTime qos_earliest;    /* running time downstream reports as late (QoS) */

  GstVisionLatencyModel model;
  GstClockTime upstream_latency;        /* the minimum upstream reported, live */
  gboolean upstream_live;
} GstVisionScheduler;

void gst_vision_scheduler_init (GstVisionScheduler * sched,
    const GstVisionSchedulerEngine * engine, gpointer user_data,
    GstObject * owner, GstDebugCategory * category);
void gst_vision_scheduler_clear (GstVisionScheduler * sched);

/* start(): a fresh stream and latency model (@shared: a batching engine whose
 * frames wait up to @batch_timeout), and the output thread. */
gboolean gst_vision_scheduler_start (GstVisionScheduler * sched,
    guint max_in_flight, gboolean shared, GstClockTime batch_timeout,
    GError ** error);
/* stop(): the output thread stops; the frames not pushed are dropped. */
void gst_vision_scheduler_stop (GstVisionScheduler * sched);

/* GST_FLOW_FLUSHING while flushing, else the last push's flow. */
GstFlowReturn gst_vision_scheduler_flow (GstVisionScheduler * sched);
/* Streaming thread: waits while max-in-flight frames are in the engine;
 * *@waited: whether it had to. GST_FLOW_FLUSHING when flushing. */
GstFlowReturn gst_vision_scheduler_wait_room (GstVisionScheduler * sched,
    gboolean * waited);
/* Streaming thread: @frame (submitted to the engine when INFERRED) is the
 * next to leave; the scheduler owns it. */
void gst_vision_scheduler_queue (GstVisionScheduler * sched,
    GstVisionFrame * frame);
/* Streaming thread: waits until every queued frame is out (or dropped). */
GstFlowReturn gst_vision_scheduler_drain (GstVisionScheduler * sched);
/* Flush start (TRUE): the frames not out are dropped, a wait for room ends,
 * the engine cancels; flush stop (FALSE): streaming again, no flow error. */
void gst_vision_scheduler_set_flushing (GstVisionScheduler * sched,
    gboolean flushing);

/* A QoS event: frames before the running time downstream can still show
 * count as late. A new segment forgets it (@timestamp GST_CLOCK_TIME_NONE). */
void gst_vision_scheduler_set_qos (GstVisionScheduler * sched,
    GstClockTime timestamp, GstClockTimeDiff diff);
/* The latency query: upstream's; returns the latency to add. */
GstClockTime gst_vision_scheduler_set_upstream (GstVisionScheduler * sched,
    gboolean live, GstClockTime min_latency);
/* The engine's time for one frame (or batch) into the moving average. */
void gst_vision_scheduler_update_latency (GstVisionScheduler * sched,
    GstClockTime engine_time);
/* A warm-up inference of a new frame size took @engine_time: the typical time
 * from now on. */
void gst_vision_scheduler_warmed_up (GstVisionScheduler * sched,
    GstClockTime engine_time);

/* Whether inference would make the frame at running time @rt leave after its
 * deadline, the clock's running time being @now (GST_CLOCK_TIME_NONE without
 * a clock or outside PLAYING): the time it is due here (@rt plus the live
 * upstream latency) plus the latency reported. Also late: what downstream
 * reported as late. */
gboolean gst_vision_scheduler_would_be_late (GstVisionScheduler * sched,
    GstClockTime rt, GstClockTime now);

/* The latency model's arithmetic. */
GstClockTime gst_vision_scheduler_margin (GstClockTime deviation,
    GstClockTime floor);
GstClockTime gst_vision_scheduler_wanted_latency (const GstVisionLatencyModel *
    model, GstClockTime inference_time, GstClockTime deviation);

G_END_DECLS

#endif /* GST_VISION_SCHEDULER_H */
