/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's frame scheduler (see scheduler.h). */
#include "scheduler.h"

#include <string.h>

#define GST_CAT_DEFAULT (sched->category)

void
gst_vision_scheduler_init (GstVisionScheduler * sched,
    const GstVisionSchedulerEngine * engine, gpointer user_data,
    GstObject * owner, GstDebugCategory * category)
{
  memset (sched, 0, sizeof (*sched));
  g_mutex_init (&sched->lock);
  g_cond_init (&sched->cond);
  g_queue_init (&sched->pending);
  sched->engine = engine;
  sched->user_data = user_data;
  sched->owner = owner;
  sched->category = category;
  sched->monotonic = gst_util_get_timestamp;
  sched->output_ret = GST_FLOW_OK;
  sched->qos_earliest = GST_CLOCK_TIME_NONE;
  sched->model.inference_time = GST_CLOCK_TIME_NONE;
  sched->model.max_in_flight = 1;
}

void
gst_vision_scheduler_clear (GstVisionScheduler * sched)
{
  g_mutex_clear (&sched->lock);
  g_cond_clear (&sched->cond);
}

/* The margin over the typical time for a slow frame: four mean deviations
 * (as TCP's retransmission timer takes over the round-trip time, RFC 6298),
 * at least @floor, what a steady machine needs. On a machine whose other
 * work (or hypervisor) takes the cores at times, frames vary by several
 * times their typical time, and a fixed fraction would have many late. */
GstClockTime
gst_vision_scheduler_margin (GstClockTime deviation, GstClockTime floor)
{
  return MAX (4 * deviation, floor);
}

/* What the element reports: a frame waits for the frames ahead of it, then
 * runs; half an inference more for the variation, or more when frames vary
 * more. With a shared engine (@inference_time is then a batch's), a frame
 * first waits up to the batch timeout for others, and one batch more may be
 * ahead of it (other streams' frames). */
GstClockTime
gst_vision_scheduler_wanted_latency (const GstVisionLatencyModel * model,
    GstClockTime inference_time, GstClockTime deviation)
{
  GstClockTime margin = gst_vision_scheduler_margin (deviation,
      inference_time / 2);

  if (model->shared)
    return model->batch_timeout + inference_time * (model->max_in_flight + 1) +
        margin;
  return inference_time * model->max_in_flight + margin;
}

/* Raises the latency when the typical inference time and its variation need
 * a quarter more than reported (of the part that follows them: a shared
 * engine's batch timeout is fixed). Lock held; returns whether to post. */
static gboolean
raise_latency_locked (GstVisionScheduler * sched)
{
  GstVisionLatencyModel *m = &sched->model;
  GstClockTime wanted = gst_vision_scheduler_wanted_latency (m,
      m->inference_time, m->inference_dev);
  GstClockTime fixed = gst_vision_scheduler_wanted_latency (m, 0, 0);

  if (wanted <= m->latency + (m->latency - MIN (fixed, m->latency)) / 4)
    return FALSE;
  m->latency = wanted;
  return TRUE;
}

void
gst_vision_scheduler_update_latency (GstVisionScheduler * sched,
    GstClockTime engine_time)
{
  GstVisionLatencyModel *m = &sched->model;
  GstClockTime inference_time, deviation, latency;
  gboolean post;

  g_mutex_lock (&sched->lock);
  m->n_inferences++;
  if (!GST_CLOCK_TIME_IS_VALID (m->inference_time)) {
    m->inference_time = engine_time;
  } else {
    GstClockTimeDiff diff = GST_CLOCK_DIFF (m->inference_time, engine_time);

    /* gains of RFC 6298: 1/4 for the deviation, 1/8 for the mean */
    m->inference_dev = (3 * m->inference_dev + ABS (diff)) / 4;
    m->inference_time = (7 * m->inference_time + engine_time) / 8;
  }
  post = raise_latency_locked (sched);
  inference_time = m->inference_time;
  deviation = m->inference_dev;
  latency = m->latency;
  g_mutex_unlock (&sched->lock);
  GST_LOG_OBJECT (sched->owner, "engine time %" GST_TIME_FORMAT ", typical %"
      GST_TIME_FORMAT ", deviation %" GST_TIME_FORMAT,
      GST_TIME_ARGS (engine_time), GST_TIME_ARGS (inference_time),
      GST_TIME_ARGS (deviation));
  if (post)
    sched->engine->latency_raised (sched->user_data, inference_time, latency);
}

void
gst_vision_scheduler_warmed_up (GstVisionScheduler * sched,
    GstClockTime engine_time)
{
  GstClockTime latency;
  gboolean post;

  g_mutex_lock (&sched->lock);
  /* a new size: its own typical time, not the average of the old one */
  sched->model.inference_time = engine_time;
  sched->model.inference_dev = 0;
  post = raise_latency_locked (sched);
  latency = sched->model.latency;
  g_mutex_unlock (&sched->lock);
  if (post)
    sched->engine->latency_raised (sched->user_data, engine_time, latency);
}

static void
frame_free (GstVisionScheduler * sched, GstVisionFrame * f)
{
  sched->engine->frame_free (sched->user_data, f);
}

/* The output thread: frames leave in order, each once its result is in. */
static gpointer
output_main (gpointer data)
{
  GstVisionScheduler *sched = data;
  const GstVisionSchedulerEngine *engine = sched->engine;
  GstClockTime last_done = 0;

  g_mutex_lock (&sched->lock);
  for (;;) {
    GstVisionFrame *f;
    GstVisionSchedulerStatus status = GST_VISION_SCHEDULER_DONE;
    gboolean submitted, drop;
    GstFlowReturn ret = GST_FLOW_OK;
    GError *err = NULL;

    while (!sched->quit && g_queue_is_empty (&sched->pending))
      g_cond_wait (&sched->cond, &sched->lock);
    if (sched->quit)
      break;
    f = g_queue_pop_head (&sched->pending);
    submitted = f->inference == GST_VISION_DETECT_INFERRED;
    sched->pushing = TRUE;
    g_mutex_unlock (&sched->lock);

    if (submitted) {
      GstClockTime done, engine_time = GST_CLOCK_TIME_NONE;

      status = engine->collect (sched->user_data, f, &engine_time, &err);
      done = sched->monotonic ();
      g_mutex_lock (&sched->lock);
      sched->n_submitted--;
      if (sched->n_submitted == 0)
        sched->engine_free_at = done;
      g_cond_broadcast (&sched->cond);
      g_mutex_unlock (&sched->lock);
      /* the engine's own time for the frame; without it, the time since the
       * engine could start on it, not the time to collect it, which waited
       * on the pushes before it */
      if (status == GST_VISION_SCHEDULER_DONE)
        gst_vision_scheduler_update_latency (sched,
            GST_CLOCK_TIME_IS_VALID (engine_time) ? engine_time :
            done - MAX (f->submitted, last_done));
      last_done = done;
    }

    g_mutex_lock (&sched->lock);
    drop = sched->flushing || sched->output_ret != GST_FLOW_OK
        || status == GST_VISION_SCHEDULER_CANCELLED;
    g_mutex_unlock (&sched->lock);
    if (status == GST_VISION_SCHEDULER_FAILED) {
      if (!drop)
        engine->failed (sched->user_data, f, err);
      g_clear_error (&err);
      ret = GST_FLOW_ERROR;
    } else if (drop) {
      ret = GST_FLOW_OK;
    } else {
      ret = engine->push (sched->user_data, f);
    }
    frame_free (sched, f);

    g_mutex_lock (&sched->lock);
    sched->pushing = FALSE;
    if (ret != GST_FLOW_OK && sched->output_ret == GST_FLOW_OK) {
      GST_DEBUG_OBJECT (sched->owner, "push: %s", gst_flow_get_name (ret));
      sched->output_ret = ret;
    }
    g_cond_broadcast (&sched->cond);
  }
  g_mutex_unlock (&sched->lock);
  return NULL;
}

gboolean
gst_vision_scheduler_start (GstVisionScheduler * sched, guint max_in_flight,
    gboolean shared, GstClockTime batch_timeout, GError ** error)
{
  GstVisionLatencyModel *m = &sched->model;

  g_mutex_lock (&sched->lock);
  sched->flushing = FALSE;
  sched->quit = FALSE;
  sched->pushing = FALSE;
  sched->n_submitted = 0;
  sched->output_ret = GST_FLOW_OK;
  sched->engine_free_at = 0;
  sched->qos_earliest = GST_CLOCK_TIME_NONE;
  m->shared = shared;
  m->batch_timeout = batch_timeout;
  m->max_in_flight = max_in_flight;
  m->inference_time = GST_CLOCK_TIME_NONE;
  m->inference_dev = 0;
  m->n_inferences = 0;
  /* a shared engine's frame may wait the batch timeout: known from the start */
  m->latency = gst_vision_scheduler_wanted_latency (m, 0, 0);
  sched->upstream_live = FALSE;
  sched->upstream_latency = 0;
  g_mutex_unlock (&sched->lock);
  sched->output_thread = g_thread_try_new ("visiondetect-out", output_main,
      sched, error);
  return sched->output_thread != NULL;
}

void
gst_vision_scheduler_stop (GstVisionScheduler * sched)
{
  GstVisionFrame *f;

  g_mutex_lock (&sched->lock);
  sched->quit = TRUE;
  sched->flushing = TRUE;
  g_cond_broadcast (&sched->cond);
  /* an output thread waiting for the engine stops waiting */
  if (sched->engine->cancel != NULL)
    sched->engine->cancel (sched->user_data);
  g_mutex_unlock (&sched->lock);
  if (sched->output_thread != NULL)
    g_thread_join (sched->output_thread);
  sched->output_thread = NULL;
  /* their batches are dropped with the engine */
  while ((f = g_queue_pop_head (&sched->pending)) != NULL)
    frame_free (sched, f);
  sched->n_submitted = 0;
  sched->pushing = FALSE;
}

GstFlowReturn
gst_vision_scheduler_flow (GstVisionScheduler * sched)
{
  GstFlowReturn ret;

  g_mutex_lock (&sched->lock);
  ret = sched->flushing ? GST_FLOW_FLUSHING : sched->output_ret;
  g_mutex_unlock (&sched->lock);
  return ret;
}

GstFlowReturn
gst_vision_scheduler_wait_room (GstVisionScheduler * sched, gboolean * waited)
{
  GstFlowReturn ret;

  *waited = FALSE;
  g_mutex_lock (&sched->lock);
  while (sched->n_submitted >= sched->model.max_in_flight && !sched->flushing) {
    g_cond_wait (&sched->cond, &sched->lock);
    *waited = TRUE;
  }
  ret = sched->flushing ? GST_FLOW_FLUSHING : GST_FLOW_OK;
  g_mutex_unlock (&sched->lock);
  return ret;
}

void
gst_vision_scheduler_queue (GstVisionScheduler * sched, GstVisionFrame * f)
{
  GstClockTime inference_time;

  g_mutex_lock (&sched->lock);
  inference_time = sched->model.inference_time;
  if (f->inference == GST_VISION_DETECT_INFERRED) {
    sched->n_submitted++;
    sched->engine_free_at = MAX (sched->engine_free_at, f->submitted);
    if (GST_CLOCK_TIME_IS_VALID (inference_time))
      sched->engine_free_at += inference_time;
  }
  g_queue_push_tail (&sched->pending, f);
  g_cond_broadcast (&sched->cond);
  g_mutex_unlock (&sched->lock);
}

GstFlowReturn
gst_vision_scheduler_drain (GstVisionScheduler * sched)
{
  GstFlowReturn ret;

  g_mutex_lock (&sched->lock);
  while (!g_queue_is_empty (&sched->pending) || sched->pushing)
    g_cond_wait (&sched->cond, &sched->lock);
  ret = sched->flushing ? GST_FLOW_FLUSHING : sched->output_ret;
  g_mutex_unlock (&sched->lock);
  return ret;
}

void
gst_vision_scheduler_set_flushing (GstVisionScheduler * sched,
    gboolean flushing)
{
  g_mutex_lock (&sched->lock);
  sched->flushing = flushing;
  if (flushing) {
    /* the frames not yet out are dropped; a wait for room ends; and those
     * in the engine leave it */
    g_cond_broadcast (&sched->cond);
    if (sched->engine->cancel != NULL)
      sched->engine->cancel (sched->user_data);
  } else {
    sched->output_ret = GST_FLOW_OK;
    sched->qos_earliest = GST_CLOCK_TIME_NONE;
  }
  g_mutex_unlock (&sched->lock);
}

void
gst_vision_scheduler_set_qos (GstVisionScheduler * sched,
    GstClockTime timestamp, GstClockTimeDiff diff)
{
  g_mutex_lock (&sched->lock);
  /* late frames are skipped until downstream catches up (as GstVideoDecoder
   * does) */
  if (!GST_CLOCK_TIME_IS_VALID (timestamp))
    sched->qos_earliest = GST_CLOCK_TIME_NONE;
  else
    sched->qos_earliest = diff > 0 ? timestamp + 2 * diff :
        (GstClockTime) MAX ((GstClockTimeDiff) timestamp + diff, 0);
  g_mutex_unlock (&sched->lock);
}

GstClockTime
gst_vision_scheduler_set_upstream (GstVisionScheduler * sched, gboolean live,
    GstClockTime min_latency)
{
  GstClockTime latency;

  g_mutex_lock (&sched->lock);
  latency = sched->model.latency;
  sched->upstream_live = live;
  sched->upstream_latency = min_latency;
  g_mutex_unlock (&sched->lock);
  return latency;
}

gboolean
gst_vision_scheduler_would_be_late (GstVisionScheduler * sched,
    GstClockTime rt, GstClockTime now)
{
  GstClockTime done, deadline, inference_time, deviation, latency, upstream,
      mono, free_at, earliest, gather = 0;
  gboolean live;

  if (!GST_CLOCK_TIME_IS_VALID (rt))
    return FALSE;
  g_mutex_lock (&sched->lock);
  earliest = sched->qos_earliest;
  live = sched->upstream_live;
  upstream = sched->upstream_latency;
  inference_time = sched->model.inference_time;
  deviation = sched->model.inference_dev;
  latency = sched->model.latency;
  /* a shared engine's batch may wait that long for its other frames */
  if (sched->model.shared)
    gather = sched->model.batch_timeout;
  g_mutex_unlock (&sched->lock);
  if (GST_CLOCK_TIME_IS_VALID (earliest) && rt < earliest)
    return TRUE;
  if (!GST_CLOCK_TIME_IS_VALID (now) || !live
      || !GST_CLOCK_TIME_IS_VALID (inference_time))
    return FALSE;

  /* when the frames ahead end (monotonic time), then this one */
  mono = sched->monotonic ();
  g_mutex_lock (&sched->lock);
  free_at = sched->n_submitted > 0 ? MAX (sched->engine_free_at, mono) : mono;
  g_mutex_unlock (&sched->lock);
  /* a slow frame's time (a quarter more than the typical time on a steady
   * machine): a slower frame than typical still on time */
  done = now + (free_at - mono) + gather + inference_time +
      gst_vision_scheduler_margin (deviation, inference_time / 4);
  deadline = rt + upstream + latency;
  GST_LOG_OBJECT (sched->owner, "running time %" GST_TIME_FORMAT ": done at %"
      GST_TIME_FORMAT ", deadline %" GST_TIME_FORMAT, GST_TIME_ARGS (rt),
      GST_TIME_ARGS (done), GST_TIME_ARGS (deadline));
  return done > deadline;
}
