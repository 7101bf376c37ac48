/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vt-track: runs the visiontrack tracker core on detections read from a text
 * file (or standard input) and prints the tracked objects, for benchmarks
 * (tools/bench_track.py) and tests without GStreamer.
 *
 * Input, one record per line ('#' lines and blank lines are skipped):
 *   F <frame> <detected>                  a frame; detected 0: no detection ran
 *   D <class> <score> <x1> <y1> <x2> <y2> a detection of the last F line
 * Output, one line per object reported on a frame:
 *   <frame> <id> <class> <x1> <y1> <x2> <y2> <score> <predicted>
 * The detections of the frame that belong to a confirmed track (their own box,
 * predicted 0), and the predicted box of every other confirmed track that has
 * missed at most --hold-misses (default 1) detection frames (predicted 1): on
 * a frame without detection, that is every track matched on the last
 * detection frame. visiontrack shows the same objects. With --frame-size WxH
 * predicted boxes are clipped to the frame as visiontrack clips them (and not
 * shown when less than a pixel of them is left inside). */
#include "vt_tracker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    vt_tracker *tracker;
    GArray *detections;
    gint64 frame;
    gboolean detected;
    gboolean have_frame;
    FILE *out;
    guint hold_misses;
    int width, height; /* > 0: the frame predicted boxes are clipped to */
} driver;

static void print_object(driver *d, int32_t id, int class_id, float x1, float y1, float x2,
                         float y2, float score, int predicted)
{
    fprintf(d->out, "%" G_GINT64_FORMAT " %d %d %.3f %.3f %.3f %.3f %.4f %d\n", d->frame, id,
            class_id, x1, y1, x2, y2, score, predicted);
}

static void flush_frame(driver *d)
{
    const vt_track *tracks;
    size_t n_tracks, k;

    if (!d->have_frame)
        return;
    if (d->detected) {
        guint n = d->detections->len, i;
        int32_t *ids = g_new0(int32_t, n + 1);

        vt_tracker_update(d->tracker, (const vt_detection *)d->detections->data, n, VT_NO_PTS, ids);
        for (i = 0; i < n; i++) {
            const vt_detection *det = &g_array_index(d->detections, vt_detection, i);

            if (ids[i] > 0)
                print_object(d, ids[i], det->class_id, det->x1, det->y1, det->x2, det->y2,
                             det->score, 0);
        }
        g_free(ids);
    } else {
        vt_tracker_predict(d->tracker, VT_NO_PTS);
    }
    /* the element's rule: confirmed tracks not matched on this frame are shown
     * predicted while they have missed at most hold_misses detection frames */
    tracks = vt_tracker_tracks(d->tracker, &n_tracks);
    for (k = 0; k < n_tracks; k++)
        if (tracks[k].id > 0 && tracks[k].detection < 0 && tracks[k].misses <= d->hold_misses &&
            !(tracks[k].provisional && tracks[k].misses > 0)) {
            float x1 = tracks[k].x1, y1 = tracks[k].y1, x2 = tracks[k].x2, y2 = tracks[k].y2;

            if (d->width > 0) {
                x1 = CLAMP(x1, 0.0f, (float)d->width);
                y1 = CLAMP(y1, 0.0f, (float)d->height);
                x2 = CLAMP(x2, x1, (float)d->width);
                y2 = CLAMP(y2, y1, (float)d->height);
                if (!(x2 - x1 >= 1.0f && y2 - y1 >= 1.0f))
                    continue; /* outside the frame, or degenerate */
            }
            print_object(d, tracks[k].id, tracks[k].class_id, x1, y1, x2, y2, tracks[k].score, 1);
        }
    g_array_set_size(d->detections, 0);
    d->have_frame = FALSE;
}

int main(int argc, char **argv)
{
    vt_tracker_params params = vt_tracker_default_params();
    gdouble high = params.high_threshold, low = params.low_threshold;
    gdouble new_track = params.new_track_threshold, match_iou = params.match_iou;
    gdouble low_match_iou = params.low_match_iou;
    gdouble tentative_match_iou = params.tentative_match_iou;
    gint confirm_hits = (gint)params.confirm_hits, max_lost = (gint)params.max_lost_frames;
    gint confirm_frames = (gint)params.confirm_frames;
    gboolean any_class = FALSE;
    gint hold_misses = 1;
    gchar *frame_size = NULL;
    GOptionEntry entries[] = {
        {"high", 0, 0, G_OPTION_ARG_DOUBLE, &high, "high-confidence threshold", "S"},
        {"low", 0, 0, G_OPTION_ARG_DOUBLE, &low, "low-confidence threshold", "S"},
        {"new-track", 0, 0, G_OPTION_ARG_DOUBLE, &new_track, "score to start a track", "S"},
        {"match-iou", 0, 0, G_OPTION_ARG_DOUBLE, &match_iou, "first round IoU", "IOU"},
        {"low-match-iou", 0, 0, G_OPTION_ARG_DOUBLE, &low_match_iou, "second round IoU", "IOU"},
        {"tentative-match-iou", 0, 0, G_OPTION_ARG_DOUBLE, &tentative_match_iou,
         "third round (tentative tracks) IoU", "IOU"},
        {"confirm-hits", 0, 0, G_OPTION_ARG_INT, &confirm_hits, "hits to confirm a track", "N"},
        {"confirm-frames", 0, 0, G_OPTION_ARG_INT, &confirm_frames,
         "frames after its first hit a new track gets its id between detections (0: off)", "N"},
        {"max-lost", 0, 0, G_OPTION_ARG_INT, &max_lost, "frames a lost track is kept", "N"},
        {"any-class", 0, 0, G_OPTION_ARG_NONE, &any_class, "match across classes", NULL},
        {"hold-misses", 0, 0, G_OPTION_ARG_INT, &hold_misses,
         "show a track predicted through N detection frames without a match", "N"},
        {"frame-size", 0, 0, G_OPTION_ARG_STRING, &frame_size,
         "clip predicted boxes to a frame of this size, as visiontrack does", "WxH"},
        {NULL}};
    GOptionContext *context = g_option_context_new("[DETECTIONS] - track detections");
    GError *error = NULL;
    FILE *in = stdin;
    driver d = {0};
    char line[512];
    long line_no = 0;
    int status = 1;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        fprintf(stderr, "vt-track: %s\n", error->message);
        goto out_free_context;
    }
    if (frame_size != NULL) {
        char end;

        if (sscanf(frame_size, "%dx%d%c", &d.width, &d.height, &end) != 2 || d.width <= 0 ||
            d.height <= 0) {
            fprintf(stderr, "vt-track: --frame-size %s: not WIDTHxHEIGHT\n", frame_size);
            goto out_free_context;
        }
    }
    params.high_threshold = (float)high;
    params.low_threshold = (float)low;
    params.new_track_threshold = (float)new_track;
    params.match_iou = (float)match_iou;
    params.low_match_iou = (float)low_match_iou;
    params.tentative_match_iou = (float)tentative_match_iou;
    params.confirm_hits = (unsigned)MAX(confirm_hits, 0);
    params.max_lost_frames = (unsigned)MAX(max_lost, 0);
    params.confirm_frames = (unsigned)MAX(confirm_frames, 0);
    params.per_class = !any_class;
    d.tracker = vt_tracker_new(&params, &error);
    if (d.tracker == NULL) {
        fprintf(stderr, "vt-track: %s\n", error->message);
        goto out_free_context;
    }
    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        in = fopen(argv[1], "r");
        if (in == NULL) {
            fprintf(stderr, "vt-track: %s: %s\n", argv[1], g_strerror(errno));
            goto out_free_tracker;
        }
    }
    d.detections = g_array_new(FALSE, FALSE, sizeof(vt_detection));
    d.out = stdout;
    d.hold_misses = (guint)MAX(hold_misses, 0);

    while (fgets(line, sizeof(line), in) != NULL) {
        gint64 frame;
        int detected;
        vt_detection det;

        line_no++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "F %" G_GINT64_FORMAT " %d", &frame, &detected) == 2) {
            flush_frame(&d);
            d.frame = frame;
            d.detected = detected != 0;
            d.have_frame = TRUE;
        } else if (d.have_frame && sscanf(line, "D %d %f %f %f %f %f", &det.class_id, &det.score,
                                          &det.x1, &det.y1, &det.x2, &det.y2) == 6) {
            g_array_append_val(d.detections, det);
        } else {
            fprintf(stderr, "vt-track: line %ld: not a frame or detection record\n", line_no);
            goto out_close;
        }
    }
    flush_frame(&d);
    status = ferror(in) ? 1 : 0;

out_close:
    if (in != stdin)
        fclose(in);
    g_array_unref(d.detections);
out_free_tracker:
    vt_tracker_free(d.tracker);
out_free_context:
    g_clear_error(&error);
    g_free(frame_size);
    g_option_context_free(context);
    return status;
}
