#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: ResNet-18-FPN Faster R-CNN (BasicBlock, FrozenBatchNorm2d with eps 1e-5),
5 classes, min/max size 320/512, random calibrated weights, float32 model file.

One scene (one seed) rendered at five sizes (H x W). At 240x320, 333x500 and 500x333
(portrait) torchvision 0.14.1's float32 resize scale gives the same size as the double
one; at 200x200 and 401x299 (portrait) it loses a pixel (319 instead of 320), and the
engine must resize as the model file says the exporting torchvision does. The resized
sizes 320x426, 320x480, 480x320, 319x319 and 429x319 (0.14.1) are mostly not multiples
of 32, so padding is exercised. All five images go through one vd-detect process (one
context, changing sizes).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

IMAGES = [  # (height, width, seed)
    (240, 320, 1801),
    (333, 500, 1801),
    (500, 333, 1801),
    (200, 200, 1801),
    (401, 299, 1801),
]
CLASSES = ["__background__", "circle", "square", "triangle", "blob"]


def main():
    args = pc.start(__doc__)
    model = pc.build_resnet_fpn(18, len(CLASSES), 320, 512, seed=18)
    return pc.run_parity(args, "resnet18_fpn", model, IMAGES, class_names=CLASSES,
                         min_size=320, max_size=512)


if __name__ == "__main__":
    sys.exit(main())
