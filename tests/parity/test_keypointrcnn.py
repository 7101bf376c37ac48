#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity: torchvision's keypointrcnn_resnet50_fpn, the Faster R-CNN R50-FPN of
fasterrcnn_resnet50_fpn plus the keypoint branch (engine/KEYPOINTRCNN.md): a 14x14
MultiScaleRoIAlign on the final boxes, eight 3x3 conv (512) + ReLU, ConvTranspose2d
4x4 stride 2 padding 1 to the 17 keypoints, bilinear x2 upsampling to 56x56 heatmaps,
heatmaps_to_keypoints (each map resized by bicubic interpolation to the box's ceil'd
size, its argmax and the value there), resize_keypoints. Two classes (background,
person) as the builder has them, random calibrated weights, float32 model file, the
transform at --min-size/--max-size (smaller than the builder's 800/1333 to keep the
test short on two cores; the engine reads them from the model file). Every stage is
compared as in the other parity tests; then, for the matched detections, the keypoint
features, the heatmaps, the keypoints in frame pixels and their scores, and the
decoding alone (torchvision's heatmaps_to_keypoints on our heatmaps): see
pc.compare_keypoints. Images (--sizes HxW,HxW,...) are one scene rendered at each
size.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_common as pc  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
import torchvision  # noqa: E402


def add_arguments(p):
    p.add_argument("--min-size", type=int, default=512, help="the transform's min_size (512)")
    p.add_argument("--max-size", type=int, default=853, help="the transform's max_size (853)")
    p.add_argument("--seed", type=int, default=13, help="seed of the random weights (13)")


def main():
    args = pc.start(__doc__, sizes=True, add_arguments=add_arguments)
    torch.manual_seed(args.seed)
    model = torchvision.models.detection.keypointrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=2, num_keypoints=17,
        min_size=args.min_size, max_size=args.max_size).eval()
    images = [(h, w, 7100) for h, w in args.sizes]
    return pc.run_parity(args, "keypointrcnn_resnet50_fpn", model, images,
                         class_names=["__background__", "person"],
                         min_size=args.min_size, max_size=args.max_size,
                         feature_rel_tol=pc.FEATURE_REL_TOL_RESNET50)


if __name__ == "__main__":
    sys.exit(main())
