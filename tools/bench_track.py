#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tracking benchmark: visiontrack's tracker core against the plain IoU tracker
baseline (GStreamer's ioutracker's method) on generated sequences
(tools/track_sim.py: shapes entering, leaving, crossing and passing behind a
pillar; noisy detections with misses, false positives and low scores), with
detections on every frame and on every 3rd frame. MOTA, IDF1 and ID switches
by motmetrics (py-motmetrics, from PyPI, in a venv of its own: a benchmark
dependency only, never the product's or the tests').

    tools/bench_track.py [--sequences N] [--frames N] [--real-sequences N] [--json FILE]

With --real-sequences N (default 2, 0 to skip) also on rendered clips
(tools/track_render.py: the bundled model's shapes moving over its kind of
backgrounds) with the detections of visiondetect and the bundled model
(threshold 0.1), read back from visionjson's output.

Builds build/tools/vt-track first (ninja) unless VD_VT_TRACK names a binary;
VD_BUILD_DIR names another build tree (its plugin and vt-track).
Targets (issue 13): IDF1 >= 0.9 and fewer ID switches than the baseline at
interval 1; MOTA at interval 3 within 0.05 of interval 1."""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "build-bench", "track-venv")
# the build tree whose plugin and vt-track are measured (VD_BUILD_DIR, default build/)
BUILD = os.path.abspath(os.environ.get("VD_BUILD_DIR", os.path.join(ROOT, "build")))


def ensure_venv():
    """Re-runs this script inside build-bench/track-venv with motmetrics."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(py):
        print("bench_track: creating %s with motmetrics" % VENV, file=sys.stderr)
        venv.create(VENV, with_pip=True)
        # motmetrics 1.4 calls np.asfarray, which NumPy 2 removed
        subprocess.run([py, "-m", "pip", "install", "-q", "motmetrics==1.4.0", "numpy<2"],
                       check=True)
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def real_sequence(seed, n_frames):
    """A rendered clip (cached in build-bench/track-real/) and visiondetect's
    detections on every frame, as track_sim frames."""
    clip = os.path.join(ROOT, "build-bench", "track-real", "seed-%d-%d" % (seed, n_frames))
    # the detections are cached per model file (the element's default: the bundled model)
    model = os.environ.get("VISIONDETECT_MODEL") or os.path.join(
        ROOT, "models", "visiondetect-shapes.safetensors")
    with open(model, "rb") as f:
        model_id = hashlib.sha256(f.read()).hexdigest()[:16]
    gt_path = os.path.join(clip, "gt.json")
    det_path = os.path.join(clip, "detections-%s.jsonl" % model_id)
    if not os.path.exists(gt_path):
        print("bench_track: rendering %s" % clip, file=sys.stderr)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "track_render.py"),
                        clip, str(seed), str(n_frames)], check=True)
    if not os.path.exists(det_path):
        env = dict(os.environ, GST_PLUGIN_PATH=os.path.join(BUILD, "gst"),
                   GST_REGISTRY=os.path.join(BUILD, "gst-registry.bin"))
        subprocess.run(["gst-launch-1.0", "-q", "multifilesrc",
                        "location=" + os.path.join(clip, "frame-%04d.png"),
                        "stop-index=%d" % (n_frames - 1), "caps=image/png,framerate=25/1",
                        "!", "pngdec", "!", "videoconvert", "!", "visiondetect", "threshold=0.1",
                        "!", "visionjson", "location=" + det_path + ".part", "!", "fakesink"],
                       check=True, env=env)
        os.rename(det_path + ".part", det_path)
    gt = json.load(open(gt_path))
    frames = []
    for i, line in enumerate(open(det_path)):
        d = json.loads(line)
        dets = [(o["label_id"], o["confidence"],
                 (o["rect"]["x"], o["rect"]["y"], o["rect"]["x"] + o["rect"]["w"],
                  o["rect"]["y"] + o["rect"]["h"])) for o in d["objects"]]
        frames.append({"gt": [(g[0], g[1], tuple(g[2:])) for g in gt[i]],
                       "detections": dets, "detected": True})
    return frames


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=10)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1000, help="seed of the first sequence")
    ap.add_argument("--real-sequences", type=int, default=2,
                    help="rendered clips detected by visiondetect (0: none)")
    ap.add_argument("--real-frames", type=int, default=150)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    ensure_venv()
    import motmetrics as mm
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import track_sim as ts

    vt_track = os.environ.get("VD_VT_TRACK")
    if not vt_track:
        subprocess.run(["ninja", "-C", BUILD, "tools/vt-track"],
                       check=True, stdout=subprocess.DEVNULL)
        vt_track = os.path.join(BUILD, "tools", "vt-track")

    def accumulate(frames, hyp):
        acc = mm.MOTAccumulator(auto_id=True)
        for fr, objs in zip(frames, hyp):
            gt_ids = [g[0] for g in fr["gt"]]
            gt_boxes = [(b[0], b[1], b[2] - b[0], b[3] - b[1]) for _, _, b in fr["gt"]]
            hyp_ids = [o[0] for o in objs]
            hyp_boxes = [(b[0], b[1], b[2] - b[0], b[3] - b[1]) for _, _, b, _ in objs]
            dist = mm.distances.iou_matrix(gt_boxes, hyp_boxes, max_iou=0.5)
            acc.update(gt_ids, hyp_ids, dist)
        return acc

    mh = mm.metrics.create()
    metrics = ["mota", "idf1", "num_switches", "num_false_positives", "num_misses",
               "mostly_tracked", "num_unique_objects"]
    results = {}

    def evaluate(sequences, title, prefix):
        runs = {}
        for frames in sequences:
            for interval in (1, 3):
                fi = ts.with_interval(frames, interval)
                # predicted boxes clipped to the frame, as visiontrack does
                ours = ts.run_vt_track(vt_track, fi, ("--frame-size", "%dx%d" % (ts.WIDTH, ts.HEIGHT)))
                for name, hyp in (("visiontrack", ours),
                                  ("iou-baseline", ts.run_iou_baseline(fi))):
                    runs.setdefault((name, interval), []).append(accumulate(fi, hyp))
        print("%s: %d ground-truth boxes, %d objects"
              % (title, sum(len(f["gt"]) for fr in sequences for f in fr),
                 sum(len({g[0] for f in fr for g in f["gt"]}) for fr in sequences)))
        print("%-13s %8s %7s %7s %9s %6s %6s %7s"
              % ("tracker", "interval", "MOTA", "IDF1", "ID sw.", "FP", "FN", "MT"))
        for (name, interval), accs in sorted(runs.items(),
                                             key=lambda kv: (kv[0][1], kv[0][0] != "visiontrack")):
            summary = mh.compute_many(accs, metrics=metrics,
                                      names=[str(i) for i in range(len(accs))],
                                      generate_overall=True)
            row = summary.loc["OVERALL"]
            r = {m: float(row[m]) for m in metrics}
            results["%s%s/interval=%d" % (prefix, name, interval)] = r
            print("%-13s %8d %7.3f %7.3f %9d %6d %6d %4d/%d"
                  % (name, interval, r["mota"], r["idf1"], r["num_switches"],
                     r["num_false_positives"], r["num_misses"], r["mostly_tracked"],
                     r["num_unique_objects"]))

    evaluate([ts.generate(args.seed + k, n_frames=args.frames)[0] for k in range(args.sequences)],
             "synthetic detections, %d sequences of %d frames (seeds %d..%d)"
             % (args.sequences, args.frames, args.seed, args.seed + args.sequences - 1), "")
    if args.real_sequences > 0:
        real = [real_sequence(args.seed + k, args.real_frames) for k in range(args.real_sequences)]
        print()
        evaluate(real, "visiondetect detections (bundled model, threshold 0.1), %d rendered "
                 "clips of %d frames (seeds %d..%d)" % (args.real_sequences, args.real_frames,
                                                       args.seed,
                                                       args.seed + args.real_sequences - 1),
                 "visiondetect/")

    ours1, ours3 = results["visiontrack/interval=1"], results["visiontrack/interval=3"]
    print()
    base1 = results["iou-baseline/interval=1"]
    checks = [
        ("IDF1 >= 0.9 (interval 1)", ours1["idf1"] >= 0.9),
        ("ID switches below the baseline's (interval 1)",
         ours1["num_switches"] < base1["num_switches"]),
        ("MOTA at interval 3 within 0.05 of interval 1",
         ours1["mota"] - ours3["mota"] <= 0.05),
    ]
    for label, ok in checks:
        print("%-48s %s" % (label, "yes" if ok else "NO"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results,
                       "targets": {label: ok for label, ok in checks}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
