#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: ResNet-34-FPN Faster R-CNN with FrozenBatchNorm2d whose eps is overwritten
to 0.0 (as torchvision does for the COCO_V1 detection weights), 3 classes, min/max
size 320/512, random calibrated weights, float32 model file.

The calibration scales the convolutions' output channels by 0.01..1 before measuring
the norm layers' statistics, so many channels have small variances and eps matters:
folding with eps 1e-5 where it is 0 moves the FPN features by tenths of max|ref|
(measured by test_harness.py on the opposite mistake), far above the tolerance.

One scene (one seed) rendered at three sizes (H x W): 375x500, and 427x640 and
640x427 (portrait), sizes where torchvision 0.14.1's float32 resize scale loses a pixel
against the double one (319x479 and 479x319).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

IMAGES = [  # (height, width, seed)
    (375, 500, 3401),
    (427, 640, 3401),
    (640, 427, 3401),
]
CLASSES = ["__background__", "person", "vehicle"]


def main():
    args = pc.start(__doc__)
    model = pc.build_resnet_fpn(34, len(CLASSES), 320, 512, seed=34, norm="frozen", eps=0.0)
    return pc.run_parity(args, "resnet34_fpn_eps0", model, IMAGES, class_names=CLASSES,
                         min_size=320, max_size=512)


if __name__ == "__main__":
    sys.exit(main())
