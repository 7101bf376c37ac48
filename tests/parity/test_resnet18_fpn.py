#!/usr/bin/env python3
"""Parity: ResNet-18-FPN Faster R-CNN (BasicBlock, FrozenBatchNorm2d with eps 1e-5),
5 classes, min/max size 320/512, random calibrated weights, float32 model file.

One scene (one seed) rendered at five sizes (H x W). 240x320, 333x500 and 500x333
(portrait) run against unmodified torchvision 0.14.1: its float32 resize scale gives
the same size as double there. 200x200 and 401x299 (portrait) are sizes where
0.14.1's float32 scale loses a pixel (319 instead of 320): they run with the resize
scale patched to double precision, as the engine and current torchvision compute it
(parity_common.resize_scale_in_double). The resized sizes 320x426, 320x480, 480x320,
320x320 and 429x320 are mostly not multiples of 32, so padding is exercised. All five
images go through one vd-detect process (one context, changing sizes).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

IMAGES = [  # (height, width, seed, resize scale patched to double)
    (240, 320, 1801, False),
    (333, 500, 1801, False),
    (500, 333, 1801, False),
    (200, 200, 1801, True),
    (401, 299, 1801, True),
]
CLASSES = ["__background__", "circle", "square", "triangle", "blob"]


def main():
    args = pc.parse_args(__doc__)
    pc.setup_torch(args.threads)
    model = pc.build_resnet_fpn(18, len(CLASSES), 320, 512, seed=18)
    return pc.run_parity(args, "resnet18_fpn", model, IMAGES, class_names=CLASSES,
                         min_size=320, max_size=512)


if __name__ == "__main__":
    sys.exit(main())
