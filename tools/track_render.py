#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Renders a moving-shapes clip for the tracking benchmark's real-detector run
(tools/bench_track.py --real-sequences): balls, boxes, triangles and rings drawn
as the bundled model was trained on (tools/train_demo.py's shapes and
backgrounds), entering, leaving, crossing each other and passing behind a
pillar, as PNG frames DIR/frame-0000.png ... with the ground truth in
DIR/gt.json: per frame [[id, class, x1, y1, x2, y2], ...], the object's whole
box (clipped to the frame) while at least a fifth of it is visible.

Debian's python3 (numpy, PIL); the motion is tools/track_sim.py's.
usage: track_render.py DIR SEED FRAMES [WxH]"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import track_sim as ts  # noqa: E402
from train_demo import _mask_box, _pick_colour, _shape_mask, make_background  # noqa: E402


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[-1])
    out_dir, seed, n_frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    w, h = (int(v) for v in (sys.argv[4] if len(sys.argv) == 5 else "640x480").split("x"))
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng([seed, 13])
    background = make_background(rng, w, h)
    sx, sy = w / ts.WIDTH, h / ts.HEIGHT
    pillar = [int(ts.PILLAR[0] * sx), int(ts.PILLAR[2] * sx)]
    objects = {}  # id -> (class, size, colour, shape seed, full-mask area)
    gt_frames = []
    for f, shapes in enumerate(ts.motion(seed, n_frames)):
        img = background.copy()
        masks = []
        for oid, cls, cx, cy, size in shapes:  # back to front
            if oid not in objects:
                shape_seed = int(rng.integers(1 << 30))
                ref = _shape_mask(np.random.default_rng(shape_seed), cls, w, h, size * sx,
                                  w / 2, h / 2, 1)
                colour = _pick_colour(rng, img, ref)
                objects[oid] = (cls, size, colour, shape_seed, float((ref >= 0.5).sum()))
            _, size, colour, shape_seed, area = objects[oid]
            mask = _shape_mask(np.random.default_rng(shape_seed), cls, w, h, size * sx,
                               cx * sx, cy * sy, 1)
            img = img * (1 - mask[:, :, None]) + colour[None, None, :] * mask[:, :, None]
            masks = [(o, c, m * (1 - mask), full, a) for o, c, m, full, a in masks]
            masks.append((oid, cls, mask, mask, area))
        img[:, pillar[0]:pillar[1]] = (128, 128, 128)
        gt = []
        for oid, cls, visible, full, area in masks:
            visible = visible.copy()
            visible[:, pillar[0]:pillar[1]] = 0
            box = _mask_box(full)
            if box is None or area <= 0:
                continue
            if (full >= 0.5).sum() < 0.3 * area or (visible >= 0.5).sum() < 0.2 * area:
                continue
            gt.append([oid, cls] + box)
        gt_frames.append(gt)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            os.path.join(out_dir, "frame-%04d.png" % f))
    with open(os.path.join(out_dir, "gt.json"), "w") as fp:
        json.dump(gt_frames, fp)


if __name__ == "__main__":
    main()
