# SPDX-License-Identifier: LGPL-2.1-or-later
"""Synthetic multi-object sequences for the tracker (tools/bench_track.py and the
CI test tests/tracker/test_sequence.py): moving shapes of four classes that enter,
leave, cross each other and pass behind a pillar, with ground truth from the
generator and noisy detections drawn from it (misses, jitter, false positives,
a score distribution with a low-confidence share). Also the plain IoU tracker
baseline, what GStreamer's ioutracker does (greedy IoU matching frame to frame,
no motion model), and an ID-switch count that needs no third-party package.

Pure Python (no numpy), so that the CI test runs with Debian's python3 alone."""
import math
import os
import random
import subprocess

WIDTH, HEIGHT = 640, 480
PILLAR = (300.0, 0.0, 340.0, 480.0)  # a static occluder, x1 y1 x2 y2
N_CLASSES = 4


def box_area(b):
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def intersection(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def iou(a, b):
    inter = box_area(intersection(a, b))
    union = box_area(a) + box_area(b) - inter
    return inter / union if union > 0 else 0.0


def clip(b):
    return (min(max(b[0], 0.0), WIDTH), min(max(b[1], 0.0), HEIGHT),
            min(max(b[2], 0.0), WIDTH), min(max(b[3], 0.0), HEIGHT))


class Shape:
    def __init__(self, oid, cls, x, y, vx, vy, w, h, start):
        self.oid, self.cls = oid, cls
        self.x, self.y, self.vx, self.vy, self.w, self.h = x, y, vx, vy, w, h
        self.start = start

    def box(self):
        return (self.x - self.w / 2, self.y - self.h / 2,
                self.x + self.w / 2, self.y + self.h / 2)


def _edge_entry(rng):
    """A position just outside an edge and a velocity into the frame."""
    speed = rng.uniform(2.0, 6.0)
    edge = rng.randrange(4)
    if edge == 0:
        x, y = -30.0, rng.uniform(60, HEIGHT - 60)
    elif edge == 1:
        x, y = WIDTH + 30.0, rng.uniform(60, HEIGHT - 60)
    elif edge == 2:
        x, y = rng.uniform(60, WIDTH - 60), -30.0
    else:
        x, y = rng.uniform(60, WIDTH - 60), HEIGHT + 30.0
    tx, ty = rng.uniform(150, WIDTH - 150), rng.uniform(120, HEIGHT - 120)
    d = math.hypot(tx - x, ty - y)
    return x, y, speed * (tx - x) / d, speed * (ty - y) / d


def generate(seed, n_frames=300, interval=1):
    """One sequence: a list of frames, each a dict with 'gt' [(gt_id, cls, box)],
    'detections' [(cls, score, box)] and 'detected' (False on the frames a
    detector with this interval skips). Detections are drawn for every frame
    from the same random stream whatever the interval, so interval=3 sees
    exactly the interval=1 detections of its frames."""
    rng = random.Random(seed)
    shapes, next_id = [], 1
    crossings = []  # (frame, id_a, id_b) of the planned crossings

    def new_shape(start, x, y, vx, vy, cls=None):
        nonlocal next_id
        cls = cls if cls is not None else rng.randrange(1, N_CLASSES + 1)
        w, h = rng.uniform(30, 70), 0
        h = w * rng.uniform(0.7, 1.4)
        s = Shape(next_id, cls, x, y, vx, vy, w, h, start)
        next_id += 1
        shapes.append(s)
        return s

    for _ in range(4):
        new_shape(0, rng.uniform(80, WIDTH - 80), rng.uniform(80, HEIGHT - 80),
                  rng.uniform(-4, 4), rng.uniform(-3, 3))
    # planned crossings: two shapes (same class half of the time) heading for
    # the same point from opposite sides, meeting 40 frames after they start
    plans = []
    for k in range(3):
        start = rng.randrange(10, max(11, n_frames - 80))
        plans.append(start)
    plans.sort()

    frames = []
    alive = list(shapes)
    for f in range(n_frames):
        while plans and plans[0] == f:
            plans.pop(0)
            px, py = rng.uniform(200, WIDTH - 200), rng.uniform(150, HEIGHT - 150)
            angle = rng.uniform(0, 2 * math.pi)
            speed = rng.uniform(2.5, 5.0)
            vx, vy = speed * math.cos(angle), speed * math.sin(angle)
            cls_a = rng.randrange(1, N_CLASSES + 1)
            cls_b = cls_a if rng.random() < 0.5 else rng.randrange(1, N_CLASSES + 1)
            a = new_shape(f, px - 40 * vx, py - 40 * vy, vx, vy, cls_a)
            b = new_shape(f, px + 40 * vx, py + 40 * vy + rng.uniform(-8, 8), -vx, -vy, cls_b)
            alive += [a, b]
            crossings.append((f + 40, a.oid, b.oid, cls_a == cls_b))
        if rng.random() < 1.0 / 30 and len(alive) < 9:
            alive.append(new_shape(f, *_edge_entry(rng)))

        gt, dets = [], []
        # front to back: later shapes pass in front of earlier ones
        visible_boxes = []
        for s in sorted(alive, key=lambda s: -s.oid):
            b = s.box()
            cb = clip(b)
            area = box_area(b)
            in_frame = box_area(cb) / area if area > 0 else 0.0
            hidden = box_area(intersection(cb, PILLAR))
            for fb in visible_boxes:
                hidden += box_area(intersection(cb, fb))
            visibility = max(0.0, box_area(cb) - hidden) / area if area > 0 else 0.0
            visible_boxes.append(cb)
            if in_frame < 0.3 or visibility < 0.2:
                continue  # not in the ground truth: out of the frame or hidden
            gt.append((s.oid, s.cls, cb))
            if visibility >= 0.7:
                found = rng.random() < 0.92
                score = rng.uniform(0.55, 1.0) if rng.random() < 0.85 else rng.uniform(0.15, 0.5)
            else:
                found = rng.random() < 0.7
                score = rng.uniform(0.15, 0.5)
            jitter = [rng.gauss(0.0, 0.04) for _ in range(4)]
            wrong_class = rng.random() < 0.02
            if not found:
                continue
            w, h = cb[2] - cb[0], cb[3] - cb[1]
            db = clip((cb[0] + jitter[0] * w, cb[1] + jitter[1] * h,
                       cb[2] + jitter[2] * w, cb[3] + jitter[3] * h))
            cls = rng.randrange(1, N_CLASSES + 1) if wrong_class else s.cls
            if box_area(db) > 0:
                dets.append((cls, score, db))
        # false positives: about one every three frames, mostly low scores
        n_fp = 0
        while rng.random() < 0.25:
            n_fp += 1
        for _ in range(n_fp):
            w = rng.uniform(30, 70)
            h = w * rng.uniform(0.7, 1.4)
            x, y = rng.uniform(0, WIDTH - w), rng.uniform(0, HEIGHT - h)
            score = rng.uniform(0.1, 0.5) if rng.random() < 0.7 else rng.uniform(0.5, 0.7)
            dets.append((rng.randrange(1, N_CLASSES + 1), score, (x, y, x + w, y + h)))
        rng.shuffle(dets)
        frames.append({"gt": gt, "detections": dets, "detected": f % interval == 0})

        # motion: a slow random walk of the velocity
        for s in alive:
            s.vx += rng.gauss(0.0, 0.08)
            s.vy += rng.gauss(0.0, 0.08)
            s.x += s.vx
            s.y += s.vy
        alive = [s for s in alive
                 if -80 < s.x < WIDTH + 80 and -80 < s.y < HEIGHT + 80]
    return frames, crossings


def motion(seed, n_frames):
    """Object motion alone, for rendering (tools/track_render.py): per frame
    the shapes back to front as (id, class, cx, cy, size) in the 640x480
    plane. The same kinds of entries, exits and planned crossings as generate()
    (its own random stream)."""
    rng = random.Random(seed * 7919 + 1)
    shapes, plans, next_id = [], sorted(rng.randrange(10, max(11, n_frames - 80))
                                        for _ in range(3)), 1

    def add(x, y, vx, vy, cls=None):
        nonlocal next_id
        s = Shape(next_id, cls or rng.randrange(1, N_CLASSES + 1), x, y, vx, vy,
                  rng.uniform(35, 80), 0, 0)
        next_id += 1
        shapes.append(s)
        return s

    for _ in range(3):
        add(rng.uniform(80, WIDTH - 80), rng.uniform(80, HEIGHT - 80),
            rng.uniform(-4, 4), rng.uniform(-3, 3))
    for f in range(n_frames):
        while plans and plans[0] == f:
            plans.pop(0)
            px, py = rng.uniform(200, WIDTH - 200), rng.uniform(150, HEIGHT - 150)
            angle = rng.uniform(0, 2 * math.pi)
            speed = rng.uniform(2.5, 5.0)
            vx, vy = speed * math.cos(angle), speed * math.sin(angle)
            a = add(px - 40 * vx, py - 40 * vy, vx, vy)
            add(px + 40 * vx, py + 40 * vy + rng.uniform(-8, 8), -vx, -vy,
                a.cls if rng.random() < 0.5 else None)
        if rng.random() < 1.0 / 30 and len(shapes) < 7:
            add(*_edge_entry(rng))
        yield [(s.oid, s.cls, s.x, s.y, s.w) for s in shapes]
        for s in shapes:
            s.vx += rng.gauss(0.0, 0.08)
            s.vy += rng.gauss(0.0, 0.08)
            s.x += s.vx
            s.y += s.vy
        shapes = [s for s in shapes if -80 < s.x < WIDTH + 80 and -80 < s.y < HEIGHT + 80]


def with_interval(frames, interval):
    return [dict(fr, detected=(i % interval == 0)) for i, fr in enumerate(frames)]


def run_vt_track(vt_track, frames, extra_args=()):
    """Our tracker core through tools/vt-track: per frame a list of
    (id, cls, box, predicted)."""
    lines = []
    for i, fr in enumerate(frames):
        lines.append("F %d %d" % (i, 1 if fr["detected"] else 0))
        if fr["detected"]:
            for cls, score, b in fr["detections"]:
                lines.append("D %d %.4f %.3f %.3f %.3f %.3f" % (cls, score, *b))
    out = subprocess.run([vt_track, *extra_args], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout
    result = [[] for _ in frames]
    for line in out.splitlines():
        f, oid, cls, x1, y1, x2, y2, score, predicted = line.split()
        result[int(f)].append((int(oid), int(cls), (float(x1), float(y1), float(x2), float(y2)),
                               predicted == "1"))
    return result


def run_iou_baseline(frames, iou_threshold=0.5, score_threshold=0.5, max_lost=5):
    """The plain IoU tracker: detections above score_threshold matched greedily
    (highest IoU first, same class) to the tracks' last boxes at iou_threshold;
    a track unmatched for more than max_lost frames ends, an unmatched detection
    starts a new id. No motion model: on a frame without detection the tracks
    keep their last box."""
    tracks = {}  # id -> [cls, box, lost]
    next_id = 1
    result = []
    for fr in frames:
        out = []
        if not fr["detected"]:
            for oid, (cls, b, lost) in tracks.items():
                if lost == 0:
                    out.append((oid, cls, b, True))
            result.append(out)
            continue
        dets = [d for d in fr["detections"] if d[1] >= score_threshold]
        pairs = []
        for oid, (cls, b, lost) in tracks.items():
            for j, (dcls, score, db) in enumerate(dets):
                if dcls == cls:
                    v = iou(b, db)
                    if v >= iou_threshold:
                        pairs.append((v, oid, j))
        pairs.sort(reverse=True)
        used_t, used_d = set(), set()
        for v, oid, j in pairs:
            if oid in used_t or j in used_d:
                continue
            used_t.add(oid)
            used_d.add(j)
            tracks[oid][1] = dets[j][2]
            tracks[oid][2] = 0
            out.append((oid, tracks[oid][0], dets[j][2], False))
        for oid in list(tracks):
            if oid not in used_t:
                tracks[oid][2] += 1
                if tracks[oid][2] > max_lost:
                    del tracks[oid]
        for j, (dcls, score, db) in enumerate(dets):
            if j not in used_d:
                tracks[next_id] = [dcls, db, 0]
                out.append((next_id, dcls, db, False))
                next_id += 1
        result.append(out)
    return result


def id_switches(frames, hyp, min_iou=0.5):
    """CLEAR-MOT style ID switches without motmetrics: per frame, ground truth
    and hypotheses matched greedily by IoU (>= min_iou, keeping last frame's
    pairs first when they still overlap); a switch is a ground-truth object
    matched to a different hypothesis id than at its previous match."""
    last = {}
    switches = 0
    for fr, objs in zip(frames, hyp):
        pairs = []
        for g, (gid, gcls, gb) in enumerate(fr["gt"]):
            for h, (hid, hcls, hb, _) in enumerate(objs):
                v = iou(gb, hb)
                if v >= min_iou:
                    keep = 1 if last.get(gid) == hid else 0
                    pairs.append((keep, v, g, h))
        pairs.sort(reverse=True)
        used_g, used_h = set(), set()
        for keep, v, g, h in pairs:
            if g in used_g or h in used_h:
                continue
            used_g.add(g)
            used_h.add(h)
            gid, hid = fr["gt"][g][0], objs[h][0]
            if gid in last and last[gid] != hid:
                switches += 1
            last[gid] = hid
    return switches


def default_vt_track():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.environ.get("VD_VT_TRACK", os.path.join(root, "build", "tools", "vt-track"))
