#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's maskrcnn_resnet50_fpn and maskrcnn_resnet50_fpn_v2 (--builder),
the Faster R-CNN of the same builder (engine/RESNET50_V2.md for v2) plus the mask
branch (engine/MASKRCNN.md): a 14x14 MultiScaleRoIAlign on the final boxes, four 3x3
conv + ReLU (v2: with BatchNorm2d), ConvTranspose2d 2x2 stride 2 + ReLU, the 1x1 conv
to the classes, the label's channel, sigmoid, paste_masks_in_image. 91 classes with
the COCO category names, random calibrated weights (the mask logits calibrated on the
first image's detections: std 3, mean 0), float32 model file, the transform at
--min-size/--max-size (smaller than the builders' 800/1333 to keep the test near a
minute on two cores; the engine reads them from the model file). Every stage is
compared as in the other parity tests; the masks of matched detections: the 28x28
probabilities before the paste (pc.MASK_PROB_TOL), and the pasted masks thresholded
at 0.5 on both sides (IoU >= pc.MASK_IOU each). Images (--sizes HxW,HxW,...) are one
scene rendered at each size (both resize-scale rules agree at 384x512 and 300x451; the
other tests have the sizes where they differ).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision.models.detection import MaskRCNN_ResNet50_FPN_Weights  # noqa: E402

BUILDERS = ("maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2")


def add_arguments(p):
    p.add_argument("--builder", choices=BUILDERS, required=True, help="torchvision builder")
    p.add_argument("--min-size", type=int, default=512, help="the transform's min_size (512)")
    p.add_argument("--max-size", type=int, default=853, help="the transform's max_size (853)")
    p.add_argument("--seed", type=int, default=11, help="seed of the random weights (11)")


def main():
    args = pc.start(__doc__, sizes=True, add_arguments=add_arguments)
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models.detection, args.builder)(
        weights=None, weights_backbone=None, num_classes=91, min_size=args.min_size,
        max_size=args.max_size).eval()
    images = [(h, w, 7100) for h, w in args.sizes]
    classes = pc.coco_names(MaskRCNN_ResNet50_FPN_Weights)
    short = args.builder.replace("maskrcnn_", "")
    return pc.run_parity(args, f"maskrcnn_{short}", model, images, class_names=classes,
                         min_size=args.min_size, max_size=args.max_size,
                         feature_rel_tol=pc.FEATURE_REL_TOL_RESNET50)


if __name__ == "__main__":
    sys.exit(main())
