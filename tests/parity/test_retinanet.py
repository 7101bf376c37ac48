#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's retinanet_resnet50_fpn (ResNet-50 v1.5 returning C3-C5,
nn.BatchNorm2d with eps 1e-5 as the builder makes it without pretrained weights, the
FPN with LastLevelP6P7 from P5, RetinaNetHead without normalisation) or, with
--builder retinanet_resnet50_fpn_v2, its v2 (P6 from C5, GroupNorm(32) between the
head's convolutions and their ReLUs), 91 classes with
the COCO category names, min/max size 320/512 to keep the test short, random
calibrated weights (parity_one_stage.calibrate: about 400 detections before the cap,
which the test sets to 300, so the ordering at the cut is compared), float32 model
file, one image of --size HxW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)
import parity_one_stage as pos  # noqa: E402

import torchvision  # noqa: E402
from torchvision.models.detection import RetinaNet_ResNet50_FPN_Weights  # noqa: E402


def main():
    args = pc.start(__doc__, size=True, add_arguments=lambda p: p.add_argument(
        "--builder", default="retinanet_resnet50_fpn",
        choices=["retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2"]))
    pc.torch.manual_seed(47)
    model = getattr(torchvision.models.detection, args.builder)(
        weights=None, weights_backbone=None, num_classes=91, min_size=320, max_size=512).eval()
    classes = pc.coco_names(RetinaNet_ResNet50_FPN_Weights)
    h, w = args.size
    return pos.run_parity(args, f"{args.builder}_{h}x{w}", model, h, w, 4700 + h + w,
                          class_names=classes)


if __name__ == "__main__":
    sys.exit(main())
