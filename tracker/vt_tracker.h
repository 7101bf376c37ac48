/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack: the multi-object tracker core (C, GLib only, no GStreamer).
 *
 * ByteTrack-style association of per-frame detections to tracks:
 *   - each track's box follows a constant-velocity Kalman filter over its centre,
 *     aspect ratio (w/h) and height, predicted one step per frame;
 *   - round 1: confirmed and lost tracks against the high-confidence detections
 *     (score >= high_threshold), IoU against the prediction, optimal assignment;
 *   - round 2: the confirmed tracks still unmatched against the
 *     low-confidence detections (low_threshold <= score < high_threshold),
 *     which keeps an object through a partial occlusion whose detection score
 *     drops; tracks unmatched after it become lost. (ByteTrack tries only the
 *     tracks matched on the last frame here; lost ones too, at the same strict
 *     IoU, recover an object missed once during an occlusion: on the
 *     benchmark of tools/bench_track.py, MOTA 0.70 -> 0.79 at interval 1,
 *     before the element showed missed tracks predicted);
 *   - round 3: tentative tracks against the high-confidence detections left,
 *     with boxes enlarged by 35% of their size per frame since the track's
 *     match beyond the first (buffered IoU: a tentative track has no velocity
 *     yet, and a detector interval lets the object move away from it); a
 *     tentative track that misses a detection frame is dropped;
 *   - a detector interval does not delay new ids by whole intervals: on a
 *     frame without detection, a tentative track confirm_frames frames after
 *     its first match (counting that one) gets its id provisionally; until
 *     confirm_hits matches it is still matched as a tentative track (round 3),
 *     and when a detection frame misses it, it is lost like a confirmed track
 *     but should not be shown (vt_track.provisional) until it is matched
 *     again. With detections on every frame this never happens;
 *   - a high-confidence detection left over (score >= new_track_threshold)
 *     starts a tentative track, confirmed (and given an id) after confirm_hits
 *     matched frames; a lost track is dropped after max_lost_frames frames or,
 *     when frames carry timestamps and max_lost_ns > 0, after max_lost_ns.
 * Detections and tracks of different classes never match unless per_class is
 * false. Assignment is the optimal one (Hungarian method) where leaving a track
 * and a detection unmatched costs as much as a match at the IoU threshold; a
 * round of more than 256 tracks and detections together is matched greedily
 * (highest IoU first). At most the 1024 highest-scoring detections of a frame
 * are used, and no track starts while 2048 exist.
 *
 * Threads: a vt_tracker is used by one thread at a time; distinct trackers are
 * independent. Nothing here aborts, exits or prints; bad parameters are reported
 * through GError, bad detections (NaN, infinite, empty boxes) are ignored.
 */
#ifndef VT_TRACKER_H
#define VT_TRACKER_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

#define VT_ERROR (vt_error_quark())
GQuark vt_error_quark(void);

typedef enum {
    VT_ERROR_INVALID_ARGUMENT, /* a parameter out of its range */
} vt_error_code;

/* No timestamp for a frame. */
#define VT_NO_PTS INT64_MIN

typedef struct {
    float x1, y1, x2, y2; /* box corners, any consistent unit (pixels) */
    float score;          /* 0..1 */
    int class_id;         /* compared for equality only */
} vt_detection;

typedef struct {
    float high_threshold;      /* first round and new tracks (default 0.5) */
    float low_threshold;       /* second round: [low, high) (default 0.1) */
    float new_track_threshold; /* a new track needs this score (default 0.6) */
    float match_iou;           /* round 1 minimum IoU (default 0.2) */
    float low_match_iou;       /* round 2 minimum IoU (default 0.5) */
    float tentative_match_iou; /* round 3 minimum IoU (default 0.3) */
    unsigned confirm_hits;     /* matched frames before a track has an id (default 2, >= 1) */
    unsigned confirm_frames;   /* a tentative track not matched again yet gets its id on a
                                * frame without detection this many frames after its first
                                * match, counting that one (default 2; 0: only by hits) */
    unsigned max_lost_frames;  /* frames a lost track is kept (default 30) */
    int64_t max_lost_ns;       /* > 0: a lost track is kept this long instead (default 0) */
    bool per_class;            /* match only equal class ids (default true) */
} vt_tracker_params;

typedef enum {
    VT_TRACK_TENTATIVE, /* not yet confirmed: id 0 */
    VT_TRACK_TRACKED,   /* confirmed, matched on the last detection frame */
    VT_TRACK_LOST,      /* confirmed, unmatched since; predicted, kept for a while */
} vt_track_state;

typedef struct {
    int32_t id;           /* > 0 once confirmed, 0 while tentative */
    int class_id;         /* the class of the detection that started it */
    float x1, y1, x2, y2; /* this frame: the matched detection's box, else the prediction */
    float score;          /* the score of the last matched detection */
    int detection;        /* index of this frame's matched detection, -1 if none */
    vt_track_state state;
    uint32_t hits;        /* matched frames */
    uint32_t frames_lost; /* frames (updates and predictions) since the last match */
    uint32_t misses;      /* detection frames (updates) since the last match */
    bool provisional;     /* id given by confirm_frames, fewer than confirm_hits matches yet;
                           * one that has missed (misses > 0) is best not shown */
} vt_track;

typedef struct vt_tracker vt_tracker;

vt_tracker_params vt_tracker_default_params(void);

/* A new tracker with no tracks; NULL and @error set when @params is invalid
 * (thresholds not finite or outside 0..1, low above high, confirm_hits 0,
 * negative max_lost_ns). @params is copied. Free with vt_tracker_free(). */
vt_tracker *vt_tracker_new(const vt_tracker_params *params, GError **error);
void vt_tracker_free(vt_tracker *tracker);

/* Replaces the parameters (validated as by vt_tracker_new); the tracks stay. */
bool vt_tracker_set_params(vt_tracker *tracker, const vt_tracker_params *params, GError **error);
void vt_tracker_get_params(const vt_tracker *tracker, vt_tracker_params *params);

/* Drops every track (a seek, a flush, a new stream). Ids keep increasing, so a
 * reset never gives an id of an earlier object to a new one. */
void vt_tracker_reset(vt_tracker *tracker);

/* One frame on which detection ran: predicts every track one frame ahead and
 * associates @detections (@n_detections of them, may be NULL when 0) with the
 * tracks. @pts is the frame's time in nanoseconds or VT_NO_PTS. When @ids is
 * not NULL it receives, per detection, the id of the confirmed track it belongs
 * to, or 0 (a tentative track, an ignored or unmatched detection). */
void vt_tracker_update(vt_tracker *tracker, const vt_detection *detections, size_t n_detections,
                       int64_t pts, int32_t *ids);

/* One frame without detection (a detector interval): predicts every track one
 * frame ahead; no track is confirmed, lost or dropped by it except lost tracks
 * whose time is up. */
void vt_tracker_predict(vt_tracker *tracker, int64_t pts);

/* The tracks after the last update or predict, in no particular order. The
 * array belongs to the tracker and stays valid until its next call. */
const vt_track *vt_tracker_tracks(const vt_tracker *tracker, size_t *n_tracks);

/* The largest id given so far (0: none). */
int32_t vt_tracker_last_id(const vt_tracker *tracker);

/* Intersection over union of two corner boxes; 0 for empty or invalid boxes. */
float vt_iou(float ax1, float ay1, float ax2, float ay2, float bx1, float by1, float bx2,
             float by2);

G_END_DECLS

#endif /* VT_TRACKER_H */
