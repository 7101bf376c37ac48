#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's fasterrcnn_resnet50_fpn (Bottleneck ResNet-50 v1.5, nn.BatchNorm2d
with eps 1e-5 as the builder makes it without pretrained weights), 91 classes with the
COCO category names, default min/max size 800/1333, random calibrated weights, float32
model file. One image per run (--size HxW), since one torchvision forward takes about
10 s on two cores:

  --size 427x640: torchvision 0.14.1's float32 resize scale gives 799x1199 where the
    double one gives 800x1199; the engine follows the rule the model file records.
  --size 480x640: both give 800x1066.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights  # noqa: E402


def main():
    args = pc.start(__doc__, size=True)
    model = pc.build_resnet50_fpn_coco(seed=50)
    classes = pc.coco_names(FasterRCNN_ResNet50_FPN_Weights)
    return pc.run_parity_at_size(args, "resnet50_fpn", model, 5000, class_names=classes,
                                 min_size=800, max_size=1333,
                                 feature_rel_tol=pc.FEATURE_REL_TOL_RESNET50)


if __name__ == "__main__":
    sys.exit(main())
