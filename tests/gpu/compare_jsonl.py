#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Compares the JSON Lines that element-check.sh's pipelines wrote and writes its
results as one JSON file (standard library only).

Input: a manifest, one run per line, tab-separated:
    name role device precision format width height frames rc wall_s jsonl log
role: `ref` (the CPU engine, fp32), `test32` (the checked device in fp32), `test16`
(the checked device in reduced precision) or `bench` (the throughput run, no JSON
Lines: its frame times are read from the GST_DEBUG log).

Detections of one frame (matched by pts) are paired greedily by IoU among the
same label; a pair counts when its IoU and confidence difference are within the
tolerance: test32 against ref (IoU >= 0.99, |confidence diff| <= 1e-3), test16
against test32 (IoU >= 0.9, |diff| <= 0.02).

Exits 1 when a run failed or wrote fewer frames than asked, when a comparison
run found no ball at all, or when test32 matches fewer than 97% of the
reference's detections; 0 otherwise.

    compare_jsonl.py MANIFEST OUT_JSON [--bench-warmup N] [--plugins FILE
                     --plugin-dir DIR] [--extra JSON]
"""
import argparse
import json
import os
import re
import sys

STRICT = {"iou": 0.99, "confidence": 1e-3}
LOOSE = {"iou": 0.9, "confidence": 0.02}
MIN_STRICT_FRACTION = 0.97

FIELDS = ("name role device precision format width height frames rc wall_s "
          "jsonl log").split()


def read_manifest(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            run = dict(zip(FIELDS, line.split("\t")))
            for k in ("width", "height", "frames", "rc"):
                run[k] = int(run[k])
            run["wall_s"] = float(run["wall_s"])
            runs.append(run)
    return runs


def read_jsonl(path):
    frames = {}
    bad = 0
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                key = obj.get("pts")
                if key is None:
                    key = ("frame", obj.get("frame"))
                frames[key] = obj
    except OSError:
        return None, 0
    return frames, bad


def read_log(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def engine_of(log):
    """'CUDA fp16' from the element's INFO line, None without it."""
    m = re.search(r"on (CUDA|the CPU) in (\w+)", log)
    if not m:
        return None
    return ("CUDA" if m.group(1) == "CUDA" else "CPU") + " " + m.group(2)


def error_of(log):
    """The pipeline's error message (gst-launch's "ERROR: from element" or
    "erroneous pipeline" line), else the log's last lines."""
    lines = log.splitlines()
    for prefix in ("ERROR: from element", "WARNING: erroneous pipeline", "ERROR"):
        hits = [l for l in lines if l.startswith(prefix)]
        if hits:
            return hits[0]
    return "\n".join(lines[-4:])


def iou(a, b):
    ix = min(a["x_max"], b["x_max"]) - max(a["x_min"], b["x_min"])
    iy = min(a["y_max"], b["y_max"]) - max(a["y_min"], b["y_min"])
    if ix <= 0 or iy <= 0:
        return 0.0
    inter = ix * iy
    area = lambda r: (r["x_max"] - r["x_min"]) * (r["y_max"] - r["y_min"])
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def compare(ref_frames, test_frames, tol):
    """Pairs each frame's detections; counts the reference's detections that
    have a partner within tol, and the worst IoU / confidence difference among
    same-label best pairs."""
    n_ref = n_test = matched = 0
    frames_missing = 0
    worst_iou = None
    worst_conf = None
    for key, ref in ref_frames.items():
        test = test_frames.get(key)
        ref_objs = ref.get("objects", [])
        n_ref += len(ref_objs)
        if test is None:
            frames_missing += 1
            continue
        test_objs = list(test.get("objects", []))
        for r in ref_objs:
            best, best_iou = None, -1.0
            for t in test_objs:
                if t["label"] != r["label"]:
                    continue
                v = iou(r["box"], t["box"])
                if v > best_iou:
                    best, best_iou = t, v
            if best is None:
                continue
            dc = abs(best["confidence"] - r["confidence"])
            worst_iou = best_iou if worst_iou is None else min(worst_iou, best_iou)
            worst_conf = dc if worst_conf is None else max(worst_conf, dc)
            if best_iou >= tol["iou"] and dc <= tol["confidence"]:
                matched += 1
                test_objs.remove(best)
    for key, test in test_frames.items():
        n_test += len(test.get("objects", []))
    return {
        "reference_detections": n_ref,
        "test_detections": n_test,
        "matched": matched,
        "fraction": matched / n_ref if n_ref else None,
        "test_unmatched": n_test - matched,
        "frames_missing_in_test": frames_missing,
        "min_iou": worst_iou,
        "max_confidence_diff": worst_conf,
        "tolerance": tol,
    }


LOG_TIME = re.compile(r"^(\d+):(\d\d):(\d\d)\.(\d+)\s.*frame (\d+): (\d+) detections")


def bench_figures(log, warmup):
    times = {}
    for line in log.splitlines():
        m = LOG_TIME.match(line)
        if m:
            h, mi, s, frac, idx = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
            t = int(h) * 3600 + int(mi) * 60 + int(s) + int(frac) / 10 ** len(frac)
            times[int(idx)] = t
    if not times:
        return {"frames_logged": 0}
    last = max(times)
    first = min(warmup, last)
    out = {"frames_logged": len(times), "warmup_frames": first}
    if last > first and times[last] > times[first]:
        out["frames_timed"] = last - first
        out["seconds"] = round(times[last] - times[first], 6)
        out["frames_per_s"] = round((last - first) / (times[last] - times[first]), 2)
        out["ms_per_frame"] = round(1000 * (times[last] - times[first]) / (last - first), 4)
    m = re.findall(r"inference takes (\d+):(\d\d):(\d\d)\.(\d+)", log)
    if m:
        h, mi, s, frac = m[-1]
        out["element_inference_ms_smoothed"] = round(
            1000 * (int(h) * 3600 + int(mi) * 60 + int(s) + int(frac) / 10 ** len(frac)), 4)
    return out


def fmt_frac(c):
    if c["fraction"] is None:
        return "n/a"
    return "%d/%d = %.1f%%" % (c["matched"], c["reference_detections"], 100 * c["fraction"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("out_json")
    ap.add_argument("--bench-warmup", type=int, default=30)
    ap.add_argument("--extra", help="JSON object merged into the output (environment)")
    ap.add_argument("--plugins", help="lines 'plugin<TAB>file it was loaded from'")
    ap.add_argument("--plugin-dir", help="the folder every plugin must come from")
    args = ap.parse_args()

    runs = read_manifest(args.manifest)
    failures = []
    plugins = {}
    if args.plugins:
        with open(args.plugins) as f:
            for line in f:
                name, _, path = line.rstrip("\n").partition("\t")
                plugins[name] = path or None
                if not path:
                    failures.append("plugin %s not found by the carried GStreamer" % name)
                elif args.plugin_dir and os.path.dirname(os.path.realpath(path)) != \
                        os.path.realpath(args.plugin_dir):
                    failures.append("plugin %s loaded from %s, not from %s" % (
                        name, path, args.plugin_dir))
    by_config = {}
    run_out = []
    throughput = None
    for run in runs:
        log = read_log(run["log"])
        info = {k: run[k] for k in ("name", "role", "device", "precision", "format",
                                    "width", "height", "frames", "rc", "wall_s")}
        info["engine"] = engine_of(log)
        m = re.search(r"Execution ended after (\d+):(\d\d):(\d\d)\.(\d+)", log)
        if m:
            info["pipeline_s"] = round(int(m.group(1)) * 3600 + int(m.group(2)) * 60 +
                                       int(m.group(3)) + int(m.group(4)) / 10 ** len(m.group(4)), 3)
        warnings = [l.strip() for l in log.splitlines() if re.search(r"\s(WARN|ERROR)\s", l)]
        if warnings:
            info["warnings"] = [w[:300] for w in warnings[:4]]
            info["warning_count"] = len(warnings)
        label = "%s %s %s %dx%d" % (run["device"], run["precision"], run["format"],
                                    run["width"], run["height"])
        if run["rc"] != 0:
            info["error"] = ("stopped by its timeout" if run["rc"] in (124, 137)
                             else error_of(log))
            failures.append("%s: exit %d (%s)" % (
                label, run["rc"], "skipped: out of time" if run["rc"] == 200 else
                info["error"].splitlines()[-1][:400] if info["error"] else "no output"))
        want = "%s %s" % (run["device"].split(":")[0], run["precision"])
        if info["engine"] and info["engine"].lower() != want:
            failures.append("%s: the element ran on %s" % (label, info["engine"]))
        if run["role"] == "bench":
            info.update(bench_figures(log, args.bench_warmup))
            if run["rc"] in (124, 137) and info.get("frames_timed", 0) >= 100:
                # slower than expected: the frames before the timeout still
                # give the throughput
                info["note"] = "stopped by its timeout after %d frames" % info["frames_logged"]
                failures[:] = [f for f in failures if not f.startswith(label + ": exit")]
            elif run["rc"] == 0 and info.get("frames_logged", 0) < run["frames"]:
                failures.append("%s: %d of %d frames logged" % (
                    label, info.get("frames_logged", 0), run["frames"]))
            throughput = info
            run_out.append(info)
            continue
        frames, bad = read_jsonl(run["jsonl"])
        frames = frames or {}
        info["frames_written"] = len(frames)
        info["bad_lines"] = bad
        objs = [o for f in frames.values() for o in f.get("objects", [])]
        info["detections"] = len(objs)
        info["frames_with_ball"] = sum(
            1 for f in frames.values() if any(o["label"] == "ball" for o in f.get("objects", [])))
        info["labels"] = sorted({o["label"] for o in objs})
        if run["rc"] == 0 and len(frames) < run["frames"]:
            failures.append("%s: %d of %d frames written" % (label, len(frames), run["frames"]))
        if bad:
            failures.append("%s: %d unreadable lines" % (label, bad))
        if run["rc"] == 0 and info["frames_with_ball"] == 0:
            failures.append("%s: no ball detected in any frame" % label)
        run_out.append(info)
        config = "%s %dx%d" % (run["format"], run["width"], run["height"])
        by_config.setdefault(config, {})[run["role"]] = (run, frames)

    comparisons = []
    totals = {"strict": [0, 0], "loose": [0, 0]}
    for config, roles in by_config.items():
        pairs = []
        if "ref" in roles and "test32" in roles:
            pairs.append(("strict", "ref", "test32", STRICT))
        if "test16" in roles:
            base = "test32" if "test32" in roles and roles["test32"][0]["rc"] == 0 else "ref"
            if base in roles:
                pairs.append(("loose", base, "test16", LOOSE))
        for kind, rname, tname, tol in pairs:
            rrun, rframes = roles[rname]
            trun, tframes = roles[tname]
            c = compare(rframes, tframes, tol)
            c.update({"config": config,
                      "reference": "%s %s" % (rrun["device"], rrun["precision"]),
                      "test": "%s %s" % (trun["device"], trun["precision"]),
                      "kind": kind})
            comparisons.append(c)
            totals[kind][0] += c["matched"]
            totals[kind][1] += c["reference_detections"]

    summary = {}
    for kind, (m, n) in totals.items():
        summary[kind] = {"matched": m, "reference_detections": n,
                         "fraction": m / n if n else None}
    if totals["strict"][1] == 0:
        failures.append("no fp32 comparison: the reference or the fp32 runs produced nothing")
    elif summary["strict"]["fraction"] < MIN_STRICT_FRACTION:
        failures.append("fp32 against the CPU: %d of %d detections matched (%.1f%% < %.0f%%)" % (
            totals["strict"][0], totals["strict"][1], 100 * summary["strict"]["fraction"],
            100 * MIN_STRICT_FRACTION))

    result = {
        "ok": not failures,
        "failures": failures,
        "summary": summary,
        "min_strict_fraction": MIN_STRICT_FRACTION,
        "comparisons": comparisons,
        "throughput": throughput,
        "plugins": plugins,
        "runs": run_out,
    }
    if args.extra:
        result.update(json.loads(args.extra))
    with open(args.out_json, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")

    print("runs:")
    for r in run_out:
        extra = ""
        if r["role"] == "bench" and r.get("frames_per_s"):
            extra = "%s frames/s over %s frames" % (r.get("frames_per_s"), r.get("frames_timed"))
        elif r["role"] == "bench":
            extra = "no throughput (%s frames logged)" % r.get("frames_logged")
        else:
            extra = "%s frames, %s detections, ball in %s frames" % (
                r.get("frames_written"), r.get("detections"), r.get("frames_with_ball"))
        print("  %-7s %-6s %-5s %-5s %4dx%-4d exit %-3d %6.2f s  [%s]  %s" % (
            r["role"], r["device"], r["precision"], r["format"], r["width"], r["height"],
            r["rc"], r["wall_s"], r["engine"] or "-", extra))
    print("comparisons:")
    for c in comparisons:
        print("  %-16s %-12s vs %-12s matched %-16s min IoU %s, max |conf diff| %s, unmatched test %d" % (
            c["config"], c["test"], c["reference"], fmt_frac(c),
            "%.5f" % c["min_iou"] if c["min_iou"] is not None else "n/a",
            "%.2e" % c["max_confidence_diff"] if c["max_confidence_diff"] is not None else "n/a",
            c["test_unmatched"]))
    for kind, s in summary.items():
        if s["fraction"] is not None:
            print("%s (%s): %d/%d = %.2f%%" % (
                "fp32 vs CPU" if kind == "strict" else "reduced precision vs fp32",
                kind, s["matched"], s["reference_detections"], 100 * s["fraction"]))
    if throughput and throughput.get("frames_per_s"):
        print("throughput: %s frames/s (%s ms/frame) over %s frames after %s warm-up" % (
            throughput.get("frames_per_s"), throughput.get("ms_per_frame"),
            throughput.get("frames_timed"), throughput.get("warmup_frames")))
    for f in failures:
        print("FAIL: " + f)
    print("element check: %s" % ("ok" if not failures else "FAILED"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
