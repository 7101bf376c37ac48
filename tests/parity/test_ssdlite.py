#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's ssdlite320_mobilenet_v3_large (MobileNetV3-Large with the
reduced tail, as the builder makes it without pretrained weights, nn.BatchNorm2d with
eps 0.001, SSDlite's feature extractor: features up to the C4 block's expansion, the
rest, four depthwise-separable extra blocks; DefaultBoxGenerator with six default
boxes per location on every map; SSDLiteHead: depthwise 3x3 + BN + ReLU6, then a 1x1
convolution, per map and branch), 91 classes with the COCO category names, the fixed
320x320 transform (mean and std 0.5), random calibrated weights
(parity_ssd.calibrate: about 400 detections before the cap of 300), float32 model
file, one image of --size HxW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)
import parity_ssd as pssd  # noqa: E402

import torchvision  # noqa: E402
from torchvision.models.detection import SSDLite320_MobileNet_V3_Large_Weights  # noqa: E402


def main():
    args = pc.start(__doc__, size=True)
    pc.torch.manual_seed(49)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=91).eval()
    classes = pc.coco_names(SSDLite320_MobileNet_V3_Large_Weights)
    h, w = args.size
    return pssd.run_parity(args, f"ssdlite320_mobilenet_v3_large_{h}x{w}", model, h, w,
                           4900 + h + w, class_names=classes,
                           calibrate_kwargs={"target": 400, "cap": 300})


if __name__ == "__main__":
    sys.exit(main())
