/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect's frame scheduler (gst/helpers/scheduler.c) with a fake engine
 * and a fake monotonic clock, no model: frames leave in order with at most
 * max-in-flight in the engine, the latency model's moving averages and when
 * it raises the latency, the late-frame policy's deadline (to the
 * nanosecond), QoS, flushing, an engine failure and a failed push. Times are
 * whole nanoseconds: every value is exact, compared with ==. */
#include <gst/check/gstcheck.h>

#include "scheduler.h"

GST_DEBUG_CATEGORY_STATIC (test_scheduler_debug);

#define MS GST_MSECOND

/* A frame as the fake engine keeps it. */
typedef struct
{
  GstVisionFrame frame;
  GstVisionSchedulerStatus status;      /* what collect says */
  GstClockTime engine_time;     /* what collect reports */
  gulong collect_us;            /* how long collect takes */
} FakeFrame;

typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean gate_closed;         /* collect waits while closed */
  gboolean cancelled;           /* cancel(): waiting collects return CANCELLED */
  guint in_engine, max_in_engine;
  GArray *pushed;               /* guint64 frame indices, in push order */
  GArray *pushed_inference;     /* GstVisionDetectInference of each */
  guint n_collected, n_failed, n_cancels, n_freed, n_latency_posts;
  GstClockTime posted_latency;
  GstFlowReturn push_ret;
} FakeEngine;

static FakeEngine fake;
static GMutex clock_lock;
static GstClockTime fake_now;

static GstClockTime
fake_monotonic (void)
{
  GstClockTime now;

  g_mutex_lock (&clock_lock);
  now = fake_now;
  g_mutex_unlock (&clock_lock);
  return now;
}

static void
set_fake_now (GstClockTime now)
{
  g_mutex_lock (&clock_lock);
  fake_now = now;
  g_mutex_unlock (&clock_lock);
}

static GstVisionSchedulerStatus
fake_collect (gpointer user_data, GstVisionFrame * frame,
    GstClockTime * engine_time, GError ** error)
{
  FakeFrame *f = (FakeFrame *) frame;
  GstVisionSchedulerStatus status;

  g_usleep (f->collect_us);
  g_mutex_lock (&fake.lock);
  while (fake.gate_closed && !fake.cancelled)
    g_cond_wait (&fake.cond, &fake.lock);
  status = fake.cancelled ? GST_VISION_SCHEDULER_CANCELLED : f->status;
  fake.in_engine--;
  fake.n_collected++;
  g_mutex_unlock (&fake.lock);
  *engine_time = f->engine_time;
  if (status == GST_VISION_SCHEDULER_FAILED)
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED, "fake");
  return status;
}

static GstFlowReturn
fake_push (gpointer user_data, GstVisionFrame * frame)
{
  GstFlowReturn ret;

  g_mutex_lock (&fake.lock);
  g_array_append_val (fake.pushed, frame->index);
  g_array_append_val (fake.pushed_inference, frame->inference);
  ret = fake.push_ret;
  g_mutex_unlock (&fake.lock);
  gst_clear_buffer (&frame->buffer);
  return ret;
}

static void
fake_failed (gpointer user_data, GstVisionFrame * frame, const GError * error)
{
  g_mutex_lock (&fake.lock);
  fake.n_failed++;
  g_mutex_unlock (&fake.lock);
}

/* called with the scheduler's lock held */
static void
fake_cancel (gpointer user_data)
{
  g_mutex_lock (&fake.lock);
  fake.cancelled = TRUE;
  fake.n_cancels++;
  g_cond_broadcast (&fake.cond);
  g_mutex_unlock (&fake.lock);
}

static void
fake_latency_raised (gpointer user_data, GstClockTime inference_time,
    GstClockTime latency)
{
  g_mutex_lock (&fake.lock);
  fake.n_latency_posts++;
  fake.posted_latency = latency;
  g_mutex_unlock (&fake.lock);
}

static void
fake_frame_free (gpointer user_data, GstVisionFrame * frame)
{
  gst_clear_buffer (&frame->buffer);
  g_free (frame);
  g_mutex_lock (&fake.lock);
  fake.n_freed++;
  g_mutex_unlock (&fake.lock);
}

static const GstVisionSchedulerEngine fake_engine = {
  fake_collect, fake_push, fake_failed, fake_cancel, fake_latency_raised,
  fake_frame_free,
};

static void
fake_reset (void)
{
  g_mutex_init (&fake.lock);
  g_cond_init (&fake.cond);
  fake.gate_closed = FALSE;
  fake.cancelled = FALSE;
  fake.in_engine = fake.max_in_engine = 0;
  fake.pushed = g_array_new (FALSE, FALSE, sizeof (guint64));
  fake.pushed_inference = g_array_new (FALSE, FALSE,
      sizeof (GstVisionDetectInference));
  fake.n_collected = fake.n_failed = fake.n_cancels = fake.n_freed = 0;
  fake.n_latency_posts = 0;
  fake.posted_latency = GST_CLOCK_TIME_NONE;
  fake.push_ret = GST_FLOW_OK;
  set_fake_now (1 * GST_SECOND);
}

static void
fake_free (void)
{
  g_array_unref (fake.pushed);
  g_array_unref (fake.pushed_inference);
  g_mutex_clear (&fake.lock);
  g_cond_clear (&fake.cond);
}

static void
set_gate (gboolean closed)
{
  g_mutex_lock (&fake.lock);
  fake.gate_closed = closed;
  g_cond_broadcast (&fake.cond);
  g_mutex_unlock (&fake.lock);
}

static void
start (GstVisionScheduler * sched, guint max_in_flight, gboolean shared,
    GstClockTime batch_timeout)
{
  fake_reset ();
  gst_vision_scheduler_init (sched, &fake_engine, NULL, NULL,
      test_scheduler_debug);
  sched->monotonic = fake_monotonic;
  fail_unless (gst_vision_scheduler_start (sched, max_in_flight, shared,
          batch_timeout, NULL));
}

static void
stop (GstVisionScheduler * sched)
{
  gst_vision_scheduler_stop (sched);
  gst_vision_scheduler_clear (sched);
  fake_free ();
}

/* The element's streaming thread for one frame: room in the engine first
 * when it is to be inferred, then into the queue. */
static FakeFrame *
queue_frame_taking (GstVisionScheduler * sched, guint64 index,
    GstVisionDetectInference inference, GstVisionSchedulerStatus status,
    GstClockTime engine_time, gulong collect_us)
{
  FakeFrame *f = g_new0 (FakeFrame, 1);
  gboolean waited;

  f->frame.buffer = gst_buffer_new ();
  f->frame.index = index;
  f->frame.inference = inference;
  f->frame.width = 64;
  f->frame.height = 48;
  f->status = status;
  f->engine_time = engine_time;
  f->collect_us = collect_us;
  if (inference == GST_VISION_DETECT_INFERRED) {
    fail_unless_equals_int (gst_vision_scheduler_wait_room (sched, &waited),
        GST_FLOW_OK);
    f->frame.submitted = fake_monotonic ();
    g_mutex_lock (&fake.lock);
    fake.in_engine++;
    fake.max_in_engine = MAX (fake.max_in_engine, fake.in_engine);
    g_mutex_unlock (&fake.lock);
  }
  gst_vision_scheduler_queue (sched, &f->frame);
  return f;
}

static void
queue_frame (GstVisionScheduler * sched, guint64 index,
    GstVisionDetectInference inference, GstVisionSchedulerStatus status,
    GstClockTime engine_time)
{
  queue_frame_taking (sched, index, inference, status, engine_time, 0);
}

/* 40 frames, every third passed without inference, the engine taking
 * 0-3 ms per frame: all out, in order, each with its inference status, never
 * more than max-in-flight (2) in the engine. */
GST_START_TEST (test_order)
{
  GstVisionScheduler sched;
  guint64 i;

  start (&sched, 2, FALSE, 0);
  g_random_set_seed (38);
  for (i = 0; i < 40; i++) {
    if (i % 3 == 1) {
      queue_frame (&sched, i, GST_VISION_DETECT_SKIPPED_INTERVAL,
          GST_VISION_SCHEDULER_DONE, 0);
    } else {
      queue_frame_taking (&sched, i, GST_VISION_DETECT_INFERRED,
          GST_VISION_SCHEDULER_DONE, 10 * MS, g_random_int_range (0, 3000));
    }
  }
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched), GST_FLOW_OK);
  fail_unless_equals_int (fake.pushed->len, 40);
  for (i = 0; i < 40; i++) {
    fail_unless_equals_uint64 (g_array_index (fake.pushed, guint64, i), i);
    fail_unless_equals_int (g_array_index (fake.pushed_inference,
            GstVisionDetectInference, i), i % 3 == 1 ?
        GST_VISION_DETECT_SKIPPED_INTERVAL : GST_VISION_DETECT_INFERRED);
  }
  fail_unless_equals_int (fake.n_collected, 27);
  fail_unless (fake.max_in_engine <= 2, "%u frames in the engine at once",
      fake.max_in_engine);
  fail_unless_equals_int (fake.n_freed, 40);
  stop (&sched);
}

GST_END_TEST;

/* The latency: the engine's time times max-in-flight plus a margin of half
 * an inference or four mean deviations; a shared engine's adds its batch
 * timeout and one batch more. */
GST_START_TEST (test_wanted_latency)
{
  GstVisionLatencyModel model = { 0, };

  model.max_in_flight = 1;
  fail_unless_equals_uint64 (gst_vision_scheduler_wanted_latency (&model,
          10 * MS, 0), 15 * MS);
  fail_unless_equals_uint64 (gst_vision_scheduler_wanted_latency (&model,
          10 * MS, 3 * MS), 22 * MS);
  model.max_in_flight = 3;
  fail_unless_equals_uint64 (gst_vision_scheduler_wanted_latency (&model,
          10 * MS, 0), 35 * MS);
  model.shared = TRUE;
  model.batch_timeout = 5 * MS;
  model.max_in_flight = 1;
  fail_unless_equals_uint64 (gst_vision_scheduler_wanted_latency (&model,
          10 * MS, 0), 30 * MS);
  fail_unless_equals_uint64 (gst_vision_scheduler_wanted_latency (&model,
          0, 0), 5 * MS);
}

GST_END_TEST;

/* RFC 6298's moving averages (1/8 for the mean, 1/4 for the deviation), the
 * latency raised (and posted) only when it needs a quarter more. */
GST_START_TEST (test_latency_model)
{
  GstVisionScheduler sched;

  start (&sched, 1, FALSE, 0);
  fail_unless_equals_uint64 (gst_vision_scheduler_set_upstream (&sched, TRUE,
          0), 0);
  gst_vision_scheduler_update_latency (&sched, 10 * MS);
  fail_unless_equals_uint64 (sched.model.inference_time, 10 * MS);
  fail_unless_equals_uint64 (sched.model.inference_dev, 0);
  fail_unless_equals_int (fake.n_latency_posts, 1);
  fail_unless_equals_uint64 (fake.posted_latency, 15 * MS);

  gst_vision_scheduler_update_latency (&sched, 10 * MS);
  fail_unless_equals_int (fake.n_latency_posts, 1);

  /* mean (7 * 10 + 18) / 8 = 11, deviation 8 / 4 = 2: 11 + 4 * 2 = 19 ms,
   * over 15 + 15 / 4 = 18.75 */
  gst_vision_scheduler_update_latency (&sched, 18 * MS);
  fail_unless_equals_uint64 (sched.model.inference_time, 11 * MS);
  fail_unless_equals_uint64 (sched.model.inference_dev, 2 * MS);
  fail_unless_equals_int (fake.n_latency_posts, 2);
  fail_unless_equals_uint64 (fake.posted_latency, 19 * MS);

  /* deviation (3 * 2) / 4 = 1.5: 11 + 6 = 17 ms, the latency stays */
  gst_vision_scheduler_update_latency (&sched, 11 * MS);
  fail_unless_equals_uint64 (sched.model.inference_dev, 1500 * GST_USECOND);
  fail_unless_equals_int (fake.n_latency_posts, 2);
  fail_unless_equals_uint64 (gst_vision_scheduler_set_upstream (&sched, TRUE,
          0), 19 * MS);

  /* 19 * 1.25 = 23.75 ms: 23 stays, 24 is raised */
  gst_vision_scheduler_warmed_up (&sched, 15 * MS);
  fail_unless_equals_uint64 (sched.model.inference_dev, 0);
  fail_unless_equals_int (fake.n_latency_posts, 2);
  gst_vision_scheduler_warmed_up (&sched, 16 * MS);
  fail_unless_equals_int (fake.n_latency_posts, 3);
  fail_unless_equals_uint64 (fake.posted_latency, 24 * MS);
  stop (&sched);

  /* a shared engine reports its batch timeout before any batch ran */
  start (&sched, 1, TRUE, 5 * MS);
  fail_unless_equals_uint64 (gst_vision_scheduler_set_upstream (&sched, TRUE,
          0), 5 * MS);
  stop (&sched);
}

GST_END_TEST;

/* An engine that does not say its time: the time from when it could start on
 * the frame (its submission) to its result. */
GST_START_TEST (test_engine_time_measured)
{
  GstVisionScheduler sched;

  start (&sched, 1, FALSE, 0);
  set_gate (TRUE);
  queue_frame (&sched, 0, GST_VISION_DETECT_INFERRED,
      GST_VISION_SCHEDULER_DONE, GST_CLOCK_TIME_NONE);
  set_fake_now (1 * GST_SECOND + 12 * MS);
  set_gate (FALSE);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched), GST_FLOW_OK);
  fail_unless_equals_uint64 (sched.model.inference_time, 12 * MS);
  stop (&sched);
}

GST_END_TEST;

/* skip-inference's deadline: a 10 ms engine, latency 15 ms, nothing ahead: a
 * frame is done 12.5 ms (the time and a quarter) after now, due 15 ms after
 * its running time: late from 2.5 ms behind, to the nanosecond; a frame in
 * the engine ahead of it moves that by its 10 ms; upstream's latency and a
 * shared engine's batch timeout count. */
GST_START_TEST (test_late_policy)
{
  GstVisionScheduler sched;

  start (&sched, 1, FALSE, 0);
  gst_vision_scheduler_warmed_up (&sched, 10 * MS);
  /* not live: never late */
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          1 * GST_SECOND));
  gst_vision_scheduler_set_upstream (&sched, TRUE, 0);
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          102500 * GST_USECOND));
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          102500 * GST_USECOND + 1));
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          1 * GST_SECOND));
  /* no clock, not playing, no running time: not late */
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          GST_CLOCK_TIME_NONE));
  fail_if (gst_vision_scheduler_would_be_late (&sched, GST_CLOCK_TIME_NONE,
          1 * GST_SECOND));

  /* upstream's 20 ms move the deadline */
  gst_vision_scheduler_set_upstream (&sched, TRUE, 20 * MS);
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          122500 * GST_USECOND));
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          122500 * GST_USECOND + 1));
  gst_vision_scheduler_set_upstream (&sched, TRUE, 0);

  /* a frame in the engine (submitted now, 10 ms) is ahead */
  set_gate (TRUE);
  queue_frame (&sched, 0, GST_VISION_DETECT_INFERRED,
      GST_VISION_SCHEDULER_DONE, 10 * MS);
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS, 100 * MS));
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          92500 * GST_USECOND));
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          92500 * GST_USECOND + 1));
  set_gate (FALSE);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched), GST_FLOW_OK);
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS, 100 * MS));

  /* QoS: before the earliest time downstream can show (timestamp plus twice
   * a positive jitter) late, without a clock too; a new segment forgets it */
  gst_vision_scheduler_set_qos (&sched, 200 * MS, 10 * MS);
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 220 * MS - 1,
          GST_CLOCK_TIME_NONE));
  fail_if (gst_vision_scheduler_would_be_late (&sched, 220 * MS,
          GST_CLOCK_TIME_NONE));
  gst_vision_scheduler_set_qos (&sched, 200 * MS, -10 * MS);
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 190 * MS - 1,
          GST_CLOCK_TIME_NONE));
  fail_if (gst_vision_scheduler_would_be_late (&sched, 190 * MS,
          GST_CLOCK_TIME_NONE));
  gst_vision_scheduler_set_qos (&sched, GST_CLOCK_TIME_NONE, 0);
  fail_if (gst_vision_scheduler_would_be_late (&sched, 0, GST_CLOCK_TIME_NONE));
  stop (&sched);

  /* a shared engine: latency 5 + 2 * 10 + 5 = 30 ms; done 5 + 12.5 ms after
   * now: late from 12.5 ms behind */
  start (&sched, 1, TRUE, 5 * MS);
  gst_vision_scheduler_warmed_up (&sched, 10 * MS);
  gst_vision_scheduler_set_upstream (&sched, TRUE, 0);
  fail_if (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          112500 * GST_USECOND));
  fail_unless (gst_vision_scheduler_would_be_late (&sched, 100 * MS,
          112500 * GST_USECOND + 1));
  stop (&sched);
}

GST_END_TEST;

/* A flush drops the frames not out (the engine cancels those it holds), ends
 * a wait for room, and after it the stream runs again. */
static gpointer
wait_room_thread (gpointer data)
{
  gboolean waited;

  return GINT_TO_POINTER (gst_vision_scheduler_wait_room (data, &waited));
}

GST_START_TEST (test_flush)
{
  GstVisionScheduler sched;
  GThread *waiter;
  guint i;

  start (&sched, 3, FALSE, 0);
  set_gate (TRUE);
  for (i = 0; i < 3; i++)
    queue_frame (&sched, i, GST_VISION_DETECT_INFERRED,
        GST_VISION_SCHEDULER_DONE, 10 * MS);
  /* the engine is full: a fourth frame waits for room until the flush */
  waiter = g_thread_new ("waiter", wait_room_thread, &sched);
  g_usleep (20000);
  gst_vision_scheduler_set_flushing (&sched, TRUE);
  fail_unless_equals_int (GPOINTER_TO_INT (g_thread_join (waiter)),
      GST_FLOW_FLUSHING);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched),
      GST_FLOW_FLUSHING);
  fail_unless_equals_int (fake.n_cancels, 1);
  fail_unless_equals_int (fake.pushed->len, 0);
  fail_unless_equals_int (fake.n_freed, 3);
  fail_unless_equals_int (gst_vision_scheduler_flow (&sched),
      GST_FLOW_FLUSHING);

  gst_vision_scheduler_set_flushing (&sched, FALSE);
  g_mutex_lock (&fake.lock);
  fake.cancelled = FALSE;
  fake.gate_closed = FALSE;
  g_mutex_unlock (&fake.lock);
  fail_unless_equals_int (gst_vision_scheduler_flow (&sched), GST_FLOW_OK);
  queue_frame (&sched, 0, GST_VISION_DETECT_INFERRED,
      GST_VISION_SCHEDULER_DONE, 10 * MS);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched), GST_FLOW_OK);
  fail_unless_equals_int (fake.pushed->len, 1);
  stop (&sched);
}

GST_END_TEST;

/* The engine fails on a frame: one error, that frame and those after it are
 * not pushed, the stream's flow is an error; a failed push is the flow too. */
GST_START_TEST (test_failures)
{
  GstVisionScheduler sched;

  start (&sched, 1, FALSE, 0);
  queue_frame (&sched, 0, GST_VISION_DETECT_INFERRED,
      GST_VISION_SCHEDULER_DONE, 10 * MS);
  queue_frame (&sched, 1, GST_VISION_DETECT_INFERRED,
      GST_VISION_SCHEDULER_FAILED, 10 * MS);
  queue_frame (&sched, 2, GST_VISION_DETECT_SKIPPED_GAP,
      GST_VISION_SCHEDULER_DONE, 0);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched), GST_FLOW_ERROR);
  fail_unless_equals_int (fake.n_failed, 1);
  fail_unless_equals_int (fake.pushed->len, 1);
  fail_unless_equals_int (fake.n_freed, 3);
  /* only the frame that succeeded counts in the average */
  fail_unless_equals_int (sched.model.n_inferences, 1);
  stop (&sched);

  start (&sched, 1, FALSE, 0);
  fake.push_ret = GST_FLOW_NOT_LINKED;
  queue_frame (&sched, 0, GST_VISION_DETECT_SKIPPED_LATE,
      GST_VISION_SCHEDULER_DONE, 0);
  queue_frame (&sched, 1, GST_VISION_DETECT_SKIPPED_LATE,
      GST_VISION_SCHEDULER_DONE, 0);
  fail_unless_equals_int (gst_vision_scheduler_drain (&sched),
      GST_FLOW_NOT_LINKED);
  fail_unless_equals_int (gst_vision_scheduler_flow (&sched),
      GST_FLOW_NOT_LINKED);
  fail_unless_equals_int (fake.pushed->len, 1);
  stop (&sched);
}

GST_END_TEST;

static Suite *
scheduler_suite (void)
{
  Suite *s = suite_create ("scheduler");
  TCase *tc = tcase_create ("general");

  GST_DEBUG_CATEGORY_INIT (test_scheduler_debug, "test-scheduler", 0,
      "visiondetect's scheduler under test");
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_order);
  tcase_add_test (tc, test_wanted_latency);
  tcase_add_test (tc, test_latency_model);
  tcase_add_test (tc, test_engine_time_measured);
  tcase_add_test (tc, test_late_policy);
  tcase_add_test (tc, test_flush);
  tcase_add_test (tc, test_failures);
  return s;
}

GST_CHECK_MAIN (scheduler);
