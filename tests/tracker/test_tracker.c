/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vt_tracker (tracker/vt_tracker.c): ids through crossings, confirmation, lost
 * tracks and their time limits, the low-confidence round, classes, prediction
 * on frames without detection, bad detections and bad parameters. */
#include "vt_tracker.h"

#include <math.h>
#include <string.h>

static vt_detection det(float cx, float cy, float w, float h, float score, int class_id)
{
    vt_detection d = {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, score, class_id};
    return d;
}

static vt_tracker *tracker_with(unsigned confirm_hits)
{
    vt_tracker_params p = vt_tracker_default_params();
    GError *error = NULL;
    vt_tracker *t;

    p.confirm_hits = confirm_hits;
    t = vt_tracker_new(&p, &error);
    g_assert_no_error(error);
    g_assert_nonnull(t);
    return t;
}

/* two boxes of one class cross head-on (their boxes overlap for several
 * frames); the detections come in swapped order on odd frames so that the
 * order of the input cannot carry the ids */
static void test_crossing_keeps_ids(void)
{
    vt_tracker *t = tracker_with(2);
    int32_t first_a = 0, first_b = 0;
    int frame;

    for (frame = 0; frame < 60; frame++) {
        vt_detection d[2];
        int32_t ids[2];
        int ia = frame % 2, ib = 1 - ia;

        d[ia] = det(100.0f + 5.0f * frame, 200.0f, 40, 40, 0.9f, 1);
        d[ib] = det(400.0f - 5.0f * frame, 210.0f, 40, 40, 0.9f, 1);
        vt_tracker_update(t, d, 2, VT_NO_PTS, ids);
        if (frame == 0) {
            g_assert_cmpint(ids[0], ==, 0); /* tentative */
            g_assert_cmpint(ids[1], ==, 0);
            continue;
        }
        if (frame == 1) {
            first_a = ids[ia];
            first_b = ids[ib];
            g_assert_cmpint(first_a, >, 0);
            g_assert_cmpint(first_b, >, 0);
            g_assert_cmpint(first_a, !=, first_b);
        }
        g_assert_cmpint(ids[ia], ==, first_a);
        g_assert_cmpint(ids[ib], ==, first_b);
    }
    g_assert_cmpint(vt_tracker_last_id(t), ==, 2);
    vt_tracker_free(t);
}

/* an object hidden for a while comes back with its id when the wait is under
 * max_lost_frames, with a new one after */
static void test_lost_and_found(void)
{
    vt_tracker_params p = vt_tracker_default_params();
    vt_tracker *t;
    int32_t id, again;
    int frame;

    p.max_lost_frames = 10;
    t = vt_tracker_new(&p, NULL);
    for (frame = 0; frame < 5; frame++) {
        vt_detection d = det(100.0f + 2.0f * frame, 100.0f, 30, 30, 0.9f, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
    }
    g_assert_cmpint(id, >, 0);
    /* 8 frames with no detection: lost but kept, predicted along its motion */
    for (; frame < 13; frame++)
        vt_tracker_update(t, NULL, 0, VT_NO_PTS, NULL);
    {
        size_t n;
        const vt_track *tracks = vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 1);
        g_assert_cmpint(tracks[0].state, ==, VT_TRACK_LOST);
        g_assert_cmpint(tracks[0].frames_lost, ==, 8);
    }
    {
        vt_detection d = det(100.0f + 2.0f * frame, 100.0f, 30, 30, 0.9f, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &again);
        g_assert_cmpint(again, ==, id);
        frame++;
    }
    /* now 11 frames: dropped, the next detection starts a new track */
    for (int k = 0; k < 11; k++, frame++)
        vt_tracker_update(t, NULL, 0, VT_NO_PTS, NULL);
    {
        size_t n;
        vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 0);
    }
    for (int k = 0; k < 2; k++, frame++) {
        vt_detection d = det(100.0f + 2.0f * frame, 100.0f, 30, 30, 0.9f, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &again);
    }
    g_assert_cmpint(again, >, id);
    vt_tracker_free(t);
}

/* with max_lost_ns the limit is time, whatever the number of frames */
static void test_lost_time_limit(void)
{
    vt_tracker_params p = vt_tracker_default_params();
    const int64_t ms = 1000000;
    vt_tracker *t;
    vt_detection d = det(50, 50, 20, 20, 0.9f, 3);
    int32_t id, again;
    size_t n;

    p.max_lost_frames = 1000;
    p.max_lost_ns = 500 * ms;
    t = vt_tracker_new(&p, NULL);
    vt_tracker_update(t, &d, 1, 0, &id);
    vt_tracker_update(t, &d, 1, 40 * ms, &id);
    g_assert_cmpint(id, >, 0);
    vt_tracker_update(t, NULL, 0, 400 * ms, NULL);
    vt_tracker_tracks(t, &n);
    g_assert_cmpuint(n, ==, 1);
    vt_tracker_update(t, &d, 1, 500 * ms, &again);
    g_assert_cmpint(again, ==, id);
    /* 501 ms after the last match: gone (a predict-only frame also ends it) */
    vt_tracker_update(t, NULL, 0, 600 * ms, NULL);
    vt_tracker_predict(t, 1001 * ms);
    vt_tracker_tracks(t, &n);
    g_assert_cmpuint(n, ==, 0);
    vt_tracker_free(t);
}

/* a score dip below high_threshold (partial occlusion) keeps the id through
 * the second round; a low-confidence detection alone never starts a track */
static void test_low_confidence_round(void)
{
    vt_tracker *t = tracker_with(2);
    int32_t id = 0, got;
    int frame;
    size_t n;

    for (frame = 0; frame < 30; frame++) {
        float score = (frame >= 10 && frame < 20) ? 0.3f : 0.9f;
        vt_detection d = det(100.0f + 4.0f * frame, 100.0f, 40, 40, score, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &got);
        if (frame == 1)
            id = got;
        if (frame >= 1)
            g_assert_cmpint(got, ==, id);
    }
    vt_tracker_free(t);

    t = tracker_with(1);
    for (frame = 0; frame < 5; frame++) {
        vt_detection d = det(100, 100, 40, 40, 0.3f, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &got);
        g_assert_cmpint(got, ==, 0);
    }
    vt_tracker_tracks(t, &n);
    g_assert_cmpuint(n, ==, 0);
    vt_tracker_free(t);
}

/* classes: a detection of another class on top of a track does not take its
 * id; with per_class false it does */
static void test_classes(void)
{
    vt_tracker_params p = vt_tracker_default_params();
    vt_detection a = det(100, 100, 40, 40, 0.9f, 1);
    vt_detection b = det(101, 100, 40, 40, 0.9f, 2);
    vt_tracker *t;
    int32_t id, other;

    t = vt_tracker_new(&p, NULL);
    vt_tracker_update(t, &a, 1, VT_NO_PTS, &id);
    vt_tracker_update(t, &a, 1, VT_NO_PTS, &id);
    vt_tracker_update(t, &b, 1, VT_NO_PTS, &other);
    g_assert_cmpint(other, ==, 0); /* a new tentative track */
    vt_tracker_update(t, &b, 1, VT_NO_PTS, &other);
    g_assert_cmpint(other, >, id);
    vt_tracker_free(t);

    p.per_class = false;
    t = vt_tracker_new(&p, NULL);
    vt_tracker_update(t, &a, 1, VT_NO_PTS, &id);
    vt_tracker_update(t, &a, 1, VT_NO_PTS, &id);
    vt_tracker_update(t, &b, 1, VT_NO_PTS, &other);
    g_assert_cmpint(other, ==, id);
    vt_tracker_free(t);
}

/* detections every 3rd frame: the frames between get predicted boxes that
 * follow the motion */
static void test_prediction_between_detections(void)
{
    vt_tracker *t = tracker_with(2);
    int32_t id = 0;
    int frame;

    for (frame = 0; frame < 60; frame++) {
        float cx = 100.0f + 6.0f * frame, cy = 300.0f - 2.0f * frame;

        if (frame % 3 == 0) {
            vt_detection d = det(cx, cy, 50, 30, 0.9f, 1);
            vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
        } else {
            size_t n;
            const vt_track *tracks;

            vt_tracker_predict(t, VT_NO_PTS);
            tracks = vt_tracker_tracks(t, &n);
            g_assert_cmpuint(n, ==, 1);
            g_assert_cmpint(tracks[0].detection, ==, -1);
            if (frame > 12) {
                g_assert_cmpint(tracks[0].state, ==, VT_TRACK_TRACKED);
                g_assert_cmpint(tracks[0].id, ==, id);
                /* after a few detections the velocity is known: the prediction
                 * overlaps the true box closely */
                g_assert_cmpfloat(vt_iou(tracks[0].x1, tracks[0].y1, tracks[0].x2, tracks[0].y2,
                                         cx - 25, cy - 15, cx + 25, cy + 15),
                                  >, 0.85f);
            }
        }
    }
    g_assert_cmpint(vt_tracker_last_id(t), ==, 1);
    vt_tracker_free(t);
}

/* a fast object (near a quarter of its size per frame, as videotestsrc's ball at
 * 640x480) detected every 3rd frame gets its id at its second detection: its
 * tentative track, with no velocity yet, is matched with boxes enlarged for
 * the frames between */
static void test_fast_object_with_interval(void)
{
    vt_tracker *t = tracker_with(2);
    int32_t id = 0;
    int frame;

    for (frame = 0; frame <= 12; frame += 3) {
        vt_detection d = det(100.0f + 9.0f * frame, 100.0f + 9.0f * frame, 38, 38, 0.99f, 1);

        if (frame > 0) {
            vt_tracker_predict(t, VT_NO_PTS);
            vt_tracker_predict(t, VT_NO_PTS);
        }
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
        if (frame == 0)
            g_assert_cmpint(id, ==, 0);
        else
            g_assert_cmpint(id, ==, 1);
    }
    vt_tracker_free(t);
}

/* NaN, infinite, empty and inverted boxes and NaN scores are ignored */
/* detections on every 3rd frame: a new track gets its id on the first frame
 * without detection after its first one (confirm_frames 2), provisionally; a
 * detection frame that misses it makes it lost, still provisional (not to be
 * shown), and its next match confirms it for good with the same id; with
 * confirm_frames 0 the id waits for the second hit, with 3 for the second
 * frame without detection */
static void test_confirm_between_detections(void)
{
    static const unsigned frames_param[] = {2, 0, 3};
    unsigned v;

    for (v = 0; v < G_N_ELEMENTS(frames_param); v++) {
        vt_tracker_params p = vt_tracker_default_params();
        vt_detection d = det(100.0f, 100.0f, 40, 40, 0.9f, 1);
        const vt_track *tracks;
        int32_t id = -1;
        size_t n;

        p.confirm_frames = frames_param[v];
        vt_tracker *t = vt_tracker_new(&p, NULL);
        g_assert_nonnull(t);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
        g_assert_cmpint(id, ==, 0);

        vt_tracker_predict(t, VT_NO_PTS);
        tracks = vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 1);
        if (frames_param[v] == 2) {
            g_assert_cmpint(tracks[0].id, ==, 1);
            g_assert_true(tracks[0].provisional);
            g_assert_cmpint(tracks[0].state, ==, VT_TRACK_TRACKED);
        } else {
            g_assert_cmpint(tracks[0].id, ==, 0);
            g_assert_cmpint(tracks[0].state, ==, VT_TRACK_TENTATIVE);
        }
        vt_tracker_predict(t, VT_NO_PTS);
        tracks = vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 1);
        g_assert_cmpint(tracks[0].id, ==, frames_param[v] == 0 ? 0 : 1);

        if (frames_param[v] == 0) {
            /* a tentative track is dropped by a missed detection frame */
            vt_tracker_update(t, NULL, 0, VT_NO_PTS, NULL);
            vt_tracker_tracks(t, &n);
            g_assert_cmpuint(n, ==, 0);
            vt_tracker_free(t);
            continue;
        }
        /* missed: lost, kept, still provisional */
        vt_tracker_update(t, NULL, 0, VT_NO_PTS, NULL);
        tracks = vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 1);
        g_assert_cmpint(tracks[0].id, ==, 1);
        g_assert_cmpint(tracks[0].state, ==, VT_TRACK_LOST);
        g_assert_true(tracks[0].provisional);
        g_assert_cmpuint(tracks[0].misses, ==, 1);
        vt_tracker_predict(t, VT_NO_PTS);
        vt_tracker_predict(t, VT_NO_PTS);
        /* seen again, moved by a third of its size: matched as a tentative
         * track (buffered IoU), confirmed for good, same id */
        d = det(113.0f, 100.0f, 40, 40, 0.9f, 1);
        vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
        g_assert_cmpint(id, ==, 1);
        tracks = vt_tracker_tracks(t, &n);
        g_assert_cmpuint(n, ==, 1);
        g_assert_cmpint(tracks[0].state, ==, VT_TRACK_TRACKED);
        g_assert_false(tracks[0].provisional);
        g_assert_cmpuint(tracks[0].hits, ==, 2);
        g_assert_cmpint(vt_tracker_last_id(t), ==, 1);
        vt_tracker_free(t);
    }
}

static void test_bad_detections(void)
{
    vt_tracker *t = tracker_with(1);
    vt_detection d[7];
    int32_t ids[7];
    size_t n;
    int i;

    d[0] = det(100, 100, 40, 40, 0.9f, 1);
    d[1] = det(NAN, 100, 40, 40, 0.9f, 1);
    d[2] = det(200, 100, INFINITY, 40, 0.9f, 1);
    d[3] = det(300, 100, 0, 40, 0.9f, 1);
    d[4] = det(400, 100, -10, 40, 0.9f, 1);
    d[5] = det(500, 100, 40, 40, NAN, 1);
    d[6] = det(-3e38f, 3e38f, 3e38f, 3e38f, 0.9f, 1);
    for (i = 0; i < 3; i++) {
        vt_tracker_update(t, d, 7, VT_NO_PTS, ids);
        g_assert_cmpint(ids[0], ==, 1);
        for (int k = 1; k < 6; k++)
            g_assert_cmpint(ids[k], ==, 0);
    }
    vt_tracker_tracks(t, &n);
    for (size_t k = 0; k < n; k++) {
        const vt_track *tr = &vt_tracker_tracks(t, &n)[k];
        g_assert_true(isfinite(tr->x1) && isfinite(tr->x2));
    }
    vt_tracker_update(t, NULL, 5, VT_NO_PTS, NULL); /* NULL detections: none */
    vt_tracker_free(t);
    vt_tracker_free(NULL);
}

/* thousands of detections a frame (a foreign element's flood of ROIs): the
 * work stays bounded (the 1024 best are used) and those keep their ids */
static void test_flood(void)
{
    enum { N = 5000 };
    vt_tracker *t = tracker_with(1);
    vt_detection *d = g_new(vt_detection, N);
    int32_t *ids = g_new(int32_t, N), *first = g_new(int32_t, N);
    gint64 start = g_get_monotonic_time();
    int frame, i, n_ids = 0;

    for (frame = 0; frame < 3; frame++) {
        for (i = 0; i < N; i++)
            d[i] = det(10.0f * (i % 100) + frame, 10.0f * (i / 100), 8, 8,
                       0.5f + 0.5f * (float)i / N, 1);
        vt_tracker_update(t, d, N, VT_NO_PTS, ids);
        if (frame == 0)
            memcpy(first, ids, sizeof(int32_t) * N);
        for (i = 0; i < N; i++) {
            if (i < N - 1024)
                g_assert_cmpint(ids[i], ==, 0); /* not among the best */
            else
                g_assert_cmpint(ids[i], ==, first[i]);
        }
    }
    for (i = 0; i < N; i++)
        n_ids += ids[i] > 0;
    g_assert_cmpint(n_ids, ==, 1024);
    /* about 0.1 s here; 10 s is far above any machine or sanitizer slowness */
    g_assert_cmpint(g_get_monotonic_time() - start, <, 10 * G_USEC_PER_SEC);
    g_free(d);
    g_free(ids);
    g_free(first);
    vt_tracker_free(t);
}

static void test_reset_keeps_ids_growing(void)
{
    vt_tracker *t = tracker_with(1);
    vt_detection d = det(100, 100, 40, 40, 0.9f, 1);
    int32_t id, after;
    size_t n;

    vt_tracker_update(t, &d, 1, VT_NO_PTS, &id);
    vt_tracker_reset(t);
    vt_tracker_tracks(t, &n);
    g_assert_cmpuint(n, ==, 0);
    vt_tracker_update(t, &d, 1, VT_NO_PTS, &after);
    g_assert_cmpint(after, ==, id + 1);
    vt_tracker_free(t);
}

static void test_bad_params(void)
{
    vt_tracker_params p;
    GError *error = NULL;
    vt_tracker *t;

    p = vt_tracker_default_params();
    p.low_threshold = 0.7f; /* above high */
    g_assert_null(vt_tracker_new(&p, &error));
    g_assert_error(error, VT_ERROR, VT_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    p = vt_tracker_default_params();
    p.match_iou = NAN;
    g_assert_null(vt_tracker_new(&p, &error));
    g_assert_error(error, VT_ERROR, VT_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    p = vt_tracker_default_params();
    p.confirm_hits = 0;
    g_assert_null(vt_tracker_new(&p, &error));
    g_clear_error(&error);

    p = vt_tracker_default_params();
    t = vt_tracker_new(&p, &error);
    g_assert_no_error(error);
    p.max_lost_ns = -1;
    g_assert_false(vt_tracker_set_params(t, &p, &error));
    g_assert_error(error, VT_ERROR, VT_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    vt_tracker_get_params(t, &p);
    g_assert_cmpint(p.max_lost_ns, ==, 0);
    g_assert_null(vt_tracker_new(NULL, &error));
    g_clear_error(&error);
    vt_tracker_free(t);
}

static void test_iou(void)
{
    g_assert_cmpfloat_with_epsilon(vt_iou(0, 0, 10, 10, 5, 0, 15, 10), 50.0f / 150.0f, 1e-6);
    g_assert_cmpfloat(vt_iou(0, 0, 10, 10, 10, 0, 20, 10), ==, 0.0f);
    g_assert_cmpfloat(vt_iou(0, 0, 0, 10, 0, 0, 0, 10), ==, 0.0f);
    g_assert_cmpfloat(vt_iou(NAN, 0, 10, 10, 0, 0, 10, 10), ==, 0.0f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/tracker/iou", test_iou);
    g_test_add_func("/tracker/crossing", test_crossing_keeps_ids);
    g_test_add_func("/tracker/lost-and-found", test_lost_and_found);
    g_test_add_func("/tracker/lost-time-limit", test_lost_time_limit);
    g_test_add_func("/tracker/low-confidence-round", test_low_confidence_round);
    g_test_add_func("/tracker/classes", test_classes);
    g_test_add_func("/tracker/prediction", test_prediction_between_detections);
    g_test_add_func("/tracker/fast-object-interval", test_fast_object_with_interval);
    g_test_add_func("/tracker/confirm-between-detections", test_confirm_between_detections);
    g_test_add_func("/tracker/bad-detections", test_bad_detections);
    g_test_add_func("/tracker/flood", test_flood);
    g_test_add_func("/tracker/reset", test_reset_keeps_ids_growing);
    g_test_add_func("/tracker/bad-params", test_bad_params);
    return g_test_run();
}
