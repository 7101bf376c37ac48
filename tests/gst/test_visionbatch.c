/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect elements sharing one batching engine (batch-size > 1), with the
 * calibrated test model. The oracle is the unshared element (batch-size=1) on
 * the same frames with one lane's threads: the shared CPU engine of THREADS
 * threads runs a batch split between THREADS lanes of one thread each, frame by
 * frame with the same arithmetic as an unshared element of one thread, so every
 * detection must be equal to the bit. (Not against an element of THREADS
 * threads: below AVX-512, oneDNN's sgemm splits a matrix product's sums among
 * its threads, and the last bits move with their count.) Each
 * stream is a GstHarness of its own; the harnesses of one test process share
 * the engine as the elements of one application would. */
#include "vdtest.h"
#include "../../gst/gstvisiondetect.h"

#include <string.h>

#define THREADS 2
#define N_VARIANTS 4


/* A 320x240 RGB frame: @w x @h of @frame at @x, @y, mirrored when asked. */
static GstBuffer *
variant_of (GstBuffer * frame, const GstVideoInfo * in_info, gint x, gint y,
    gboolean mirror)
{
  GstVideoInfo out_info;
  GstVideoFrame in, out;
  GstBuffer *result;
  gint row, col;

  gst_video_info_set_format (&out_info, GST_VIDEO_FORMAT_RGB, 320, 240);
  result = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&out_info),
      NULL);
  fail_unless (gst_video_frame_map (&in, in_info, frame, GST_MAP_READ));
  fail_unless (gst_video_frame_map (&out, &out_info, result, GST_MAP_WRITE));
  for (row = 0; row < 240; row++) {
    const guint8 *src = (const guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&in, 0) +
        (y + row) * GST_VIDEO_FRAME_PLANE_STRIDE (&in, 0) + 3 * x;
    guint8 *dst = (guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&out, 0) +
        row * GST_VIDEO_FRAME_PLANE_STRIDE (&out, 0);

    for (col = 0; col < 320; col++)
      memcpy (dst + 3 * col, src + 3 * (mirror ? 319 - col : col), 3);
  }
  gst_video_frame_unmap (&out);
  gst_video_frame_unmap (&in);
  return result;
}

/* An element of @threads threads */
static GstHarness *
new_detect (gint threads, const gchar * extra)
{
  gchar *props = g_strdup_printf ("device=cpu threshold=0.3 %s",
      extra ? extra : "");
  GstHarness *h = vdtest_new_detect (threads, props);

  /* not live: no warm-up inference on new caps (test_timeout_bounds_latency
   * has one) */
  gst_harness_set_live (h, FALSE);
  g_free (props);
  return h;
}

static GstHarness *
new_shared (guint batch_size, GstClockTime timeout, const gchar * caps)
{
  gchar *extra = g_strdup_printf ("batch-size=%u batch-timeout=%"
      G_GUINT64_FORMAT, batch_size, timeout);
  GstHarness *h = new_detect (THREADS, extra);

  g_free (extra);
  if (caps != NULL)
    gst_harness_set_src_caps_str (h, caps);
  return h;
}

static gdouble
mean_batch_size (GstHarness * h)
{
  GstElement *detect = gst_harness_find_element (h, "visiondetect");
  gdouble mean;

  g_object_get (detect, "batch-mean-size", &mean, NULL);
  gst_object_unref (detect);
  return mean;
}

static void
push (GstHarness * h, GstBuffer * frame, GstClockTime pts)
{
  fail_unless_equals_int (gst_harness_push (h, vdtest_timed_copy (frame, pts)),
      GST_FLOW_OK);
}

/* Pulls a frame and checks it is @ref's, inferred, at @pts. */
static void
pull_check (GstHarness * h, GstBuffer * ref, GstClockTime pts,
    const gchar * what)
{
  GstBuffer *out = gst_harness_pull (h);

  fail_unless (out != NULL, "%s: no frame", what);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), pts);
  fail_unless_equals_int (vdtest_inference_of (out),
      GST_VISION_DETECT_INFERRED);
  fail_unless (vdtest_same_detections (out, ref),
      "%s: not the unshared element's detections", what);
  gst_buffer_unref (out);
}

/* The test frames: four different 320x240 pictures, each with detections
 * (the first four of frame 0, frame 0 mirrored and crops of frame 1, plain or
 * mirrored, that have any), and frame 1 whole (400x300); with each, the
 * unshared element's output, the oracle. Which of them have detections
 * depends on the calibrated test model, and so on the CPU whose torch made it
 * (built with torch's AVX2 kernels, two crops of frame 1 get none). */
typedef struct
{
  GstBuffer *frames[N_VARIANTS];
  GstBuffer *refs[N_VARIANTS];
  GstBuffer *frame_400, *ref_400;
  GstClockTime inference_time;  /* of one frame, unshared, warm */
} Fixture;

static GstBuffer *
unshared_output (GstHarness * h, GstBuffer * frame, GstClockTime * elapsed)
{
  GstClockTime start = gst_util_get_timestamp ();
  GstBuffer *out;

  push (h, frame, 0);
  out = gst_harness_pull (h);
  if (elapsed != NULL)
    *elapsed = gst_util_get_timestamp () - start;
  fail_unless (out != NULL);
  return out;
}

static gboolean
found_something (GstBuffer * out)
{
  return vdtest_get_detect_meta (out)->detections->len > 0;
}

static void
fixture_init (Fixture * fx)
{
  GstVideoInfo info0, info1;
  GstBuffer *frame0 = vdtest_load_frame (0, &info0);
  /* frame 1 crops: x, y, mirrored */
  static const gint crops[][3] = { {0, 0, FALSE}, {80, 60, FALSE},
  {40, 30, FALSE}, {80, 0, FALSE}, {0, 60, FALSE}, {0, 0, TRUE},
  {80, 60, TRUE}, {40, 30, TRUE}, {80, 0, TRUE}, {0, 60, TRUE}
  };
  GstHarness *h;
  guint i, j, n = 0, c;

  memset (fx, 0, sizeof (*fx));
  fx->frame_400 = vdtest_load_frame (1, &info1);
  /* the oracle: one lane's threads */
  h = new_detect (1, NULL);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  for (c = 0; c < 2 + G_N_ELEMENTS (crops) && n < N_VARIANTS; c++) {
    GstBuffer *frame = c == 0 ? gst_buffer_ref (frame0)
        : c == 1 ? variant_of (frame0, &info0, 0, 0, TRUE)
        : variant_of (fx->frame_400, &info1, crops[c - 2][0], crops[c - 2][1],
        crops[c - 2][2]);
    GstBuffer *ref = unshared_output (h, frame, &fx->inference_time);

    if (found_something (ref)) {
      fx->frames[n] = frame;
      fx->refs[n++] = ref;
    } else {
      gst_buffer_unref (frame);
      gst_buffer_unref (ref);
    }
  }
  gst_buffer_unref (frame0);
  fail_unless_equals_int (n, N_VARIANTS);
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_400);
  fx->ref_400 = unshared_output (h, fx->frame_400, NULL);
  fail_unless (found_something (fx->ref_400),
      "the oracle found nothing: comparing it proves little");
  gst_harness_teardown (h);
  /* different pictures, different detections: a frame given another
   * stream's result, or another frame's, is seen */
  for (i = 0; i < N_VARIANTS; i++)
    for (j = i + 1; j < N_VARIANTS; j++)
      fail_unless (!vdtest_same_detections (fx->refs[i], fx->refs[j]),
          "variants %u and %u give the same detections", i, j);
}

static void
fixture_clear (Fixture * fx)
{
  guint i;

  for (i = 0; i < N_VARIANTS; i++) {
    gst_buffer_unref (fx->frames[i]);
    gst_buffer_unref (fx->refs[i]);
  }
  gst_buffer_unref (fx->frame_400);
  gst_buffer_unref (fx->ref_400);
}

/* The fixture, and two elements sharing batches of two (@timeout), each pushed
 * the fixture's frame of its index at time 0; returns the time before the
 * pushes. */
static GstClockTime
start_two_streams (Fixture * fx, GstClockTime timeout, GstHarness ** a,
    GstHarness ** b)
{
  GstClockTime start;

  fixture_init (fx);
  *a = new_shared (2, timeout, VDTEST_CAPS_320);
  *b = new_shared (2, timeout, VDTEST_CAPS_320);
  start = gst_util_get_timestamp ();
  push (*a, fx->frames[0], 0);
  push (*b, fx->frames[1], 0);
  return start;
}

/* ------------------------------------------------------------------------ */

/* Four streams, batches of four: every frame gets its own detections, equal
 * to the unshared element's, in its stream's order; the batches are full (the
 * mean batch size is exactly 4) and ran when full, not after the timeout. */
GST_START_TEST (test_streams_match_unshared)
{
  const GstClockTime timeout = 30 * GST_SECOND;
  GstHarness *h[N_VARIANTS];
  GstClockTime start, elapsed;
  Fixture fx;
  guint s, r;

  fixture_init (&fx);
  for (s = 0; s < N_VARIANTS; s++)
    h[s] = new_shared (4, timeout, VDTEST_CAPS_320);

  start = gst_util_get_timestamp ();
  /* stream s, round r: picture (s + r) % 4; with max-in-flight=1 a push
   * waits for its stream's frame before, so each round is one batch */
  for (r = 0; r < 3; r++)
    for (s = 0; s < N_VARIANTS; s++)
      push (h[s], fx.frames[(s + r) % N_VARIANTS], r * 33 * GST_MSECOND);
  for (s = 0; s < N_VARIANTS; s++)
    for (r = 0; r < 3; r++)
      pull_check (h[s], fx.refs[(s + r) % N_VARIANTS], r * 33 * GST_MSECOND,
          "stream frame");
  elapsed = gst_util_get_timestamp () - start;

  fail_unless (mean_batch_size (h[0]) == 4.0, "mean batch size %f",
      mean_batch_size (h[0]));
  fail_unless (elapsed < timeout, "12 frames took %" GST_TIME_FORMAT,
      GST_TIME_ARGS (elapsed));

  for (s = 0; s < N_VARIANTS; s++)
    gst_harness_teardown (h[s]);
  fixture_clear (&fx);
}

GST_END_TEST;

/* One stream's frame while another stream of the engine sends nothing: it
 * waits for the batch to fill at most the batch timeout, then runs (measured:
 * at least the timeout, at most the timeout plus two inferences and a margin
 * for a loaded machine). The reported latency includes the timeout. */
GST_START_TEST (test_timeout_bounds_latency)
{
  const GstClockTime timeout = 400 * GST_MSECOND;
  GstHarness *a, *idle;
  GstClockTime start, elapsed, latency, bound;
  Fixture fx;

  fixture_init (&fx);
  /* live: a warm-up inference on the caps, alone, outside the statistics */
  a = new_shared (4, timeout, NULL);
  gst_harness_set_live (a, TRUE);
  gst_harness_set_src_caps_str (a, VDTEST_CAPS_320);
  idle = new_shared (4, timeout, VDTEST_CAPS_320);
  fail_unless (mean_batch_size (a) == 0.0);

  /* the first frame also sets the engine up for the size */
  push (a, fx.frames[0], 0);
  pull_check (a, fx.refs[0], 0, "first frame");

  start = gst_util_get_timestamp ();
  push (a, fx.frames[1], 33 * GST_MSECOND);
  pull_check (a, fx.refs[1], 33 * GST_MSECOND, "lone frame");
  elapsed = gst_util_get_timestamp () - start;
  bound = timeout + 2 * fx.inference_time + 300 * GST_MSECOND;
  GST_INFO ("lone frame: %" GST_TIME_FORMAT " (timeout %" GST_TIME_FORMAT
      ", inference %" GST_TIME_FORMAT ")", GST_TIME_ARGS (elapsed),
      GST_TIME_ARGS (timeout), GST_TIME_ARGS (fx.inference_time));
  fail_unless (elapsed >= timeout, "the frame did not wait for others: %"
      GST_TIME_FORMAT, GST_TIME_ARGS (elapsed));
  fail_unless (elapsed <= bound, "the frame took %" GST_TIME_FORMAT
      ", more than %" GST_TIME_FORMAT, GST_TIME_ARGS (elapsed),
      GST_TIME_ARGS (bound));
  fail_unless (mean_batch_size (a) == 1.0);

  latency = gst_harness_query_latency (a);
  fail_unless (latency >= timeout, "latency %" GST_TIME_FORMAT,
      GST_TIME_ARGS (latency));

  gst_harness_teardown (idle);
  gst_harness_teardown (a);
  fixture_clear (&fx);
}

GST_END_TEST;

/* One stream changes its frame size mid-stream and back, the other goes on:
 * both get the unshared element's detections in order, and frames of two
 * sizes run in batches of their own (round by round, so that the batches
 * are known: 2, then 1 and 1, then 2). */
GST_START_TEST (test_renegotiation)
{
  const GstClockTime timeout = 30 * GST_SECOND;
  GstHarness *a, *b;
  GstClockTime start, elapsed, t1 = 33 * GST_MSECOND, t2 = 66 * GST_MSECOND;
  GstVisionDetectMeta *meta;
  GstBuffer *out;
  Fixture fx;

  start = start_two_streams (&fx, timeout, &a, &b);
  pull_check (a, fx.refs[0], 0, "a, 320x240");
  pull_check (b, fx.refs[1], 0, "b, 1");

  gst_harness_set_src_caps_str (a, VDTEST_CAPS_400);
  push (a, fx.frame_400, t1);
  push (b, fx.frames[2], t1);
  out = gst_harness_pull (a);
  fail_unless (out != NULL);
  meta = vdtest_get_detect_meta (out);
  fail_unless (meta != NULL && meta->width == 400 && meta->height == 300);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), t1);
  fail_unless (vdtest_same_detections (out, fx.ref_400), "a, 400x300");
  gst_buffer_unref (out);
  pull_check (b, fx.refs[2], t1, "b, 2");

  gst_harness_set_src_caps_str (a, VDTEST_CAPS_320);
  push (a, fx.frames[3], t2);
  push (b, fx.frames[0], t2);
  pull_check (a, fx.refs[3], t2, "a, 320x240 again");
  pull_check (b, fx.refs[0], t2, "b, 3");
  elapsed = gst_util_get_timestamp () - start;
  fail_unless (mean_batch_size (a) == 1.5, "mean batch size %f",
      mean_batch_size (a));
  /* no batch waited for the timeout: the streams' frames are all in */
  fail_unless (elapsed < timeout, "6 frames took %" GST_TIME_FORMAT,
      GST_TIME_ARGS (elapsed));

  gst_harness_teardown (a);
  gst_harness_teardown (b);
  fixture_clear (&fx);
}

GST_END_TEST;

/* What an element's output thread takes, at most, to take up a frame pushed to
 * it: far less on any machine, far less than a batch */
#define SETTLE_US (200 * 1000)

static GstClockTime
timed_teardown (GstHarness * h)
{
  GstClockTime start = gst_util_get_timestamp ();

  gst_harness_teardown (h);
  return gst_util_get_timestamp () - start;
}

/* A stream set to NULL while its frame waits in a batch that is not full, and
 * another while its frame runs: neither waits for the batch, and the other
 * streams' frames of those batches, and their next ones, come out right. */
GST_START_TEST (test_stream_stops_mid_batch)
{
  const GstClockTime timeout = 2 * GST_SECOND;
  GstHarness *a, *b, *c, *idle;
  GstClockTime t;
  Fixture fx;

  fixture_init (&fx);
  a = new_shared (4, timeout, VDTEST_CAPS_320);
  b = new_shared (4, timeout, VDTEST_CAPS_320);
  c = new_shared (4, timeout, VDTEST_CAPS_320);
  idle = new_shared (4, timeout, VDTEST_CAPS_320);

  /* a batch of three waiting for the fourth stream */
  push (a, fx.frames[0], 0);
  push (b, fx.frames[1], 0);
  push (c, fx.frames[2], 0);
  /* c's output thread waits for the frame (not stopped before it does) */
  g_usleep (SETTLE_US);
  t = timed_teardown (c);
  fail_unless (t < timeout / 4, "stopping took %" GST_TIME_FORMAT,
      GST_TIME_ARGS (t));
  pull_check (a, fx.refs[0], 0, "a, with c stopped while waiting");
  pull_check (b, fx.refs[1], 0, "b, with c stopped while waiting");
  gst_harness_teardown (idle);

  /* without an idle stream, a batch runs as soon as each stream has its
   * frame in: c stops while its batch runs */
  c = new_shared (4, timeout, VDTEST_CAPS_320);
  push (a, fx.frames[2], GST_SECOND);
  push (b, fx.frames[3], GST_SECOND);
  push (c, fx.frames[0], GST_SECOND);
  g_usleep (SETTLE_US);
  t = timed_teardown (c);
  /* the batch of three takes about three inferences: far more */
  fail_unless (t < fx.inference_time / 2, "stopping took %" GST_TIME_FORMAT
      " (one inference %" GST_TIME_FORMAT ")", GST_TIME_ARGS (t),
      GST_TIME_ARGS (fx.inference_time));
  pull_check (a, fx.refs[2], GST_SECOND, "a, with c stopped while running");
  pull_check (b, fx.refs[3], GST_SECOND, "b, with c stopped while running");

  /* and the engine goes on */
  push (a, fx.frames[1], 2 * GST_SECOND);
  push (b, fx.frames[0], 2 * GST_SECOND);
  pull_check (a, fx.refs[1], 2 * GST_SECOND, "a, after");
  pull_check (b, fx.refs[0], 2 * GST_SECOND, "b, after");

  gst_harness_teardown (a);
  gst_harness_teardown (b);
  fixture_clear (&fx);
}

GST_END_TEST;

static GstVisionDetectInference
pull_inference (GstHarness * h)
{
  GstBuffer *out = gst_harness_pull (h);
  GstVisionDetectInference inference;

  fail_unless (out != NULL);
  inference = vdtest_inference_of (out);
  gst_buffer_unref (out);
  return inference;
}

/* late-frames=skip-inference on a live source (a test clock, as in
 * test_visiondetect.c's test_live_deadline) with a shared engine: a frame
 * due now is inferred (the latency covers the batch timeout and the
 * inference), one whose deadline leaves less than the batch timeout is passed
 * without inference, as its batch may wait that long. */
GST_START_TEST (test_deadline_counts_timeout)
{
  const GstClockTime timeout = 10 * GST_SECOND;
  const GstClockTime now = 100 * GST_SECOND;
  GstHarness *h;
  GstElement *detect;
  GstClockTime latency;
  guint64 skipped;
  Fixture fx;

  fixture_init (&fx);
  h = new_shared (2, timeout, NULL);
  detect = gst_harness_find_element (h, "visiondetect");
  gst_harness_set_live (h, TRUE);
  gst_harness_use_testclock (h);
  /* live: the warm-up sets the inference time before the first frame */
  gst_harness_set_src_caps_str (h, VDTEST_CAPS_320);
  latency = gst_harness_query_latency (h);
  fail_unless (latency > timeout + fx.inference_time, "latency %"
      GST_TIME_FORMAT, GST_TIME_ARGS (latency));
  gst_element_set_base_time (detect, 0);
  fail_unless (gst_harness_set_time (h, now));

  push (h, fx.frames[0], now);
  fail_unless_equals_int (pull_inference (h), GST_VISION_DETECT_INFERRED);
  push (h, fx.frames[0], now - timeout / 2);
  fail_unless_equals_int (pull_inference (h), GST_VISION_DETECT_SKIPPED_LATE);
  g_object_get (detect, "frames-skipped-late", &skipped, NULL);
  fail_unless_equals_uint64 (skipped, 1);

  gst_object_unref (detect);
  gst_harness_teardown (h);
  fixture_clear (&fx);
}

GST_END_TEST;

/* A flush (a seek) of a stream whose frame waits in a batch: the frame is
 * dropped at once, not after the batch timeout, and the stream's next frames
 * come out right; the other stream's frame of that batch too. */
GST_START_TEST (test_flush_mid_batch)
{
  const GstClockTime timeout = 2 * GST_SECOND;
  GstHarness *a, *b, *idle;
  GstClockTime start, t;
  GstSegment segment;
  Fixture fx;

  fixture_init (&fx);
  a = new_shared (4, timeout, VDTEST_CAPS_320);
  b = new_shared (4, timeout, VDTEST_CAPS_320);
  idle = new_shared (4, timeout, VDTEST_CAPS_320);

  push (a, fx.frames[0], 0);
  push (b, fx.frames[1], 0);
  g_usleep (SETTLE_US);
  start = gst_util_get_timestamp ();
  fail_unless (gst_harness_push_event (a, gst_event_new_flush_start ()));
  fail_unless (gst_harness_push_event (a, gst_event_new_flush_stop (TRUE)));
  t = gst_util_get_timestamp () - start;
  fail_unless (t < timeout / 4, "the flush took %" GST_TIME_FORMAT,
      GST_TIME_ARGS (t));
  gst_harness_teardown (idle);

  /* after the flush: a new segment, the frame after the seek */
  gst_segment_init (&segment, GST_FORMAT_TIME);
  fail_unless (gst_harness_push_event (a, gst_event_new_segment (&segment)));
  push (a, fx.frames[2], 5 * GST_SECOND);
  push (b, fx.frames[3], GST_SECOND);
  pull_check (b, fx.refs[1], 0, "b, beside the flushed frame");
  /* the flushed frame never comes out: the next one does */
  pull_check (a, fx.refs[2], 5 * GST_SECOND, "a, after the flush");
  pull_check (b, fx.refs[3], GST_SECOND, "b, after a's flush");

  gst_harness_teardown (a);
  gst_harness_teardown (b);
  fixture_clear (&fx);
}

GST_END_TEST;

/* EOS of one stream: it gets its frames and EOS after them; the other goes on,
 * its batches no longer waiting for the ended stream (far below the
 * timeout). */
GST_START_TEST (test_eos_one_stream)
{
  const GstClockTime timeout = 30 * GST_SECOND;
  GstHarness *a, *b;
  GstClockTime start, elapsed;
  GstEvent *event;
  gboolean eos = FALSE;
  Fixture fx;

  start = start_two_streams (&fx, timeout, &a, &b);
  fail_unless (gst_harness_push_event (a, gst_event_new_eos ()));
  pull_check (a, fx.refs[0], 0, "a, before EOS");
  while (!eos && (event = gst_harness_try_pull_event (a)) != NULL) {
    eos = GST_EVENT_TYPE (event) == GST_EVENT_EOS;
    gst_event_unref (event);
  }
  fail_unless (eos, "no EOS after a's frame");

  push (b, fx.frames[2], GST_SECOND);
  push (b, fx.frames[3], 2 * GST_SECOND);
  pull_check (b, fx.refs[1], 0, "b, 1");
  pull_check (b, fx.refs[2], GST_SECOND, "b, 2");
  pull_check (b, fx.refs[3], 2 * GST_SECOND, "b, 3");
  elapsed = gst_util_get_timestamp () - start;
  fail_unless (elapsed < timeout, "b's frames took %" GST_TIME_FORMAT,
      GST_TIME_ARGS (elapsed));
  fail_unless (mean_batch_size (b) == 4.0 / 3.0, "mean batch size %f",
      mean_batch_size (b));
  /* the timeout is in the latency reported, however short the batches (the
   * harness gives a latency only for a live source) */
  gst_harness_set_live (b, TRUE);
  fail_unless (gst_harness_query_latency (b) >= timeout,
      "latency %" GST_TIME_FORMAT,
      GST_TIME_ARGS (gst_harness_query_latency (b)));

  gst_harness_teardown (a);
  gst_harness_teardown (b);
  fixture_clear (&fx);
}

GST_END_TEST;

/* A frame the engine refuses (a GstVideoMeta whose row stride is shorter than
 * a row) in a batch with two good ones: that stream gets an error naming its
 * frame, the two others their detections. */
GST_START_TEST (test_bad_frame_fails_alone)
{
  const GstClockTime timeout = 30 * GST_SECOND;
  GstHarness *bad, *a, *b;
  GstElement *detect;
  GstBus *bus = gst_bus_new ();
  GstBuffer *broken;
  GstMessage *msg;
  GError *err = NULL;
  gsize offsets[4] = { 0, };
  gint strides[4] = { 3, };
  Fixture fx;

  fixture_init (&fx);
  bad = new_shared (3, timeout, VDTEST_CAPS_320);
  a = new_shared (3, timeout, VDTEST_CAPS_320);
  b = new_shared (3, timeout, VDTEST_CAPS_320);
  detect = gst_harness_find_element (bad, "visiondetect");
  gst_element_set_bus (detect, bus);

  broken = gst_buffer_copy (fx.frames[0]);
  while (gst_buffer_get_video_meta (broken) != NULL)
    gst_buffer_remove_meta (broken,
        (GstMeta *) gst_buffer_get_video_meta (broken));
  gst_buffer_add_video_meta_full (broken, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_FORMAT_RGB, 320, 240, 1, offsets, strides);

  fail_unless_equals_int (gst_harness_push (bad, broken), GST_FLOW_OK);
  push (a, fx.frames[1], 0);
  push (b, fx.frames[2], 0);
  pull_check (a, fx.refs[1], 0, "a, beside a bad frame");
  pull_check (b, fx.refs[2], 0, "b, beside a bad frame");

  msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "no error for the bad frame");
  gst_message_parse_error (msg, &err, NULL);
  fail_unless (strstr (err->message, "frame 0") != NULL
      && strstr (err->message, "stride") != NULL, "%s", err->message);
  g_error_free (err);
  gst_message_unref (msg);

  gst_element_set_bus (detect, NULL);
  gst_object_unref (detect);
  gst_object_unref (bus);
  gst_harness_teardown (bad);
  gst_harness_teardown (a);
  gst_harness_teardown (b);
  fixture_clear (&fx);
}

GST_END_TEST;

GST_START_TEST (test_properties)
{
  GstElement *detect = gst_element_factory_make ("visiondetect", NULL);
  guint batch_size;
  guint64 timeout;
  gdouble mean;

  fail_unless (detect != NULL);
  g_object_get (detect, "batch-size", &batch_size, "batch-timeout", &timeout,
      "batch-mean-size", &mean, NULL);
  /* the unshared element by default */
  fail_unless_equals_int (batch_size, 1);
  fail_unless_equals_uint64 (timeout, 5 * GST_MSECOND);
  fail_unless (mean == 0.0);
  g_object_set (detect, "batch-size", 8, "batch-timeout",
      (guint64) (20 * GST_MSECOND), NULL);
  g_object_get (detect, "batch-size", &batch_size, "batch-timeout", &timeout,
      NULL);
  fail_unless_equals_int (batch_size, 8);
  fail_unless_equals_uint64 (timeout, 20 * GST_MSECOND);
  gst_object_unref (detect);
}

GST_END_TEST;

static Suite *
visionbatch_suite (void)
{
  Suite *s = suite_create ("visionbatch");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 300);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_streams_match_unshared);
  tcase_add_test (tc, test_timeout_bounds_latency);
  tcase_add_test (tc, test_renegotiation);
  tcase_add_test (tc, test_stream_stops_mid_batch);
  tcase_add_test (tc, test_flush_mid_batch);
  tcase_add_test (tc, test_deadline_counts_timeout);
  tcase_add_test (tc, test_eos_one_stream);
  tcase_add_test (tc, test_bad_frame_fails_alone);
  return s;
}

GST_CHECK_MAIN (visionbatch);
