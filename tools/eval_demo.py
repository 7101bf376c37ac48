#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Evaluate the bundled demo model (tools/train_demo.py) on held-out synthetic scenes:
mean average precision at IoU 0.5 for torchvision's forward and for our engine
(vd-detect) on the same images and the same weights.

The held-out scenes come from train_demo.make_scene(seed, i, STREAM_EVAL): a stream
the training never draws from. The torchvision model is rebuilt from the model file
itself (train_demo.build_model() + the file's tensors, F16/BF16 widened to F32), so
both sides run exactly the same weights.

    /usr/bin/python3 tools/eval_demo.py --model models/visiondetect-shapes.safetensors \\
        --vd-detect build/tools/vd-detect --images 300
    # CI-sized: 40 images, fails (exit 1) below the targets
    /usr/bin/python3 tools/eval_demo.py --images 40 --min-map 0.90 --max-diff 0.01
    # per-frame CPU time at 640x480 (vd-detect --repeat and torchvision, same threads)
    /usr/bin/python3 tools/eval_demo.py --bench 10 --images 0
    # hard-negative mining for tools/train_demo.py --hard-negatives: the frames among
    # 4000 training-side frames without shapes that the engine answers above 0.3
    /usr/bin/python3 tools/eval_demo.py --images 0 --mine 4000 --mine-out hard.json

mAP: per class, detections of all images sorted by score, greedy matching to unmatched
ground-truth boxes of that class at IoU >= 0.5, AP = area under the precision/recall
curve with precision made monotone (all-point interpolation, as VOC 2010+ and COCO's
per-threshold AP without the 101-point sampling); mAP = mean over the four classes.
Exit status: 0, 1 when a --min-map/--max-diff target is missed, 77 when torch or the
model file is missing.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is missing")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))  # parity_common, with torch

try:
    import train_demo  # noqa: E402  (numpy + PIL: the scene generator)
except ImportError as _e:
    print(f"SKIP: {_e}")
    sys.exit(77)

DEFAULT_MODEL = os.path.join(ROOT, "models", "visiondetect-shapes.safetensors")
DEFAULT_VD_DETECT = os.path.join(ROOT, "build", "tools", "vd-detect")


def read_safetensors(path):
    """(config dict, {name: float32 numpy array}) of a visiondetect model file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    config = json.loads(meta["config"]) if "config" in meta else None
    tensors = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        raw = data[a:b]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, "<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, "<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{name}: dtype {dt} not handled")
        tensors[name] = arr.reshape(info["shape"]).astype(np.float32)
    return config, tensors


def torchvision_model(path):
    """train_demo.build_model() carrying the weights of the model file @path."""
    import torch
    config, tensors = read_safetensors(path)
    model = train_demo.build_model(num_classes=config["num_classes"] if config else len(train_demo.CLASS_NAMES))
    state = model.state_dict()
    missing = [k for k in state if k not in tensors and not k.endswith("num_batches_tracked")]
    extra = [k for k in tensors if k not in state]
    if missing or extra:
        raise SystemExit(f"{path}: does not match train_demo.build_model(): missing {missing[:3]}, "
                         f"unexpected {extra[:3]}")
    for k, v in tensors.items():
        state[k] = torch.from_numpy(v.copy()).to(state[k].dtype).reshape(state[k].shape)
    model.load_state_dict(state)
    model.eval()
    return model, config


def held_out_set(n, seed):
    return [train_demo.make_scene(seed, i, train_demo.STREAM_EVAL) for i in range(n)]


def box_iou(a, b):
    """IoU matrix of boxes a (N,4) and b (M,4)."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


def average_precision(detections, ground_truth, cls, iou_thresh=0.5):
    """detections: per image a list of (box, score, label); ground_truth: per image
    (boxes, labels). AP of class @cls."""
    n_gt = 0
    scored = []
    for img_i, ((gt_boxes, gt_labels), dets) in enumerate(zip(ground_truth, detections)):
        n_gt += int((np.asarray(gt_labels) == cls).sum())
        for box, score, label in dets:
            if label == cls:
                scored.append((score, img_i, box))
    if n_gt == 0:
        return float("nan")
    scored.sort(key=lambda s: -s[0])
    used = [np.zeros(len(gt[1]), bool) for gt in ground_truth]
    tp = np.zeros(len(scored))
    for k, (score, img_i, box) in enumerate(scored):
        gt_boxes, gt_labels = ground_truth[img_i]
        sel = np.nonzero(np.asarray(gt_labels) == cls)[0]
        if len(sel) == 0:
            continue
        ious = box_iou([box], np.asarray(gt_boxes)[sel])[0]
        ious[used[img_i][sel]] = -1.0
        j = int(np.argmax(ious))
        if ious[j] >= iou_thresh:
            used[img_i][sel[j]] = True
            tp[k] = 1
    if len(scored) == 0:
        return 0.0
    ctp = np.cumsum(tp)
    recall = ctp / n_gt
    precision = ctp / np.arange(1, len(scored) + 1)
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    idx = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1]))


def mean_ap(detections, ground_truth, n_classes, iou_thresh=0.5):
    aps = {c: average_precision(detections, ground_truth, c, iou_thresh) for c in range(1, n_classes)}
    valid = [v for v in aps.values() if not np.isnan(v)]
    return float(np.mean(valid)) if valid else 0.0, aps


def run_torchvision(model, scenes, threads):
    import torch
    import parity_common as pc
    torch.set_num_threads(threads)
    out = []
    # the box head's linears on oneDNN, as in the parity references (Debian's torch runs
    # nn.Linear on the netlib reference BLAS: a third of this function's time)
    with torch.no_grad(), pc.box_head_linears_on_onednn(model):
        for img, _, _ in scenes:
            t = torch.from_numpy(img).permute(2, 0, 1).float().div(255.0)
            r = model([t])[0]
            out.append([(b.tolist(), float(s), int(l))
                        for b, s, l in zip(r["boxes"], r["scores"], r["labels"])])
    return out


def run_engine(vd_detect, model_path, scenes, workdir, threads, threshold, batch=50, precision=None):
    paths = []
    for i, (img, _, _) in enumerate(scenes):
        p = os.path.join(workdir, f"scene-{i:04d}.npy")
        np.save(p, img)
        paths.append(p)
    out = []
    for a in range(0, len(paths), batch):
        cmd = [vd_detect, "--model", model_path, "--device", "cpu", "--json",
               "--threads", str(threads), "--threshold", str(threshold)] + \
              (["--precision", precision] if precision else []) + paths[a:a + batch]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if res.returncode != 0:
            raise SystemExit(f"vd-detect failed ({res.returncode}): {' '.join(cmd[:8])} ...\n{res.stderr}")
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        if len(lines) != len(paths[a:a + batch]):
            raise SystemExit(f"vd-detect printed {len(lines)} results for {len(paths[a:a + batch])} images")
        for ln in lines:
            obj = json.loads(ln)
            out.append([(d["box"], float(d["score"]), int(d["label"])) for d in obj["detections"]])
    return out


def cpu_refuses(vd_detect, model_path, precision):
    """vd-detect's reason when this processor lacks what @precision needs (int8: VNNI on
    x86, the dot product on Arm), else None."""
    probe = subprocess.run([vd_detect, "--model", model_path, "--device", "cpu",
                            "--precision", precision, "--info"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0 and ("VNNI" in probe.stderr or "dot product" in probe.stderr):
        return probe.stderr.strip()
    return None


def calibrate(vd_detect, model_path, n, seed, workdir, threads):
    """A copy of @model_path with an int8 calibration of @n training-stream scenes."""
    paths = []
    for i in range(n):
        img, _, _ = train_demo.make_scene(seed, i, train_demo.STREAM_TRAIN)
        p = os.path.join(workdir, f"calibration-{i:04d}.npy")
        np.save(p, img)
        paths.append(p)
    out = os.path.join(workdir, "calibrated.safetensors")
    cmd = [vd_detect, "--model", model_path, "--threads", str(threads), "--calibrate", out] + paths
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        raise SystemExit(f"vd-detect --calibrate failed ({res.returncode}):\n{res.stderr}")
    return out


def match_fraction(ref, other, iou=0.9, max_score_diff=0.02):
    """Fraction of @ref's detections (per image: (box, score, label)) that have a
    partner in @other: same class, IoU >= @iou, |score difference| <= @max_score_diff;
    greedy by @ref's score, each detection of @other used once."""
    total = matched = 0
    for r, o in zip(ref, other):
        used = [False] * len(o)
        for box, score, label in sorted(r, key=lambda d: -d[1]):
            total += 1
            best, best_iou = -1, iou
            for j, (ob, osc, ol) in enumerate(o):
                if used[j] or ol != label or abs(osc - score) > max_score_diff:
                    continue
                v = box_iou(np.array([box], dtype=np.float64), np.array([ob], dtype=np.float64))[0, 0]
                if v >= best_iou:
                    best, best_iou = j, v
            if best >= 0:
                used[best] = True
                matched += 1
    return matched / total if total else 1.0, total


def mine(model, model_path, vd_detect, n, seed, threshold, threads, workdir, chunk=200):
    """Indices and best scores of the frames train_demo.distractor_scene(seed, i,
    STREAM_MINE), i < @n, on which the model (the engine when @vd_detect is given,
    else torchvision) reports a detection above @threshold."""
    found = []
    for a in range(0, n, chunk):
        idx = list(range(a, min(n, a + chunk)))
        frames = [(train_demo.distractor_scene(seed, i, train_demo.STREAM_MINE), None, None) for i in idx]
        for i, best in zip(idx, best_scores(model, model_path, vd_detect, frames, threshold,
                                            threads, workdir)):
            if best > threshold:
                found.append((i, best))
    return found


def best_scores(model, model_path, vd_detect, frames, threshold, threads, workdir):
    """Each frame's highest detection score (0 for none) at @threshold: the engine's
    when @vd_detect is given, else torchvision's."""
    if vd_detect:
        dets = run_engine(vd_detect, model_path, frames, workdir, threads, threshold)
    else:
        dets = run_torchvision(model, frames, threads)
    return [max((d[1] for d in ds), default=0.0) for ds in dets]


def bench(model, model_path, vd_detect, runs, threads, workdir):
    """Per-frame CPU wall time at 640x480 (a videotestsrc-like ball frame), median of
    @runs after one warm-up, for vd-detect (its --repeat timings) and torchvision."""
    import torch
    torch.set_num_threads(threads)
    img, _, _ = train_demo.draw_ball_frame(640, 480, 200.0, 150.0, 20, (255, 255, 255), (0, 0, 0))
    p = os.path.join(workdir, "bench-640x480.npy")
    np.save(p, img)
    result = {}
    t = torch.from_numpy(img).permute(2, 0, 1).float().div(255.0)
    times = []
    with torch.no_grad():
        model([t])
        for _ in range(runs):
            t0 = time.perf_counter()
            model([t])
            times.append(time.perf_counter() - t0)
    result["torchvision_ms"] = 1000 * float(np.median(times))
    result["torchvision_min_ms"] = 1000 * float(np.min(times))
    if vd_detect:
        res = subprocess.run([vd_detect, "--model", model_path, "--device", "cpu", "--threads", str(threads),
                              "--repeat", str(runs + 1), p], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if res.returncode != 0:
            raise SystemExit(f"vd-detect --repeat failed: {res.stderr}")
        import re
        ms = [float(m) for m in re.findall(r"time_ms:\s*([0-9.]+)", res.stderr)]
        result["vd_detect_stderr"] = res.stderr.strip().splitlines()[-3:]
        if len(ms) > 1:
            result["vd_detect_ms"] = float(np.median(ms[1:runs + 1]))
            result["vd_detect_min_ms"] = float(np.min(ms[1:runs + 1]))
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--vd-detect", default=DEFAULT_VD_DETECT,
                    help="vd-detect binary ('' to evaluate torchvision only)")
    ap.add_argument("--images", type=int, default=300, help="held-out scenes")
    ap.add_argument("--seed", type=int, default=20261129, help="held-out set seed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--threshold", type=float, default=0.05,
                    help="score threshold of both sides (torchvision's box_score_thresh is 0.05)")
    ap.add_argument("--min-map", type=float, default=None, help="fail below this mAP (both sides)")
    ap.add_argument("--max-diff", type=float, default=None, help="fail if |mAP engine - torchvision| > this")
    ap.add_argument("--distractors", type=int, default=0,
                    help="also N held-out frames without any shape (lines, grids, text, "
                         "videotestsrc's sweep lines: train_demo.distractor_scene)")
    ap.add_argument("--distractor-threshold", type=float, default=0.5,
                    help="score from which a detection on such a frame counts (the element's "
                         "default threshold)")
    ap.add_argument("--max-distracted", type=float, default=None,
                    help="fail when more than this fraction of those frames has a detection")
    ap.add_argument("--mine", type=int, default=0,
                    help="hard-negative mining: run the model on N training-side frames without "
                         "shapes (train_demo.STREAM_MINE) and write those with a detection above "
                         "--mine-threshold to --mine-out (train_demo.py --hard-negatives)")
    ap.add_argument("--mine-seed", type=int, default=1, help="seed of the mined frames")
    ap.add_argument("--mine-threshold", type=float, default=0.3)
    ap.add_argument("--mine-out", default=None)
    ap.add_argument("--mine-videotestsrc", default=None, metavar="DIR",
                    help="mine the frames of tools/capture_videotestsrc.py's DIR instead: "
                         "write those with a detection above --mine-threshold to --mine-out "
                         "as an index of the same form (train_demo.py --videotestsrc-frames)")
    ap.add_argument("--mine-text", type=int, default=0, metavar="K",
                    help="with --mine-videotestsrc: draw K candidates per frame, each with lines "
                         "of text over it (train_demo.pattern_text_frame, --mine-seed), and "
                         "write the answered ones with their text key")
    ap.add_argument("--bench", type=int, default=0, help="also time N forwards at 640x480")
    ap.add_argument("--precisions", default=None,
                    help="comma-separated engine precisions (fp32,bf16,...): the engine runs the "
                         "held-out set at each; every one after the first is compared with the first "
                         "(mAP difference, share of its detections matched: same class, IoU >= 0.9, "
                         "|score difference| <= 0.02)")
    ap.add_argument("--max-precision-diff", type=float, default=None,
                    help="fail if |mAP of a precision - mAP of the first| > this")
    ap.add_argument("--min-matched", type=float, default=None,
                    help="fail if a precision matches less than this share of the first's detections")
    ap.add_argument("--calibration-images", type=int, default=64,
                    help="precision int8: the engine runs a copy of the model calibrated "
                         "(vd-detect --calibrate) on this many training-stream scenes "
                         "(train_demo.make_scene, --calibration-seed), none of them held out")
    ap.add_argument("--calibration-seed", type=int, default=7)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    if (args.mine > 0 or args.mine_videotestsrc) and not args.mine_out:
        ap.error("--mine and --mine-videotestsrc need --mine-out")
    if args.mine_text and not args.mine_videotestsrc:
        ap.error("--mine-text needs --mine-videotestsrc")

    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {sys.executable} cannot import torch/torchvision ({e})")
        return 77
    if not os.path.exists(args.model):
        print(f"SKIP: no model file {args.model}")
        return 77
    vd = args.vd_detect
    if vd and not os.access(vd, os.X_OK):
        if args.max_diff is not None:
            print(f"FAIL: vd-detect not found at {vd} (needed for --max-diff)")
            return 1
        print(f"vd-detect not found at {vd}; evaluating torchvision only")
        vd = ""

    # int8 where the processor lacks its instructions: vd-detect refuses it whatever the
    # model (no calibration needed to ask), so skip before any of the work
    precisions = [p for p in (args.precisions or "").split(",") if p]
    if vd and "int8" in precisions:
        reason = cpu_refuses(vd, args.model, "int8")
        if reason:
            print(f"SKIP: {reason}")
            return 77

    model, config = torchvision_model(args.model)
    model.roi_heads.score_thresh = args.threshold
    n_classes = config["num_classes"]
    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="eval_demo-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)

    results = {"model": args.model, "images": args.images, "seed": args.seed, "threshold": args.threshold}
    ok = True
    if args.images > 0:
        scenes = held_out_set(args.images, args.seed)
        gt = [(b, l) for _, b, l in scenes]
        n_obj = sum(len(l) for _, _, l in scenes)
        print(f"held-out set: {args.images} scenes, {n_obj} objects (seed {args.seed})", flush=True)
        t0 = time.time()
        tv = run_torchvision(model, scenes, args.threads)
        tv_map, tv_aps = mean_ap(tv, gt, n_classes)
        names = config["class_names"]
        print(f"torchvision: mAP@0.5 {tv_map:.4f}  ("
              + ", ".join(f"{names[c]} {v:.3f}" for c, v in tv_aps.items()) + f")  {time.time() - t0:.0f} s",
              flush=True)
        results["torchvision_map50"] = tv_map
        results["torchvision_ap50"] = {names[c]: v for c, v in tv_aps.items()}
        if args.min_map is not None and tv_map < args.min_map:
            print(f"FAIL: torchvision mAP {tv_map:.4f} < {args.min_map}")
            ok = False
        if vd:
            t0 = time.time()
            en = run_engine(vd, args.model, scenes, workdir, args.threads, args.threshold,
                            precision="fp32")
            en_map, en_aps = mean_ap(en, gt, n_classes)
            print(f"engine:      mAP@0.5 {en_map:.4f}  ("
                  + ", ".join(f"{names[c]} {v:.3f}" for c, v in en_aps.items())
                  + f")  {time.time() - t0:.0f} s", flush=True)
            results["engine_map50"] = en_map
            results["engine_ap50"] = {names[c]: v for c, v in en_aps.items()}
            diff = abs(en_map - tv_map)
            print(f"|engine - torchvision| = {diff:.4f}")
            if args.min_map is not None and en_map < args.min_map:
                print(f"FAIL: engine mAP {en_map:.4f} < {args.min_map}")
                ok = False
            if args.max_diff is not None and diff > args.max_diff:
                print(f"FAIL: |engine - torchvision| {diff:.4f} > {args.max_diff}")
                ok = False
        if vd and precisions:
            ref = None
            for prec in precisions:
                t0 = time.time()
                model_path = args.model
                if prec == "int8":
                    model_path = calibrate(vd, args.model, args.calibration_images,
                                           args.calibration_seed, workdir, args.threads)
                dets = run_engine(vd, model_path, scenes, workdir, args.threads, args.threshold,
                                  precision=prec)
                m, aps = mean_ap(dets, gt, n_classes)
                line = f"engine {prec}: mAP@0.5 {m:.4f}  {time.time() - t0:.0f} s"
                results[f"engine_{prec}_map50"] = m
                if ref is None:
                    ref = (prec, m, dets)
                else:
                    frac, total = match_fraction(ref[2], dets)
                    d = abs(m - ref[1])
                    line += (f"; against {ref[0]}: |mAP difference| {d:.4f}, {frac * 100:.2f} % of "
                             f"its {total} detections matched (class, IoU >= 0.9, |score diff| <= 0.02)")
                    results[f"engine_{prec}_matched"] = frac
                    if args.max_precision_diff is not None and d > args.max_precision_diff:
                        line += f"\nFAIL: {prec}: |mAP difference| {d:.4f} > {args.max_precision_diff}"
                        ok = False
                    if args.min_matched is not None and frac < args.min_matched:
                        line += f"\nFAIL: {prec}: {frac:.4f} of the detections matched < {args.min_matched}"
                        ok = False
                print(line, flush=True)
    if args.distractors > 0:
        frames = [(train_demo.distractor_scene(args.seed, i), None, None)
                  for i in range(args.distractors)]
        thr = args.distractor_threshold
        sides = [("torchvision", lambda: run_torchvision(model, frames, args.threads))]
        if vd:
            sides.append(("engine", lambda: run_engine(vd, args.model, frames, workdir,
                                                       args.threads, args.threshold)))
        for name, run in sides:
            dets = run()
            hit = [[d for d in ds if d[1] > thr] for ds in dets]
            n_frames = sum(1 for h in hit if h)
            n_dets = sum(len(h) for h in hit)
            frac = n_frames / len(frames)
            labels = {}
            for h in hit:
                for _, _, label in h:
                    labels[config["class_names"][label]] = labels.get(config["class_names"][label], 0) + 1
            which = [i for i, h in enumerate(hit) if h]
            print(f"{name + ':':12s} frames without shapes: {n_frames}/{len(frames)} with a detection "
                  f"above {thr} ({n_dets} detections: {labels})"
                  + (f"; frames {which}" if which else ""), flush=True)
            results[f"{name}_distracted_frames"] = frac
            results[f"{name}_distracted_indices"] = which
            results[f"{name}_distractor_detections"] = n_dets
            if args.max_distracted is not None and frac > args.max_distracted:
                print(f"FAIL: {name}: {frac:.3f} of the frames without shapes have a detection "
                      f"(> {args.max_distracted})")
                ok = False
    if args.mine > 0:
        t0 = time.time()
        found = mine(model, args.model, vd, args.mine, args.mine_seed, args.mine_threshold,
                     args.threads, workdir)
        print(f"mined {len(found)} of {args.mine} frames without shapes (seed {args.mine_seed}) "
              f"with a detection above {args.mine_threshold} ({'engine' if vd else 'torchvision'}, "
              f"{time.time() - t0:.0f} s)", flush=True)
        with open(args.mine_out, "w") as f:
            json.dump({"model": args.model, "seed": args.mine_seed, "stream": train_demo.STREAM_MINE,
                       "candidates": args.mine, "threshold": args.mine_threshold,
                       "side": "engine" if vd else "torchvision",
                       "indices": [i for i, _ in found], "scores": [s for _, s in found]}, f, indent=1)
        results["mined"] = len(found)
    if args.mine_videotestsrc:
        from PIL import Image
        t0 = time.time()
        with open(os.path.join(args.mine_videotestsrc, "index.json")) as f:
            entries = json.load(f)["frames"]
        # candidates: each frame as it is, or (--mine-text K) K text keys of each frame
        keys = [(i, None) for i in range(len(entries))] if not args.mine_text else \
            [(i, (args.mine_seed, i, k)) for i in range(len(entries)) for k in range(args.mine_text)]
        answered = []
        for a in range(0, len(keys), 100):
            chunk = keys[a:a + 100]
            frames = []
            for i, key in chunk:
                with Image.open(os.path.join(args.mine_videotestsrc, entries[i]["file"])) as im:
                    img = np.array(im.convert("RGB"))
                if key is not None:
                    img = train_demo.pattern_text_frame(img, *key)
                frames.append((img, None, None))
            for (i, key), best in zip(chunk, best_scores(model, args.model, vd, frames,
                                                         args.mine_threshold, args.threads, workdir)):
                if best > args.mine_threshold:
                    answered.append(dict(entries[i], score=best, **({"text": list(key)} if key else {})))
        print(f"mined {len(answered)} of {len(keys)} videotestsrc frames with a detection above "
              f"{args.mine_threshold} ({'engine' if vd else 'torchvision'}, {time.time() - t0:.0f} s): "
              f"{sorted({e['pattern'] for e in answered})}", flush=True)
        with open(args.mine_out, "w") as f:
            json.dump({"model": args.model, "source": os.path.abspath(args.mine_videotestsrc),
                       "threshold": args.mine_threshold, "frames": answered}, f, indent=1)
        results["mined"] = len(answered)
    if args.bench > 0:
        b = bench(model, args.model, vd, args.bench, args.threads, workdir)
        print(f"640x480, {args.threads} threads, median (best) of {args.bench}: torchvision "
              f"{b['torchvision_ms']:.1f} ({b['torchvision_min_ms']:.1f}) ms/frame"
              + (f", vd-detect {b['vd_detect_ms']:.1f} ({b['vd_detect_min_ms']:.1f}) ms/frame"
                 if "vd_detect_ms" in b else ""))
        if vd and "vd_detect_ms" not in b:
            print("vd-detect timing output not understood:", b.get("vd_detect_stderr"))
        results["bench_640x480"] = b
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
