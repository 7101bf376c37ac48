#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's ssd300_vgg16 (VGG16's features up to conv4_3 with the
ceil_mode max-pool, its L2 norm with a per-channel scale, pool5 and fc6/fc7 as a
dilated 3x3 and a 1x1 convolution, four extra blocks; DefaultBoxGenerator with steps
and 4 or 6 default boxes per location; SSDHead: one 3x3 convolution per map and
branch), 91 classes with the COCO category names, the fixed 300x300 transform (mean
0.48235, 0.45882, 0.40784 and std 1/255), random calibrated weights (VGG16's
convolutions standardised layer by layer, parity_ssd.calibrate: about 270
detections before the cap of 200), float32 model file, one image of --size HxW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)
import parity_ssd as pssd  # noqa: E402

import torchvision  # noqa: E402
from torchvision.models.detection import SSD300_VGG16_Weights  # noqa: E402


def main():
    args = pc.start(__doc__, size=True)
    pc.torch.manual_seed(50)
    model = torchvision.models.detection.ssd300_vgg16(
        weights=None, weights_backbone=None, num_classes=91).eval()
    classes = pc.coco_names(SSD300_VGG16_Weights)
    h, w = args.size
    return pssd.run_parity(args, f"ssd300_vgg16_{h}x{w}", model, h, w, 5000 + h + w,
                           class_names=classes, calibrate_kwargs={"target": 270, "cap": 200})


if __name__ == "__main__":
    sys.exit(main())
