# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared code of the parity tests: visiondetect's CPU engine against torchvision.

A parity test
  1. builds a torchvision Faster R-CNN with random weights (fixed seeds),
  2. calibrates it so that its outputs are not degenerate (calibrate()),
  3. exports it with tools/export_torchvision.py,
  4. writes deterministic synthetic test images as .npy (synthetic_image()),
  5. runs `vd-detect --json --dump` on them and torchvision step by step on the same
     input (reference()), and
  6. compares every stage in pipeline order (compare_image()): resized size, padded
     input, anchors, FPN features, RPN proposals, box-head outputs, final detections.

All stages are compared even when an early one fails, and the report names the first
diverging tensor, so a failure says where the engine leaves torchvision.

Resize scale precision: torchvision 0.14.1 computes the resize scale in float32 and
current torchvision in double, which gives many frame sizes one pixel more or less.
The exporter records the rule of the torchvision that runs it in the model file
("transform.resize_scale") and the engine follows the file, so every reference is
torchvision as it is, at every size; the tests keep sizes where the two rules differ.
resize_scale_as() makes torchvision resize under a given rule instead, for the
references that need the rule this torchvision does not have: the bundled model's file,
written before the field (double: test_cpu_bf16.py), and test_harness.py's planted
one-pixel mismatch.

Runs with /usr/bin/python3 (Debian's torch 1.13 / torchvision 0.14.1). Exit status 77
(meson: skipped) when torch or torchvision cannot be imported.
"""

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import types

SKIP = 77


def _engine_isa(vd_detect, env):
    """The ISA the engine runs under @env, from vd-detect --info ("ISA avx2")."""
    p = subprocess.run([vd_detect, "--info", "--device", "cpu"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"vd-detect --info failed: {p.stderr.decode(errors='replace')}")
    m = re.search(r"ISA (\S+),", p.stdout.decode())
    if m is None:
        raise SystemExit(f"vd-detect --info names no ISA: {p.stdout.decode()}")
    return m.group(1)


def _skip_if_cap_is_native(vd_detect):
    """A run with oneDNN capped (ONEDNN_MAX_CPU_ISA, both sides) proves the engine's
    path for a smaller ISA; where the machine has no more than the cap, it is the
    uncapped run again: skip (77)."""
    native_env = dict(os.environ)
    cap = native_env.pop("ONEDNN_MAX_CPU_ISA")
    capped, native = _engine_isa(vd_detect, dict(os.environ)), _engine_isa(vd_detect, native_env)
    print(f"oneDNN capped at {cap}: the engine runs {capped} (uncapped: {native})")
    if capped == native:
        print(f"SKIP: this processor has no more than {cap}: the uncapped run covers it")
        sys.exit(SKIP)


def _vd_detect_argument(argv):
    """--vd-detect's value on the command line, before argparse sees it (None if
    absent)."""
    for i, a in enumerate(argv):
        if a == "--vd-detect" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--vd-detect="):
            return a.split("=", 1)[1]
    return None


# A parity test (a script of this folder; the tools that import this module are not
# tests) capped on a machine with no more than the cap skips before importing torch:
# seconds of a run that would compare nothing
_cap_checked = False
if (os.environ.get("ONEDNN_MAX_CPU_ISA") and _vd_detect_argument(sys.argv[1:])
        and os.path.dirname(os.path.abspath(sys.argv[0])) == os.path.dirname(os.path.abspath(__file__))):
    _skip_if_cap_is_native(_vd_detect_argument(sys.argv[1:]))
    _cap_checked = True

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torchvision
    from torchvision.models.detection import transform as tv_transform
    from torchvision.ops import misc as tv_misc
except ImportError as exc:  # pragma: no cover - depends on the machine
    print(f"SKIP: parity tests need numpy, torch and torchvision in {sys.executable}: {exc}")
    sys.exit(SKIP)

SRCDIR = os.path.dirname(os.path.abspath(__file__))
TOOLSDIR = os.path.normpath(os.path.join(SRCDIR, "..", "..", "tools"))

# ---------------------------------------------------------------------------------
# Tolerances. Each is explained where it is used (compare_image); collected here so
# the numbers are in one place.
# ---------------------------------------------------------------------------------

# Normalised, resized and padded input: the resize is specified bit-exactly
# (spec 1.3) and the normalisation is one subtract and one divide in float32, so only
# a different evaluation order may move the last bit. Values are O(2.5); 1e-5 is a
# few ulps of that, far below any indexing or weight error (which moves values by
# O(0.01) or more).
INPUT_ABS_TOL = 1e-5

# FPN features: max|ours - ref| <= tolerance * max|ref| per level. The engine folds
# batch-norm into the convolutions and runs oneDNN's convolution algorithms (blocked
# layouts, another summation order); torch runs unfolded BN after its own
# convolutions. Both are float32 evaluations of the same network, each off the exact
# (float64) result by its own rounding, and the calibrated random networks amplify
# rounding (batch-norm subtracts means that are large against the spread of some
# channels). Measured on the test models:
#   ResNet-18/34 (320/512): torch vs float64 on the same float32 input 2e-6..8e-6 of
#     max|ref|; ours vs torch 7e-6 (R18) and 1.5e-5 (R34). Tolerance 1e-4 (6..15x).
#   ResNet-50 (800/1333): torch vs float64 of the exact input 1.4e-4..2.6e-4 of
#     max|ref|, ours equally far; ours vs torch 3.3e-5 (P2) .. 7.7e-5 (P5).
#     Tolerance 4e-4 (5x).
# Planted bugs (test_harness.py, ResNet-18): one convolution's weights off by 1 %
# moves the features by 7e-3..1.4e-2 of max|ref|, eps 0 instead of 1e-5 by 0.4..0.66,
# a one-pixel resize by 0.2: 70x and more above the tolerance.
FEATURE_REL_TOL = 1e-4
FEATURE_REL_TOL_RESNET50 = 4e-4

# Box head outputs (class logits and box regression) for the proposals that both
# sides share (IoU > 0.9999): they sit downstream of RoIAlign on slightly different
# features and of two 12544/1024-input linears. Measured 1e-5..2e-5 of max|ref|
# (R18/R34), 1.1e-4 (R50); 1e-3 of max|ref| still catches a wrong layout of the
# flattened RoI features or a wrong sampling point (changes of O(1e-2..1)).
HEAD_REL_TOL = 1e-3

# Proposals and detections: the brief's criteria.
PROPOSAL_IOU = 0.99
PROPOSAL_MIN_MATCHED = 0.97
DETECTION_IOU = 0.99
DETECTION_SCORE_TOL = 1e-3
DETECTION_MIN_MATCHED = 0.97
COUNT_REL_TOL = 0.03

# Non-degenerate reference: a test must not pass on (near-)empty output.
MIN_REF_DETECTIONS = 20
MIN_REF_LOW = 5     # scores in [threshold, 0.5)
MIN_REF_HIGH = 5    # scores >= 0.5


def log(msg=""):
    print(msg, flush=True)


def setup_torch(threads=2):
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)


def parse_args(description, dtype=False, size=False, sizes=False, engine=True, add_arguments=None):
    """The common options, --dtype, --size HxW (args.size: (h, w)) and --sizes HxW,...
    (args.sizes: [(h, w), ...]) where asked; add_arguments(parser) adds a test's own."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vd-detect", required=engine, help="path of the vd-detect executable")
    p.add_argument("--workdir", required=True,
                   help="folder for the model file, images, our dumps and the reference tensors")
    p.add_argument("--threads", type=int, default=2, help="threads for torch and vd-detect (2)")
    p.add_argument("--keep", action="store_true", help="keep the model file even on success")
    if dtype:
        p.add_argument("--dtype", choices=["f16", "bf16"], required=True, help="model file dtype")
    if size:
        p.add_argument("--size", required=True, type=_parse_size, help="image size HxW, e.g. 480x640")
    if sizes:
        p.add_argument("--sizes", required=True, type=_parse_sizes,
                       help="image sizes HxW,HxW,..., e.g. 384x512,300x451")
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args()
    # (a test of this folder has done this on import, before torch)
    if engine and os.environ.get("ONEDNN_MAX_CPU_ISA") and not _cap_checked:
        _skip_if_cap_is_native(args.vd_detect)
    if engine and os.environ.get("VD_CPU_LAYOUT"):
        _check_layout(args.vd_detect, os.environ["VD_CPU_LAYOUT"])
    return args



def start(description, **kwargs):
    """A test's command line (parse_args with @kwargs), and torch set up for its
    --threads."""
    args = parse_args(description, **kwargs)
    setup_torch(args.threads)
    return args


def coco_names(weights):
    """The 91 COCO category names of a torchvision weights enum (its COCO_V1 entry)."""
    return list(weights.COCO_V1.meta["categories"])

def _check_layout(vd_detect, layout):
    """A run with VD_CPU_LAYOUT set (the -nhwc tests) compares that layout: the
    engine must say so (vd-detect --info: "layout nhwc")."""
    p = subprocess.run([vd_detect, "--info", "--device", "cpu", "--precision", "fp32"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode()
    want = "layout nhwc," if layout == "nhwc" else "layout nChw"
    if p.returncode != 0 or want not in out:
        raise SystemExit(f"FAIL: VD_CPU_LAYOUT={layout}, but vd-detect --info says: "
                         f"{out.strip()} {p.stderr.decode(errors='replace').strip()}")
    log(f"VD_CPU_LAYOUT={layout}: {out.strip().splitlines()[0]}")


def _parse_size(text):
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW, got {text!r}")
    return h, w


def _parse_sizes(text):
    return [_parse_size(s) for s in text.split(",")]


# ---------------------------------------------------------------------------------
# Test images
# ---------------------------------------------------------------------------------

def synthetic_image(h, w, seed):
    """A deterministic natural-ish RGB uint8 image [h, w, 3]: smooth colour gradients
    and low-frequency waves, a few dozen filled shapes (rectangles, ellipses,
    triangles) with shading and soft edges, fine texture and sensor-like noise.
    Depends only on (h, w, seed) through numpy's legacy RandomState."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    v = yy / max(h - 1, 1)
    u = xx / max(w - 1, 1)
    img = np.empty((h, w, 3), np.float64)
    for c in range(3):
        a, bx, by = rng.uniform(40, 200), rng.uniform(-60, 60), rng.uniform(-60, 60)
        fx, fy, ph = rng.uniform(1, 4), rng.uniform(1, 4), rng.uniform(0, 2 * np.pi)
        img[..., c] = a + bx * u + by * v + 25 * np.sin(2 * np.pi * (fx * u + fy * v) + ph)
    n_shapes = rng.randint(18, 30)
    for _ in range(n_shapes):
        kind = rng.randint(3)
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        sx = rng.uniform(0.03, 0.25) * w
        sy = rng.uniform(0.03, 0.25) * h
        colour = rng.uniform(0, 255, 3)
        shade = rng.uniform(-40, 40, 2)
        if kind == 0:      # axis-aligned rectangle
            d = np.maximum(np.abs(xx - cx) / sx, np.abs(yy - cy) / sy)
        elif kind == 1:    # ellipse
            d = np.sqrt(((xx - cx) / sx) ** 2 + ((yy - cy) / sy) ** 2)
        else:              # triangle-ish: a rotated wedge clipped by a disc
            ang = rng.uniform(0, 2 * np.pi)
            rx = (xx - cx) * np.cos(ang) + (yy - cy) * np.sin(ang)
            ry = -(xx - cx) * np.sin(ang) + (yy - cy) * np.cos(ang)
            d = np.maximum(np.abs(ry) / (sy * np.clip(1 - rx / sx, 0, None) + 1e-9), np.abs(rx) / sx)
        edge = rng.uniform(0.02, 0.15)
        alpha = np.clip((1.0 - d) / edge, 0, 1) * rng.uniform(0.7, 1.0)
        fill = colour[None, None, :] + (shade[0] * (xx - cx) / sx + shade[1] * (yy - cy) / sy)[..., None]
        img = img * (1 - alpha[..., None]) + fill * alpha[..., None]
    texture = rng.normal(0, 1, (h // 4 + 2, w // 4 + 2, 3))
    texture = np.repeat(np.repeat(texture, 4, 0), 4, 1)[:h, :w]
    img += 6 * texture + rng.normal(0, 3, (h, w, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def to_tensor(img_u8):
    """uint8 HxWx3 -> float [3,H,W] in [0,1], as torchvision's ObjectDetection preset:
    a true division by 255 (spec 1.1)."""
    return torch.from_numpy(np.ascontiguousarray(img_u8)).permute(2, 0, 1).contiguous().to(torch.float32) / 255.0


# ---------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------

def build_resnet_fpn(depth, num_classes, min_size, max_size, seed, norm="frozen", eps=None):
    """FasterRCNN on resnet_fpn_backbone('resnet<depth>') with all layers trainable (so
    nothing is special-cased by freezing). norm: 'frozen' (FrozenBatchNorm2d, the
    builder's default) or 'bn' (nn.BatchNorm2d); eps overrides every norm layer's eps
    (0.0 as the COCO_V1 models after overwrite_eps)."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    torch.manual_seed(seed)
    norm_layer = tv_misc.FrozenBatchNorm2d if norm == "frozen" else torch.nn.BatchNorm2d
    backbone = resnet_fpn_backbone(backbone_name=f"resnet{depth}", weights=None,
                                   norm_layer=norm_layer, trainable_layers=5)
    model = FasterRCNN(backbone, num_classes=num_classes, min_size=min_size, max_size=max_size)
    if eps is not None:
        for m in model.modules():
            if isinstance(m, (tv_misc.FrozenBatchNorm2d, torch.nn.BatchNorm2d)):
                m.eps = eps
    return model.eval()


def build_mobilenet_v3_fpn(builder, seed):
    """torchvision's fasterrcnn_mobilenet_v3_large_fpn or _320_fpn (@builder) with
    random weights and 91 classes at the builder's sizes; without pretrained weights
    the builders use nn.BatchNorm2d (eps 1e-5) and every backbone layer trainable."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models.detection, builder)(
        weights=None, weights_backbone=None, num_classes=91)
    return model.eval()


def build_resnet50_fpn_v2(seed):
    """fasterrcnn_resnet50_fpn_v2 with random weights and 91 classes at the default
    sizes (800/1333): nn.BatchNorm2d (eps 1e-5) in the body, the FPN and the conv box
    head, two RPN convolutions."""
    torch.manual_seed(seed)
    model = torchvision.models.detection.fasterrcnn_resnet50_fpn_v2(
        weights=None, weights_backbone=None, num_classes=91)
    return model.eval()


def build_resnet50_fpn_coco(seed):
    """fasterrcnn_resnet50_fpn with random weights and 91 classes at the default sizes
    (800/1333); without pretrained weights the builder uses nn.BatchNorm2d (eps 1e-5)."""
    torch.manual_seed(seed)
    model = torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91)
    return model.eval()


def convs_before_norms(model):
    """The convolution feeding each norm layer of a torchvision ResNet body (conv1/bn1,
    convK/bnK, downsample.0/downsample.1) or MobileNetV3 body (Conv2dNormActivation:
    .0/.1)."""
    modules = dict(model.named_modules())
    convs = []
    for name, m in modules.items():
        if not isinstance(m, (tv_misc.FrozenBatchNorm2d, torch.nn.BatchNorm2d)):
            continue
        head, _, last = name.rpartition(".")
        if last.startswith("bn"):
            conv_name = f"{head}.conv{last[2:]}"
        elif last == "1" and isinstance(modules.get(f"{head}.0"), torch.nn.Conv2d):
            conv_name = f"{head}.0"
        else:
            raise ValueError(f"no convolution known before norm layer {name}")
        convs.append(modules[conv_name])
    return convs


def norm_layers(model):
    return [m for m in model.modules()
            if isinstance(m, (tv_misc.FrozenBatchNorm2d, torch.nn.BatchNorm2d))]


# ---------------------------------------------------------------------------------
# The resize-scale patch (see the module docstring)
# ---------------------------------------------------------------------------------

def resize_scale(h, w, min_size, max_size, rule):
    """GeneralizedRCNNTransform's resize scale for an h x w image under a model file's
    resize-scale @rule: "float32" (torchvision 0.10 to 0.15) or "double" (later)."""
    if rule == "double":
        return min(float(min_size) / min(h, w), float(max_size) / max(h, w))
    # 0.14.1's expression, literally: Python float / float32 tensor (which torch
    # evaluates as a reciprocal and a multiplication, both float32).
    shape = torch.tensor([h, w])
    m = torch.min(shape).to(dtype=torch.float32)
    big = torch.max(shape).to(dtype=torch.float32)
    return torch.min(float(min_size) / m, float(max_size) / big).item()


def resized_size(h, w, min_size, max_size, rule):
    """(H', W') as torchvision computes it under the resize-scale @rule."""
    s = resize_scale(h, w, min_size, max_size, rule)
    return int(math.floor(h * s)), int(math.floor(w * s))


@contextlib.contextmanager
def resize_scale_as(rule):
    """While active, torchvision's GeneralizedRCNNTransform computes the resize scale
    under @rule (resize_scale()), whichever rule this torchvision has: the reference a
    model file whose "transform.resize_scale" is @rule asks for. The interpolation
    itself is unchanged (torch computes floor(double(H) * scale)). None: no change."""
    if rule is None:
        yield
        return
    original = tv_transform._resize_image_and_masks

    def patched(image, self_min_size, self_max_size, target=None, fixed_size=None):
        if target is not None or fixed_size is not None:
            return original(image, self_min_size, self_max_size, target, fixed_size)
        h, w = image.shape[-2:]
        scale = resize_scale(int(h), int(w), self_min_size, self_max_size, rule)
        image = F.interpolate(image[None], size=None, scale_factor=scale, mode="bilinear",
                              recompute_scale_factor=True, align_corners=False)[0]
        return image, target

    tv_transform._resize_image_and_masks = patched
    try:
        yield
    finally:
        tv_transform._resize_image_and_masks = original


# ---------------------------------------------------------------------------------
# Box-head linears through oneDNN
# ---------------------------------------------------------------------------------

# Debian's torch is built with BLAS_INFO=generic and runs nn.Linear on the netlib
# reference BLAS: about 1 GFLOP/s, 12 s for fc6 on 1000 RoIs (12544x1024), which alone
# would take most of the suite's time budget. Inside the reference and the calibration
# the box head's linears therefore run through torch's oneDNN convolution as 1x1
# convolutions: the same maths in float32 with another summation order (torch builds
# with MKL differ from netlib in the same way; measured on fc6-sized data: 1.2e-5 vs
# 4e-6 max error against float64 on outputs of magnitude 5 for netlib vs oneDNN).
# VD_PARITY_NETLIB_LINEAR=1 in the environment runs torch's own nn.Linear instead.
NETLIB_LINEAR = os.environ.get("VD_PARITY_NETLIB_LINEAR", "") not in ("", "0")
# VD_PARITY_VERBOSE=1 logs the calibration's search.
VERBOSE = os.environ.get("VD_PARITY_VERBOSE", "") not in ("", "0")


def _linear_as_conv(self, x):
    if x.dim() != 2 or x.shape[0] == 0:  # no rows to multiply: torch's own Linear
        return F.linear(x, self.weight, self.bias)
    # The rows as the convolution's spatial dimension (one image, N x 1 pixels, the
    # inputs as channels), not as its batch: oneDNN's 1x1 kernels take that shape at
    # several times the speed (fc6 on 1000 RoIs: 0.7 s against 3.3 s on 2 AVX2 cores).
    y = F.conv2d(x.t().contiguous()[None, :, :, None], self.weight[:, :, None, None], self.bias)
    return y[0, :, :, 0].t()


@contextlib.contextmanager
def box_head_linears_on_onednn(model):
    linears = [] if NETLIB_LINEAR else [m for m in model.roi_heads.modules()
                                         if isinstance(m, torch.nn.Linear)]
    for m in linears:
        m.forward = types.MethodType(_linear_as_conv, m)
    try:
        yield
    finally:
        for m in linears:
            del m.forward


# ---------------------------------------------------------------------------------
# The reference: torchvision step by step (mirrors GeneralizedRCNN.forward in eval)
# ---------------------------------------------------------------------------------

def reference(model, img_u8, cached=None):
    """Runs model on one uint8 HxWx3 image the way GeneralizedRCNN.forward does in
    eval mode, but step by step so the internals can be compared. Returns a dict of
    numpy arrays named as vd-detect's --dump files, plus 'boxes', 'scores', 'labels'
    (final detections in original-image pixels, torchvision's order).
    cached: calibrate()'s cache entry of this image, the weights unchanged since: its
    FPN features are used where the transform's output is the same as the one they
    were computed on (bit for bit; as it is unless a resize_scale_as() around one of
    the two changes the resized size), and its box-head output where the proposals are
    the same (the same modules on the same features give them bit for bit).
    test_harness.py checks that the whole result is the same as without."""
    h0, w0 = img_u8.shape[:2]
    x = to_tensor(img_u8)
    with torch.no_grad(), box_head_linears_on_onednn(model):
        images, _ = model.transform([x])
        if cached is not None and (cached[0].image_sizes != images.image_sizes
                                   or not torch.equal(cached[0].tensors, images.tensors)):
            cached = None
        features = model.backbone(images.tensors) if cached is None else cached[1]
        feats = list(features.values())
        rpn = model.rpn
        objectness, deltas = rpn.head(feats)
        anchors = rpn.anchor_generator(images, feats)
        num_anchors_per_level = [o[0].shape[0] * o[0].shape[1] * o[0].shape[2] for o in objectness]
        from torchvision.models.detection.rpn import concat_box_prediction_layers
        obj_flat, deltas_flat = concat_box_prediction_layers(objectness, deltas)
        proposals = rpn.box_coder.decode(deltas_flat, anchors).view(1, -1, 4)
        boxes, scores = rpn.filter_proposals(proposals, obj_flat, images.image_sizes, num_anchors_per_level)
        roi = model.roi_heads
        if cached is not None and torch.equal(boxes[0], cached[2][0]):
            box_features = cached[3]
        else:
            box_features = roi.box_head(roi.box_roi_pool(features, boxes, images.image_sizes))
        class_logits, box_regression = roi.box_predictor(box_features)
        dboxes, dscores, dlabels = roi.postprocess_detections(class_logits, box_regression, boxes,
                                                              images.image_sizes)
        found = {"boxes": dboxes[0], "scores": dscores[0], "labels": dlabels[0]}
        mask_probs = None
        if roi.has_mask():
            # RoIHeads.forward's mask branch on the final boxes (resized coordinates)
            from torchvision.models.detection.roi_heads import maskrcnn_inference
            mask_logits = roi.mask_predictor(roi.mask_head(roi.mask_roi_pool(
                features, [dboxes[0]], images.image_sizes)))
            found["masks"] = maskrcnn_inference(mask_logits, [dlabels[0]])[0]
            mask_probs = found["masks"][:, 0].numpy().copy()
        kp = None
        if roi.has_keypoint():
            # RoIHeads.forward's keypoint branch on the final boxes (resized coordinates)
            from torchvision.models.detection.roi_heads import keypointrcnn_inference
            kp_features = roi.keypoint_roi_pool(features, [dboxes[0]], images.image_sizes)
            kp_heatmaps = roi.keypoint_predictor(roi.keypoint_head(kp_features))
            kp_probs, kp_scores = keypointrcnn_inference(kp_heatmaps, [dboxes[0]])
            found["keypoints"], found["keypoints_scores"] = kp_probs[0], kp_scores[0]
            kp = {"keypoint_rois": dboxes[0].numpy().copy(),
                  "keypoint_features": kp_features.numpy(),
                  "keypoint_heatmaps": kp_heatmaps.numpy(),
                  "keypoints_resized": kp_probs[0].numpy().copy(),
                  "keypoint_scores": kp_scores[0].numpy()}
        dets = model.transform.postprocess([found], images.image_sizes, [(h0, w0)])[0]
    out = {
        "image_size": np.array(images.image_sizes[0], np.float32),
        "input": images.tensors.numpy(),
        "anchors": anchors[0].numpy(),
        "proposals": boxes[0].numpy(),
        "proposal_scores": scores[0].numpy(),
        "box_logits": class_logits.numpy(),
        "box_regression": box_regression.numpy(),
        "boxes": dets["boxes"].numpy(),
        "scores": dets["scores"].numpy(),
        "labels": dets["labels"].numpy(),
        "_levels": num_anchors_per_level,
        # whether the FPN features and the box head's output came from calibrate()'s cache
        "_features_cached": cached is not None,
        "_box_features_cached": cached is not None and box_features is cached[3],
    }
    for name, f in features.items():
        out["fpn." + name] = f.numpy()
    if kp is not None:
        out.update(kp)
        out["keypoints"] = dets["keypoints"].numpy()   # [D, K, 3] frame pixels (x, y, 1)
    if mask_probs is not None:
        out["mask_probs"] = mask_probs                 # [D, 28, 28] before the paste
        out["masks"] = dets["masks"][:, 0].numpy()     # [D, H0, W0] pasted probabilities
    return out


def reference_matches_model(model, img_u8, ref):
    """Self-check of reference(): the plain model(image) must give the same detections
    bit for bit (without the resize patch only; the patch changes sizes)."""
    with torch.no_grad(), box_head_linears_on_onednn(model):
        det = model([to_tensor(img_u8)])[0]
    return (np.array_equal(det["boxes"].numpy(), ref["boxes"])
            and np.array_equal(det["scores"].numpy(), ref["scores"])
            and np.array_equal(det["labels"].numpy(), ref["labels"]))


# ---------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------

def set_stats(module, inputs):
    """A forward pre-hook: @module's (a norm layer's) statistics from its input."""
    x = inputs[0]
    module.running_mean.copy_(x.mean(dim=(0, 2, 3)))
    # Clamped so that eps = 0 cannot divide by an exactly zero variance.
    module.running_var.copy_(x.var(dim=(0, 2, 3), unbiased=False).clamp_min(1e-10))


@torch.no_grad()
def calibrate_body(model, images_u8, g):
    """Step 1 of calibrate(), every kind of detector's: the norm layers of the body
    (and of the FPN where it has them) get random affine parameters, the convolution
    before each random output gains, and the statistics of their actual input on the
    first image. Returns (the norm layers, [(ImageList, features)] of the first
    image)."""
    norms = norm_layers(model)
    for m in norms:
        m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
        m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
    # Log-uniform gains in [0.01, 1] on the output channels of the convolution before
    # each norm layer: the variances the norm layers then measure spread over about
    # 1e-4..1, as in trained models, so eps is visible (eps 1e-5 against 0 changes a
    # channel of variance 1e-4 by 5 %) while the normalised activations stay O(1).
    for conv in convs_before_norms(model):
        gains = 10.0 ** (-2.0 * torch.rand(conv.out_channels, generator=g))
        conv.weight.mul_(gains[:, None, None, None])

    handles = [m.register_forward_pre_hook(set_stats) for m in norms]
    try:
        with torch.no_grad():
            batch, _ = model.transform([to_tensor(images_u8[0])])
            # Each norm layer computes with the statistics just set: these are the
            # calibrated body's features of the first image.
            per_image = [(batch, model.backbone(batch.tensors))]
    finally:
        for h in handles:
            h.remove()

    return norms, per_image


@torch.no_grad()
def calibrate(model, images_u8, seed=0, rpn_logit_std=2.0,
              rpn_delta_std=0.2, box_delta_std=1.0, target=(50, 12, 8), cache=None):
    """Makes a random-weight model produce non-degenerate outputs on images_u8.

    1. Norm layers: random affine (gamma in [0.5, 1.5], beta ~ N(0, 0.2)) and random
       gains in [0.01, 1] on the output channels of the convolution before each (so
       eps matters), then the running mean/variance of every BN/FrozenBN are set to
       the batch statistics of its actual input on the first image. A forward pre-hook does this in one eval
       forward of the body: each layer sees the output of the already calibrated
       layers before it, so activations stay O(1) through the whole depth.
    2. RPN: scales the objectness conv so the logits have std rpn_logit_std (sigmoid
       scores spread over (0, 1) instead of all ~0.5) and the delta conv so the deltas
       have std rpn_delta_std (proposals move off the anchor grid).
    3. Box predictor: scales bbox_pred so the class deltas have std box_delta_std
       (before the 10/10/5/5 weights); rebuilds cls_score from the principal
       directions of the proposals' fc7 features and standardises its logits, then
       searches a gain a on them and a shift b of the background logit so that the
       detections on the images number about target[0], with at least target[1]
       scores in [threshold, 0.5) and target[2] above 0.5, never capped at
       detections_per_img.
    cache: a list that receives, for each image, the calibrated model's
    (batch, features, proposals, box_features): the transform's ImageList, the FPN
    features, the RPN's proposals and the box head's output on them. Only the box
    predictor changes after they are computed (and calibrate_masks changes only the
    mask branch), so reference() and calibrate_masks() take them instead of computing
    the same tensors again, as long as the weights stay as calibrated.
    Returns a short description of what was chosen."""
    g = torch.Generator().manual_seed(seed)
    norms, per_image = calibrate_body(model, images_u8, g)
    # Features of the other calibration images with the calibrated body.
    with torch.no_grad(), box_head_linears_on_onednn(model):
        for img in images_u8[1:]:
            batch, _ = model.transform([to_tensor(img)])
            per_image.append((batch, model.backbone(batch.tensors)))

        head = model.rpn.head
        logits, deltas = [], []
        for batch, feats in per_image:
            o, d = head(list(feats.values()))
            logits += [t.flatten() for t in o]
            deltas += [t.flatten() for t in d]
        lstd = torch.cat(logits).std().item()
        dstd = torch.cat(deltas).std().item()
        head.cls_logits.weight.mul_(rpn_logit_std / lstd)
        head.cls_logits.bias.mul_(rpn_logit_std / lstd)
        head.bbox_pred.weight.mul_(rpn_delta_std / dstd)
        head.bbox_pred.bias.mul_(rpn_delta_std / dstd)

        roi = model.roi_heads
        # A conv box head's norm layers (FastRCNNConvFCHead of fasterrcnn_resnet50_fpn_v2):
        # statistics of their actual input, the first image's proposals, as the body's
        # (each norm layer computes with the statistics just set, so this is also the
        # calibrated box head's output on the first image)
        box_norms = norm_layers(roi)
        first_box = None
        if box_norms:
            handles = [m.register_forward_pre_hook(set_stats) for m in box_norms]
            try:
                batch, feats = per_image[0]
                proposals, _ = model.rpn(batch, feats)
                first_box = (proposals, roi.box_head(roi.box_roi_pool(feats, proposals,
                                                                      batch.image_sizes)))
            finally:
                for h in handles:
                    h.remove()
        pred = roi.box_predictor
        entries = []  # (batch, features, proposals, box-head output) per image
        for i, (batch, feats) in enumerate(per_image):
            if i == 0 and first_box is not None:
                proposals, x = first_box
            else:
                proposals, _ = model.rpn(batch, feats)
                x = roi.box_head(roi.box_roi_pool(feats, proposals, batch.image_sizes))
            entries.append((batch, feats, proposals, x))
        if cache is not None:
            cache.extend(entries)
        reg = torch.cat([pred.bbox_pred(x) for _, _, _, x in entries])
        gain = box_delta_std / reg.std().item()
        pred.bbox_pred.weight.mul_(gain)
        pred.bbox_pred.bias.mul_(gain)

        # Standardise every class logit over the proposals of all images, then search
        # logits = a * z + b * [class == background]. The candidate boxes do not depend
        # on (a, b): decode them once and rerun only softmax, threshold and NMS (the
        # steps of postprocess_detections).
        from torchvision.ops import boxes as box_ops
        x_all = torch.cat([x for _, _, _, x in entries])
        # The random cls_score mostly reads the component that all proposals share
        # (the fc7 features of a random network differ little between proposals):
        # its logits then vary across proposals by little compared with their size,
        # and float32 rounding, in torch as in the engine, moves the scores by more
        # than the 1e-3 tolerance. Rebuild it from random combinations of the 16
        # principal directions of the proposals' centred fc7 features: the logit
        # spread then comes from the largest variations, with small weights.
        centre = x_all.mean(0)
        _, _, v = torch.svd_lowrank(x_all - centre, q=16, niter=3)
        mix = torch.randn(pred.cls_score.out_features, v.shape[1], generator=g)
        pred.cls_score.weight.copy_(mix @ v.T)
        pred.cls_score.bias.copy_(-(pred.cls_score.weight @ centre))
        raw = pred.cls_score(x_all)
        mu, sigma = raw.mean(0), raw.std(0).clamp_min(1e-6)
        w0 = pred.cls_score.weight / sigma[:, None]
        b0 = (pred.cls_score.bias - mu) / sigma
        per_image_z = []
        for batch, _, proposals, x in entries:
            z = (pred.cls_score(x) - mu) / sigma
            boxes = roi.box_coder.decode(pred.bbox_pred(x), proposals)
            boxes = box_ops.clip_boxes_to_image(boxes, batch.image_sizes[0])[:, 1:].reshape(-1, 4)
            labels = torch.arange(1, z.shape[1]).repeat(z.shape[0])
            per_image_z.append((z, boxes, labels))
        thr = roi.score_thresh
        want_total, want_low, want_high = target
        onehot = torch.zeros(raw.shape[1])
        onehot[0] = 1

        def counts_for(a, b):
            counts = []
            for z, boxes, labels in per_image_z:
                scores = torch.softmax(a * z + b * onehot, -1)[:, 1:].reshape(-1)
                keep = torch.where(scores > thr)[0]
                bx, sc, lb = boxes[keep], scores[keep], labels[keep]
                small = box_ops.remove_small_boxes(bx, min_size=1e-2)
                bx, sc, lb = bx[small], sc[small], lb[small]
                s = sc[box_ops.batched_nms(bx, sc, lb, roi.nms_thresh)][: roi.detections_per_img]
                counts.append((len(s), int(((s >= thr) & (s < 0.5)).sum()), int((s >= 0.5).sum())))
            return counts

        # For each gain a, bisect the background shift b (the count falls as b grows)
        # to about want_total detections per image, then keep the a whose images are
        # furthest from the limits (the cap, too few low or high scores).
        best = None
        for a in [1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 10, 12]:
            lo, hi = -20.0, 80.0
            for _ in range(9):
                b = 0.5 * (lo + hi)
                counts = counts_for(a, b)
                if sum(n for n, _, _ in counts) > want_total * len(counts):
                    lo = b
                else:
                    hi = b
            cost = 0.0
            for n, low, high in counts:
                cost += (abs(n - want_total) / want_total + 4 * max(0, want_low - low) / want_low
                         + 4 * max(0, want_high - high) / want_high
                         + (10 if n >= roi.detections_per_img else 0)
                         + 0.1 * abs(math.log((low + 1) / (high + 1))))
            # Score errors grow with the gain (a rounding error d in a standardised
            # logit moves a score by up to a * d / 4): prefer the smaller gains.
            cost += 0.05 * a * len(counts)
            if VERBOSE:
                log(f"  cls_score gain {a}: background shift {b:.3g}, cost {cost:.3f}, counts {counts}")
            if best is None or cost < best[0]:
                best = (cost, a, b, counts)
        _, a, b, counts = best
        pred.cls_score.weight.copy_(w0 * a)
        pred.cls_score.bias.copy_(b0 * a)
        pred.cls_score.bias[0] += b
    return (f"calibrated: {len(norms)} norm layers; rpn logits x{rpn_logit_std / lstd:.3g}, "
            f"rpn deltas x{rpn_delta_std / dstd:.3g}; box deltas x{gain:.3g}; cls_score gain {a}, "
            f"background shift {b:.3g}; detections (total, <0.5, >=0.5) per image {counts}")


def first_detections(model, img_u8, cached=None):
    """The image's transform, FPN features and RoIHeads.forward's detections in eval
    (boxes and labels per image), from calibrate()'s cache entry when at hand (saves a
    forward of the body and of the box head). Call it under
    box_head_linears_on_onednn()."""
    roi = model.roi_heads
    if cached is not None:
        batch, feats, proposals, box_features = cached
    else:
        batch, _ = model.transform([to_tensor(img_u8)])
        feats = model.backbone(batch.tensors)
        proposals, _ = model.rpn(batch, feats)
        box_features = roi.box_head(roi.box_roi_pool(feats, proposals, batch.image_sizes))
    class_logits, box_regression = roi.box_predictor(box_features)
    det_boxes, _, det_labels = roi.postprocess_detections(class_logits, box_regression,
                                                          proposals, batch.image_sizes)
    return batch, feats, det_boxes, det_labels


@torch.no_grad()
def calibrate_masks(model, img_u8, logit_std=3.0, cached=None):
    """Mask R-CNN: the mask head's norm statistics (v2) from its actual input, the mask
    RoI features of the first image's detections (as the box head's); then the logits
    convolution scaled and shifted so that the logits of the detections' labels have
    mean 0 and std @logit_std: probabilities spread over (0, 1), both sides of 0.5
    in every mask, instead of one saturated value. cached: calibrate()'s cache entry
    of the image, when at hand (saves a forward of the body and of the box head)."""
    roi = model.roi_heads
    with box_head_linears_on_onednn(model):
        batch, feats, det_boxes, det_labels = first_detections(model, img_u8, cached)
        boxes = [det_boxes[0]]
        labels = det_labels[0]
        pooled = roi.mask_roi_pool(feats, boxes, batch.image_sizes)

        def set_stats(module, inputs):
            x = inputs[0]
            module.running_mean.copy_(x.mean(dim=(0, 2, 3)))
            module.running_var.copy_(x.var(dim=(0, 2, 3), unbiased=False).clamp_min(1e-10))

        # (each norm layer computes with the statistics just set: x is the calibrated
        # mask head's output)
        handles = [m.register_forward_pre_hook(set_stats) for m in norm_layers(roi.mask_head)]
        try:
            x = roi.mask_head(pooled)
        finally:
            for h in handles:
                h.remove()
        pred = roi.mask_predictor
        logits = pred(x)[torch.arange(len(labels)), labels]
        mu, sigma = logits.mean().item(), logits.std().item()
        gain = logit_std / max(sigma, 1e-12)
        pred.mask_fcn_logits.weight.mul_(gain)
        pred.mask_fcn_logits.bias.sub_(mu).mul_(gain)
    return (f"mask logits of {len(labels)} detections: mean {mu:.3g}, std {sigma:.3g} -> x{gain:.3g}, "
            f"shift {-mu:.3g}")


@torch.no_grad()
def describe_keypoints(model, img_u8, cached=None):
    """Keypoint R-CNN: the statistics of the heatmaps of the first image's detections
    under torchvision's own initialisation of the keypoint head, which the tests keep
    (no calibration: argmax and score need no spread around a threshold, unlike the
    masks' 0.5). The log gives the heatmaps' mean and std, how far each map's peak
    rises above its mean, and the softmax probability at the peak (what the keypoint
    loss trains: a trained model's is larger; see KEYPOINT_SCORE_TOL for what a larger
    scale does to the scores' agreement). cached: calibrate()'s cache entry."""
    roi = model.roi_heads
    with box_head_linears_on_onednn(model):
        batch, feats, det_boxes, _ = first_detections(model, img_u8, cached)
        heatmaps = roi.keypoint_predictor(roi.keypoint_head(
            roi.keypoint_roi_pool(feats, [det_boxes[0]], batch.image_sizes)))
        flat = heatmaps.flatten(2)
        peak = torch.softmax(flat, dim=2).max(dim=2).values
        gap = flat.max(dim=2).values - flat.mean(dim=2)
    return (f"keypoint heatmaps of {len(det_boxes[0])} detections (torchvision's initialisation): "
            f"mean {heatmaps.mean().item():.3g}, std {heatmaps.std().item():.3g}, peak above the "
            f"map's mean: median {gap.median().item():.3g}; softmax probability at the peak: "
            f"median {peak.median().item():.3g}, range [{peak.min().item():.3g}, "
            f"{peak.max().item():.3g}]")


# Mask probabilities before the paste ([D, 28, 28], matched detections): max|ours -
# torchvision|. They come from RoIAlign on features within FEATURE_REL_TOL_RESNET50
# of each other, five convolutions and the sigmoid (slope <= 1/4). Measured on the
# test models (logits calibrated to std 3): 6.7e-4 (maskrcnn_resnet50_fpn), 2.4e-3
# (_v2, whose folded batch-norms divide by the small spreads of the calibration's
# low-gain channels and so amplify the feature differences). Tolerance 5e-3 (2x the
# worst). A wrong channel, a transposed deconvolution kernel or a misplaced RoI moves
# them by O(0.1..1). The bound depends on the calibration's conditioning: _v2
# calibrated on a 300x451 frame alone (--sizes 300x451) reaches 8.5e-3, over it, with
# every mask IoU 1.0 and no decided pixel flipped; the tests calibrate on 384x512.
# Against a float64 run of the same model (each side with its own boxes), there:
# torchvision's float32 max 1.6e-3 (median 2.9e-4), ours 7.6e-3 (4.3e-4), ours with
# VD_CPU_WINOGRAD=0 5.4e-3 (3.6e-4). Stage by stage (50 detections, all matched;
# vd-detect --dump's mask_features and mask_logits): the mask head itself adds
# nothing (ours on our RoI features against float64 on them: 8.5e-6; torchvision
# float32 2.1e-6), nor RoIAlign (8.4e-5 on features of magnitude 10). The float64
# mask branch on our final boxes (float64 features) gives 7.6e-3 and on
# torchvision's 1.6e-3: the whole difference is the boxes, at the worst detection
# 2.1e-2 resized-image pixels from float64's (torchvision's 2.8e-3; medians 9.0e-4,
# 5.8e-4). Of that, 5.6e-4 is our box head; the rest is its proposal, 3.2e-3 px off
# (torchvision's 4.9e-4), which the box head amplifies 6x and the mask head turns
# into 7.6e-3 of probability. Our proposals come from our FPN features (float64's
# RPN head on them reproduces them: max 6.8e-3, median 6.8e-4; torchvision 2.9e-3,
# 4.7e-4); without Winograd they are at torchvision's level (3.8e-3, 4.9e-4; RPN
# deltas rms 6.92e-6 against 6.86e-6), yet that proposal stays 2.0e-3 off and the
# box 1.4e-2 (float64's mask branch on our boxes alone: 5.4e-3, all of ours). So
# the max is a matter of which rounding each proposal draws on a
# chain that amplifies ~2e-3 px of proposal into ~5e-3 of probability: torchvision
# float32 itself with channels_last (oneDNN's NHWC kernels, another valid summation
# order) reaches 4.6e-3 (median 4.3e-4), 1 thread NCHW 1.6e-3 (3.6e-4). Winograd
# adds its 1.3x feature rms error on top (7.6e-3 against 5.4e-3).
MASK_PROB_TOL = 5e-3
# Pasted masks, thresholded at 0.5 on both sides (ours: byte >= 128, i.e. p >= 0.5).
# A pasted probability is a convex combination of four 28x28 ones, so it differs
# from torchvision's by at most MASK_PROB_TOL (plus rounding): every pixel whose
# torchvision probability is farther than that from 0.5 must be on the same side
# (no exceptions). Pixels closer to 0.5 may go either way; one of them decides the
# IoU of a mask of under 100 pixels by more than 1 %, so the brief's IoU >= 0.99
# is required of all matched detections but ceil(MASK_LOW_IOU_FRACTION * matched)
# (the rounding of count_ok), and the smallest is reported. Measured: at most one
# mask per image below 0.99, of 70-90 pixels, off by one pixel.
MASK_IOU = 0.99
MASK_LOW_IOU_FRACTION = 0.03


def decode_mask(m, h0, w0):
    """vd-detect's JSON mask ({"x", "y", "width", "height", "data": base64 bytes}) as a
    full-frame uint8 array, and the rectangle."""
    import base64
    full = np.zeros((h0, w0), np.uint8)
    x, y, w, h = m["x"], m["y"], m["width"], m["height"]
    data = np.frombuffer(base64.b64decode(m["data"]), np.uint8)
    if data.size != w * h or x < 0 or y < 0 or x + w > w0 or y + h > h0:
        raise ValueError(f"mask {w}x{h} at ({x}, {y}) with {data.size} bytes does not fit {w0}x{h0}")
    full[y:y + h, x:x + w] = data.reshape(h, w)
    return full, (x, y, w, h)


def compare_masks(report, ref, result, dump, pairs, size_hw, stats):
    """Masks of the matched detections: the 28x28 probabilities (MASK_PROB_TOL), every
    detection of ours has its mask, torchvision's nonzero pixels lie inside our
    rectangle, the masks thresholded at 0.5 agree wherever torchvision's probability
    is farther than MASK_PROB_TOL from 0.5, and have IoU >= MASK_IOU (see there)."""
    h0, w0 = size_hw
    dets = result.get("detections", [])
    missing = [k for k, d in enumerate(dets) if "mask" not in d]
    report.check("masks present", not missing, f"{len(dets) - len(missing)} of {len(dets)} detections "
                 "carry a mask")
    matched = [(i, j) for i, j in pairs if j >= 0 and "mask" in dets[j]]
    probs = dump.get("mask_probs")
    if probs is None or probs.shape[0] != len(dets):
        report.check("mask_probs", False, "missing from the dump or not one per detection: "
                     f"{None if probs is None else list(probs.shape)} for {len(dets)} detections")
    elif matched:
        d = max(float(np.abs(probs[j].astype(np.float64) - ref["mask_probs"][i]).max())
                for i, j in matched)
        stats["mask_prob"] = max(stats.get("mask_prob", 0.0), d)
        report.check("mask_probs", d <= MASK_PROB_TOL,
                     f"max|diff| {d:.3g} over {len(matched)} matched detections (tol {MASK_PROB_TOL:g})")
    worst, outside, n_pix, decided_bad, n_undecided, n_low = 1.0, 0, 0, 0, 0, 0
    worst_at = None
    for i, j in matched:
        try:
            ours, (x, y, w, h) = decode_mask(dets[j]["mask"], h0, w0)
        except ValueError as exc:
            report.check("masks", False, f"detection {j}: {exc}")
            return
        theirs = ref["masks"][i]
        inside = np.zeros((h0, w0), bool)
        inside[y:y + h, x:x + w] = True
        outside += int(np.count_nonzero(theirs[~inside]))
        a, b = ours >= 128, theirs >= 0.5
        decided = np.abs(theirs.astype(np.float64) - 0.5) > MASK_PROB_TOL
        decided_bad += int(np.count_nonzero((a != b) & decided))
        n_undecided += int(np.count_nonzero(~decided))
        union = int(np.count_nonzero(a | b))
        iou = np.count_nonzero(a & b) / union if union else 1.0
        n_pix += int(np.count_nonzero(b))
        n_low += iou < MASK_IOU
        if iou < worst:
            worst, worst_at = iou, (i, j, int(np.count_nonzero(a)), int(np.count_nonzero(b)))
    stats["mask_iou"] = min(stats.get("mask_iou", 1.0), worst)
    report.check("mask rectangles", outside == 0,
                 f"{outside} nonzero torchvision pixels outside our rectangles")
    report.check("masks decided", decided_bad == 0,
                 f"{decided_bad} pixels on the other side of 0.5 among those farther than "
                 f"{MASK_PROB_TOL:g} from it ({n_undecided} pixels closer)")
    allowed = math.ceil(MASK_LOW_IOU_FRACTION * len(matched))
    msg = (f"{len(matched)} matched detections, {n_pix} torchvision mask pixels; {n_low} below IoU "
           f"{MASK_IOU} (at most {allowed}); min IoU {worst:.5f}")
    if worst_at is not None:
        msg += f" at torchvision #{worst_at[0]} (ours #{worst_at[1]}: {worst_at[2]} vs {worst_at[3]} pixels)"
    report.check("masks", n_low <= allowed and n_pix > 0, msg)


# Keypoint R-CNN (engine/KEYPOINTRCNN.md), matched detections only.
# Keypoint features (RoIAlign 14x14 of the keypoint pooler) and heatmaps (the
# keypoint head's 8 convolutions, the transposed convolution, the bilinear
# upsampling): max|ours - torchvision| over max|torchvision|, as the box head's
# outputs (HEAD_REL_TOL): the same boxes within IoU 0.99 sample the same features
# up to the boxes' own float32 differences (see MASK_PROB_TOL's account of how
# proposals and boxes differ), which the convolutions carry; a wrong layout, a
# flipped kernel or a misplaced RoI moves them by O(0.1..1) of max|ref|.
KEYPOINT_FEATURE_REL_TOL = HEAD_REL_TOL
KEYPOINT_HEATMAP_REL_TOL = HEAD_REL_TOL
# The brief's criteria: every matched detection's keypoints within 1 frame pixel
# of torchvision's (in x and in y) and the same keypoint scores within 1e-3; a point
# farther off passes only where torchvision's own map is at a tie there
# (_keypoint_ties: two maxima closer than the score tolerance, which no float32
# implementation orders the same way as another).
# Measured (test_keypointrcnn.py, 384x512 and 300x451, 105 matched detections):
# positions 1.6e-3 px, scores 8.3e-4 on heatmaps of std 1.29 (torchvision's
# initialisation, max 9.1). The scores are heatmap values and move with the boxes:
# our keypoint head on our RoI features is within 6e-5 of torchvision's on the same
# features, torchvision's pooler on our boxes gives 8e-4 from the FPN features'
# differences, and the rest is the boxes themselves (ours 2.9e-3 resized-image px
# from torchvision's, inside IoU 0.9998): torchvision's own keypoint branch on our
# boxes differs from itself on its boxes by 3.5e-3 of heatmap. Heatmaps scaled to
# std 3 (max 20) scale that to 1.9e-3 of score: over the criterion, while every
# stage before stays within its tolerance and the decoding is exact.
# The score tolerance is the detection scores' 1e-3, but relative where the score is
# larger than 1: |ours - torchvision| <= 1e-3 x max(1, |torchvision's score|). A
# detection score is a probability (at most 1), a keypoint score a heatmap logit
# (here 0.1 to 9.3), and an absolute 1e-3 on those is below torchvision's own
# reproducibility: on a 2-vCPU AVX2-only machine (2026-12-07, image 0 at 384x512, the
# same weights and image) torchvision against itself with torch's oneDNN convolutions
# switched off (torch.backends.mkldnn.flags(enabled=False)) gave scores up to 1.19e-3
# apart (4.0e-4 relative), with one thread instead of two 4.1e-4; ours there 1.22e-3
# (the same heatmaps within 1.9e-4 of max, the decoding exact). The relative form is
# also the heatmaps' own criterion (KEYPOINT_HEATMAP_REL_TOL of max|heatmap|) applied
# per value: a score is the bicubic map's value at its maximum.
KEYPOINT_POS_TOL = 1.0
KEYPOINT_SCORE_TOL = 1e-3
# The decoding alone (heatmaps_to_keypoints on our own heatmaps and boxes, run by
# torchvision): our point must be a maximum of torchvision's bicubic map up to its
# rounding (the map's value there within KEYPOINT_DECODE_TIE of the map's max,
# float32 values of magnitude 10..50: a few ulps), and our score that value within
# the same.
KEYPOINT_DECODE_TIE = 1e-4


def compare_keypoints(report, ref, result, dump, pairs, stats):
    """Keypoints of the matched detections: every detection of ours has its
    num_keypoints points; the keypoint features and heatmaps (KEYPOINT_*_REL_TOL),
    the points in frame pixels (KEYPOINT_POS_TOL) and their scores
    (KEYPOINT_SCORE_TOL) against torchvision's; and torchvision's
    heatmaps_to_keypoints on our heatmaps and RoIs against our points
    (KEYPOINT_DECODE_TIE): the decoding stage alone."""
    from torchvision.models.detection.roi_heads import heatmaps_to_keypoints
    dets = result.get("detections", [])
    K = ref["keypoints"].shape[1]
    bad = [k for k, d in enumerate(dets) if len(d.get("keypoints", [])) != K]
    report.check("keypoints present", not bad, f"{len(dets) - len(bad)} of {len(dets)} detections "
                 f"carry {K} keypoints")
    matched = [(i, j) for i, j in pairs if j >= 0 and j not in bad]
    stats["kp_matched"] = stats.get("kp_matched", 0) + len(matched)
    ii = np.array([i for i, _ in matched], np.int64)
    jj = np.array([j for _, j in matched], np.int64)
    for name, stat, tol in (("keypoint_features", "kp_feature_rel", KEYPOINT_FEATURE_REL_TOL),
                            ("keypoint_heatmaps", "kp_heatmap_rel", KEYPOINT_HEATMAP_REL_TOL)):
        a = dump.get(name)
        if a is None or a.shape[0] != len(dets) or a.shape[1:] != ref[name].shape[1:]:
            report.check(name, False, f"missing from the dump or not one per detection: "
                         f"{None if a is None else list(a.shape)}, torchvision "
                         f"{list(ref[name].shape)} for {len(dets)} detections")
            continue
        if not matched:
            continue
        diff = np.abs(a[jj].astype(np.float64) - ref[name][ii])
        d = float(diff.max())
        scale = float(np.abs(ref[name][ii]).max())
        rel = d / scale if scale > 0 else d
        stats[stat] = max(stats.get(stat, 0.0), rel)
        where = np.unravel_index(int(diff.argmax()), diff.shape)
        report.check(name, rel <= tol,
                     f"max|diff| {d:.3g} = {rel:.3g} of max|ref| {scale:.3g} over {len(matched)} "
                     f"matched detections (tol {tol:g}); worst at {list(map(int, where))}")

    # the decoding alone: torchvision's heatmaps_to_keypoints on our heatmaps and RoIs
    maps, rois, pts = dump.get("keypoint_heatmaps"), dump.get("keypoint_rois"), dump.get("keypoints")
    if maps is None or rois is None or pts is None or len(rois) != len(dets) \
            or pts.shape != (len(dets), K, 3):
        report.check("keypoint decoding", False, "keypoint_heatmaps, keypoint_rois or keypoints "
                     "missing from the dump or not one per detection")
    elif len(dets):
        off, sd = 0, 0.0
        with torch.no_grad():
            tv_xy, tv_scores = heatmaps_to_keypoints(torch.from_numpy(maps), torch.from_numpy(rois))
            for n in range(len(dets)):
                at, top = _bicubic_at(maps[n], rois[n], pts[n])
                off += int(np.count_nonzero(top - at > KEYPOINT_DECODE_TIE))
                sd = max(sd, float(np.abs(pts[n, :, 2].astype(np.float64) - at).max()))
        exact = int(np.count_nonzero(np.all(tv_xy[:, :, :2].numpy() == pts[:, :, :2], axis=2)))
        stats["kp_decode_pos"] = stats.get("kp_decode_pos", 0) + off
        stats["kp_decode_score"] = max(stats.get("kp_decode_score", 0.0), sd)
        report.check("keypoint decoding", off == 0 and sd <= KEYPOINT_DECODE_TIE,
                     f"torchvision's heatmaps_to_keypoints on our {len(dets)} detections' heatmaps: "
                     f"{exact} of {len(dets) * K} points the same, {off} not a maximum of its map "
                     f"(within {KEYPOINT_DECODE_TIE:g}); max|score diff| {sd:.3g} (tol "
                     f"{KEYPOINT_DECODE_TIE:g})")

    if not matched:
        report.check("keypoints", False, "no matched detection to compare keypoints of")
        return
    ours = np.array([dets[j]["keypoints"] for j in jj], np.float64)      # [M, K, 3]
    theirs_xy = ref["keypoints"][ii][:, :, :2].astype(np.float64)
    theirs_s = ref["keypoint_scores"][ii].astype(np.float64)
    dpos = np.abs(ours[:, :, :2] - theirs_xy).max(axis=2)                 # [M, K]
    dscore = np.abs(ours[:, :, 2] - theirs_s)
    dscore_rel = dscore / np.maximum(1.0, np.abs(theirs_s))
    stats["kp_pos"] = max(stats.get("kp_pos", 0.0), float(dpos.max()))
    stats["kp_score"] = max(stats.get("kp_score", 0.0), float(dscore.max()))
    stats["kp_score_rel"] = max(stats.get("kp_score_rel", 0.0), float(dscore_rel.max()))
    far_mask = dpos > KEYPOINT_POS_TOL
    ties = _keypoint_ties(ref, ii, jj, pts if pts is not None and pts.shape == (len(dets), K, 3)
                          else None, far_mask)
    far = int(np.count_nonzero(far_mask)) - len(ties)
    msg = (f"{len(matched)} matched detections x {K} keypoints: max|position diff| "
           f"{dpos.max():.3g} px (tol {KEYPOINT_POS_TOL:g}, {far} over"
           + (f", {len(ties)} more at a tie of torchvision's map" if ties else "")
           + f"), max|score diff| {dscore.max():.3g}, relative to max(1, |score|) "
           f"{dscore_rel.max():.3g} (tol {KEYPOINT_SCORE_TOL:g})")
    for m, k, top, at in ties:
        msg += (f"; tie: torchvision #{ii[m]} keypoint {k}: ours {ours[m, k].round(3).tolist()}, "
                f"torchvision {theirs_xy[m, k].round(3).tolist()}, torchvision's map {top:.6f} "
                f"at its maximum and {at:.6f} at ours")
    stats["kp_ties"] = stats.get("kp_ties", 0) + len(ties)
    if far:
        tied = {(m, k) for m, k, _, _ in ties}
        m, k = max(((m, k) for m, k in zip(*np.nonzero(far_mask)) if (m, k) not in tied),
                   key=lambda mk: dpos[mk])
        msg += (f"; worst torchvision #{ii[m]} keypoint {k}: ours {ours[m, k].round(3).tolist()}, "
                f"torchvision {theirs_xy[m, k].round(3).tolist()} score {theirs_s[m, k]:.4f}")
    report.check("keypoints", far == 0 and float(dscore_rel.max()) <= KEYPOINT_SCORE_TOL, msg)


def _bicubic_at(maps, roi, points):
    """heatmaps_to_keypoints' bicubic maps of @maps ([K, H, W]) resized to @roi's
    ceil'd size, read at @points ([K, 2+]: resized-image pixels, each mapped back to
    the map's pixel, the inverse of (p + 0.5) * w / ceil(w) + x1): (values there [K],
    each map's maximum [K])."""
    x1, y1, x2, y2 = (torch.tensor(v, dtype=torch.float32) for v in roi)
    w = int(torch.clamp(x2 - x1, min=1).ceil().item())
    h = int(torch.clamp(y2 - y1, min=1).ceil().item())
    with torch.no_grad():
        m = F.interpolate(torch.from_numpy(np.ascontiguousarray(maps))[:, None], size=(h, w),
                          mode="bicubic", align_corners=False)[:, 0].numpy()
    px = np.rint((points[:, 0].astype(np.float64) - float(x1)) * w
                 / max(float(x2 - x1), 1.0) - 0.5).astype(np.int64).clip(0, w - 1)
    py = np.rint((points[:, 1].astype(np.float64) - float(y1)) * h
                 / max(float(y2 - y1), 1.0) - 0.5).astype(np.int64).clip(0, h - 1)
    return m[np.arange(len(m)), py, px], m.reshape(len(m), -1).max(axis=1)


def _keypoint_ties(ref, ii, jj, pts, far_mask):
    """The keypoints of far_mask ([matched, K]: farther than KEYPOINT_POS_TOL from
    torchvision's) where torchvision's own bicubic map (from its heatmap and RoI) has,
    at our point (pts: our dump's keypoints, resized-image pixels), a value within
    KEYPOINT_SCORE_TOL x max(1, |max|) of its maximum: a map with two maxima that
    close has no argmax at the precision both sides agree to (the heatmaps within
    KEYPOINT_HEATMAP_REL_TOL, the scores within KEYPOINT_SCORE_TOL), and either point
    is torchvision's answer up to its rounding. Measured (2026-12-07, image 0 at
    384x512, torchvision #28 keypoint 6): torchvision's map has maxima 1.973141 and
    1.973126, 4.6 frame pixels apart; the engine's map the same two, 1.973228 and
    1.973218, in the other order. Returns [(m, k, max, value at ours)]."""
    if pts is None or not far_mask.any():
        return []
    ties = []
    for m, k in zip(*np.nonzero(far_mask)):
        i, j = int(ii[m]), int(jj[m])
        at, top = _bicubic_at(ref["keypoint_heatmaps"][i][k:k + 1], ref["keypoint_rois"][i],
                              pts[j, k:k + 1])
        at, top = float(at[0]), float(top[0])
        if top - at <= KEYPOINT_SCORE_TOL * max(1.0, abs(top)):
            ties.append((int(m), int(k), top, at))
    return ties


# ---------------------------------------------------------------------------------
# Export and the engine
# ---------------------------------------------------------------------------------

def export_model(model, path, class_names=None, dtype="f32"):
    sys.path.insert(0, TOOLSDIR)
    try:
        import export_torchvision
    finally:
        sys.path.pop(0)
    return export_torchvision.export(model, path, class_names=class_names, dtype=dtype)


_ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "F64": ("<f8", 8),
              "I64": ("<i8", 8), "I32": ("<i4", 4)}


def read_safetensors(path):
    """{name: float32/int numpy array} and the header's __metadata__, read with numpy
    only (the safetensors package is not in Debian)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        np_dtype, size = _ST_DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F16":
            a = a.astype(np.float32)
        tensors[name] = a
    return tensors, meta


@torch.no_grad()
def load_back(model, tensors):
    """Loads the (rounded) tensors of an exported file back into model, so torchvision
    runs exactly the weights the engine reads. Returns how many tensors were loaded."""
    sd = model.state_dict()
    n = 0
    for name, a in tensors.items():
        if name in sd and sd[name].is_floating_point():
            sd[name].copy_(torch.from_numpy(np.array(a, dtype=np.float32)).reshape(sd[name].shape))
            n += 1
    return n


def run_engine(vd_detect, model_path, image_paths, dump_dir, threads, threshold, timeout):
    """Runs vd-detect --json --dump on image_paths. Returns (list of parsed JSON lines,
    seconds, stderr). Raises RuntimeError with the output on failure."""
    if os.path.isdir(dump_dir):
        shutil.rmtree(dump_dir)
    os.makedirs(dump_dir)
    cmd = [vd_detect, "--model", model_path, "--device", "cpu", "--precision", "fp32",
           "--threads", str(threads), "--threshold", repr(float(threshold)), "--json", "--dump",
           dump_dir] + list(image_paths)
    log("$ " + " ".join(cmd))
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"vd-detect timed out after {timeout} s")
    dt = time.monotonic() - t
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"vd-detect exited with {p.returncode}\nstdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}")
    lines = [l for l in out.splitlines() if l.strip()]
    if len(lines) != len(image_paths):
        raise RuntimeError(f"vd-detect printed {len(lines)} JSON lines for {len(image_paths)} images:\n{out[-2000:]}")
    try:
        results = [json.loads(l) for l in lines]
    except ValueError as exc:
        raise RuntimeError(f"vd-detect printed invalid JSON ({exc}):\n{out[-2000:]}")
    return results, dt, err


def load_dump(dump_dir, index):
    d = os.path.join(dump_dir, str(index))
    out = {}
    if os.path.isdir(d):
        for f in os.listdir(d):
            if f.endswith(".npy"):
                out[f[:-4]] = np.load(os.path.join(d, f))
    return out


# ---------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------

def iou_matrix(a, b):
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / union, np.where(np.all(a[:, None] == b[None], -1), 1.0, 0.0))
    return iou


def match(ref_boxes, our_boxes, iou_min, ref_labels=None, our_labels=None,
          ref_scores=None, our_scores=None, score_tol=None):
    """Greedy one-to-one matching in reference order (score descending): each
    reference box takes the unused box of ours with the highest IoU among those with
    the same label, IoU >= iou_min and |score difference| <= score_tol. Returns the
    list of (ref index, our index or -1)."""
    iou = iou_matrix(ref_boxes, our_boxes)
    ok = iou >= iou_min
    if ref_labels is not None:
        ok &= np.asarray(ref_labels)[:, None] == np.asarray(our_labels)[None, :]
    if score_tol is not None:
        ok &= np.abs(np.asarray(ref_scores, np.float64)[:, None]
                     - np.asarray(our_scores, np.float64)[None, :]) <= score_tol
    used = np.zeros(iou.shape[1], bool)
    pairs = []
    for i in range(iou.shape[0]):
        cand = np.where(ok[i] & ~used)[0]
        if len(cand) == 0:
            pairs.append((i, -1))
            continue
        j = cand[np.argmax(iou[i, cand])]
        used[j] = True
        pairs.append((i, j))
    return pairs, iou


class Report:
    """Stage checks of one image, in pipeline order."""

    def __init__(self, title):
        self.title = title
        self.checks = []   # (stage, ok, message)

    def check(self, stage, ok, message):
        self.checks.append((stage, bool(ok), message))
        log(f"  {'ok  ' if ok else 'FAIL'} {stage}: {message}")
        return ok

    def first_failure(self):
        for stage, ok, message in self.checks:
            if not ok:
                return stage, message
        return None


def count_ok(n_ours, n_ref):
    return abs(n_ours - n_ref) <= math.ceil(COUNT_REL_TOL * n_ref)


def describe_detections(scores, thr):
    s = np.asarray(scores)
    return (len(s), int(((s >= thr) & (s < 0.5)).sum()), int((s >= 0.5).sum()))


def check_reference_spread(report, ref, thr):
    n, low, high = describe_detections(ref["scores"], thr)
    s = ref["scores"]
    rng = f"[{s.min():.3f}, {s.max():.3f}]" if n else "[]"
    return report.check(
        "reference spread", n >= MIN_REF_DETECTIONS and low >= MIN_REF_LOW and high >= MIN_REF_HIGH,
        f"torchvision: {n} detections, {low} in [{thr}, 0.5), {high} >= 0.5, scores {rng} "
        f"(need >= {MIN_REF_DETECTIONS}, {MIN_REF_LOW}, {MIN_REF_HIGH})")


def compare_image(report, ref, result, dump, class_names, size_hw, stats, feature_rel_tol=FEATURE_REL_TOL):
    """Compares one image stage by stage. ref: reference(); result: vd-detect's JSON
    object; dump: load_dump(). stats collects numbers for the summary."""
    compare_front(report, ref, result, dump, size_hw, stats, feature_rel_tol)
    compare_proposals(report, ref, dump, stats)
    return compare_detections(report, ref, result, class_names, stats)


def _need(report, dump, name):
    if name not in dump:
        report.check(name, False, "missing from the dump")
        return None
    return dump[name]


def compare_front(report, ref, result, dump, size_hw, stats, feature_rel_tol=FEATURE_REL_TOL):
    """The stages every kind of detector shares: frame size, resized size, input,
    anchors, FPN levels (every 'fpn.*' tensor of ref)."""
    h0, w0 = size_hw

    # Output frame size: the JSON echoes the original size.
    report.check("json size", (result.get("width"), result.get("height")) == (w0, h0),
                 f"width/height {result.get('width')}x{result.get('height')}, image {w0}x{h0}")

    def need(name):
        return _need(report, dump, name)

    # Resized size: exact (integer sizes; the engine rounds the resize scale as the model
    # file records that this torchvision does).
    a = need("image_size")
    if a is not None:
        report.check("image_size", np.array_equal(np.asarray(a).reshape(-1)[:2], ref["image_size"]),
                     f"ours {np.asarray(a).reshape(-1).tolist()}, torchvision {ref['image_size'].tolist()}")

    # Input: padded shape exact, values within INPUT_ABS_TOL (see its comment).
    a = need("input")
    if a is not None:
        r = ref["input"]
        if a.shape != r.shape:
            report.check("input", False, f"shape ours {list(a.shape)}, torchvision {list(r.shape)}")
        else:
            d = float(np.abs(a.astype(np.float64) - r).max())
            stats["input"] = max(stats.get("input", 0.0), d)
            report.check("input", d <= INPUT_ABS_TOL,
                         f"shape {list(r.shape)}, max|diff| {d:.3g} (tol {INPUT_ABS_TOL:g})")

    # Anchors: exact. They are integers computed from integer sizes (spec 3).
    a = need("anchors")
    if a is not None:
        r = ref["anchors"]
        if a.shape != r.shape:
            report.check("anchors", False, f"shape ours {list(a.shape)}, torchvision {list(r.shape)} "
                         f"(per level {ref['_levels']})")
        else:
            bad = np.where(np.any(a != r, axis=1))[0]
            msg = f"{r.shape[0]} anchors, {len(bad)} differ"
            if len(bad):
                msg += f"; first at {bad[0]}: ours {a[bad[0]].tolist()}, torchvision {r[bad[0]].tolist()}"
            report.check("anchors", len(bad) == 0, msg)

    # FPN features: feature_rel_tol of max|ref| (see FEATURE_REL_TOL).
    for name in [k for k in ref if k.startswith("fpn.")]:
        a = need(name)
        if a is None:
            continue
        r = ref[name]
        if a.shape != r.shape:
            report.check(name, False, f"shape ours {list(a.shape)}, torchvision {list(r.shape)}")
            continue
        check_relative(report, name, a, r, stats, "feature_rel", feature_rel_tol)


def check_relative(report, name, a, r, stats, stat, tol):
    """Stage @name, ours @a against torchvision's @r of the same shape: max|diff| within
    @tol of max|ref|; the largest such fraction so far in @stats[@stat]."""
    diff = np.abs(a.astype(np.float64) - r)
    d = float(diff.max())
    scale = float(np.abs(r).max())
    rel = d / scale if scale > 0 else d
    stats[stat] = max(stats.get(stat, 0.0), rel)
    where = np.unravel_index(int(diff.argmax()), diff.shape)
    report.check(name, rel <= tol,
                 f"shape {list(r.shape)}, max|diff| {d:.3g} = {rel:.3g} of max|ref| {scale:.3g} "
                 f"(tol {tol:g}); worst at {list(map(int, where))}")


def compare_proposals(report, ref, dump, stats):
    """The two-stage detectors' RPN proposals and box head outputs; returns the
    proposals' matched pairs."""
    def need(name):
        return _need(report, dump, name)

    pairs = []
    # Proposals: >= 97 % of torchvision's matched by IoU >= 0.99, counts within 3 %.
    a = need("proposals")
    if a is not None:
        r = ref["proposals"]
        pairs, iou = match(r, a, PROPOSAL_IOU)
        m = sum(j >= 0 for _, j in pairs)
        frac = m / max(len(r), 1)
        stats.setdefault("proposal_frac", []).append(frac)
        report.check("proposals", frac >= PROPOSAL_MIN_MATCHED and count_ok(len(a), len(r)),
                     f"ours {len(a)}, torchvision {len(r)}; {m} matched at IoU >= {PROPOSAL_IOU} "
                     f"({100 * frac:.2f} %, need {100 * PROPOSAL_MIN_MATCHED:.0f} %)")
        ps = need("proposal_scores")
        if ps is not None:
            exact = [(i, j) for i, j in pairs if j >= 0 and iou[i, j] > 0.9999]
            if exact and len(ps) == len(a):
                d = max(abs(float(ps[j]) - float(ref["proposal_scores"][i])) for i, j in exact)
                report.check("proposal_scores", d <= DETECTION_SCORE_TOL,
                             f"max|diff| {d:.3g} over {len(exact)} shared proposals (tol {DETECTION_SCORE_TOL:g})")
            else:
                report.check("proposal_scores", False,
                             f"{len(ps)} scores for {len(a)} proposals, {len(exact)} shared proposals")
        # Box head outputs for shared proposals: HEAD_REL_TOL of max|ref|.
        for name in ("box_logits", "box_regression"):
            b = need(name)
            if b is None:
                continue
            rb = ref[name]
            exact = [(i, j) for i, j in pairs if j >= 0 and iou[i, j] > 0.9999]
            if b.ndim != 2 or b.shape[1] != rb.shape[1] or b.shape[0] != len(a) or not exact:
                report.check(name, False, f"shape ours {list(b.shape)}, torchvision {list(rb.shape)}, "
                             f"{len(exact)} shared proposals")
                continue
            ii = np.array([i for i, _ in exact])
            jj = np.array([j for _, j in exact])
            d = float(np.abs(b[jj].astype(np.float64) - rb[ii]).max())
            scale = float(np.abs(rb).max())
            rel = d / scale if scale > 0 else d
            stats["head_rel"] = max(stats.get("head_rel", 0.0), rel)
            report.check(name, rel <= HEAD_REL_TOL,
                         f"max|diff| {d:.3g} = {rel:.3g} of max|ref| {scale:.3g} over {len(exact)} "
                         f"shared proposals (tol {HEAD_REL_TOL:g})")
    return pairs


def compare_detections(report, ref, result, class_names, stats):
    """The final detections (every kind of detector); returns their matched pairs."""
    # Final detections one by one: same label, IoU >= 0.99, |score diff| <= 1e-3;
    # >= 97 % of torchvision's matched, counts within 3 %.
    dets = result.get("detections", [])
    ob = np.array([d["box"] for d in dets], np.float64).reshape(-1, 4)
    osc = np.array([d["score"] for d in dets], np.float64)
    olab = np.array([d["label"] for d in dets], np.int64)
    pairs, iou = match(ref["boxes"], ob, DETECTION_IOU, ref["labels"], olab, ref["scores"], osc,
                       DETECTION_SCORE_TOL)
    m = sum(j >= 0 for _, j in pairs)
    n_ref = len(ref["scores"])
    frac = m / n_ref if n_ref else 1.0
    sd = max([abs(osc[j] - ref["scores"][i]) for i, j in pairs if j >= 0], default=0.0)
    miou = min([iou[i, j] for i, j in pairs if j >= 0], default=1.0)
    stats.setdefault("detection_frac", []).append(frac)
    stats["score_diff"] = max(stats.get("score_diff", 0.0), sd)
    msg = (f"ours {len(osc)}, torchvision {n_ref}; {m} matched ({100 * frac:.2f} %, need "
           f"{100 * DETECTION_MIN_MATCHED:.0f} %); max|score diff| {sd:.3g} (tol {DETECTION_SCORE_TOL:g}); "
           f"min IoU {miou:.6f}")
    unmatched = [i for i, j in pairs if j < 0]
    if unmatched:
        i = unmatched[0]
        full = iou_matrix(ref["boxes"][i:i + 1], ob)[0] if len(ob) else np.zeros(0)
        k = int(full.argmax()) if len(full) else -1
        msg += (f"; first unmatched torchvision #{i} label {int(ref['labels'][i])} score "
                f"{ref['scores'][i]:.6f} box {np.round(ref['boxes'][i], 3).tolist()}")
        if k >= 0:
            msg += (f", nearest ours label {int(olab[k])} score {osc[k]:.6f} IoU {full[k]:.5f} "
                    f"box {np.round(ob[k], 3).tolist()}")
    report.check("detections", frac >= DETECTION_MIN_MATCHED and count_ok(len(osc), n_ref), msg)

    # Order and names: sorted by score, label_name from the class list.
    report.check("detections sorted", bool(np.all(np.diff(osc) <= 0)), "scores in descending order")
    if class_names is not None:
        bad = [d for d in dets if d.get("label_name") != class_names[d["label"]]
               if 0 <= d["label"] < len(class_names)]
        report.check("label_name", not bad, f"{len(bad)} wrong" + (f", e.g. {bad[0]}" if bad else ""))
    return pairs


# ---------------------------------------------------------------------------------
# A whole test: model, images, engine, reference, comparison
# ---------------------------------------------------------------------------------

def run_parity(args, name, model, images, class_names=None, dtype="f32", min_size=800, max_size=1333,
               calibrate_kwargs=None, engine_timeout=600, feature_rel_tol=FEATURE_REL_TOL):
    """images: list of (h, w, seed). Calibrates (on every image), exports,
    runs the engine once on all images and the reference on each, compares; returns
    the process exit status. The tests give all their images one seed: the same scene
    rendered at several sizes has similar statistics at every size, so one calibration
    gives every image tens of detections (different scenes can differ by a factor of
    ten in detection count under the same weights)."""
    t_start = time.monotonic()
    setup_torch(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    work = os.path.abspath(args.workdir)

    imgs = [synthetic_image(h, w, seed) for h, w, seed in images]

    t = time.monotonic()
    cache = []
    desc = calibrate(model, imgs, cache=cache, **(calibrate_kwargs or {}))
    log(f"{name}: {desc} ({time.monotonic() - t:.1f} s)")
    if model.roi_heads.has_mask():
        t = time.monotonic()
        desc = calibrate_masks(model, imgs[0], cached=cache[0])
        log(f"{name}: {desc} ({time.monotonic() - t:.1f} s)")
    if model.roi_heads.has_keypoint():
        t = time.monotonic()
        desc = describe_keypoints(model, imgs[0], cached=cache[0])
        log(f"{name}: {desc} ({time.monotonic() - t:.1f} s)")

    model_path = os.path.join(work, f"{name}.safetensors")
    t = time.monotonic()
    try:
        config = export_model(model, model_path, class_names=class_names, dtype=dtype)
    except Exception as exc:
        log(f"FAIL {name}: export failed: {type(exc).__name__}: {exc}")
        return 1
    rule = config["transform"]["resize_scale"]
    log(f"{name}: exported {dtype} to {model_path} ({os.path.getsize(model_path) / 1e6:.1f} MB, "
        f"{time.monotonic() - t:.1f} s), resize scale in {rule}")
    other = "double" if rule == "float32" else "float32"
    for h, w, _ in images:
        ours, theirs = (resized_size(h, w, min_size, max_size, r) for r in (rule, other))
        log(f"{name}: image {h}x{w}: resized {ours[0]}x{ours[1]} with the {rule} scale"
            + ("" if theirs == ours else f" ({theirs[0]}x{theirs[1]} with the {other} one)"))
    if dtype != "f32":
        tensors, _ = read_safetensors(model_path)
        n = load_back(model, tensors)
        log(f"{name}: loaded {n} rounded tensors back into torchvision")
        cache = []  # computed with the weights before the rounding

    paths = []
    for i, img in enumerate(imgs):
        p = os.path.join(work, f"image{i}_{img.shape[0]}x{img.shape[1]}.npy")
        np.save(p, img)
        paths.append(p)

    thr = model.roi_heads.score_thresh
    dump_dir = os.path.join(work, "dump")
    engine_error = None
    try:
        results, dt, err = run_engine(args.vd_detect, model_path, paths, dump_dir, args.threads, thr,
                                      engine_timeout)
        log(f"{name}: vd-detect took {dt:.1f} s for {len(paths)} images")
    except (RuntimeError, OSError) as exc:
        engine_error = str(exc)
        results = None

    failed = []
    stats = {}
    ref_dir = os.path.join(work, "reference")
    for i, img in enumerate(imgs):
        h, w = img.shape[:2]
        t = time.monotonic()
        ref = reference(model, img, cache[i] if cache else None)
        reused = ("" if not ref["_features_cached"] else " (the calibration's FPN features" +
                  (" and box-head output)" if ref["_box_features_cached"] else ")"))
        log(f"{name}: image {i} ({h}x{w}): torchvision {time.monotonic() - t:.1f} s{reused}, "
            f"resized {ref['image_size'].astype(int).tolist()}, padded {list(ref['input'].shape[2:])}, "
            f"{len(ref['anchors'])} anchors, {len(ref['proposals'])} proposals, "
            f"{len(ref['scores'])} detections")
        os.makedirs(os.path.join(ref_dir, str(i)), exist_ok=True)
        for k, v in ref.items():
            if not k.startswith("_"):
                np.save(os.path.join(ref_dir, str(i), k + ".npy"), v)
        report = Report(f"{name} image {i} {h}x{w}")
        spread_ok = check_reference_spread(report, ref, thr)
        if results is not None:
            dump = load_dump(dump_dir, i)
            pairs = compare_image(report, ref, results[i], dump, class_names, (h, w), stats,
                                  feature_rel_tol)
            if "masks" in ref:
                compare_masks(report, ref, results[i], dump, pairs, (h, w), stats)
            if "keypoints" in ref:
                compare_keypoints(report, ref, results[i], dump, pairs, stats)
        first = report.first_failure()
        if first:
            failed.append((i, h, w, first))
        elif not spread_ok:
            failed.append((i, h, w, ("reference spread", "")))

    log(f"SUMMARY {name} ({dtype}): images {len(imgs)}, "
        f"proposals matched {_fmt_fracs(stats.get('proposal_frac'))}, "
        f"detections matched {_fmt_fracs(stats.get('detection_frac'))}, "
        f"max|score diff| {stats.get('score_diff', float('nan')):.3g}, "
        f"max feature diff {stats.get('feature_rel', float('nan')):.3g} of max|ref|, "
        f"max head diff {stats.get('head_rel', float('nan')):.3g} of max|ref|, "
        f"max input diff {stats.get('input', float('nan')):.3g}"
        + (f", max mask prob diff {stats['mask_prob']:.3g}, min mask IoU {stats['mask_iou']:.5f}"
           if "mask_iou" in stats else "")
        + (f", keypoints of {stats['kp_matched']} matched detections: max|position diff| "
           f"{stats['kp_pos']:.3g} px ({stats.get('kp_ties', 0)} at a tie of torchvision's map), "
           f"max|score diff| {stats['kp_score']:.3g} "
           f"({stats['kp_score_rel']:.3g} of max(1, |score|)), heatmaps "
           f"{stats['kp_heatmap_rel']:.3g} of max|ref|, features {stats['kp_feature_rel']:.3g}; "
           f"decoding on our heatmaps: {stats['kp_decode_pos']} positions off torchvision's "
           f"argmax, max|score diff| {stats['kp_decode_score']:.3g}"
           if "kp_pos" in stats else "") + "; "
        f"{time.monotonic() - t_start:.0f} s")
    log(f"reference tensors in {ref_dir}/<i>/, ours in {dump_dir}/<i>/")
    if engine_error is not None:
        log(f"FAIL {name}: the engine did not run: {engine_error}")
        return 1
    if failed:
        for i, h, w, (stage, message) in failed:
            log(f"FAIL {name}: image {i} ({h}x{w}): first divergence at '{stage}': {message}")
        return 1
    if not args.keep:
        os.remove(model_path)
    log(f"PASS {name}")
    return 0


def run_parity_at_size(args, name, model, seed, min_size=800, max_size=1333, **kwargs):
    """run_parity on one image of args.size (--size HxW), the test named
    <name>_<H>x<W>, its scene seed @seed + H + W (another scene at each size)."""
    h, w = args.size
    return run_parity(args, f"{name}_{h}x{w}", model, [(h, w, seed + h + w)],
                      min_size=min_size, max_size=max_size, **kwargs)


def _fmt_fracs(fr):
    if not fr:
        return "n/a"
    return "min {:.2f} %".format(100 * min(fr))
