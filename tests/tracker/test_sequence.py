#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""CI-sized tracking check without motmetrics: the tracker core (tools/vt-track)
and the plain IoU tracker baseline on one generated sequence
(tools/track_sim.py), every frame detected and every 3rd frame detected.

Asserts, with measures computed here:
  - our ID switches are fewer than the baseline's, on both;
  - through every planned crossing of two shapes of the same class, each shape
    keeps one id from 20 frames before the meeting to 20 frames after
    (frames where it is not matched at all do not count);
  - on frames without detection, the predicted boxes overlap the ground truth
    (mean IoU of the matched ones >= 0.6).
usage: test_sequence.py VT_TRACK"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import track_sim as ts  # noqa: E402


def matched_ids(frames, hyp, gid, lo, hi):
    ids = set()
    for fr, objs in list(zip(frames, hyp))[max(lo, 0):hi]:
        gb = next((b for g, _, b in fr["gt"] if g == gid), None)
        if gb is None:
            continue
        best = max(((ts.iou(gb, hb), hid) for hid, _, hb, _ in objs), default=(0.0, None))
        if best[0] >= 0.5:
            ids.add(best[1])
    return ids


def main():
    vt_track = sys.argv[1]
    frames, crossings = ts.generate(7, n_frames=300)
    failures = []
    for interval in (1, 3):
        f = ts.with_interval(frames, interval)
        ours = ts.run_vt_track(vt_track, f)
        base = ts.run_iou_baseline(f)
        sw_ours, sw_base = ts.id_switches(f, ours), ts.id_switches(f, base)
        print("interval %d: ID switches %d (baseline %d)" % (interval, sw_ours, sw_base))
        if not sw_ours < sw_base:
            failures.append("interval %d: %d ID switches, baseline %d" % (interval, sw_ours, sw_base))
        for at, a, b, same_class in crossings:
            if not same_class:
                continue
            for gid in (a, b):
                ids = matched_ids(f, ours, gid, at - 20, at + 21)
                print("interval %d: crossing at frame %d, object %d: ids %s"
                      % (interval, at, gid, sorted(ids)))
                if len(ids) > 1:
                    failures.append("interval %d: object %d has ids %s through the crossing "
                                    "at frame %d" % (interval, gid, sorted(ids), at))
        if interval > 1:
            ious = []
            for fr, objs in zip(f, ours):
                if fr["detected"]:
                    continue
                for _, _, gb in fr["gt"]:
                    best = max((ts.iou(gb, hb) for _, _, hb, _ in objs), default=0.0)
                    if best > 0.3:
                        ious.append(best)
            mean = sum(ious) / len(ious)
            print("interval %d: mean IoU of predicted boxes %.3f over %d" % (interval, mean, len(ious)))
            if mean < 0.6:
                failures.append("predicted boxes' mean IoU %.3f" % mean)
    if not any(same for _, _, _, same in crossings):
        failures.append("the sequence has no same-class crossing to check")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
