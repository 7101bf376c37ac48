#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's fcos_resnet50_fpn (ResNet-50 v1.5 returning C3-C5,
nn.BatchNorm2d with eps 1e-5 as the builder makes it without pretrained weights, the
FPN with LastLevelP6P7 from P5, FCOSHead: four conv + GroupNorm(32) + ReLU per
branch, the classification logits, the regression distances after a ReLU and the
centerness, BoxLinearCoder(normalize_by_size=True), one anchor per location of sizes
8..128), 91 classes with the COCO category names, min/max size 320/512, random
calibrated weights (parity_one_stage.calibrate: about 400 detections before the cap,
which the test sets to 300), float32 model file, one image of --size HxW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)
import parity_one_stage as pos  # noqa: E402

import torchvision  # noqa: E402
from torchvision.models.detection import FCOS_ResNet50_FPN_Weights  # noqa: E402


def main():
    args = pc.start(__doc__, size=True)
    pc.torch.manual_seed(48)
    model = torchvision.models.detection.fcos_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91, min_size=320, max_size=512).eval()
    classes = pc.coco_names(FCOS_ResNet50_FPN_Weights)
    h, w = args.size
    return pos.run_parity(args, f"fcos_resnet50_fpn_{h}x{w}", model, h, w, 4800 + h + w,
                          class_names=classes)


if __name__ == "__main__":
    sys.exit(main())
