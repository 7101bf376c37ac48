#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The CPU small ops against torchvision's own implementations, bit for bit.

roi_align, nms, the per-class batched_nms, BoxCoder.decode, AnchorGenerator,
LevelMapper, softmax and sigmoid of torch 1.13 / torchvision 0.14.1 (CPU) on
random inputs, compared with the engine's ops through tests/engine/ops_module.c
(ctypes), and GeneralizedRCNNTransform's resized sizes under the resize-scale rule
tools/export_torchvision.py records for the torchvision running this script.
Everything must be identical, except top-k whose tie order torch does not define
(the values must match). meson runs it with ATEN_CPU_CAPABILITY=avx2: torch's
softmax sums in the lanes of its CPU capability (16 with AVX-512 in torch 2.6, a
last-bit difference), and the engine reproduces its AVX2 kernels.

Usage: ops_vs_torchvision.py LIBVDOPS.so. Exit 77 (skip) without torchvision.
"""
import ctypes
import os
import sys

try:
    import numpy as np
    import torch
    from torchvision.models.detection._utils import BoxCoder
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.image_list import ImageList
    from torchvision.models.detection.transform import GeneralizedRCNNTransform
    from torchvision.ops import nms, roi_align
    from torchvision.ops.boxes import _batched_nms_vanilla
    from torchvision.ops.poolers import LevelMapper
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import export_torchvision  # noqa: E402

from ops_common import check, failures, load_ops_module, ptr  # noqa: E402

lib = load_ops_module()


def random_boxes(rng, n, width, height, max_side):
    x1 = rng.uniform(-0.05 * width, width, n)
    y1 = rng.uniform(-0.05 * height, height, n)
    w = rng.uniform(0, max_side, n) * rng.choice([0.005, 1.0], n, p=[0.1, 0.9])
    h = rng.uniform(0, max_side, n)
    return np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)


def test_roi_align(rng):
    c, h, w = 64, 50, 76  # a stride-16 level of an 800x1216 input
    feat = rng.standard_normal((1, c, h, w)).astype(np.float32)
    nhwc = np.ascontiguousarray(feat[0].transpose(1, 2, 0))
    rois = random_boxes(rng, 300, 1216, 800, 500)
    for sampling in (2, 0):
        ref = roi_align(torch.from_numpy(feat), [torch.from_numpy(rois)], (7, 7),
                        spatial_scale=1 / 16, sampling_ratio=sampling, aligned=False).numpy()
        out = np.zeros((len(rois), 7, 7, c), np.float32)
        lib.vdt_roi_align_nhwc(ptr(nhwc), h, w, c, ptr(rois), len(rois), ctypes.c_float(1 / 16),
                               7, sampling, ptr(out))
        out = out.transpose(0, 3, 1, 2)
        check(f"roi_align sampling_ratio={sampling}", np.array_equal(out, ref),
              f"max |diff| {np.abs(out - ref).max():.3g}")


def test_nms(rng):
    n = 2000
    boxes = random_boxes(rng, n, 1000, 700, 200)
    scores = np.round(rng.uniform(0, 1, n), 2).astype(np.float32)  # many ties
    groups = rng.integers(0, 5, n).astype(np.int32)
    keep = np.zeros(n, np.int32)
    for thr in (0.5, 0.7):
        ref = nms(torch.from_numpy(boxes), torch.from_numpy(scores), thr).numpy()
        k = lib.vdt_nms(ptr(boxes), ptr(scores), n, ctypes.c_float(thr), ptr(keep))
        check(f"nms {thr}", np.array_equal(keep[:k], ref), f"{k} kept, torchvision {len(ref)}")
        ref = _batched_nms_vanilla(torch.from_numpy(boxes), torch.from_numpy(scores),
                                   torch.from_numpy(groups).long(), thr).numpy()
        k = lib.vdt_batched_nms(ptr(boxes), ptr(scores), ptr(groups), n, ctypes.c_float(thr),
                                ptr(keep))
        # the per-class loop ends with an unstable sort: same set, same score order
        same = (set(keep[:k].tolist()) == set(ref.tolist()) and
                np.array_equal(scores[keep[:k]], scores[ref]))
        check(f"batched_nms {thr}", same, f"{k} kept, torchvision {len(ref)}")


def test_decode(rng):
    n = 20000
    refs = random_boxes(rng, n, 1216, 800, 400)
    deltas = (rng.standard_normal((n, 4)) * 2).astype(np.float32)
    deltas[::7, 2] = 9.0  # beyond the log(1000/16) clamp
    for weights in ((1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)):
        ref = BoxCoder(weights).decode_single(torch.from_numpy(deltas),
                                              torch.from_numpy(refs)).numpy()
        out = np.zeros((n, 4), np.float32)
        w = np.array(weights, np.float32)
        lib.vdt_decode_boxes(ptr(refs), ptr(deltas), n, ptr(w), ptr(out))
        check(f"decode {weights}", np.array_equal(out, ref),
              f"{np.mean(out == ref) * 100:.3f} % identical")


def test_anchors():
    sizes = (32, 64, 128, 256, 512)
    grids = ((200, 304), (100, 152), (50, 76), (25, 38), (13, 19))
    generator = AnchorGenerator(tuple((s,) for s in sizes), ((0.5, 1.0, 2.0),) * 5)
    images = ImageList(torch.zeros(1, 3, 800, 1216), [(800, 1199)])
    ref = generator(images, [torch.zeros(1, 1, gh, gw) for gh, gw in grids])[0].numpy()
    ratios = np.array([0.5, 1.0, 2.0], np.float32)
    levels = []
    for size, (gh, gw) in zip(sizes, grids):
        cell = np.zeros(12, np.float32)
        lib.vdt_cell_anchors(ptr(np.array([size], np.float32)), 1, ptr(ratios), 3, ptr(cell))
        out = np.zeros((gh * gw * 3, 4), np.float32)
        lib.vdt_grid_anchors(ptr(cell), 3, 800, 1216, gh, gw, ptr(out))
        levels.append(out)
    out = np.concatenate(levels)
    check("anchors 800x1216", out.shape == ref.shape and np.array_equal(out, ref),
          f"{len(ref)} anchors")


def test_levels(rng):
    n = 50000
    sides = np.exp(rng.uniform(-1, 7.5, (n, 2))).astype(np.float32)
    boxes = np.zeros((n, 4), np.float32)
    boxes[:, 2:] = sides
    boxes[:10] = 0  # zero area
    ref = LevelMapper(2, 5)([torch.from_numpy(boxes)]).numpy()
    out = np.zeros(n, np.int32)
    lib.vdt_roi_levels(ptr(boxes), n, 2, 5, ptr(out))
    check("LevelMapper", np.array_equal(out, ref))


def test_softmax_sigmoid(rng):
    for classes in (91, 2, 7, 8, 21):
        logits = (rng.standard_normal((500, classes)) * 4).astype(np.float32)
        ref = torch.softmax(torch.from_numpy(logits), -1).numpy()
        out = logits.copy()
        lib.vdt_softmax_rows(ptr(out), len(out), classes)
        check(f"softmax {classes} classes", np.array_equal(out, ref),
              f"max |diff| {np.abs(out - ref).max():.3g}")
    x = (rng.standard_normal(4736) * 6).astype(np.float32)  # a multiple of 16: no scalar tail
    ref = torch.sigmoid(torch.from_numpy(x)).numpy()
    out = np.zeros_like(x)
    lib.vdt_sigmoid(ptr(x), len(x), ptr(out))
    check("sigmoid", np.array_equal(out, ref))


def test_paste_masks(rng):
    """paste_masks_in_image (engine/MASKRCNN.md §3): the same rectangle, and round(255 p)
    of torchvision's float probabilities, for boxes inside, across and beyond the
    frame's edges, tiny and large. The resize's indices and weights are torch's
    exactly; torch's kernel sums the four products in an order that differs with its
    build and the tensor's shape (a few ulp, measured <= 1.2e-7 here), so a byte may
    differ by one only where 255 p lies within 1e-4 of a rounding boundary (k + 0.5);
    a wrong index or weight moves bytes by several units far from any boundary."""
    from torchvision.models.detection.roi_heads import paste_masks_in_image
    h0, w0 = 97, 131
    n = 60
    boxes = random_boxes(rng, n, w0, h0, 90)
    boxes[:5] = [[-3.7, -0.4, 20.2, 30.9], [120.5, 80.25, 131.0, 97.0], [0, 0, 0.01, 0.02],
                 [10.5, 10.5, 10.6, 60.0], [0, 0, 131, 97]]
    boxes = boxes.astype(np.float32)
    masks = rng.random((n, 28, 28)).astype(np.float32)
    masks[:10] = (masks[:10] > 0.5)  # hard edges, values 0 and 1
    ref = paste_masks_in_image(torch.from_numpy(masks)[:, None], torch.from_numpy(boxes),
                               (h0, w0), padding=1)[:, 0].numpy().astype(np.float64)
    out = np.zeros((n, h0, w0), np.uint8)
    rects = np.zeros((n, 4), np.int32)
    lib.vdt_paste_masks(ptr(masks), n, 28, ptr(boxes), w0, h0, ptr(out), ptr(rects))
    expected = np.floor(255.0 * ref + 0.5).astype(np.uint8)
    outside = 0
    for i in range(n):
        x, y, w, h = rects[i]
        inside = np.zeros((h0, w0), bool)
        inside[y:y + h, x:x + w] = True
        outside += int(np.count_nonzero(ref[i][~inside]))
    check("paste_masks rectangles", outside == 0, f"{outside} nonzero pixels outside")
    diff = np.abs(out.astype(int) - expected.astype(int))
    scaled = 255.0 * ref
    boundary = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-4
    bad = (diff > 1) | ((diff == 1) & ~boundary)
    check("paste_masks", not bad.any(),
          f"{int(np.count_nonzero(diff))} of {diff.size} bytes differ (max {int(diff.max())}), "
          f"{int(np.count_nonzero(bad))} of them away from a rounding boundary")


def test_topk(rng):
    values = rng.integers(0, 300, 20000).astype(np.float32)
    ref = torch.topk(torch.from_numpy(values), 1000).values.numpy()
    idx = np.zeros(1000, np.int32)
    k = lib.vdt_topk(ptr(values), len(values), 1000, ptr(idx))
    ties_ascending = all(idx[i] < idx[i + 1] for i in range(k - 1)
                         if values[idx[i]] == values[idx[i + 1]])
    check("topk values", k == 1000 and np.array_equal(values[idx], ref) and ties_ascending)


def test_transform_sizes(rng):
    """The size torchvision's own transform resizes random frames to (its resize(), on a
    blank one-channel image) against the engine's under the rule the exporter records for
    this torchvision. The other rule must disagree on some of the frames, or the
    comparison would not tell them apart."""
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    transforms = [GeneralizedRCNNTransform(lo, hi, mean, std).eval()
                  for lo, hi in ((800, 1333), (352, 1333), (320, 640), (320, 512), (512, 853))]
    rule = export_torchvision.resize_scale_rule(transforms[0])
    out = np.zeros(4, np.int32)
    n, wrong, other_differs = 0, [], 0
    for tr in transforms:
        lo, hi = tr.min_size[-1], tr.max_size
        for h, w in rng.integers(16, 1400, (300, 2)).tolist():
            with torch.no_grad():
                ref = tuple(tr.resize(torch.zeros(1, h, w))[0].shape[-2:])
            sizes = {}
            for float32_scale in (0, 1):
                lib.vdt_transform_sizes(h, w, lo, hi, 32, float32_scale, ptr(out))
                sizes["float32" if float32_scale else "double"] = (int(out[0]), int(out[1]))
            n += 1
            if sizes[rule] != ref:
                wrong.append(f"{h}x{w} ({lo}/{hi}): torchvision {ref}, ours {sizes[rule]}")
            other_differs += sizes["float32"] != sizes["double"]
    check(f"transform sizes ({rule} resize scale)", not wrong and other_differs > 0,
          f"{n} frames, {len(wrong)} wrong{': ' + wrong[0] if wrong else ''}; the other rule "
          f"differs on {other_differs}")


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(20240611)
    test_roi_align(rng)
    test_nms(rng)
    test_decode(rng)
    test_anchors()
    test_levels(rng)
    test_softmax_sigmoid(rng)
    test_paste_masks(rng)
    test_topk(rng)
    test_transform_sizes(rng)
    if failures:
        print("FAILED:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
