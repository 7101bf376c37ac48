#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The arm64 engine against the x86 engine, stage by stage (tests/debian13-arm64.sh,
phase "parity"; tests/arm64/parity.sh runs the engines).

The x86 engine (oneDNN, the layers torchvision's parity tests check on every run:
tests/parity) is the oracle; the arm64 engine runs the same model files on the same
frames under QEMU_CPU=neoverse-n1, where its convolutions, pooling and linear layers
run on XNNPACK (engine/cpu/vd_cpu_xnnpack.c) and every other op is the same plain C.
Both ran `vd-detect --dump D -p fp32 -t 2 --json FRAME...` (Mask R-CNN on the first
frame only: parity.sh says why); this compares what they wrote:

  parity.py frame OUT.ppm     writes the second frame (360x480, portrait: a
                              triangle, a ring and a box over a diagonal gradient;
                              the first frame, 320x240, is landscape: another
                              resized size and plan for every model)
  parity.py compare DIR       compares DIR/arm64/MODEL/ with DIR/x86/MODEL/ for
                              every MODEL in DIR/x86 (its file DIR/models/
                              MODEL.safetensors: the thresholds and limits);
                              exit 1 on any difference beyond the tolerances below
  parity.py perturb IN OUT TENSOR
                              IN with every weight of TENSOR (a safetensors name;
                              F32, F16 or BF16) 1 % larger: the self-check's
                              broken model

Each MODEL directory holds detections.json (vd-detect's JSON, a line per frame),
dump/I/*.npy (frame I's tensors) and info.txt (vd-detect --info: the layers that
ran). Needs numpy only.
"""
import json
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------------
# Tolerances, and why. Both engines evaluate the same float32 network from the same
# weights and the same input; they differ in the summation order of the layers'
# dot products only (oneDNN's blocked JIT kernels on x86, XNNPACK's NEON
# micro-kernels on arm64: another blocking of the reduction, another order of its
# partial sums, and Winograd or im2col where each library picks them). Every other
# op (preprocessing, anchors, box decoding, top-k, NMS, RoIAlign, softmax, sigmoid,
# mask pasting) is the engine's own plain C, compiled with -ffp-contract=off on both
# (no fused multiply-add where the source has none), so it rounds identically on
# both given identical inputs.
# ---------------------------------------------------------------------------------

# How the tolerances were set (2026-12-06, Debian 13's oneDNN 3.7.2 and XNNPACK
# 2024-11, the four models on both frames): "noise" is the largest difference
# between the arm64 engine under QEMU_CPU=neoverse-n1 and the x86 one with oneDNN at
# each of AVX-512, AVX2 and SSE4.1 (ONEDNN_MAX_CPU_ISA: CI machines differ, and so do
# oneDNN's kernels on them); "a weight 1 % off" is what one layer's weights 1 % off
# (parity.py perturb) moved, x86 against x86, for an early, a middle and a late layer
# of each model. Each tolerance sits well above the noise and well below what a
# wrong weight does, and the run prints the largest difference of every stage.

# The preprocessed input, its resized size and the anchors: the same C on the same
# bytes, no layer before them. Bit for bit (noise: none).
#
# The FPN levels: max|arm64 - x86| <= FEATURE_REL_TOL * max|x86| per level. A float32
# dot product of n terms summed in another order moves its result by about sqrt(n)
# ulps of its partial sums (1e-7..1e-6 of the values for the n = 576..4608 of these
# layers); ResNet-50's 53 convolutions and the FPN's top-down sums compound that.
# Noise: 1.3e-6..4.3e-6 on every model, level and x86 ISA. A weight 1 % off:
# 6e-4..8e-3 (ResNet-50 layer1 to layer4, MobileNetV3's block 11 and last
# convolution, the FPN), 1e-2..3e-2 for the bundled model's layer3; but 2.5e-5 for
# MobileNetV3's block 4 (a random MobileNet damps what its early blocks do: a blind
# spot of random weights, which the other models' early layers do not share).
# 3e-5 is 7x the noise.
#
# And channel by channel: the RMS of each channel's difference <= CHANNEL_REL_TOL *
# the RMS of the x86 channel, for the worst channel. A wrong weight moves some
# channels far more than the level's largest values, which other channels set.
# Noise: 2.3e-6..1.1e-5 (the most on the smallest levels, 4x5 and 2x3 pixels); a
# weight 1 % off: 1.6e-4 for MobileNetV3's block 4 too. 5e-5 is 4.5x the noise.
FEATURE_REL_TOL = 3e-5
CHANNEL_REL_TOL = 5e-5

# Proposals: each x86 proposal whose score is clear of the cut-offs (below) must have
# an arm64 proposal with IoU >= PROPOSAL_IOU and |score difference| <=
# SCORE_ABS_TOL, and the other way round. Noise: 1 - IoU 4.7e-5 (the boxes are
# decoded from the RPN head's deltas: a few ulps of the coordinates), 20x below; a
# weight 1 % off: 1 - IoU up to 1e-2, and most proposals unmatched.
PROPOSAL_IOU = 0.999
# Scores are sigmoids and softmaxes of logits within a few 1e-6 of their scale.
# Noise: 7.6e-6; a weight 1 % off: 3e-4..1e-3. A proposal or detection within
# SCORE_MARGIN of a cut-off (the score threshold, or the last score kept when a
# top-n limit was reached) may be on one side only: its rank against a near-equal
# score can flip. So may whatever NMS decides differently (below).
SCORE_ABS_TOL = 1e-4
SCORE_MARGIN = 5e-4
# NMS keeps a box unless a higher-scoring one overlaps it by more than the threshold:
# a box whose IoU with such a box (on either side) is within NMS_IOU_MARGIN of the
# threshold may be kept on one side only (IoUs move by 4.7e-5 at most, above).
NMS_IOU_MARGIN = 5e-4
# A detection is decoded from one proposal, by deltas that move it a little (random
# models: a tenth of a box; trained ones: to the object): one of its side's one-sided
# proposals overlapping it by SOURCE_IOU or more is taken for its source.
SOURCE_IOU = 0.5
# However many one-sided boxes are excused, no more than this fraction of a set may
# be, or MIN_ONE_SIDED (a tie at a cut-off makes two, one on each side, and what NMS
# then decides differently a pair more): ties touch a few, a broken engine many.
MAX_ONE_SIDED = 0.1
MIN_ONE_SIDED = 4

# The box head's outputs (class logits, box regression) of the proposals both sides
# share (IoU >= SHARED_IOU): max|diff| <= HEAD_REL_TOL * max|x86|. They sit
# downstream of RoIAlign on the features and of two linear layers of 12544
# (ResNet-50: 256x7x7) and 1024 inputs. Noise: 1.4e-6..1.1e-5; a weight 1 % off
# (fc6): 1e-2, and a wrong layout of the flattened RoI features changes them by
# 1e-2..1. 1e-4 is 9x the noise.
SHARED_IOU = 0.9999
HEAD_REL_TOL = 1e-4

# Final detections: the same label, IoU >= DETECTION_IOU, |score difference| <=
# SCORE_ABS_TOL, every one clear of the cut-offs matched both ways. The bundled
# model (trained, its scores far from the threshold: 0.99 and more for the frames'
# shapes) must match every detection, none excused, each box coordinate within
# BOX_ABS_TOL pixels of the frame. Noise: 6.1e-5 pixel (two float32 ulps at
# 256..512); a weight 1 % off (its layer3): 0.06..0.09 pixel. 0.01 is 160x the
# noise.
DETECTION_IOU = 0.999
BOX_ABS_TOL = 0.01

# Mask R-CNN: the mask features (RoIAlign of the FPN levels at the shared
# detections' boxes) within FEATURE_REL_TOL of their scale, as the levels they
# sample (noise: 3.3e-6); the mask logits (four 3x3 convolutions of 2304 inputs, a
# transposed convolution and a 1x1 after them) within MASK_LOGIT_REL_TOL of their
# scale (noise: 5.6e-6; a weight 1 % off in the head or the transposed convolution:
# 1e-2); the probabilities (sigmoids of those logits, slope <= 1/4) within
# MASK_PROB_ABS_TOL (noise: 1.8e-6; a weight 1 % off: 4e-3). The pasted masks are
# those probabilities resized and thresholded at 0.5: a pixel may flip only where
# the probability is within the noise of 0.5, so at most MASK_PIXEL_FRACTION of a
# mask's pixels may differ (noise: none; a weight 1 % off: none either, which is why
# the probabilities are compared).
MASK_LOGIT_REL_TOL = 1e-4
MASK_PROB_ABS_TOL = 1e-4
MASK_PIXEL_FRACTION = 0.01


class Report:
    """Every check's line (compare.log has them all; the run's output, the failures)."""

    def __init__(self):
        self.lines = []
        self.failures = []

    def check(self, where, ok, message):
        self.lines.append(f"  {'ok  ' if ok else 'FAIL'} {where}: {message}")
        if not ok:
            self.failures.append(f"{where}: {message}")
        return ok


# ---------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------

def model_config(path):
    """The model file's configuration (safetensors __metadata__)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["config"])


def load_dump(d):
    return {name[:-4]: np.load(os.path.join(d, name)) for name in sorted(os.listdir(d))
            if name.endswith(".npy")}


def load_detections(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------
# boxes
# ---------------------------------------------------------------------------------

def iou_matrix(a, b):
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match(boxes_a, scores_a, boxes_b, scores_b, labels_a=None, labels_b=None, iou_min=0.99,
          score_tol=SCORE_ABS_TOL):
    """Greedy one-to-one matching in A's (descending) score order: each A box takes
    the unused B box of the same label with the highest IoU >= iou_min and a score
    within score_tol. Returns (pairs [(i, j)], iou matrix); j = -1 when unmatched."""
    iou = iou_matrix(boxes_a, boxes_b)
    ok = iou >= iou_min
    ok &= np.abs(np.asarray(scores_a, np.float64)[:, None]
                 - np.asarray(scores_b, np.float64)[None, :]) <= score_tol
    if labels_a is not None:
        ok &= np.asarray(labels_a)[:, None] == np.asarray(labels_b)[None, :]
    used = np.zeros(iou.shape[1], bool)
    pairs = []
    for i in range(iou.shape[0]):
        cand = np.nonzero(ok[i] & ~used)[0]
        if len(cand) == 0:
            pairs.append((i, -1))
            continue
        j = int(cand[np.argmax(iou[i, cand])])
        used[j] = True
        pairs.append((i, j))
    return pairs, iou


def first_excuse(i, a, b, cut, nms_thresh, sources):
    """Why box i of set a (one side) may be missing from set b (the other side), or
    None: its score is within SCORE_MARGIN of a cut-off (cut: the score threshold, or
    the other side's last kept score when it reached its top-n limit); or NMS may have
    decided differently about it: a box of the same label (proposals: any box, their
    levels not being dumped) scoring at least as much, on either side, overlaps it
    within NMS_IOU_MARGIN of the threshold; or (detections) the proposal it was
    decoded from is on this side only: sources, that side's one-sided proposals in
    frame coordinates, has one overlapping it by SOURCE_IOU or more."""
    s = float(a["scores"][i])
    box = np.asarray(a["boxes"])[i:i + 1]
    if s < cut + SCORE_MARGIN:
        return f"score within {SCORE_MARGIN:g} of the cut-off {cut:.6f}"
    for name, c in (("this side", a), ("the other side", b)):
        if len(c["scores"]) == 0:
            continue
        iou = iou_matrix(box, c["boxes"])[0]
        near = np.asarray(c["scores"], np.float64) >= s - SCORE_MARGIN
        if a["labels"] is not None:
            near &= np.asarray(c["labels"]) == a["labels"][i]
        near &= np.abs(iou - nms_thresh) <= NMS_IOU_MARGIN
        if c is a:
            near[i] = False
        if near.any():
            k = int(np.nonzero(near)[0][0])
            return (f"IoU {iou[k]:.5f} with a box of score {float(c['scores'][k]):.6f} on "
                    f"{name}: within {NMS_IOU_MARGIN:g} of NMS's {nms_thresh:g}")
    if sources is not None and len(sources):
        iou = iou_matrix(box, sources)[0]
        if iou.max() >= SOURCE_IOU:
            return f"its proposal is on this side only (IoU {iou.max():.3f})"
    return None


def compare_sets(report, where, ref, arm, cut_ref, cut_arm, nms_thresh, iou_min,
                 box_abs_tol=None, sources=None, strict=False):
    """ref and arm: dicts of boxes [n][4], scores [n], labels [n] or None. Matches
    both ways; every box without a partner must have an excuse: first_excuse(), or a
    box on one side only (itself excused) that scores at least as much and overlaps it
    beyond NMS's threshold less NMS_IOU_MARGIN (on its side it may have suppressed
    this one, or on the other side been there to), repeated until nothing changes;
    and no more than MAX_ONE_SIDED (MIN_ONE_SIDED) of them. strict: no excuse at all. sources: per
    side ("x86", "arm64"), that side's one-sided proposals in the same coordinates.
    Returns (pairs (x86 index, arm64 index), IoU matrix, numbers, one-sided boxes per
    side)."""
    pairs, iou = match(ref["boxes"], ref["scores"], arm["boxes"], arm["scores"],
                       ref["labels"], arm["labels"], iou_min)
    matched = [(i, j) for i, j in pairs if j >= 0]
    used = {j for _, j in matched}
    sets = {"x86": ref, "arm64": arm}
    one_sided = {"x86": [i for i, j in pairs if j < 0],
                 "arm64": [j for j in range(len(arm["scores"])) if j not in used]}
    other = {"x86": "arm64", "arm64": "x86"}
    cuts = {"x86": cut_arm, "arm64": cut_ref}   # the cut-off of the side it is missing from
    why = {}
    if not strict:
        for side, idx in one_sided.items():
            for k in idx:
                w = first_excuse(k, sets[side], sets[other[side]], cuts[side], nms_thresh,
                                 None if sources is None else sources[side])
                if w is not None:
                    why[(side, k)] = w
        changed = True
        while changed:
            changed = False
            for side, idx in one_sided.items():
                a = sets[side]
                for k in idx:
                    if (side, k) in why:
                        continue
                    for (s2, k2), _ in list(why.items()):
                        b = sets[s2]
                        if (float(b["scores"][k2]) < float(a["scores"][k]) - SCORE_MARGIN
                                or (a["labels"] is not None and b["labels"][k2] != a["labels"][k])):
                            continue
                        o = float(iou_matrix(np.asarray(a["boxes"])[k:k + 1],
                                             np.asarray(b["boxes"])[k2:k2 + 1])[0, 0])
                        if o > nms_thresh - NMS_IOU_MARGIN:
                            why[(side, k)] = (f"IoU {o:.3f} with {s2} #{k2}, itself on one side "
                                              f"only, scoring more")
                            changed = True
                            break

    def describe(side, k):
        a, b = sets[side], sets[other[side]]
        text = (f"{side} #{k} score {float(a['scores'][k]):.6f}"
                + (f" label {int(a['labels'][k])}" if a["labels"] is not None else "")
                + f" box {np.round(np.asarray(a['boxes'][k], np.float64), 3).tolist()}")
        if (side, k) in why:
            return text + ": " + why[(side, k)]
        if len(b["scores"]):
            o = iou_matrix(np.asarray(a["boxes"])[k:k + 1], b["boxes"])[0]
            n = int(np.argmax(o))
            text += (f" (nearest on the other side: IoU {o[n]:.5f}, score "
                     f"{float(b['scores'][n]):.6f})")
        return text

    problems = [describe(side, k) for side, idx in one_sided.items() for k in idx
                if (side, k) not in why]
    excused = [describe(side, k) for side, k in why]
    limit = max(MIN_ONE_SIDED, int(MAX_ONE_SIDED * max(len(ref["scores"]), len(arm["scores"]))))
    if len(excused) > limit:
        problems.insert(0, f"{len(excused)} on one side only near a cut-off or an NMS tie, "
                           f"more than {MAX_ONE_SIDED:g} of them ({limit}) can be")
    ds = max([abs(float(ref["scores"][i]) - float(arm["scores"][j])) for i, j in matched],
             default=0.0)
    miou = min([float(iou[i, j]) for i, j in matched], default=1.0)
    stats = {"score": ds, "iou": miou}
    msg = (f"x86 {len(ref['scores'])}, arm64 {len(arm['scores'])}, {len(matched)} matched "
           f"(IoU >= {iou_min:g}: min {miou:.6f}; max|score diff| {ds:.3g}, tol {SCORE_ABS_TOL:g})")
    if box_abs_tol is not None and matched:
        db = max(float(np.abs(np.asarray(ref["boxes"][i], np.float64)
                              - np.asarray(arm["boxes"][j], np.float64)).max()) for i, j in matched)
        msg += f", max|box diff| {db:.3g} px (tol {box_abs_tol:g})"
        stats["box"] = db
        if db > box_abs_tol:
            problems.append(f"box difference {db:.3g} px > {box_abs_tol:g}")
    if excused:
        msg += f"; {len(excused)} on one side only, excused: " + "; ".join(excused[:4])
    if problems:
        msg += f"; {len(problems)} failing: " + "; ".join(problems[:4])
    report.check(where, not problems, msg)
    stats["one-sided"] = len(excused)
    boxes = {side: np.asarray(sets[side]["boxes"], np.float64).reshape(-1, 4)[idx]
             for side, idx in one_sided.items()}
    return matched, iou, stats, boxes


# ---------------------------------------------------------------------------------
# one frame
# ---------------------------------------------------------------------------------

def rel_diff(a, r):
    d = np.abs(a.astype(np.float64) - r.astype(np.float64))
    scale = float(np.abs(r).max()) if r.size else 0.0
    dmax = float(d.max()) if d.size else 0.0
    return dmax, (dmax / scale if scale > 0 else dmax), scale


def channel_diff(a, r):
    """The worst channel of NCHW tensors: (RMS of its difference / its RMS, index)."""
    d = a.astype(np.float64) - r.astype(np.float64)
    dc = np.sqrt((d ** 2).mean(axis=(0, 2, 3)))
    rc = np.sqrt((r.astype(np.float64) ** 2).mean(axis=(0, 2, 3)))
    rel = np.where(rc > 0, dc / np.where(rc > 0, rc, 1.0), np.where(dc > 0, np.inf, 0.0))
    c = int(np.argmax(rel))
    return float(rel[c]), c


def compare_frame(report, tag, cfg, ref_dump, arm_dump, ref_json, arm_json, worst):
    def need(name):
        ok = name in ref_dump and name in arm_dump
        if not ok:
            report.check(f"{tag} {name}", False,
                         f"missing from the {'x86' if name not in ref_dump else 'arm64'} dump")
        return ok

    def shapes_agree(name):
        a, r = arm_dump[name], ref_dump[name]
        if a.shape == r.shape:
            return True
        return report.check(f"{tag} {name}", False, f"shape x86 {list(r.shape)}, arm64 {list(a.shape)}")

    def note(stage, value):
        worst[stage] = max(worst.get(stage, 0.0), value)

    for name in ("image_size", "input", "anchors"):
        if need(name) and shapes_agree(name):
            a, r = arm_dump[name], ref_dump[name]
            n_bad = int(np.count_nonzero(a.view(np.uint32) != r.view(np.uint32)))
            d = float(np.abs(a.astype(np.float64) - r).max()) if a.size else 0.0
            note(name, d)
            report.check(f"{tag} {name}", n_bad == 0,
                         f"shape {list(r.shape)}, {n_bad} values differ in their bits "
                         f"(max|diff| {d:.3g}; must be bit-exact)")

    for name in sorted(k for k in ref_dump if k.startswith("fpn.")):
        if need(name) and shapes_agree(name):
            d, rel, scale = rel_diff(arm_dump[name], ref_dump[name])
            ch, c = channel_diff(arm_dump[name], ref_dump[name])
            note(name, rel)
            note(name + " (channel)", ch)
            report.check(f"{tag} {name}", rel <= FEATURE_REL_TOL and ch <= CHANNEL_REL_TOL,
                         f"shape {list(ref_dump[name].shape)}, max|diff| {d:.3g} = {rel:.3g} of "
                         f"max|x86| {scale:.3g} (tol {FEATURE_REL_TOL:g}); worst channel {c}: "
                         f"RMS of its difference {ch:.3g} of its RMS (tol {CHANNEL_REL_TOL:g})")

    # proposals: the RPN's score threshold, or the last kept score when it kept its
    # post-NMS limit
    rpn = cfg["rpn"]
    if not (need("proposals") and need("proposal_scores")):
        return

    def cut(scores, limit, thresh):
        return float(scores[-1]) if len(scores) >= limit else float(thresh)

    rp = {"boxes": ref_dump["proposals"], "scores": ref_dump["proposal_scores"], "labels": None}
    ap = {"boxes": arm_dump["proposals"], "scores": arm_dump["proposal_scores"], "labels": None}
    pairs, iou, st, one_sided = compare_sets(
        report, f"{tag} proposals", rp, ap,
        cut(rp["scores"], rpn["post_nms_top_n"], rpn["score_thresh"]),
        cut(ap["scores"], rpn["post_nms_top_n"], rpn["score_thresh"]),
        rpn["nms_thresh"], PROPOSAL_IOU)
    note("proposal_scores", st["score"])
    note("proposals (1 - IoU)", 1.0 - st["iou"])
    note("proposals on one side only", st["one-sided"])

    shared = [(i, j) for i, j in pairs if iou[i, j] >= SHARED_IOU]
    for name in ("box_logits", "box_regression"):
        if not need(name):
            continue
        a, r = arm_dump[name], ref_dump[name]
        if not shared or a.shape[1:] != r.shape[1:]:
            report.check(f"{tag} {name}", False, f"shape x86 {list(r.shape)}, arm64 {list(a.shape)}, "
                         f"{len(shared)} shared proposals")
            continue
        ii = np.array([i for i, _ in shared])
        jj = np.array([j for _, j in shared])
        d, rel, _ = rel_diff(a[jj], r[ii])
        scale = float(np.abs(r).max())
        rel = d / scale if scale > 0 else d
        note(name, rel)
        report.check(f"{tag} {name}", rel <= HEAD_REL_TOL,
                     f"max|diff| {d:.3g} = {rel:.3g} of max|x86| {scale:.3g} over {len(shared)} "
                     f"shared proposals (tol {HEAD_REL_TOL:g})")

    # detections
    roi = cfg["roi_heads"]

    def dets(result):
        d = result.get("detections", [])
        return {"boxes": np.array([x["box"] for x in d], np.float64).reshape(-1, 4),
                "scores": np.array([x["score"] for x in d], np.float64),
                "labels": np.array([x["label"] for x in d], np.int64), "raw": d}

    rd, ad = dets(ref_json), dets(arm_json)
    report.check(f"{tag} frame size", (ref_json["width"], ref_json["height"])
                 == (arm_json["width"], arm_json["height"]),
                 f"x86 {ref_json['width']}x{ref_json['height']}, "
                 f"arm64 {arm_json['width']}x{arm_json['height']}")
    # the one-sided proposals in the frame's coordinates (the detections')
    rh, rw = (float(v) for v in np.asarray(ref_dump["image_size"]).reshape(-1)[:2])
    scale = np.array([ref_json["width"] / rw, ref_json["height"] / rh] * 2)
    sources = {side: b * scale for side, b in one_sided.items()}
    # the bundled model (trained): every detection matched, boxes within BOX_ABS_TOL
    trained = cfg.get("num_classes", 0) < 91
    dpairs, diou, st, _ = compare_sets(
        report, f"{tag} detections", rd, ad,
        cut(rd["scores"], roi["detections_per_img"], roi["score_thresh"]),
        cut(ad["scores"], roi["detections_per_img"], roi["score_thresh"]),
        roi["nms_thresh"], DETECTION_IOU, BOX_ABS_TOL if trained else None, sources,
        strict=trained)
    note("detection_scores", st["score"])
    note("detections (1 - IoU)", 1.0 - st["iou"])
    note("detections on one side only", st["one-sided"])
    if "box" in st:
        note("boxes (px)", st["box"])
    if trained:
        report.check(f"{tag} detections (trained model)", len(rd["scores"]) > 0,
                     f"x86 {sorted(x['label_name'] for x in rd['raw'])}, arm64 "
                     f"{sorted(x['label_name'] for x in ad['raw'])}: every one matched, none "
                     f"excused")

    if "mask_probs" not in ref_dump:
        return
    dshared = [(i, j) for i, j in dpairs if diou[i, j] >= SHARED_IOU]
    for name, tol, relative in (("mask_features", FEATURE_REL_TOL, True),
                                ("mask_logits", MASK_LOGIT_REL_TOL, True),
                                ("mask_probs", MASK_PROB_ABS_TOL, False)):
        if not need(name):
            continue
        a, r = arm_dump[name], ref_dump[name]
        if not dshared or a.shape[1:] != r.shape[1:]:
            report.check(f"{tag} {name}", len(rd["scores"]) == 0 and len(ad["scores"]) == 0,
                         f"shape x86 {list(r.shape)}, arm64 {list(a.shape)}, {len(dshared)} shared "
                         f"detections")
            continue
        ii = np.array([i for i, _ in dshared])
        jj = np.array([j for _, j in dshared])
        d, rel, scale = rel_diff(a[jj], r[ii])
        scale = float(np.abs(r).max())
        value = (d / scale if scale > 0 else d) if relative else d
        note(name, value)
        what = f"= {value:.3g} of max|x86| {scale:.3g}" if relative else "(probabilities)"
        report.check(f"{tag} {name}", value <= tol,
                     f"max|diff| {d:.3g} {what} over {len(dshared)} shared detections (tol {tol:g})")
    worst_frac, n_masks = 0.0, 0
    for i, j in dshared:
        mr, ma = rd["raw"][i].get("mask"), ad["raw"][j].get("mask")
        if mr is None or ma is None:
            report.check(f"{tag} masks", False, f"x86 #{i} or arm64 #{j} has no mask")
            return
        pr, pa = decode_mask(mr, ref_json), decode_mask(ma, arm_json)
        worst_frac = max(worst_frac, np.count_nonzero(pr != pa) / max(1, np.count_nonzero(pr | pa)))
        n_masks += 1
    note("masks (pixels differing)", worst_frac)
    report.check(f"{tag} masks", worst_frac <= MASK_PIXEL_FRACTION,
                 f"{n_masks} pasted masks, at most {100 * worst_frac:.3g} % of a mask's pixels "
                 f"differ (tol {100 * MASK_PIXEL_FRACTION:g} %)")


def decode_mask(m, result):
    """A detection's mask as a frame-sized boolean array."""
    import base64
    full = np.zeros((result["height"], result["width"]), bool)
    data = np.frombuffer(base64.b64decode(m["data"]), np.uint8).reshape(m["height"], m["width"])
    full[m["y"]:m["y"] + m["height"], m["x"]:m["x"] + m["width"]] = data > 0
    return full


# ---------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------

def compare(top):
    models = sorted(os.listdir(os.path.join(top, "x86")))
    if not models:
        print(f"parity: nothing in {top}/x86", file=sys.stderr)
        return 1
    failures, summary, log = [], [], []
    for model in models:
        cfg = model_config(os.path.join(top, "models", model + ".safetensors"))
        ref_dir, arm_dir = os.path.join(top, "x86", model), os.path.join(top, "arm64", model)
        head = [f"{model}:"]
        for side, d in (("x86", ref_dir), ("arm64", arm_dir)):
            info = os.path.join(d, "info.txt")
            if os.path.exists(info):
                for line in open(info):
                    if line.startswith("engine: "):
                        head.append(f"  {side}: {line[8:].strip()}")
        report = Report()
        worst = {}
        if not os.path.isdir(arm_dir):
            report.check("arm64", False, f"no {arm_dir}")
        else:
            ref_json = load_detections(os.path.join(ref_dir, "detections.json"))
            arm_json = load_detections(os.path.join(arm_dir, "detections.json"))
            report.check("frames", len(ref_json) == len(arm_json) > 0,
                         f"x86 {len(ref_json)}, arm64 {len(arm_json)}")
            for k in range(min(len(ref_json), len(arm_json))):
                compare_frame(report, f"frame {k}", cfg,
                              load_dump(os.path.join(ref_dir, "dump", str(k))),
                              load_dump(os.path.join(arm_dir, "dump", str(k))),
                              ref_json[k], arm_json[k], worst)
        n_ok = len(report.lines) - len(report.failures)
        head.append(f"  {n_ok} of {len(report.lines)} checks passed")
        print("\n".join(head + [line for line in report.lines if line.startswith("  FAIL")]))
        log += head + report.lines
        failures += [f"{model}: {f}" for f in report.failures]
        summary.append(f"  {model}: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    summary.insert(0, "largest differences (fpn, box and mask tensors: of max|x86|; scores, "
                      "mask probabilities, boxes: absolute; proposals and detections: 1 - IoU; "
                      "masks: the fraction of a mask's pixels):")
    print("\n".join(summary))
    with open(os.path.join(top, "compare.log"), "w") as f:
        f.write("\n".join(log + summary) + "\n")
    if failures:
        print(f"parity: {len(failures)} check(s) failed (every check: {top}/compare.log); "
              f"the first: {failures[0]}")
        return 1
    print(f"parity: {len(models)} models, every stage within its tolerance (every check: "
          f"{top}/compare.log)")
    return 0


def frame(path):
    """360x480 RGB, portrait: a diagonal gradient, a green triangle, an orange ring, a
    small magenta box; drawn with numpy alone."""
    w, h = 360, 480
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, 3), np.float64)
    t = (x + y) / (w + h)
    img[..., 0] = 40 + 80 * t
    img[..., 1] = 70 + 50 * (1 - t)
    img[..., 2] = 90 + 60 * t
    # triangle: apex (120, 40), base from (40, 190) to (200, 190)
    tri = (y <= 190) & (y >= 40) & (np.abs(x - 120) <= (y - 40) * 80 / 150 + 0.5)
    img[tri] = (40, 200, 60)
    # ring: centre (230, 320), radii 65 and 38
    r2 = (x - 230) ** 2 + (y - 320) ** 2
    img[(r2 <= 65 ** 2) & (r2 >= 38 ** 2)] = (240, 150, 30)
    img[(x >= 40) & (x < 100) & (y >= 380) & (y < 440)] = (200, 40, 200)
    data = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h) + data.tobytes())
    return 0


def perturb(src, dst, tensor):
    """Copies the safetensors file src to dst with every value of tensor (F32, F16 or
    BF16) multiplied by 1.01: one layer's weights 1 % off."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    t = header[tensor]
    begin, end = (8 + n + o for o in t["data_offsets"])
    raw = bytes(data[begin:end])
    if t["dtype"] == "F32":
        out = (np.frombuffer(raw, "<f4") * np.float32(1.01)).astype("<f4").tobytes()
    elif t["dtype"] == "F16":
        out = (np.frombuffer(raw, "<f2").astype(np.float32) * np.float32(1.01)).astype("<f2").tobytes()
    elif t["dtype"] == "BF16":
        wide = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32) * np.float32(1.01)
        out = (wide.view(np.uint32) >> 16).astype("<u2").tobytes()   # truncated: still ~1 % off
    else:
        print(f"parity: {tensor} is {t['dtype']}, not F32, F16 or BF16", file=sys.stderr)
        return 1
    data[begin:end] = out
    with open(dst, "wb") as f:
        f.write(data)
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "frame":
        return frame(argv[2])
    if len(argv) == 3 and argv[1] == "compare":
        return compare(argv[2])
    if len(argv) == 5 and argv[1] == "perturb":
        return perturb(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
