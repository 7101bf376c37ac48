#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's fasterrcnn_mobilenet_v3_large_fpn and
fasterrcnn_mobilenet_v3_large_320_fpn (--builder), MobileNetV3-Large features 0..16
(hardswish, squeeze-and-excitation with hardsigmoid, depthwise convolutions,
nn.BatchNorm2d with eps 1e-5 as the builders make it without pretrained weights),
features 13 and 16 into a 256-channel FPN with the pool level, 15 anchors per
location on 3 levels, RPN score threshold 0.05, every RoI pooled from level '0'
(engine/MOBILENETV3.md). 91 classes with the COCO category names, the builders'
sizes (800/1333, or 320/640 with 150 RPN proposals), random calibrated weights,
float32 model file. One image per run (--size HxW):

  --size 480x640: float32 and double resize scales agree (800x1066, 320x426).
  --size 427x640: torchvision 0.14.1's float32 scale gives 799x1199 (and 319x479) where
    the double one gives 800x1199 (320x479); the engine follows the rule the model file
    records.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

from torchvision.models.detection import FasterRCNN_MobileNet_V3_Large_FPN_Weights  # noqa: E402

SIZES = {  # builder -> (min_size, max_size)
    "fasterrcnn_mobilenet_v3_large_fpn": (800, 1333),
    "fasterrcnn_mobilenet_v3_large_320_fpn": (320, 640),
}


def main():
    args = pc.start(__doc__, size=True, add_arguments=lambda p: p.add_argument(
        "--builder", choices=sorted(SIZES), required=True, help="torchvision builder"))
    min_size, max_size = SIZES[args.builder]
    model = pc.build_mobilenet_v3_fpn(args.builder, seed=3)
    classes = pc.coco_names(FasterRCNN_MobileNet_V3_Large_FPN_Weights)
    short = args.builder.replace("fasterrcnn_", "")
    return pc.run_parity_at_size(args, short, model, 7000, class_names=classes,
                                 min_size=min_size, max_size=max_size)


if __name__ == "__main__":
    sys.exit(main())
