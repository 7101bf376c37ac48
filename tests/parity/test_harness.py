#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Self-test of the parity harness (parity_common.py), torchvision against itself; needs
no engine. On a small calibrated ResNet-18-FPN (min/max size 320/512) it checks that

  * reference(), which runs torchvision step by step to expose the internals, gives
    bit for bit the detections of model(images), and stays within the detection
    tolerances when the box head runs torch's own nn.Linear (netlib BLAS) instead of
    the oneDNN 1x1 convolutions used for speed;
  * reference() on calibrate()'s cached tensors (the FPN features and the box head's
    output, which run_parity reuses) gives bit for bit what it gives computing them;
  * the resize-scale rule the exporter records for this torchvision gives the size its
    reference resizes to (319x479 for 427x640 with 0.14.1's float32 scale);
    resize_scale_as() gives the other rule's size there (320x479 with the double
    scale) and changes nothing where both agree;
  * the comparison passes on identical outputs (including the 9-significant-digit
    JSON round trip) and fails, at the expected stage, on planted bugs: norm-layer
    eps 0 instead of 1e-5, one convolution off by 1 %, a one-pixel resize difference
    (an engine resizing with the other rule than the file's), scores off by 2e-3, no
    detections at all.
"""
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, pc.TOOLSDIR)
import export_torchvision  # noqa: E402

CLASSES = ["__background__", "a", "b", "c", "d"]


def engine_output(ref, h, w):
    """What a perfect engine would print and dump for ref."""
    dets = [{"box": [float("%.9g" % v) for v in b], "score": float("%.9g" % s), "label": int(l),
             "label_name": CLASSES[int(l)]}
            for b, s, l in zip(ref["boxes"], ref["scores"], ref["labels"])]
    dump = {k: v for k, v in ref.items() if not k.startswith("_") and k not in ("boxes", "scores", "labels")}
    return {"width": w, "height": h, "detections": dets}, dump


def compare(title, ref, result, dump, hw):
    pc.log(f"{title}:")
    report = pc.Report(title)
    stats = {}
    pc.compare_image(report, ref, result, dump, CLASSES, hw, stats)
    return report.first_failure(), stats


def main():
    args = pc.start(__doc__, engine=False)
    failures = []

    def expect(cond, what):
        pc.log(f"{'ok  ' if cond else 'FAIL'} {what}")
        if not cond:
            failures.append(what)

    t0 = time.monotonic()
    model = pc.build_resnet_fpn(18, len(CLASSES), 320, 512, seed=7)
    img_a = pc.synthetic_image(240, 320, 71)   # float32 and double scales agree
    img_b = pc.synthetic_image(427, 640, 71)   # they do not: 319x479 against 320x479
    cache = []
    pc.log(pc.calibrate(model, [img_a, img_b], cache=cache))

    ref = pc.reference(model, img_a)
    pc.log(f"reference 240x320: {len(ref['proposals'])} proposals, {len(ref['scores'])} detections, "
           f"(total, <0.5, >=0.5) = {pc.describe_detections(ref['scores'], model.roi_heads.score_thresh)}")
    expect(pc.reference_matches_model(model, img_a, ref), "reference() == model(images) bit for bit")
    # the resize-scale rule this torchvision has (the exporter's probe), and the other
    rule = export_torchvision.resize_scale_rule(model.transform)
    other = "double" if rule == "float32" else "float32"
    with pc.resize_scale_as(other):
        ref_a = pc.reference(model, img_a)
    expect(np.array_equal(ref_a["boxes"], ref["boxes"]), "the resize patch changes nothing at 240x320")

    # nn.Linear on netlib against the oneDNN 1x1 convolutions.
    t = time.monotonic()
    with torch.no_grad():
        det = model([pc.to_tensor(img_a)])[0]
    netlib = {"width": 320, "height": 240, "detections": [
        {"box": b.tolist(), "score": float(s), "label": int(l), "label_name": CLASSES[int(l)]}
        for b, s, l in zip(det["boxes"], det["scores"], det["labels"])]}
    first, stats = compare("netlib nn.Linear vs oneDNN", ref, netlib, engine_output(ref, 240, 320)[1], (240, 320))
    expect(first is None, f"box head on netlib nn.Linear within the detection tolerances "
                          f"(max|score diff| {stats.get('score_diff', 0):.3g}, {time.monotonic() - t:.1f} s)")

    ref_b = pc.reference(model, img_b)
    with pc.resize_scale_as(other):
        ref_b_other = pc.reference(model, img_b)
    # run_parity's reference reuses calibrate()'s tensors (calibrated with torchvision
    # as it is): the same result, bit for bit; not at 427x640 patched, resized otherwise
    for title, img, patched, full, cached, reused in (
            ("240x320", img_a, False, ref, cache[0], True),
            ("240x320 patched", img_a, True, ref_a, cache[0], True),
            ("427x640", img_b, False, ref_b, cache[1], True),
            ("427x640 patched", img_b, True, ref_b_other, cache[1], False)):
        with pc.resize_scale_as(other if patched else None):
            r = pc.reference(model, img, cached)
        same = sorted(r) == sorted(full) and all(
            np.array_equal(r[k], full[k]) for k in full if not k.startswith("_"))
        expect(same and r["_box_features_cached"] == reused and not full["_box_features_cached"],
               f"{title}: reference() given calibrate()'s features and box-head output == "
               f"reference() computing them, bit for bit ({'reused' if reused else 'not reused'})")
    sizes = {r: list(pc.resized_size(427, 640, 320, 512, r)) for r in (rule, other)}
    expect(sizes == {"float32": [319, 479], "double": [320, 479]}
           and ref_b["image_size"].tolist() == sizes[rule]
           and ref_b_other["image_size"].tolist() == sizes[other],
           f"427x640 resized to {ref_b['image_size'].tolist()} with the {rule} resize scale the "
           f"exporter records for torchvision {torchvision.__version__}, to "
           f"{ref_b_other['image_size'].tolist()} patched to the {other} one")

    # Identical outputs pass; the spread check holds on this reference.
    report = pc.Report("spread")
    expect(pc.check_reference_spread(report, ref, model.roi_heads.score_thresh), "reference spread")
    result, dump = engine_output(ref, 240, 320)
    first, stats = compare("identical", ref, result, dump, (240, 320))
    expect(first is None, "identical outputs pass")

    # Planted bugs.
    bad = copy.deepcopy(model)
    for m in pc.norm_layers(bad):
        m.eps = 0.0
    r = pc.reference(bad, img_a)
    first, stats = compare("eps 0 instead of 1e-5", ref, *engine_output(r, 240, 320), (240, 320))
    expect(first is not None and first[0].startswith("fpn."),
           f"eps 0 caught at {first[0] if first else None} (feature diff {stats.get('feature_rel', 0):.3g} of max|ref|)")

    bad = copy.deepcopy(model)
    bad.backbone.body.layer3[0].conv2.weight.mul_(1.01)
    r = pc.reference(bad, img_a)
    first, stats = compare("layer3.0.conv2 x1.01", ref, *engine_output(r, 240, 320), (240, 320))
    expect(first is not None and first[0].startswith("fpn."),
           f"conv off by 1 % caught at {first[0] if first else None} "
           f"(feature diff {stats.get('feature_rel', 0):.3g} of max|ref|)")

    # an engine resizing with the other rule than the file's
    first, _ = compare("other resize scale", ref_b, *engine_output(ref_b_other, 427, 640), (427, 640))
    expect(first is not None and first[0] == "image_size", f"one-pixel resize caught at {first[0] if first else None}")

    result, dump = engine_output(ref, 240, 320)
    for d in result["detections"]:
        d["score"] -= 2e-3
    first, _ = compare("scores - 2e-3", ref, result, dump, (240, 320))
    expect(first is not None and first[0] == "detections", f"score offset caught at {first[0] if first else None}")

    result, dump = engine_output(ref, 240, 320)
    result["detections"] = []
    first, _ = compare("no detections", ref, result, dump, (240, 320))
    expect(first is not None and first[0] == "detections", f"empty output caught at {first[0] if first else None}")

    pc.log(f"SUMMARY harness: {len(failures)} failures; {time.monotonic() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
