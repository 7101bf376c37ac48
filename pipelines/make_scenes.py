#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes N synthetic scenes of the bundled model's kind (balls, boxes, triangles,
rings over varied backgrounds) as PNG files DIR/scene-000.png, ... at WxH, for the
generated clip of pipelines/annotate.sh. Deterministic: the scenes come from their
own seed stream, never used in training or evaluation.

usage: make_scenes.py DIR N WxH
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from PIL import Image  # noqa: E402
from train_demo import make_scene  # noqa: E402

STREAM_CLIP = 7  # train_demo uses 0 (training) and 1 (evaluation)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    out_dir, count, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    width, height = (int(v) for v in size.split("x"))
    os.makedirs(out_dir, exist_ok=True)
    for i in range(count):
        img, _, _ = make_scene(2026, i, stream=STREAM_CLIP)
        picture = Image.fromarray(img).resize((width, height), Image.BILINEAR)
        picture.save(os.path.join(out_dir, "scene-%03d.png" % i))


if __name__ == "__main__":
    main()
