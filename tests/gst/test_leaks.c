/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* State cycles NULL -> PLAYING -> NULL of a pipeline with the four elements,
 * checked for leaks twice: by the heap's size (glibc's mallinfo2: bytes in use,
 * small and mmap'd chunks) after many cycles, and, in the valgrind variant of
 * this test, by valgrind's definitely-lost report after a few.
 *
 * The heap measurement counts freed chunks kept in glibc's per-thread caches and
 * fast bins as in use: meson runs this test with GLIBC_TUNABLES=
 * glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0. What is left is the
 * allocator's own bookkeeping of the streaming threads' arenas: up to a few
 * hundred bytes per cycle that valgrind shows are no leak (its "in use at
 * exit" is the same after 2 and 5 cycles).
 *
 * Every cycle loads the model, creates the engine context, negotiates, runs a
 * frame and tears everything down; one cycle in ten runs inference and repeats
 * the frame as GAP buffers (the others push a GAP frame, which the element,
 * with gap-frames=skip, passes without inference), so that the test stays
 * short on two shared cores while every code path runs many times. */
#include "vdtest.h"

#include <malloc.h>
#include <stdlib.h>

static gsize
heap_in_use (void)
{
  struct mallinfo2 mi = mallinfo2 ();

  return mi.uordblks + mi.hblkhd;
}

static void
run_cycle (GstElement * pipeline, GstBuffer * frame, gboolean infer)
{
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstBus *bus = gst_element_get_bus (pipeline);
  GstBuffer *buffer = gst_buffer_copy (frame);
  GstElement *detect;
  GstFlowReturn flow;
  GstMessage *msg;
  guint i;

  if (!infer) {
    /* no inference on a GAP frame: detections of our own, so that the overlay
     * draws and the JSON writer writes */
    GstVisionDetectMeta *meta = vdtest_add_detect_meta (buffer, 320, 240);
    GstVideoRegionOfInterestMeta *roi =
        gst_buffer_add_video_region_of_interest_meta (buffer, "box", 10, 20, 50,
        40);

    GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_GAP);
    vdtest_add_detection (meta, 10, 20, 50, 40, 0.9, 2, "box", 0);
    roi->id = 0;
    gst_video_region_of_interest_meta_add_param (roi,
        gst_structure_new ("detection", "confidence", G_TYPE_DOUBLE, 0.9,
            "label", G_TYPE_STRING, "box", NULL));
  }
  GST_BUFFER_PTS (buffer) = 0;
  GST_BUFFER_DURATION (buffer) = 40 * GST_MSECOND;

  /* an inference cycle also repeats its frame: a GAP copy, inferred as the
   * stream's first, then one that repeats it (the kept frame and result);
   * the others' GAP frames are skipped */
  detect = gst_bin_get_by_name (GST_BIN (pipeline), "detect");
  if (detect != NULL) {
    gst_util_set_object_arg (G_OBJECT (detect), "gap-frames",
        infer ? "repeat" : "skip");
    gst_object_unref (detect);
  }
  fail_unless (gst_element_set_state (pipeline, GST_STATE_PLAYING) !=
      GST_STATE_CHANGE_FAILURE);
  g_signal_emit_by_name (src, "push-buffer", buffer, &flow);
  fail_unless_equals_int (flow, GST_FLOW_OK);
  for (i = 0; infer && i < 2; i++) {
    GstBuffer *gap = gst_buffer_copy (buffer);

    GST_BUFFER_FLAG_SET (gap, GST_BUFFER_FLAG_GAP);
    GST_BUFFER_PTS (gap) = (i + 1) * 40 * GST_MSECOND;
    g_signal_emit_by_name (src, "push-buffer", gap, &flow);
    gst_buffer_unref (gap);
    fail_unless_equals_int (flow, GST_FLOW_OK);
  }
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  msg = gst_bus_timed_pop_filtered (bus, 120 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "no EOS");
  fail_unless (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS, "error: %"
      GST_PTR_FORMAT, msg);
  gst_message_unref (msg);
  fail_unless_equals_int (gst_element_set_state (pipeline, GST_STATE_NULL),
      GST_STATE_CHANGE_SUCCESS);

  gst_buffer_unref (buffer);
  gst_object_unref (bus);
  gst_object_unref (src);
}

GST_START_TEST (test_state_cycles)
{
  const gchar *env = g_getenv ("VD_LEAK_CYCLES");
  const guint n_cycles = env ? (guint) atoi (env) : 100;
  const gchar *every_env = g_getenv ("VD_LEAK_INFER_EVERY");
  const guint infer_every = every_env ? (guint) atoi (every_env) : 10;
  const guint warmup = MIN (10u, n_cycles);
  gchar *model = vdtest_model ();
  gchar *path = vdtest_fixture ("frame-0.ppm");
  GstVideoInfo info;
  GstBuffer *frame = vdtest_load_ppm (path, &info);
  gchar *chain =
      g_strdup_printf ("visiondetect name=detect model=\"%s\" threads=2 "
      "threshold=0.3 ! visiontrack ! visionoverlay trail=5 ! "
      "visionjson location=/dev/null", model);
  gchar *launch =
      g_strdup_printf ("appsrc name=src format=time "
      "caps=video/x-raw,format=RGB,width=320,height=240,framerate=25/1 ! %s ! "
      "fakesink",
      g_getenv ("VD_LEAK_CHAIN") ? g_getenv ("VD_LEAK_CHAIN") : chain);
  GstElement *pipeline = gst_parse_launch (launch, NULL);
  /* the lowest heap after a cycle, over a window of cycles after the warm-up
   * and over the last ones: what a cycle leaves behind only grows, what lingers
   * a moment (a thread that exits after its join returns, its thread-local
   * caches) comes and goes */
  const guint window = MAX (1u, MIN (10u, (n_cycles - warmup) / 3));
  gsize before = G_MAXSIZE, after = G_MAXSIZE;
  guint i;

  fail_unless (pipeline != NULL);
  for (i = 0; i < n_cycles; i++) {
    run_cycle (pipeline, frame, infer_every > 0 && i % infer_every == 0);
    if (i + 1 >= warmup && i + 1 < warmup + window)
      before = MIN (before, heap_in_use ());
    if (i + 1 > n_cycles - window)
      after = MIN (after, heap_in_use ());
  }
  /* Leaking a model (57 MB), a context (MBs), a frame (230 KB) or a buffer
   * once per cycle exceeds this by far; the allocator's noise (see the top,
   * measured at most 340 bytes per cycle) stays well below. The valgrind
   * variant catches the small leaks. */
  GST_INFO ("heap, lowest of cycles %u-%u: %" G_GSIZE_FORMAT ", of the last %u"
      " of %u: %" G_GSIZE_FORMAT, warmup, warmup + window - 1, before, window,
      n_cycles, after);
  g_print ("heap in use, lowest of cycles %u-%u: %" G_GSIZE_FORMAT " bytes, of "
      "the last %u of %u: %" G_GSIZE_FORMAT " bytes\n", warmup,
      warmup + window - 1, before, window, n_cycles, after);
  if (n_cycles > warmup + window)
    fail_unless (after <= before + 64 * 1024,
        "the heap grew by %" G_GSSIZE_FORMAT " bytes in %u state cycles",
        (gssize) (after - before), n_cycles - warmup - window);

  gst_object_unref (pipeline);
  gst_buffer_unref (frame);
  g_free (launch);
  g_free (chain);
  g_free (path);
  g_free (model);
}

GST_END_TEST;

static Suite *
leaks_suite (void)
{
  Suite *s = suite_create ("leaks");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 1200);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_state_cycles);
  return s;
}

GST_CHECK_MAIN (leaks);
