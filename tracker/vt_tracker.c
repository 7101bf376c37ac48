/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack: ByteTrack-style tracker (see vt_tracker.h for the rounds). */
#include "vt_private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

GQuark vt_error_quark(void)
{
    return g_quark_from_static_string("vt-error-quark");
}

/* Bounds on a frame's work whatever the input: the highest-scoring
 * VT_MAX_DETECTIONS detections of a frame are used (the others get id 0), and
 * no track starts while VT_MAX_TRACKS exist. */
#define VT_MAX_DETECTIONS 1024
#define VT_MAX_TRACKS 2048

typedef struct {
    vt_track pub;
    vt_kalman kf;
    int64_t last_pts; /* of the last match, VT_NO_PTS when unknown */
} track_entry;

struct vt_tracker {
    vt_tracker_params params;
    GArray *tracks; /* track_entry */
    GArray *view;   /* vt_track, rebuilt after each call */
    int32_t last_id;
};

vt_tracker_params vt_tracker_default_params(void)
{
    vt_tracker_params p;

    p.high_threshold = 0.5f;
    p.low_threshold = 0.1f;
    p.new_track_threshold = 0.6f;
    p.match_iou = 0.2f;
    p.low_match_iou = 0.5f;
    p.tentative_match_iou = 0.3f;
    p.confirm_hits = 2;
    p.confirm_frames = 2;
    p.max_lost_frames = 30;
    p.max_lost_ns = 0;
    p.per_class = true;
    return p;
}

static bool unit_value(float v)
{
    return isfinite(v) && v >= 0.0f && v <= 1.0f;
}

static bool validate(const vt_tracker_params *p, GError **error)
{
    const char *bad = NULL;

    if (p == NULL)
        bad = "no parameters";
    else if (!unit_value(p->high_threshold))
        bad = "high_threshold must be in 0..1";
    else if (!unit_value(p->low_threshold) || p->low_threshold > p->high_threshold)
        bad = "low_threshold must be in 0..high_threshold";
    else if (!unit_value(p->new_track_threshold))
        bad = "new_track_threshold must be in 0..1";
    else if (!unit_value(p->match_iou) || !unit_value(p->low_match_iou) ||
             !unit_value(p->tentative_match_iou))
        bad = "IoU thresholds must be in 0..1";
    else if (p->confirm_hits < 1)
        bad = "confirm_hits must be at least 1";
    else if (p->max_lost_ns < 0)
        bad = "max_lost_ns must not be negative";
    if (bad != NULL) {
        g_set_error(error, VT_ERROR, VT_ERROR_INVALID_ARGUMENT, "invalid tracker parameters: %s",
                    bad);
        return false;
    }
    return true;
}

vt_tracker *vt_tracker_new(const vt_tracker_params *params, GError **error)
{
    vt_tracker *tracker;

    if (!validate(params, error))
        return NULL;
    tracker = g_new0(vt_tracker, 1);
    tracker->params = *params;
    tracker->tracks = g_array_new(FALSE, FALSE, sizeof(track_entry));
    tracker->view = g_array_new(FALSE, FALSE, sizeof(vt_track));
    return tracker;
}

void vt_tracker_free(vt_tracker *tracker)
{
    if (tracker == NULL)
        return;
    g_array_unref(tracker->tracks);
    g_array_unref(tracker->view);
    g_free(tracker);
}

bool vt_tracker_set_params(vt_tracker *tracker, const vt_tracker_params *params, GError **error)
{
    if (!validate(params, error))
        return false;
    tracker->params = *params;
    return true;
}

void vt_tracker_get_params(const vt_tracker *tracker, vt_tracker_params *params)
{
    *params = tracker->params;
}

void vt_tracker_reset(vt_tracker *tracker)
{
    g_array_set_size(tracker->tracks, 0);
    g_array_set_size(tracker->view, 0);
}

int32_t vt_tracker_last_id(const vt_tracker *tracker)
{
    return tracker->last_id;
}

const vt_track *vt_tracker_tracks(const vt_tracker *tracker, size_t *n_tracks)
{
    *n_tracks = tracker->view->len;
    return (const vt_track *)tracker->view->data;
}

float vt_iou(float ax1, float ay1, float ax2, float ay2, float bx1, float by1, float bx2, float by2)
{
    double aw = (double)ax2 - ax1, ah = (double)ay2 - ay1;
    double bw = (double)bx2 - bx1, bh = (double)by2 - by1;
    double iw, ih, inter, uni;

    /* written so that NaN fails every comparison and gives 0 */
    if (!(aw > 0.0 && ah > 0.0 && bw > 0.0 && bh > 0.0))
        return 0.0f;
    iw = fmin(ax2, bx2) - fmax(ax1, bx1);
    ih = fmin(ay2, by2) - fmax(ay1, by1);
    if (!(iw > 0.0 && ih > 0.0))
        return 0.0f;
    inter = iw * ih;
    uni = aw * ah + bw * bh - inter;
    if (!(uni > 0.0) || !isfinite(uni))
        return 0.0f;
    return (float)(inter / uni);
}

static bool detection_valid(const vt_detection *d)
{
    return isfinite(d->x1) && isfinite(d->y1) && isfinite(d->x2) && isfinite(d->y2) &&
           isfinite(d->score) && d->x2 > d->x1 && d->y2 > d->y1 &&
           isfinite((double)d->x2 - d->x1) && isfinite((double)d->y2 - d->y1);
}

typedef struct {
    float score;
    size_t index;
} scored_index;

static int compare_scores_desc(const void *a, const void *b)
{
    const scored_index *sa = a, *sb = b;

    if (sa->score != sb->score)
        return sa->score > sb->score ? -1 : 1;
    return sa->index < sb->index ? -1 : 1;
}

/* Per detection: valid, and among the VT_MAX_DETECTIONS highest scores. */
static bool *usable_detections(const vt_detection *dets, size_t n_dets)
{
    bool *usable = g_new0(bool, n_dets + 1);
    scored_index *order;
    size_t n_valid = 0, i;

    for (i = 0; i < n_dets; i++) {
        usable[i] = detection_valid(&dets[i]);
        n_valid += usable[i];
    }
    if (n_valid <= VT_MAX_DETECTIONS)
        return usable;
    order = g_new(scored_index, n_valid);
    n_valid = 0;
    for (i = 0; i < n_dets; i++)
        if (usable[i]) {
            order[n_valid].score = dets[i].score;
            order[n_valid++].index = i;
        }
    qsort(order, n_valid, sizeof(scored_index), compare_scores_desc);
    for (i = VT_MAX_DETECTIONS; i < n_valid; i++)
        usable[order[i].index] = false;
    g_free(order);
    return usable;
}

static void set_box(vt_track *t, const float box[4])
{
    t->x1 = box[0];
    t->y1 = box[1];
    t->x2 = box[2];
    t->y2 = box[3];
}

/* A tentative track has one box and no velocity yet: after frames without
 * detection (a detector interval) its prediction has not moved while the
 * object has. Its round compares boxes enlarged on every side by @buffer times
 * their size (the buffered IoU of C-BIoU, Yang et al. 2023), growing with the
 * frames since its match; with detections on every frame it is plain IoU.
 * 0.35 per frame: an object moving up to a quarter of its size per frame (the
 * videotestsrc ball at 640x480) detected every 3rd frame still matches at
 * IoU 0.3 (0.15 did not: it never got an id). */
#define VT_TENTATIVE_BUFFER_PER_FRAME 0.35f
#define VT_MAX_BUFFER 1.5f

static float buffered_iou(const float *track_box, const vt_detection *d, float buffer)
{
    float tw = track_box[2] - track_box[0], th = track_box[3] - track_box[1];
    float dw = d->x2 - d->x1, dh = d->y2 - d->y1;

    return vt_iou(track_box[0] - buffer * tw, track_box[1] - buffer * th,
                  track_box[2] + buffer * tw, track_box[3] + buffer * th, d->x1 - buffer * dw,
                  d->y1 - buffer * dh, d->x2 + buffer * dw, d->y2 + buffer * dh);
}

/* Matches the tracks @track_idx (n_t) to the detections @det_idx (n_d) at
 * @min_iou; matched pairs are written to @track_match / @det_match (by
 * track / detection index, -1 unmatched). */
static void associate(vt_tracker *tracker, const vt_detection *dets, const int *track_idx,
                      size_t n_t, const int *det_idx, size_t n_d, float min_iou,
                      float buffer_per_frame, int *track_match, int *det_match)
{
    double *cost;
    int *row_to_col;
    size_t i, j;

    if (n_t == 0 || n_d == 0)
        return;
    cost = g_new(double, n_t *n_d);
    row_to_col = g_new(int, n_t);
    for (i = 0; i < n_t; i++) {
        const vt_track *t = &g_array_index(tracker->tracks, track_entry, track_idx[i]).pub;
        /* frames since the track's last match beyond the one just predicted */
        float buffer =
            fminf(buffer_per_frame * (t->frames_lost > 1 ? t->frames_lost - 1 : 0), VT_MAX_BUFFER);

        for (j = 0; j < n_d; j++) {
            const vt_detection *d = &dets[det_idx[j]];
            float iou;

            if (tracker->params.per_class && d->class_id != t->class_id) {
                cost[i * n_d + j] = INFINITY;
                continue;
            }
            iou = buffer > 0.0f ? buffered_iou(&t->x1, d, buffer)
                                : vt_iou(t->x1, t->y1, t->x2, t->y2, d->x1, d->y1, d->x2, d->y2);
            cost[i * n_d + j] = iou > 0.0f ? 1.0 - iou : INFINITY;
        }
    }
    /* a pair is kept when 1 - IoU < 1 - min_iou */
    vt_assign(cost, n_t, n_d, 1.0 - min_iou, row_to_col);
    for (i = 0; i < n_t; i++) {
        if (row_to_col[i] < 0)
            continue;
        track_match[track_idx[i]] = det_idx[row_to_col[i]];
        det_match[det_idx[row_to_col[i]]] = track_idx[i];
    }
    g_free(cost);
    g_free(row_to_col);
}

static void confirm(vt_tracker *tracker, track_entry *e)
{
    e->pub.state = VT_TRACK_TRACKED;
    /* ids wrap to 1 after G_MAXINT32 rather than overflow */
    tracker->last_id = tracker->last_id == G_MAXINT32 ? 1 : tracker->last_id + 1;
    e->pub.id = tracker->last_id;
}

static void apply_match(vt_tracker *tracker, track_entry *e, const vt_detection *d, int index,
                        int64_t pts)
{
    const float box[4] = {d->x1, d->y1, d->x2, d->y2};

    if (!vt_kalman_update(&e->kf, box))
        vt_kalman_init(&e->kf, box);
    set_box(&e->pub, box);
    e->pub.score = d->score;
    e->pub.detection = index;
    e->pub.hits++;
    e->pub.frames_lost = 0;
    e->pub.misses = 0;
    e->last_pts = pts;
    if (e->pub.state == VT_TRACK_LOST) {
        e->pub.state = VT_TRACK_TRACKED;
    } else if (e->pub.state == VT_TRACK_TENTATIVE && e->pub.hits >= tracker->params.confirm_hits) {
        confirm(tracker, e);
    }
    if (e->pub.provisional && e->pub.hits >= tracker->params.confirm_hits)
        e->pub.provisional = false;
}

/* A tentative track not yet seen again, on a frame without detection: given its
 * id once confirm_frames frames have passed since its first match (counting
 * that one), provisionally, so that a detector interval does not delay new ids
 * by whole intervals. Until confirm_hits matches it is still matched as a
 * tentative track (round 3, buffered IoU: it has no velocity yet); missed on a
 * detection frame, it becomes lost like a confirmed track (callers do not show
 * a provisional track that has missed: see vt_track.provisional). Dropping it
 * instead cost ID switches when the object was seen again: on the benchmark of
 * tools/bench_track.py at interval 3, 69 ID switches against 29, MOTA 0.832
 * against 0.841. */
static void confirm_between_detections(vt_tracker *tracker)
{
    const unsigned frames = tracker->params.confirm_frames;
    guint i;

    if (frames == 0)
        return;
    for (i = 0; i < tracker->tracks->len; i++) {
        track_entry *e = &g_array_index(tracker->tracks, track_entry, i);

        if (e->pub.state == VT_TRACK_TENTATIVE && e->pub.frames_lost + 1 >= frames) {
            confirm(tracker, e);
            e->pub.provisional = true;
        }
    }
}

/* Whether a track is matched as a tentative one (round 3, buffered boxes): not
 * yet confirmed, or confirmed provisionally. */
static bool matched_as_tentative(const track_entry *e)
{
    return e->pub.state == VT_TRACK_TENTATIVE || e->pub.provisional;
}

/* Every track one frame ahead (lost ones without height velocity, as
 * ByteTrack: a box that is not seen does not keep growing or shrinking). */
static void predict_all(vt_tracker *tracker)
{
    guint i;

    for (i = 0; i < tracker->tracks->len; i++) {
        track_entry *e = &g_array_index(tracker->tracks, track_entry, i);
        float box[4];

        if (e->pub.state != VT_TRACK_TRACKED)
            e->kf.mean[7] = 0.0;
        vt_kalman_predict(&e->kf);
        vt_kalman_box(&e->kf, box);
        set_box(&e->pub, box);
        e->pub.detection = -1;
        e->pub.frames_lost++;
    }
}

static bool lost_too_long(const vt_tracker *tracker, const track_entry *e, int64_t pts)
{
    if (tracker->params.max_lost_ns > 0 && pts != VT_NO_PTS && e->last_pts != VT_NO_PTS) {
        /* a timestamp going backwards (no reset after a seek) counts as none */
        if (pts >= e->last_pts)
            return pts - e->last_pts > tracker->params.max_lost_ns;
    }
    return e->pub.frames_lost > tracker->params.max_lost_frames;
}

/* Drops the tentative tracks marked for removal and the lost ones whose time
 * is up, and rebuilds the public view. */
static void finish_frame(vt_tracker *tracker, int64_t pts, const bool *drop)
{
    guint i = 0, k = 0;

    for (i = 0; i < tracker->tracks->len; i++) {
        track_entry *e = &g_array_index(tracker->tracks, track_entry, i);

        if (drop != NULL && drop[i])
            continue;
        if (e->pub.state == VT_TRACK_LOST && lost_too_long(tracker, e, pts))
            continue;
        if (k != i)
            g_array_index(tracker->tracks, track_entry, k) = *e;
        k++;
    }
    g_array_set_size(tracker->tracks, k);

    g_array_set_size(tracker->view, k);
    for (i = 0; i < k; i++)
        g_array_index(tracker->view, vt_track, i) =
            g_array_index(tracker->tracks, track_entry, i).pub;
}

void vt_tracker_predict(vt_tracker *tracker, int64_t pts)
{
    predict_all(tracker);
    confirm_between_detections(tracker);
    finish_frame(tracker, pts, NULL);
}

void vt_tracker_update(vt_tracker *tracker, const vt_detection *dets, size_t n_dets, int64_t pts,
                       int32_t *ids)
{
    const vt_tracker_params *p = &tracker->params;
    size_t n_tracks;
    int *track_match, *det_match, *t_idx, *d_idx;
    bool *drop, *usable;
    size_t n_t, n_d, i;

    if (dets == NULL)
        n_dets = 0;
    usable = usable_detections(dets, n_dets);
    predict_all(tracker);
    n_tracks = tracker->tracks->len;

    track_match = g_new(int, n_tracks + 1);
    det_match = g_new(int, n_dets + 1);
    t_idx = g_new(int, n_tracks + 1);
    d_idx = g_new(int, n_dets + 1);
    drop = g_new0(bool, n_tracks + n_dets + 1);
    for (i = 0; i < n_tracks; i++)
        track_match[i] = -1;
    for (i = 0; i < n_dets; i++)
        det_match[i] = -1;

    /* round 1: confirmed (tracked and lost) tracks, high detections */
    n_t = n_d = 0;
    for (i = 0; i < n_tracks; i++)
        if (!matched_as_tentative(&g_array_index(tracker->tracks, track_entry, i)))
            t_idx[n_t++] = (int)i;
    for (i = 0; i < n_dets; i++)
        if (usable[i] && dets[i].score >= p->high_threshold)
            d_idx[n_d++] = (int)i;
    associate(tracker, dets, t_idx, n_t, d_idx, n_d, p->match_iou, 0.0f, track_match, det_match);

    /* round 2: confirmed tracks still unmatched, low detections */
    n_t = n_d = 0;
    for (i = 0; i < n_tracks; i++)
        if (track_match[i] < 0 &&
            !matched_as_tentative(&g_array_index(tracker->tracks, track_entry, i)))
            t_idx[n_t++] = (int)i;
    for (i = 0; i < n_dets; i++)
        if (usable[i] && dets[i].score < p->high_threshold && dets[i].score >= p->low_threshold)
            d_idx[n_d++] = (int)i;
    associate(tracker, dets, t_idx, n_t, d_idx, n_d, p->low_match_iou, 0.0f, track_match,
              det_match);

    /* round 3: tentative tracks, high detections left */
    n_t = n_d = 0;
    for (i = 0; i < n_tracks; i++)
        if (matched_as_tentative(&g_array_index(tracker->tracks, track_entry, i)))
            t_idx[n_t++] = (int)i;
    for (i = 0; i < n_dets; i++)
        if (det_match[i] < 0 && usable[i] && dets[i].score >= p->high_threshold)
            d_idx[n_d++] = (int)i;
    associate(tracker, dets, t_idx, n_t, d_idx, n_d, p->tentative_match_iou,
              VT_TENTATIVE_BUFFER_PER_FRAME, track_match, det_match);

    for (i = 0; i < n_tracks; i++) {
        track_entry *e = &g_array_index(tracker->tracks, track_entry, i);

        if (track_match[i] >= 0) {
            apply_match(tracker, e, &dets[track_match[i]], track_match[i], pts);
        } else if (e->pub.state == VT_TRACK_TENTATIVE) {
            drop[i] = true;
        } else {
            e->pub.state = VT_TRACK_LOST;
            e->pub.misses++;
        }
    }

    /* new tentative tracks (confirmed at once when confirm_hits is 1) */
    for (i = 0; i < n_dets; i++) {
        const vt_detection *d = &dets[i];
        track_entry e;

        if (det_match[i] >= 0 || !usable[i] || d->score < p->new_track_threshold ||
            d->score < p->high_threshold || tracker->tracks->len >= VT_MAX_TRACKS)
            continue;
        const float box[4] = {d->x1, d->y1, d->x2, d->y2};

        memset(&e, 0, sizeof(e));
        vt_kalman_init(&e.kf, box);
        set_box(&e.pub, box);
        e.pub.class_id = d->class_id;
        e.pub.score = d->score;
        e.pub.detection = (int)i;
        e.pub.hits = 1;
        e.pub.state = VT_TRACK_TENTATIVE;
        e.last_pts = pts;
        if (p->confirm_hits <= 1)
            confirm(tracker, &e);
        g_array_append_val(tracker->tracks, e);
        det_match[i] = (int)(tracker->tracks->len - 1);
    }

    if (ids != NULL)
        for (i = 0; i < n_dets; i++)
            ids[i] = det_match[i] >= 0
                         ? g_array_index(tracker->tracks, track_entry, det_match[i]).pub.id
                         : 0;

    finish_frame(tracker, pts, drop);

    g_free(track_match);
    g_free(det_match);
    g_free(t_idx);
    g_free(d_idx);
    g_free(drop);
    g_free(usable);
}
