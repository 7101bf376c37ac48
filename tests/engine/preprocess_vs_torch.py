#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bit-exact comparison of vd_cpu_preprocess with torch's CPU pre-processing.

torchvision's GeneralizedRCNNTransform on an RGB uint8 frame: x.float() / 255,
(x - mean) / std, F.interpolate(bilinear, align_corners=False) to the resized
size, zero padding to a multiple of 32 (spec sections 1.2-1.4). The sizes come
from the double-precision rule (vd_math_transform_size); torch gets them as an
explicit size, which is what recompute_scale_factor=True reduces to.

The engine resizes with the arithmetic this torch is found to have
(export_torchvision.resize_arithmetic_rule: "torch1" for torch 1.13, "torch2" for
torch 2.x), as a model file exported here records it. torch runs 2 intra-op threads:
torch 2.x resizes a 3-channel image with its channels-last kernel at every size when
it has only one (and only small outputs otherwise, as the "torch2" rule does).

Usage: preprocess_vs_torch.py PREPROCESS_DUMP. Exit 77 (skip) without torch.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def transform_size(h, w, min_size=800, max_size=1333, divisible=32):
    scale = min(min_size / min(h, w), max_size / max(h, w))
    rh, rw = math.floor(h * scale), math.floor(w * scale)
    return rh, rw, math.ceil(rh / divisible) * divisible, math.ceil(rw / divisible) * divisible


def torch_reference(rgb, rh, rw, ph, pw):
    # Contiguous CHW, as the parity tests feed torchvision. A permuted HWC view
    # (what pil_to_tensor gives) stays channels-last through .to() and the
    # normalisation, and torch 1.13 then runs its channels-last upsample
    # kernel, which rounds differently (last ulp on about half the values).
    x = torch.from_numpy(rgb).permute(2, 0, 1).contiguous().to(torch.float32) / 255.0
    mean = torch.tensor(MEAN, dtype=torch.float32)[:, None, None]
    std = torch.tensor(STD, dtype=torch.float32)[:, None, None]
    x = (x - mean) / std
    x = F.interpolate(x[None], size=(rh, rw), mode="bilinear", align_corners=False)[0]
    out = torch.zeros(3, ph, pw, dtype=torch.float32)
    out[:, :rh, :rw] = x
    return out.permute(1, 2, 0).contiguous().numpy()


def main():
    dump = sys.argv[1]
    torch.set_num_threads(2)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import export_torchvision
    arithmetic = export_torchvision.resize_arithmetic_rule()
    print(f"resize arithmetic of this torch: {arithmetic}")
    rng = np.random.default_rng(2024)
    # (h, w, resized size or None for the torchvision rule)
    cases = [
        (480, 640, None),   # upsample 800x1066, width not a multiple of 32
        (427, 640, None),   # 800x1199
        (640, 427, None),   # portrait 1199x800
        (1000, 300, None),  # tall portrait: 1333x399, width upsampled, height too
        (1080, 1920, None), # downsample (both axes)
        (37, 53, None),     # tiny, large ratio
        (33, 45, (33, 45, 64, 64)),   # identity size
        (50, 70, (50, 31, 64, 32)),   # one axis copied, the other downsampled
        (37, 53, (61, 47, 64, 64)),   # small output (h + w <= 128): torch 2.x's channels-last kernel
        (90, 40, (70, 58, 96, 64)),   # idem, height down, width up
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for h, w, sizes in cases:
            rh, rw, ph, pw = sizes if sizes else transform_size(h, w)
            rgb = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            src = os.path.join(tmp, "in.rgb")
            dst = os.path.join(tmp, "out.f32")
            rgb.tofile(src)
            subprocess.run([dump, src, str(w), str(h), str(rh), str(rw), str(ph), str(pw), dst,
                            arithmetic], check=True)
            ours = np.fromfile(dst, dtype=np.float32).reshape(ph, pw, 3)
            ref = torch_reference(rgb, rh, rw, ph, pw)
            diff = ours.view(np.uint32) != ref.view(np.uint32)
            n_diff = int(diff.sum())
            max_abs = float(np.abs(ours - ref).max())
            status = "ok" if n_diff == 0 else "MISMATCH"
            print(f"{h}x{w} -> {rh}x{rw} (padded {ph}x{pw}): {n_diff} values differ, "
                  f"max |diff| {max_abs:.3g}: {status}")
            failures += n_diff != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
