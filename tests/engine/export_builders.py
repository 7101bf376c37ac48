#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""torchvision's one-stage detectors and Keypoint R-CNN through the exporter and the loader.

For each of retinanet_resnet50_fpn, retinanet_resnet50_fpn_v2, fcos_resnet50_fpn,
ssd300_vgg16, ssdlite320_mobilenet_v3_large and keypointrcnn_resnet50_fpn: builds the
model with constructor arguments other than the builder's defaults (classes, sizes,
thresholds, detections per image, top-k candidates, anchors or default boxes, keypoint
count), exports it with tools/export_torchvision.py (random weights, f16, small sizes),
checks every configuration value against the model object, and checks that vd-detect
loads it (every family: the RetinaNets, FCOS, SSD and SSDlite with vd-detect --info's
model line; Keypoint R-CNN with its keypoint count, and COCO's names and skeleton with
--coco-names), or, for a builder listed in MISSING (none today), refuses the file with
a message naming the builder and what the engine lacks. The command line (--builder,
--coco-names) is checked on Keypoint R-CNN and SSDlite, and SSDlite files with one
thing wrong in their layer lists, default boxes or heads are refused naming it.

Usage: export_builders.py VD_DETECT. Exit 77 (skip) without torch/torchvision.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import warnings

try:
    import torch
    import torchvision  # noqa: F401
    from torchvision.models import detection
    from torchvision.models.detection.anchor_utils import AnchorGenerator, DefaultBoxGenerator
except ImportError as e:
    print(f"SKIP: no torch/torchvision ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import export_torchvision  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
FAILURES = []

# What vd-detect's message must say besides the builder and the architecture, for the
# builders it refuses (engine/vd_model_families.c); it runs every one today: accepted()
# checks they load
MISSING = {}

# The backbone vd-detect --info names in its model line, by architecture
BACKBONE_NAMES = {"retinanet": "resnet50-fpn", "fcos": "resnet50-fpn", "ssd": "vgg16",
                  "ssdlite": "mobilenet_v3_large"}

# COCO's person keypoints and skeleton (the "person" category of COCO 2017's
# person_keypoints annotations), written out here so that the exporter's own lists
# are checked against them
COCO_PERSON_KEYPOINTS = [
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
]
COCO_PERSON_SKELETON = [
    [16, 14], [14, 12], [17, 15], [15, 13], [12, 13], [6, 12], [7, 13], [6, 7], [6, 8],
    [7, 9], [8, 10], [9, 11], [2, 3], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6], [5, 7],
]


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def equal(got, want, what):
    check(got == want, f"{what}: {got!r} != {want!r}")


def read_config(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["config"])


def floats(values):
    return [float(v) for v in values]


# builder -> (architecture, constructor arguments other than its defaults)
def one_stage_kwargs():
    retina_anchors = AnchorGenerator(tuple((s, s * 2) for s in (16, 32, 64, 128, 256)),
                                     ((0.5, 1.0),) * 5)
    fcos_anchors = AnchorGenerator(tuple((s,) for s in (4, 8, 16, 32, 64)), ((1.0,),) * 5)
    common = dict(num_classes=4, score_thresh=0.125, nms_thresh=0.375, detections_per_img=37,
                  topk_candidates=123)
    sized = dict(common, min_size=96, max_size=128)
    return {
        "retinanet_resnet50_fpn": ("retinanet", dict(sized, anchor_generator=retina_anchors)),
        # v2's builder makes its own anchor generator (read from the model all the same)
        "retinanet_resnet50_fpn_v2": ("retinanet", dict(sized)),
        "fcos_resnet50_fpn": ("fcos", dict(sized, anchor_generator=fcos_anchors)),
        "ssd300_vgg16": ("ssd", dict(common)),
        # SSD's builders make their own DefaultBoxGenerator and take no sizes
        "ssdlite320_mobilenet_v3_large": ("ssdlite", dict(common)),
        "keypointrcnn_resnet50_fpn": ("keypointrcnn", dict(num_classes=3, num_keypoints=5,
                                                           min_size=96, max_size=128,
                                                           box_score_thresh=0.125,
                                                           box_nms_thresh=0.375,
                                                           box_detections_per_img=37)),
    }


def check_transform(cfg, tr, name):
    t = cfg["transform"]
    equal(t["min_size"], tr.min_size[-1], f"{name}: transform.min_size")
    equal(t["max_size"], tr.max_size, f"{name}: transform.max_size")
    equal(t["image_mean"], floats(tr.image_mean), f"{name}: transform.image_mean")
    equal(t["image_std"], floats(tr.image_std), f"{name}: transform.image_std")
    equal(t["size_divisible"], tr.size_divisible, f"{name}: transform.size_divisible")
    if tr.fixed_size is not None:
        equal(t.get("fixed_size"), list(tr.fixed_size), f"{name}: transform.fixed_size")
    else:
        check("fixed_size" not in t and "resize_scale" in t, f"{name}: transform without fixed_size")
    check(t.get("resize_arithmetic") in ("torch1", "torch2"), f"{name}: transform.resize_arithmetic")


def check_resnet_fpn(cfg, model, name, extra):
    bb, fpn = cfg["backbone"], cfg["fpn"]
    equal((bb["type"], bb["depth"], bb["layers"]), ("resnet", 50, [3, 4, 6, 3]), f"{name}: backbone")
    body = model.backbone.body
    equal(bb["returned_layers"], sorted(int(k[5:]) for k in body.return_layers),
          f"{name}: backbone.returned_layers")
    equal(fpn["out_channels"], model.backbone.out_channels, f"{name}: fpn.out_channels")
    equal(fpn["extra_block"], extra, f"{name}: fpn.extra_block")
    if extra == "p6p7":
        eb = model.backbone.fpn.extra_blocks
        equal((fpn["extra_in_channels"], fpn["extra_out_channels"], fpn["use_P5"]),
              (eb.p6.in_channels, eb.p6.out_channels, eb.use_P5), f"{name}: fpn P6/P7")
    bn = next(m for m in body.modules() if isinstance(m, torch.nn.modules.batchnorm._NormBase)
              or type(m).__name__ == "FrozenBatchNorm2d")
    equal(bb["norm_eps"], float(bn.eps), f"{name}: backbone.norm_eps")


def check_one_stage(cfg, model, name, arch):
    head = cfg["head"]
    for key in ("score_thresh", "nms_thresh", "detections_per_img", "topk_candidates"):
        equal(head[key], getattr(model, key), f"{name}: head.{key}")
    equal((head["score_thresh"], head["nms_thresh"], head["detections_per_img"],
           head["topk_candidates"]), (0.125, 0.375, 37, 123), f"{name}: the arguments given")
    equal(cfg["num_classes"], 4, f"{name}: num_classes")
    ag = model.anchor_generator
    if arch in ("retinanet", "fcos"):
        check_resnet_fpn(cfg, model, name, "p6p7")
        equal(cfg["anchors"]["sizes"], [floats(s) for s in ag.sizes], f"{name}: anchors.sizes")
        equal(cfg["anchors"]["aspect_ratios"], [floats(r) for r in ag.aspect_ratios],
              f"{name}: anchors.aspect_ratios")
        equal(head["num_anchors"], model.head.classification_head.num_anchors, f"{name}: num_anchors")
        gn = [m for m in model.head.classification_head.conv.modules()
              if isinstance(m, torch.nn.GroupNorm)]
        equal(head["norm"], "group_norm" if gn else "none", f"{name}: head.norm")
        if gn:
            equal((head["num_groups"], head["norm_eps"]), (gn[0].num_groups, gn[0].eps),
                  f"{name}: head GroupNorm")
        convs = [m for m in model.head.classification_head.conv.modules()
                 if isinstance(m, torch.nn.Conv2d)]
        equal(head["classification_convs"], len(convs), f"{name}: head.classification_convs")
        if arch == "retinanet":
            equal(head["bbox_reg_weights"], floats(model.box_coder.weights), f"{name}: box coder")
        else:
            check(head["centerness"] and head["box_coder"] == "linear", f"{name}: FCOS head")
    else:
        check(isinstance(ag, DefaultBoxGenerator), f"{name}: DefaultBoxGenerator")
        a = cfg["anchors"]
        equal(a["type"], "default_boxes", f"{name}: anchors.type")
        equal(a["aspect_ratios"], [floats(r) for r in ag.aspect_ratios], f"{name}: aspect_ratios")
        equal(a["scales"], floats(ag.scales), f"{name}: anchors.scales")
        equal(a["steps"], None if ag.steps is None else list(ag.steps), f"{name}: anchors.steps")
        equal(a["clip"], ag.clip, f"{name}: anchors.clip")
        equal(head["num_anchors"], ag.num_anchors_per_location(), f"{name}: head.num_anchors")
        equal(head["bbox_reg_weights"], floats(model.box_coder.weights), f"{name}: box coder")
        bb = cfg["backbone"]
        if arch == "ssd":
            equal(bb["type"], "vgg16", f"{name}: backbone.type")
            equal(bb["l2_norm"]["channels"], model.backbone.scale_weight.numel(), f"{name}: L2 norm")
            convs = [o for o in bb["features"] if o["op"] == "conv"]
            equal(len(convs), 10, f"{name}: VGG16 convolutions up to conv4_3")
            equal(len(bb["extra"]), len(model.backbone.extra), f"{name}: backbone.extra")
        else:
            equal((bb["type"], bb["arch"]), ("mobilenet_v3", "mobilenet_v3_large"), f"{name}: backbone")
            equal(len(bb["stages"]), 2, f"{name}: backbone.stages")
            bn = next(m for m in model.backbone.modules() if isinstance(m, torch.nn.BatchNorm2d))
            equal(bb["norm_eps"], bn.eps, f"{name}: backbone.norm_eps")
            equal(len(head["classification"]), len(ag.aspect_ratios), f"{name}: head levels")


def check_keypoints(cfg, model, name):
    roi = model.roi_heads
    check_resnet_fpn(cfg, model, name, "maxpool")
    equal((cfg["roi_heads"]["score_thresh"], cfg["roi_heads"]["nms_thresh"],
           cfg["roi_heads"]["detections_per_img"]),
          (roi.score_thresh, roi.nms_thresh, roi.detections_per_img), f"{name}: roi_heads")
    equal((roi.score_thresh, roi.nms_thresh, roi.detections_per_img), (0.125, 0.375, 37),
          f"{name}: the arguments given")
    equal(cfg["num_classes"], 3, f"{name}: num_classes")
    equal(cfg["num_keypoints"], roi.keypoint_predictor.out_channels, f"{name}: num_keypoints")
    equal(cfg["num_keypoints"], 5, f"{name}: the keypoint count given")
    kh = cfg["roi_heads"]["keypoint_head"]
    equal(kh["output_size"], roi.keypoint_roi_pool.output_size[0], f"{name}: keypoint output_size")
    equal(len(kh["conv_channels"]), 8, f"{name}: keypoint head convolutions")
    equal(cfg["anchors"]["sizes"], [floats(s) for s in model.rpn.anchor_generator.sizes],
          f"{name}: anchors.sizes")


def refused(vd_detect, path, builder, arch):
    r = subprocess.run([vd_detect, "--info", "--model", path], capture_output=True, text=True,
                       timeout=60)
    message = r.stderr.strip()
    check(r.returncode != 0, f"{builder}: vd-detect accepted the file")
    want = f"{builder} (architecture \"{arch}\"): this engine does not run {MISSING[builder]}"
    check(want in message, f"{builder}: vd-detect's message {message!r} does not say {want!r}")
    if r.returncode != 0 and want in message:
        print(f"ok {builder}: {message.split(': ', 1)[1]}")


def loaded(vd_detect, path, builder, want):
    """vd-detect --info loads a Keypoint R-CNN file and names its keypoints: @want
    is the line it must print."""
    r = subprocess.run([vd_detect, "--info", "--device", "cpu", "--model", path],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"{builder}: vd-detect refused the file: {r.stderr.strip()!r}")
    lines = r.stdout.splitlines()
    check(f"model: keypointrcnn resnet50-fpn, {want[0]} classes" in lines,
          f"{builder}: vd-detect --info's model line in {lines!r}")
    check(want[1] in lines, f"{builder}: vd-detect --info does not print {want[1]!r}: {lines!r}")
    if r.returncode == 0 and want[1] in lines:
        print(f"ok {builder}: loaded, {want[1]}")

def accepted(vd_detect, path, builder, arch, classes=4):
    r = subprocess.run([vd_detect, "--info", "--model", path], capture_output=True, text=True,
                       timeout=60)
    want = f"model: {arch} {BACKBONE_NAMES[arch]}, {classes} classes"
    check(r.returncode == 0 and want in r.stdout,
          f"{builder}: vd-detect --info: status {r.returncode}, {r.stdout.strip()!r} "
          f"{r.stderr.strip()!r} (want {want!r})")
    if r.returncode == 0 and want in r.stdout:
        print(f"ok {builder}: loads ({want})")


def write_config(src, dst, config):
    """@src with its __metadata__ config replaced by @config, into @dst."""
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header["__metadata__"]["config"] = json.dumps(config)
    text = json.dumps(header).encode()
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def malformed_ssd(vd_detect, path, tmp):
    """SSDlite files with one thing wrong in their layer lists, default boxes or
    heads: each refused by vd-detect with a message naming it."""
    def stem(c):
        return c["backbone"]["stages"][0][0]

    def block(c):
        return c["backbone"]["stages"][0][3]["layers"]

    cases = [
        ("a convolution's input channels",
         lambda c: stem(c).update(in_channels=4), "its input has 3"),
        ("an unknown layer",
         lambda c: c["backbone"]["extra"][0].insert(0, {"op": "gelu"}),
         "layer 'gelu' is not supported in an SSD model"),
        ("a grouped convolution",
         lambda c: stem(c).update(groups=3), "a convolution of 3 groups is not supported"),
        ("a batch norm after a convolution with bias",
         lambda c: stem(c).update(bias=True), "a batch-norm not after a convolution without bias"),
        ("an activation first",
         lambda c: c["backbone"]["extra"][0].insert(0, {"op": "relu6"}),
         "an activation not after a convolution"),
        ("a residual block ending with an activation",
         lambda c: block(c).append({"op": "relu"}), "a residual block must end with a convolution"),
        ("a module name the file does not hold",
         lambda c: stem(c).update(name="backbone.features.0.0.9"), "backbone.features.0.0.9.weight"),
        ("the default boxes' scales", lambda c: c["anchors"]["scales"].pop(),
         "'anchors.scales'"),
        ("the head's anchor counts", lambda c: c["head"]["num_anchors"].__setitem__(0, 4),
         "'head.num_anchors[0]' is not the 6 default boxes"),
        ("no fixed size", lambda c: c["transform"].pop("fixed_size"),
         "an SSD model needs 'transform.fixed_size'"),
        ("a head without its last convolution", lambda c: c["head"]["regression"][0].pop(),
         "'head.regression[0]' must end with a convolution"),
    ]
    for what, mutate, want in cases:
        cfg = read_config(path)
        mutate(cfg)
        bad = os.path.join(tmp, "bad.safetensors")
        write_config(path, bad, cfg)
        r = subprocess.run([vd_detect, "--info", "--model", bad], capture_output=True, text=True,
                           timeout=60)
        message = r.stderr.strip()
        check(r.returncode != 0 and want in message,
              f"SSDlite with {what}: status {r.returncode}, message {message!r} (want {want!r})")
        if r.returncode != 0 and want in message:
            print(f"ok SSDlite with {what}: refused")
        os.unlink(bad)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    vd_detect = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="vd-builders-") as tmp:
        for builder, (arch, kwargs) in one_stage_kwargs().items():
            torch.manual_seed(0)
            model = getattr(detection, builder)(weights=None, weights_backbone=None, **kwargs).eval()
            path = os.path.join(tmp, builder + ".safetensors")
            try:
                export_torchvision.export(model, path, dtype="f16", builder=builder)
            except export_torchvision.ExportError as e:
                check(False, f"{builder}: export failed: {e}")
                continue
            cfg = read_config(path)
            equal((cfg.get("architecture"), cfg.get("builder")), (arch, builder), f"{builder}: names")
            check_transform(cfg, model.transform, builder)
            if arch == "keypointrcnn":
                check_keypoints(cfg, model, builder)
                loaded(vd_detect, path, builder, (kwargs["num_classes"], "keypoints: 5"))
            else:
                check_one_stage(cfg, model, builder, arch)
                if builder in MISSING:
                    refused(vd_detect, path, builder, arch)
                else:
                    accepted(vd_detect, path, builder, arch)
            os.unlink(path)

        # the command line: Keypoint R-CNN with COCO's names and skeleton, SSDlite
        path = os.path.join(tmp, "kp.safetensors")
        rc = export_torchvision.main(["--builder", "keypointrcnn_resnet50_fpn", "--coco-names",
                                      "--min-size", "96", "--max-size", "128", "--dtype", "f16", path])
        equal(rc, 0, "keypointrcnn_resnet50_fpn --coco-names: exit status")
        if rc == 0:
            cfg = read_config(path)
            equal(cfg["class_names"], ["__background__", "person"], "--coco-names: class names")
            # COCO's person category as its annotations (person_keypoints_*.json)
            # give it: the 17 names, and the 19 connections 1-based
            equal(cfg["keypoint_names"], COCO_PERSON_KEYPOINTS, "--coco-names: keypoint names")
            equal(cfg["keypoint_skeleton"], [[a - 1, b - 1] for a, b in COCO_PERSON_SKELETON],
                  "--coco-names: skeleton (COCO's, 0-based)")
            equal((cfg["transform"]["min_size"], cfg["builder"]), (96, "keypointrcnn_resnet50_fpn"),
                  "--builder keypointrcnn_resnet50_fpn --min-size 96")
            names = ", ".join(export_torchvision.coco_keypoint_names())
            skeleton = " ".join(f"{a}-{b}" for a, b in export_torchvision.COCO_KEYPOINT_SKELETON)
            loaded(vd_detect, path, "keypointrcnn_resnet50_fpn --coco-names",
                   (2, f"keypoints: 17 ({names}); skeleton: {skeleton}"))
            os.unlink(path)
        path = os.path.join(tmp, "ssdlite.safetensors")
        rc = export_torchvision.main(["--builder", "ssdlite320_mobilenet_v3_large", "--num-classes",
                                      "3", "--dtype", "f16", path])
        equal(rc, 0, "ssdlite320_mobilenet_v3_large: exit status")
        if rc == 0:
            cfg = read_config(path)
            equal((cfg["architecture"], cfg["builder"], cfg["num_classes"], cfg["transform"]["fixed_size"]),
                  ("ssdlite", "ssdlite320_mobilenet_v3_large", 3, [320, 320]),
                  "--builder ssdlite320_mobilenet_v3_large")
            # the builder's defaults, read from the model object
            equal((cfg["head"]["score_thresh"], cfg["head"]["detections_per_img"],
                   cfg["head"]["topk_candidates"]), (0.001, 300, 300), "ssdlite's thresholds")
            equal(cfg["anchors"]["scales"], [0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 1.0], "ssdlite's scales")
            accepted(vd_detect, path, "ssdlite320_mobilenet_v3_large --num-classes 3", "ssdlite", 3)
            malformed_ssd(vd_detect, path, tmp)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("all builders exported, refused or loaded as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
