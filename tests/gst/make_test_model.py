# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the GStreamer tests' model and frames.

A ResNet-18-FPN Faster R-CNN with 5 classes (background + 4 shape names) and small
transform sizes (min 240, max 320) so that a frame takes a few tens of milliseconds
on the CPU, calibrated with the parity tests' calibrate() on the very frames the
tests push, so that it returns tens of detections with scores spread between the
model's threshold and 1 (a comparison of two empty lists proves nothing).

Outputs, in OUTDIR:
  gst-test-model.safetensors   the model (F16 weights: the element and vd-detect
                               read the same file, so rounding does not matter)
  frame-0.ppm                  the main test frame (binary PPM, 320x240, RGB)
  frame-1.ppm                  the same scene at 400x300 (resolution changes)

Runs with /usr/bin/python3 (Debian's torch/torchvision); exit status 77 (meson:
skipped) without them.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))

import parity_common as pc  # noqa: E402  (exits 77 without torch)

CLASS_NAMES = ["__background__", "ball", "box", "triangle", "ring"]
WIDTH, HEIGHT = 320, 240


def write_ppm(path, img):
    h, w, _ = img.shape
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(img.tobytes())


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    pc.setup_torch(2)
    model = pc.build_resnet_fpn(18, len(CLASS_NAMES), min_size=240, max_size=320, seed=3)
    # Fewer proposals than torchvision's 1000: the box head's first linear layer
    # (12544 x 1024 per proposal) is most of a frame's time, and the tests push
    # many frames on two shared cores.
    model.rpn._pre_nms_top_n["testing"] = 500
    model.rpn._post_nms_top_n["testing"] = 150
    frame = pc.synthetic_image(HEIGHT, WIDTH, seed=100)
    # The same scene at another size, for the resolution-change tests: a calibrated
    # random model answers very differently to other scenes, not to a resize.
    big = pc.F.interpolate(pc.to_tensor(frame)[None], size=(300, 400), mode="bilinear",
                           align_corners=False)[0]
    big = (big.permute(1, 2, 0).numpy() * 255.0).round().clip(0, 255).astype(pc.np.uint8)
    # The frame is at the transform's size: the resize scale is exactly 1 in float32
    # and in double. More high scores than the parity tests ask for: the element tests
    # use thresholds up to 0.5.
    print(pc.calibrate(model, [frame], target=(30, 3, 15)))
    write_ppm(os.path.join(outdir, "frame-0.ppm"), frame)
    write_ppm(os.path.join(outdir, "frame-1.ppm"), big)
    tmp = os.path.join(outdir, "gst-test-model.safetensors.tmp")
    pc.export_model(model, tmp, class_names=CLASS_NAMES, dtype="f16")
    os.replace(tmp, os.path.join(outdir, "gst-test-model.safetensors"))


if __name__ == "__main__":
    main()
