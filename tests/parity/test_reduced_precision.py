#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity of a model file stored in F16 or BF16: ResNet-18-FPN Faster R-CNN with
nn.BatchNorm2d (eps 1e-5), 4 classes, min/max size 320/512, random calibrated weights,
exported with dtype f16 or bf16 (--dtype). The rounded tensors are read back from the
file and loaded into torchvision, so both sides run exactly the same (rounded)
weights and the same float32 arithmetic as the float32 tests; the tolerances are
those of the float32 tests.

One scene (one seed) rendered at two sizes (H x W): 300x400, and 257x389, a size
where torchvision 0.14.1's float32 resize scale loses a pixel against the double one.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

IMAGES = [  # (height, width, seed)
    (300, 400, 1601),
    (257, 389, 1601),
]
CLASSES = ["__background__", "red", "green", "blue"]


def main():
    args = pc.start(__doc__, dtype=True)
    model = pc.build_resnet_fpn(18, len(CLASSES), 320, 512, seed=16, norm="bn")
    return pc.run_parity(args, f"resnet18_fpn_{args.dtype}", model, IMAGES, class_names=CLASSES,
                         dtype=args.dtype, min_size=320, max_size=512)


if __name__ == "__main__":
    sys.exit(main())
