#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Side-by-side CPU benchmark: visiondetect's vd-detect against torchvision, and
optionally against ONNX Runtime and OpenVINO (--peers), in fp32, bf16 and int8.

All sides run the same weights (one exported model file, which the torchvision side
loads back and the peers get as ONNX) on the same frame with the same number of
threads. Each repetition starts one fresh process per side, rotating which side goes
first; a process loads the model, does --warmup untimed runs, then --runs timed runs.
The report gives, per frame size and side, the median time of all timed runs and their
spread, the ratios of the medians, and each side's peak resident memory (ru_maxrss of
its process, read by a small launcher process that starts it with
getrusage(RUSAGE_CHILDREN): weights, workspace and the Python or C runtime around
them, accurate to about 10 MiB).

Times: torchvision is timed around model([image]) including the uint8 to float
conversion, in torch.no_grad(); vd-detect reports the wall time of each vd_detect() call
on the uint8 frame (--repeat, "time_ms:" lines), pre-processing included, and its
per-stage times (--stages: preprocess, backbone, fpn, rpn, roi_align, box_head,
postprocess), of which the report gives the medians. The peers are timed around the
uint8 to float conversion (numpy) and the session run / infer request.

Load and first inference: every side also reports the time it took to load the model
and the time of its first inference (the first warm-up run, or the first timed run
without warm-up), and the report gives their medians over the repetitions in a table
of its own. Loading is: torchvision, reading the file, building the FasterRCNN and
loading its tensors; vd-detect, vd_model_load() and vd_context_new() ("load_ms:" on
stderr); ONNX Runtime, creating the InferenceSession; OpenVINO, creating the Core and
reading and compiling the ONNX model. Interpreter start and imports are not counted on
any side. Neither side's int8 calibration (below) is counted either.

Sides: one vd-detect side per --precisions entry (fp32, bf16, int8), one torchvision side
per --torch-linear entry (native, onednn) and one side per --peers entry: onnxruntime
(CPUExecutionProvider, intra-op threads = --threads, one inter-op thread, all graph
optimisations) and openvino (CPU plugin, INFERENCE_NUM_THREADS = --threads, one stream,
latency hint, INFERENCE_PRECISION_HINT f32: OpenVINO would otherwise run bf16 on CPUs
with AVX512_BF16 or AMX), plus openvino-bf16 (the same with the bf16 hint) when
/proc/cpuinfo lists avx512_bf16 or amx_bf16; and openvino-int8 (the int8 model NNCF
makes, below, with the f32 hint for the layers it leaves in floating point), plus
openvino-int8-bf16 (the same with the bf16 hint, OpenVINO's default there) where the CPU
has bf16. Each repetition runs every side once, in an order rotated from one
repetition to the next, and the ratios compare every vd-detect side with every other
side (other side's median / vd-detect's: above 1, vd-detect is faster). --only
restricts the torchvision and vd-detect sides; the peers run whenever --peers names
them. The report ends with Markdown tables.

The peers: the model file is rebuilt as torchvision's detector (as the torchvision
side does) and exported with torch.onnx.export (opset 11) on the frame's float tensor,
one .onnx per frame size (the traced graph has the frame's shape; torchvision's
transform, normalisation and resize, is part of it), cached in the work folder under a
name that carries a hash of the model file. The runtimes come from PyPI into a virtual
environment used by this benchmark only (--peer-venv, default build-bench/venv; created
with /usr/bin/python3 -m venv and pip install onnxruntime openvino numpy when missing,
installing Debian's python3-venv first if need be; only the runtimes --peers names
must import), and the peer workers run with its python, which has no torch;
--peer-python PATH runs them with that python instead, making and installing nothing
(tools/bench/arm/run-detect.sh passes a wrapper that runs a venv's python in an arm64
root under qemu, and a --vd-detect wrapper likewise). The report prints the installed
versions and a sanity check per frame and peer: its detections with score >= 0.5, and
the fraction of torchvision's detections with score >= 0.5 (without a torchvision
side, --only vd-detect: vd-detect-fp32's, the same weights) that one of the peer's
detections (each used once) matches with the same label and IoU >= 0.9; under 90 % it
warns that the ONNX export is not faithful (the timing is then of a different
computation), without failing; the int8 and bf16 sides of OpenVINO are instead said to
differ by their rounding when the f32 side of the same ONNX model matches.

int8: vd-detect and OpenVINO both quantize the trained model (post-training static
quantization) on the same calibration frames, per frame size (--calibration-frames N,
default 32): N frames made as the timed frame is (parity_common.synthetic_image at the
frame's size), with the seeds 3000 to 3000+N-1 where the timed frame has 2024, so that
no calibration frame is the timed one; they are written as calib_WxH_NNN.npy beside
the frames. vd-detect-int8 runs the model file that
`vd-detect --calibrate` writes from them (fp32 on the CPU, --threads; the activation
ranges go into its metadata, "int8_calibration"); its check against torchvision and the
match of its detections with vd-detect-fp32's (IoU >= 0.5, same label) show what int8
changed. openvino-int8 runs the openvino peer's ONNX model (the same export) through
NNCF's post-training quantization, nncf.quantize(model, nncf.Dataset(frames,
transform)) with the default preset and subset size N, on the same N frames with the
transform that makes the openvino peer's input (uint8 HWC to float CHW / 255), and an
ignored scope (--nncf-ignore box-ops, the default; NNCF_BOX_OPS): left to its defaults,
NNCF also puts 8-bit FakeQuantize operations on Faster R-CNN's box arithmetic, the
inputs of the RPN's and the box head's box decoding (Add, Multiply, Subtract, Exp on
coordinates), the RoIs in box_roi_pool and the boxes' rescaling to the frame, which
rounds every coordinate to one of 256 steps over its range, so that most boxes miss
IoU 0.9 against torchvision's; the ignored scope keeps those in f32 and quantizes the backbone, the FPN,
the RPN's head and the box head (--nncf-ignore none: NNCF's defaults everywhere). The
quantized model is saved as OpenVINO IR (float weights NNCF leaves alone kept in f32),
cached in the work folder under the ONNX model's name, N and the NNCF version. Its load
time is reading and compiling the IR; the report gives the number of FakeQuantize
operations NNCF inserted, and the number of convolutions and matrix multiplications
OpenVINO then runs in u8/i8, out of all of them. nncf comes from PyPI into the peers'
venv (with scipy, scikit-learn, networkx and a few smaller packages) when an int8 peer
is asked for.

Without --model the benchmark builds torchvision's fasterrcnn_resnet50_fpn (91 classes,
min/max size 800/1333; --arch picks ResNet-18/34-FPN, fasterrcnn_resnet50_fpn_v2 or the
MobileNetV3-Large-FPN builders, fasterrcnn_mobilenet_v3_large_fpn and _320_fpn, instead)
with random weights,
calibrated on the first frame so that the RPN and the box head see realistic score
spreads (tests/parity/parity_common.calibrate), and exports it with
tools/export_torchvision.py. The timing depends on the weights only through the number
of proposals and detections, which the RPN and box head cap.

torchvision's other detectors: --arch retinanet_resnet50_fpn (91 classes, 800/1333),
keypointrcnn_resnet50_fpn (2 classes, 17 keypoints, 800/1333) and
ssdlite320_mobilenet_v3_large (91 classes, the fixed 320x320 transform) build the
builder's own model (nn.BatchNorm2d, as it is made without pretrained weights) with
random weights, calibrated on the first frame as the builder's parity test does
(tests/parity: parity_one_stage.calibrate, about 400 detections before the cap of 300;
parity_common.calibrate, the keypoint head at torchvision's initialisation;
parity_ssd.calibrate), exported as tools/export_torchvision.py --builder NAME does (the
builder's name in the file, from which the torchvision side and the peers' export
rebuild it). The peers' check compares boxes, labels and scores only (Keypoint R-CNN's
keypoints are not compared). vd-detect refuses int8 for the one-stage detectors, and
refuses a model file whose family this engine does not run; such a side is reported as
"refused: MESSAGE" (vd-detect's message) and not timed, and the run goes on. NNCF's
ignored scope on a one-stage graph is its top level (the box decoding, top-k, NMS and
rescaling of postprocess_detections and the transform's postprocess).

Debian's torch is linked against the netlib reference BLAS (torch.__config__ says
BLAS_INFO=generic), on which the box head's fc6 (12544x1024 on 1000 RoIs) alone takes
about 10 s on two cores; convolutions run on oneDNN. --torch-linear onednn runs the box
head's linear layers as oneDNN 1x1 convolutions instead, which shows what a torch build
with a fast GEMM (MKL, OpenBLAS) would do; the default measures torchvision as installed.
The peers bring their own GEMMs (MLAS, oneDNN), which is what --peers is for.

Examples (from the repository root, after ninja -C build):

  /usr/bin/python3 tools/bench_cpu.py
      ResNet-50-FPN, frames 640x480 and 1280x720, 2 threads, 5 repetitions x 1 run,
      vd-detect in fp32 and bf16, torchvision as installed
  /usr/bin/python3 tools/bench_cpu.py --peers onnxruntime,openvino
      the same, plus ONNX Runtime and OpenVINO (and OpenVINO in bf16 where the CPU has it)
  /usr/bin/python3 tools/bench_cpu.py --sizes 640x480 --precisions fp32,bf16,int8 \
      --peers openvino,openvino-int8 --torch-linear onednn --repeats 3 --runs 3
      vd-detect in int8 (on a CPU with VNNI), calibrated on 32 frames, side by side with
      OpenVINO's int8 quantized by NNCF on the same frames, and the fp32 and bf16 sides
  /usr/bin/python3 tools/bench_cpu.py --peers onnxruntime,openvino --precisions fp32 --sizes 640x480 --repeats 3
  /usr/bin/python3 tools/bench_cpu.py --model models/visiondetect-shapes.safetensors --peers openvino \
      --peer-venv /tmp/peers-venv --workdir /tmp/vd-bench
      the bundled model; the venv and (with --workdir) the .onnx files are kept for the next run
  /usr/bin/python3 tools/bench_cpu.py --torch-linear native,onednn --precisions fp32,bf16
  /usr/bin/python3 tools/bench_cpu.py --sizes 640x480 --repeats 3 --runs 2 --threads 4
  /usr/bin/python3 tools/bench_cpu.py --arch resnet18 --min-size 320 --max-size 512
  /usr/bin/python3 tools/bench_cpu.py --arch mobilenet_v3_large_320_fpn --sizes 640x480 \
      --precisions fp32 --peers onnxruntime,openvino
      torchvision's fasterrcnn_mobilenet_v3_large_320_fpn (or --arch mobilenet_v3_large_fpn)
  /usr/bin/python3 tools/bench_cpu.py --arch resnet50_fpn_v2 --sizes 640x480 --repeats 3 --runs 2
      torchvision's fasterrcnn_resnet50_fpn_v2
  /usr/bin/python3 tools/bench_cpu.py --model models/visiondetect-shapes.safetensors --sizes 1280x720
  /usr/bin/python3 tools/bench_cpu.py --torch-linear onednn
  /usr/bin/python3 tools/bench_cpu.py --arch retinanet_resnet50_fpn --sizes 640x480 \
      --precisions fp32,bf16,int8 --peers onnxruntime,openvino,openvino-int8
  /usr/bin/python3 tools/bench_cpu.py --arch keypointrcnn_resnet50_fpn --sizes 640x480 \
      --precisions fp32,bf16,int8 --peers onnxruntime,openvino,openvino-int8
  /usr/bin/python3 tools/bench_cpu.py --arch ssdlite320_mobilenet_v3_large --sizes 640x480 \
      --precisions fp32,bf16,int8 --peers onnxruntime,openvino,openvino-int8
      torchvision's other detectors side by side with torchvision, ONNX Runtime and
      OpenVINO at 640x480, 2 threads; vd-detect-int8 of the one-stage detectors is
      reported as refused

Roofline (--roofline): how far each stage of vd-detect is from what this machine's
kernels reach. vd-roofline (built beside vd-detect) first measures, with the same
threads, the peaks of the engine's own oneDNN kernels: a 256->256 3x3 convolution at
200x272 and a 1000x12544 by 12544x1024 matrix product in fp32, bf16 (where native) and
int8 (the convolution, where the CPU has VNNI or AMX), and a parallel memory copy for
the bandwidth. Then the vd-detect sides run as usual (--roofline implies --only
vd-detect unless --only says otherwise) and, per frame and side, a table gives for each
stage its GFLOP (vd-detect --stages: the stage's convolutions and matrix products, 2 x
multiply-adds), its median ms, the GFLOP/s achieved, the peak of its kernel kind in the
side's precision (the box head of a two-stage model: the matrix product's, unless its
head has convolutions; the rest: the convolution's; int8: the int8 convolution's for
the backbone and the RPN, whose convolutions it quantises (the stem and the RPN's 1x1
head aside), fp32's for the other stages) and achieved/peak. The
stages that count no products (preprocess, roi_align, postprocess, paste_masks,
keypoints) are bound by memory bandwidth: the table gives the measured copy bandwidth
beside them instead of a ratio. Both are measured in the same run, so the ratios hold
on the machine that ran it, loaded or not.

  /usr/bin/python3 tools/bench_cpu.py --roofline --arch resnet50 --sizes 640x480 \
      --precisions fp32,bf16 --repeats 3
  /usr/bin/python3 tools/bench_cpu.py --roofline --arch mobilenet_v3_large_320_fpn \
      --sizes 640x480 --precisions fp32,bf16 --repeats 3

Run it on an otherwise idle machine: it reports what the processes got, not what the
code could do.
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PARITY_DIR = os.path.join(ROOT, "tests", "parity")


def _import_parity_common():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as exc:
        sys.exit(f"bench_cpu.py: {sys.executable} cannot import torch/torchvision ({exc}); "
                 "run it with Debian's /usr/bin/python3")
    sys.path.insert(0, PARITY_DIR)
    sys.path.insert(0, HERE)
    import parity_common
    return parity_common


# ---------------------------------------------------------------------------------
# The torchvision side (a worker process)
# ---------------------------------------------------------------------------------

def torchvision_model_from_file(path):
    """A torchvision FasterRCNN built from a visiondetect model file's config (ResNet-FPN
    with the pool level, any returned layers, FPN width and box-head size, and
    fasterrcnn_resnet50_fpn_v2's batch-normed FPN, deeper RPN head and conv box head;
    MobileNetV3-Large-FPN), with the file's tensors loaded (the rounded ones for
    F16/BF16 files). Every norm is a FrozenBatchNorm2d (what nn.BatchNorm2d computes in
    eval mode) with the file's eps."""
    pc = _import_parity_common()
    import torchvision
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead, FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.rpn import RPNHead
    from torchvision.ops import MultiScaleRoIAlign
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool
    from torchvision.ops.misc import FrozenBatchNorm2d

    tensors, meta = pc.read_safetensors(path)
    cfg = json.loads(meta["config"])
    if cfg.get("architecture") in OTHER_FAMILIES:
        return other_detector_from_file(pc, path, tensors, cfg)
    bb, fpn = cfg["backbone"], cfg["fpn"]
    norm_eps = bb.get("norm_eps", 1e-5)
    if cfg.get("architecture") == "maskrcnn":
        # the builders' own models (BatchNorm2d, eps 1e-5, without pretrained weights)
        builder = "maskrcnn_resnet50_fpn_v2" if cfg["roi_heads"]["mask_head"]["norm"] == "batch_norm" \
            else "maskrcnn_resnet50_fpn"
        if bb.get("depth") != 50 or norm_eps != 1e-5 or "norm_eps_per_module" in bb:
            raise SystemExit(f"bench_cpu.py: {path}: only the Mask R-CNN builders' ResNet-50 models "
                             "(batch-norm eps 1e-5) are supported")
        model = getattr(torchvision.models.detection, builder)(
            weights=None, weights_backbone=None, num_classes=cfg["num_classes"],
            min_size=cfg["transform"]["min_size"], max_size=cfg["transform"]["max_size"])
        return with_tensors(model, tensors, path)
    eps_per_module = bb.get("norm_eps_per_module", {})
    frozen_bn = lambda n: FrozenBatchNorm2d(n, eps=norm_eps)  # noqa: E731
    if bb.get("type") == "mobilenet_v3" and fpn.get("extra_block") == "maxpool":
        # the body of fasterrcnn_mobilenet_v3_large_fpn / _320_fpn (their blocks are
        # mobilenet_v3_large's; _mobilenet_extractor returns features 13 and 16)
        from torchvision.models.detection.backbone_utils import _mobilenet_extractor
        if bb.get("arch") != "mobilenet_v3_large" or bb["returned_layers"] != [13, 16]:
            raise SystemExit(f"bench_cpu.py: {path}: only mobilenet_v3_large returning features 13 "
                             "and 16 (the torchvision builders') is supported")
        body = torchvision.models.mobilenet_v3_large(
            weights=None, norm_layer=lambda n: FrozenBatchNorm2d(n, eps=norm_eps))
        backbone = _mobilenet_extractor(body, True, 6)
        for name, m in backbone.body.named_modules():
            if isinstance(m, FrozenBatchNorm2d):
                m.eps = bb.get("norm_eps_per_module", {}).get("backbone.body." + name, norm_eps)
    elif bb.get("type") == "resnet" and fpn.get("extra_block") == "maxpool" and bb.get("groups", 1) == 1:
        body = getattr(torchvision.models, f"resnet{bb['depth']}")(
            weights=None, norm_layer=lambda n: FrozenBatchNorm2d(n, eps=norm_eps))
        for name, m in body.named_modules():
            if isinstance(m, FrozenBatchNorm2d):
                m.eps = bb.get("norm_eps_per_module", {}).get("backbone.body." + name, norm_eps)
        returned = bb["returned_layers"]
        if fpn.get("norm", "none") not in ("none", "batch_norm"):
            raise SystemExit(f"bench_cpu.py: {path}: FPN norm {fpn['norm']!r} is not supported")
        backbone = BackboneWithFPN(body, {f"layer{k}": str(i) for i, k in enumerate(returned)},
                                   fpn["in_channels"], fpn["out_channels"], extra_blocks=LastLevelMaxPool(),
                                   norm_layer=frozen_bn if fpn.get("norm") == "batch_norm" else None)
    else:
        raise SystemExit(f"bench_cpu.py: {path}: only ResNet-FPN and MobileNetV3-Large-FPN backbones "
                         "with the pool level are supported")
    tr, rpn, roi = cfg["transform"], cfg["rpn"], cfg["roi_heads"]
    anchors = AnchorGenerator(tuple(tuple(s) for s in cfg["anchors"]["sizes"]),
                              tuple(tuple(r) for r in cfg["anchors"]["aspect_ratios"]))
    c, p, rep = fpn["out_channels"], roi["output_size"], roi["representation_size"]
    head_cfg = roi.get("box_head", {"type": "two_mlp"})
    if head_cfg["type"] == "conv_fc":
        # fasterrcnn_resnet50_fpn_v2's FastRCNNConvFCHead: conv + norm + ReLU layers, one Linear
        box_head = FastRCNNConvFCHead((c, p, p), head_cfg["conv_channels"], [rep],
                                      norm_layer=frozen_bn if head_cfg.get("norm") == "batch_norm" else None)
    elif head_cfg["type"] == "two_mlp":
        box_head = TwoMLPHead(c * p * p, rep)
    else:
        raise SystemExit(f"bench_cpu.py: {path}: box head {head_cfg['type']!r} is not supported")
    model = FasterRCNN(
        backbone, num_classes=None, min_size=tr["min_size"], max_size=tr["max_size"],
        image_mean=tr["image_mean"], image_std=tr["image_std"],
        rpn_anchor_generator=anchors,
        rpn_head=RPNHead(c, anchors.num_anchors_per_location()[0], conv_depth=rpn.get("conv_depth", 1)),
        rpn_pre_nms_top_n_test=rpn["pre_nms_top_n"], rpn_post_nms_top_n_test=rpn["post_nms_top_n"],
        rpn_nms_thresh=rpn["nms_thresh"], rpn_score_thresh=rpn["score_thresh"],
        box_roi_pool=MultiScaleRoIAlign(roi["featmap_names"], p, roi["sampling_ratio"]),
        box_head=box_head, box_predictor=FastRCNNPredictor(rep, cfg["num_classes"]),
        box_score_thresh=roi["score_thresh"], box_nms_thresh=roi["nms_thresh"],
        box_detections_per_img=roi["detections_per_img"], bbox_reg_weights=roi["bbox_reg_weights"])
    # the FPN's and the box head's norms (the body's got theirs above)
    for name, m in model.named_modules():
        if isinstance(m, FrozenBatchNorm2d) and not name.startswith("backbone.body."):
            m.eps = eps_per_module.get(name, norm_eps)
    return with_tensors(model, tensors, path)


# torchvision's other detectors that --arch builds: the builder's name, its family (the
# model file's "architecture") and the seed of the random weights (that of the parity
# test of the same builder)
OTHER_ARCHS = {
    "retinanet_resnet50_fpn": ("retinanet", 47),
    "keypointrcnn_resnet50_fpn": ("keypointrcnn", 13),
    "ssdlite320_mobilenet_v3_large": ("ssdlite", 49),
}
OTHER_FAMILIES = {family for family, _ in OTHER_ARCHS.values()}


def other_detector_from_file(pc, path, tensors, cfg):
    """torchvision's RetinaNet, Keypoint R-CNN or SSDlite from a model file that
    export_torchvision wrote with the builder's name ("builder"): the builder's own
    model (nn.BatchNorm2d with the builder's eps, as it makes it without pretrained
    weights) with the file's classes, keypoints, transform sizes and thresholds, and the
    file's tensors loaded."""
    import torchvision
    builder = cfg.get("builder")
    if builder not in OTHER_ARCHS:
        raise SystemExit(f"bench_cpu.py: {path}: builder {builder!r} is not one of "
                         f"{', '.join(OTHER_ARCHS)}")
    kwargs = {"weights": None, "weights_backbone": None, "num_classes": cfg["num_classes"]}
    tr = cfg["transform"]
    if "fixed_size" not in tr:
        kwargs.update(min_size=tr["min_size"], max_size=tr["max_size"])
    if cfg["architecture"] == "keypointrcnn":
        kwargs["num_keypoints"] = cfg["num_keypoints"]
    model = getattr(torchvision.models.detection, builder)(**kwargs)
    if "head" in cfg:  # the one-stage detectors
        head = cfg["head"]
        model.score_thresh, model.nms_thresh = head["score_thresh"], head["nms_thresh"]
        model.detections_per_img = head["detections_per_img"]
        model.topk_candidates = head["topk_candidates"]
    else:
        roi = cfg["roi_heads"]
        model.roi_heads.score_thresh, model.roi_heads.nms_thresh = roi["score_thresh"], roi["nms_thresh"]
        model.roi_heads.detections_per_img = roi["detections_per_img"]
    return with_tensors(model, tensors, path)


def with_tensors(model, tensors, path):
    """@model in eval mode with the file's tensors, every floating-point one of its
    state present (else the run stops naming one that is missing)."""
    state = model.state_dict()
    missing = [k for k, v in state.items() if v.is_floating_point() and k not in tensors]
    if missing:
        raise SystemExit(f"bench_cpu.py: {path} lacks {len(missing)} tensors, e.g. {missing[0]}")
    _import_parity_common().load_back(model, tensors)
    return model.eval()


def describe_model(cfg):
    """One line on the model file's architecture, transform and candidate caps."""
    tr, bb = cfg["transform"], cfg["backbone"]
    if cfg.get("architecture") in OTHER_FAMILIES:
        size = (f"fixed size {tr['fixed_size'][0]}x{tr['fixed_size'][1]}" if "fixed_size" in tr
                else f"min/max size {tr['min_size']}/{tr['max_size']}")
        caps = (f"top-k candidates {cfg['head']['topk_candidates']}, detections "
                f"{cfg['head']['detections_per_img']}" if "head" in cfg
                else f"RPN top-n {cfg['rpn']['pre_nms_top_n']}/{cfg['rpn']['post_nms_top_n']}")
        return f"{cfg['builder']}, {cfg['num_classes']} classes, {size}, {caps}"
    arch = bb["arch"] if bb["type"] == "mobilenet_v3" else f"resnet{bb['depth']}"
    if cfg["roi_heads"].get("box_head", {}).get("type") == "conv_fc":
        arch += "-FPN-v2 (normed FPN, RPN conv depth {}, conv box head)".format(
            cfg["rpn"].get("conv_depth", 1))
    else:
        arch += "-FPN"
    return (f"{arch}, {cfg['num_classes']} classes, min/max size {tr['min_size']}/{tr['max_size']}, "
            f"RPN top-n {cfg['rpn']['pre_nms_top_n']}/{cfg['rpn']['post_nms_top_n']}")


def resized_size(pc, cfg, h, w):
    """(height, width) the model's transform resizes an h x w frame to (SSD's fixed
    size is (width, height))."""
    tr = cfg["transform"]
    if "fixed_size" in tr:
        return tr["fixed_size"][1], tr["fixed_size"][0]
    return pc.resized_size(h, w, tr["min_size"], tr["max_size"], tr.get("resize_scale", "double"))


def torch_worker(args):
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    pc = _import_parity_common()
    t = time.perf_counter()
    model = torchvision_model_from_file(args.model)
    load_ms = (time.perf_counter() - t) * 1000.0
    img = np.load(args.image)
    times = []
    first_ms = None
    out = None
    linears = pc.box_head_linears_on_onednn(model) if args.torch_linear == "onednn" else _null()
    with linears:
        for r in range(args.warmup + args.runs):
            t = time.perf_counter()
            out = model([pc.to_tensor(img)])[0]
            dt = (time.perf_counter() - t) * 1000.0
            if r == 0:
                first_ms = dt
            if r >= args.warmup:
                times.append(dt)
    print(json.dumps({"times_ms": times, "detections": len(out["scores"]), "load_ms": load_ms,
                      "first_ms": first_ms, "boxes": out["boxes"].tolist(),
                      "scores": out["scores"].tolist(), "labels": out["labels"].tolist()}))
    return 0


# ---------------------------------------------------------------------------------
# The peers: ONNX Runtime and OpenVINO (worker processes in the peers' venv)
# ---------------------------------------------------------------------------------

PEER_PACKAGES = ["onnxruntime", "openvino", "numpy"]
# for the int8 peers (NNCF's post-training quantization)
PEER_INT8_PACKAGES = ["nncf"]
# the calibration frames' seeds: CALIBRATION_SEED + i; the timed frame's is FRAME_SEED
FRAME_SEED = 2024
CALIBRATION_SEED = 3000


def peer_input(img):
    """The peers' input from a uint8 HxWx3 RGB frame: float32 CHW in [0, 1] (what the
    torchvision side gives the model; the ONNX graph does the rest of the transform)."""
    import numpy as np
    return np.ascontiguousarray(img.transpose(2, 0, 1)).astype(np.float32) / 255.0


def openvino_low_precision_ops(compiled):
    """(convolutions and matrix multiplications OpenVINO runs in u8/i8, all of them) in
    a compiled model's execution graph."""
    text = lambda v: v.astype(str) if hasattr(v, "astype") else str(v)  # noqa: E731 (an ov.OVAny)
    n_int8 = n_all = 0
    for op in compiled.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        layer = text(rt["layerType"]) if "layerType" in rt else ""
        if layer not in ("Convolution", "FullyConnected", "MatMul", "GroupConvolution", "Deconvolution"):
            continue
        n_all += 1
        if "runtimePrecision" in rt and text(rt["runtimePrecision"]).lower() in ("u8", "i8"):
            n_int8 += 1
    return n_int8, n_all


# NNCF's ignored scope for --nncf-ignore box-ops (patterns, re.match on the ONNX nodes'
# names): the arithmetic on box coordinates, which NNCF's defaults would run through
# 8-bit FakeQuantize like any activation: the RPN's anchors, box decoding, top-k and NMS
# (all of /rpn/ but its head's convolutions), the RoIs' level mapping and scaling in
# box_roi_pool, the box decoding, clipping and NMS of /roi_heads/ (all of it but the box
# head and the predictor), and the boxes' rescaling to the frame (the graph's top level,
# torchvision's transform.postprocess).
# Keypoint R-CNN's keypoint head and predictor are quantized as the box head is; its
# keypoint RoI pooling and heatmap decoding stay in f32.
NNCF_BOX_OPS = [r"/rpn/(?!head/)",
                r"/roi_heads/(?!box_head/|box_predictor/|keypoint_head/|keypoint_predictor/)", r"/[^/]*$"]
# the same for the one-stage detectors (a graph without /rpn/): their box decoding,
# top-k, NMS and rescaling to the frame are at the graph's top level (the detector's
# postprocess_detections and its transform's postprocess); the backbone, the FPN or
# feature extractor and the head are quantized.
NNCF_ONE_STAGE_BOX_OPS = [r"/[^/]*$"]


def nncf_box_ops(model):
    """NNCF_BOX_OPS for an R-CNN graph (an OpenVINO model read from the ONNX export),
    NNCF_ONE_STAGE_BOX_OPS for a one-stage one."""
    rcnn = any(op.get_friendly_name().startswith("/rpn/") for op in model.get_ops())
    return NNCF_BOX_OPS if rcnn else NNCF_ONE_STAGE_BOX_OPS


def nncf_worker(args):
    """Quantizes the ONNX model with NNCF (post-training, default preset) on the
    calibration frames (--image: a file listing their .npy paths) fed as the openvino
    peer feeds its frame, and saves it as OpenVINO IR (--nncf-quantize OUT.xml). Runs
    in the peers' venv; prints one JSON line."""
    import logging
    import numpy as np
    import nncf
    import openvino as ov
    nncf.set_log_level(logging.WARNING)
    with open(args.image) as f:
        paths = [line.strip() for line in f if line.strip()]
    t = time.perf_counter()
    model = ov.Core().read_model(args.onnx)
    dataset = nncf.Dataset(paths, lambda path: peer_input(np.load(path)))
    ignored = nncf.IgnoredScope(patterns=nncf_box_ops(model)) if args.nncf_ignore == "box-ops" else None
    quantized = nncf.quantize(model, dataset, subset_size=len(paths), ignored_scope=ignored)
    tmp = args.nncf_quantize[:-len(".xml")] + ".tmp.xml"
    ov.save_model(quantized, tmp, compress_to_fp16=False)
    os.replace(tmp[:-len(".xml")] + ".bin", args.nncf_quantize[:-len(".xml")] + ".bin")
    os.replace(tmp, args.nncf_quantize)
    fq = sum(1 for op in quantized.get_ops() if op.get_type_name() == "FakeQuantize")
    print(json.dumps({"seconds": time.perf_counter() - t, "frames": len(paths), "fake_quantize": fq,
                      "nncf": nncf.__version__}))
    return 0


def peer_worker(args):
    """Runs the ONNX model (or an int8 model's OpenVINO IR) with ONNX Runtime or
    OpenVINO; imports numpy and the runtime only (the venv has no torch). Prints one
    JSON line, as torch_worker."""
    import numpy as np
    img = np.load(args.image)
    inputs = lambda: peer_input(img)  # noqa: E731
    info = {}
    if args.peer_worker == "onnxruntime":
        import onnxruntime as ort
        t = time.perf_counter()
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        sess = ort.InferenceSession(args.onnx, sess_options=so, providers=["CPUExecutionProvider"])
        load_ms = (time.perf_counter() - t) * 1000.0
        in_name = sess.get_inputs()[0].name
        names = [o.name for o in sess.get_outputs()]
        info["providers"] = sess.get_providers()

        def infer():
            return dict(zip(names, sess.run(None, {in_name: inputs()})))
    elif args.peer_worker == "openvino":
        import openvino as ov
        t = time.perf_counter()
        core = ov.Core()
        compiled = core.compile_model(args.onnx, "CPU", {
            "INFERENCE_NUM_THREADS": args.threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": args.ov_precision})
        load_ms = (time.perf_counter() - t) * 1000.0
        request = compiled.create_infer_request()
        outputs = {name: compiled.output(name) for name in ("boxes", "labels", "scores")}
        for key in ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS"):
            try:
                v = compiled.get_property(key)
                info[key] = v.to_string() if hasattr(v, "to_string") else str(v)  # ov.Type: "f32"
            except Exception as exc:  # a property this OpenVINO version does not report
                info[key] = f"? ({exc})"
        if args.onnx.endswith(".xml"):  # the int8 model
            try:
                n_int8, n_all = openvino_low_precision_ops(compiled)
                info["u8/i8 convolutions and matmuls"] = f"{n_int8}/{n_all}"
            except Exception as exc:  # no execution graph or rt_info keys in this version
                info["u8/i8 convolutions and matmuls"] = f"? ({exc})"

        def infer():
            res = request.infer({0: inputs()})
            return {name: np.array(res[port]) for name, port in outputs.items()}
    else:
        sys.exit(f"bench_cpu.py: unknown peer {args.peer_worker!r}")
    times = []
    first_ms = None
    out = None
    for r in range(args.warmup + args.runs):
        t = time.perf_counter()
        out = infer()
        dt = (time.perf_counter() - t) * 1000.0
        if r == 0:
            first_ms = dt
        if r >= args.warmup:
            times.append(dt)
    print(json.dumps({"times_ms": times, "detections": int(len(out["scores"])), "load_ms": load_ms,
                      "first_ms": first_ms, "boxes": np.asarray(out["boxes"], np.float64).tolist(),
                      "scores": np.asarray(out["scores"], np.float64).tolist(),
                      "labels": np.asarray(out["labels"]).astype(np.int64).tolist(), "info": info}))
    return 0


def cpu_has_bf16():
    """Whether /proc/cpuinfo lists avx512_bf16 or amx_bf16 (where OpenVINO's CPU plugin
    would run bf16 unless told f32), and ONEDNN_MAX_CPU_ISA (which OpenVINO's oneDNN and
    ours both honour) does not cap the ISA below them."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap and cap not in ("ALL", "AVX512_CORE_BF16", "AVX512_CORE_AMX", "AVX512_CORE_FP16"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        pass
    return False


def peer_versions_check(runtimes, int8=False):
    """Python code that imports numpy and the runtimes (onnxruntime, openvino) and prints
    their versions as one JSON line."""
    return ("import json, numpy; v = {'numpy': numpy.__version__}\n"
            + ("import onnxruntime; v['onnxruntime'] = onnxruntime.__version__\n"
               if "onnxruntime" in runtimes else "")
            + ("import openvino; v['openvino'] = openvino.__version__; "
               "v['openvino_build'] = openvino.get_version()\n" if "openvino" in runtimes else "")
            + ("import nncf; v['nncf'] = nncf.__version__\n" if int8 else "")
            + "print(json.dumps(v))")


def python_versions(py, check):
    """check's JSON from py, or None when py is missing or fails."""
    if not os.access(py, os.X_OK):
        return None
    p = subprocess.run([py, "-c", check], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return json.loads(p.stdout.decode().strip().splitlines()[-1]) if p.returncode == 0 else None


def ensure_peer_venv(venv, int8=False, runtimes=("onnxruntime", "openvino")):
    """The peers' python: creates the venv (and installs the runtimes, and with int8
    NNCF) when it is missing or cannot import them. Returns the python and the
    runtimes' versions."""
    py = os.path.join(venv, "bin", "python")
    packages = PEER_PACKAGES + (PEER_INT8_PACKAGES if int8 else [])
    check = peer_versions_check(runtimes, int8)

    def versions():
        return python_versions(py, check)

    v = versions()
    if v is not None:
        return py, v
    if not os.access(py, os.X_OK):
        if subprocess.run(["/usr/bin/python3", "-c", "import venv, ensurepip"],
                          stderr=subprocess.DEVNULL).returncode != 0:
            print("installing Debian's python3-venv (apt-get) ...", flush=True)
            if (subprocess.run(["apt-get", "install", "-y", "python3-venv"]).returncode != 0
                    and (subprocess.run(["apt-get", "update"]).returncode != 0
                         or subprocess.run(["apt-get", "install", "-y", "python3-venv"]).returncode != 0)):
                sys.exit("bench_cpu.py: cannot install python3-venv with apt-get")
        print(f"creating the peers' venv {venv} ...", flush=True)
        if subprocess.run(["/usr/bin/python3", "-m", "venv", venv]).returncode != 0:
            sys.exit(f"bench_cpu.py: /usr/bin/python3 -m venv {venv} failed")
    print(f"installing {' '.join(packages)} into {venv} (pip) ...", flush=True)
    if subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "-q"]
                      + packages).returncode != 0:
        sys.exit(f"bench_cpu.py: pip install {' '.join(packages)} into {venv} failed")
    v = versions()
    if v is None:
        sys.exit(f"bench_cpu.py: {py} still cannot import {', '.join(packages)}")
    return py, v


def onnx_output_names(model):
    """The names of the ONNX graph's outputs, in the order of the model's detection dict
    (the peers read boxes, labels and scores by name): the one-stage detectors' dict
    is (boxes, scores, labels), the R-CNN family's (boxes, labels, scores), Keypoint
    R-CNN's with keypoints and keypoints_scores after them."""
    kind = type(model).__name__
    if kind in ("RetinaNet", "FCOS", "SSD"):
        return ["boxes", "scores", "labels"]
    if kind == "KeypointRCNN":
        return ["boxes", "labels", "scores", "keypoints", "keypoints_scores"]
    return ["boxes", "labels", "scores"]


def export_onnx(model_path, img, workdir, threads):
    """The model file as torchvision's detector (FasterRCNN, or the builder's RetinaNet,
    KeypointRCNN or SSD), exported to ONNX (opset 11) on img's float tensor (the
    torchvision side's input), with the transform in the graph. Cached in workdir under
    the model file's hash and the frame size."""
    h = hashlib.sha256()
    with open(model_path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    stem = os.path.splitext(os.path.basename(model_path))[0]
    path = os.path.join(workdir, f"{stem}_{img.shape[1]}x{img.shape[0]}_{h.hexdigest()[:12]}.onnx")
    if os.path.exists(path):
        print(f"ONNX model {path} (cached)", flush=True)
        return path
    import warnings
    import torch
    pc = _import_parity_common()
    torch.set_num_threads(threads)
    t = time.monotonic()
    model = torchvision_model_from_file(model_path)
    tensor = pc.to_tensor(img)
    tmp = path + ".tmp"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, ([tensor],), tmp, opset_version=11, input_names=["images"],
                          output_names=onnx_output_names(model))
    os.replace(tmp, path)
    print(f"exported {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s", flush=True)
    return path


def write_calibration_frames(pc, workdir, w, h, n):
    """The n calibration frames of one size (seeds CALIBRATION_SEED + i, made as the
    timed frame is) as .npy files in workdir, and a file listing them; returns the list
    of paths and the list file."""
    import numpy as np
    paths = []
    for i in range(n):
        path = os.path.join(workdir, f"calib_{w}x{h}_{i:03d}.npy")
        np.save(path, pc.synthetic_image(h, w, seed=CALIBRATION_SEED + i))
        paths.append(path)
    listing = os.path.join(workdir, f"calib_{w}x{h}.txt")
    with open(listing, "w") as f:
        f.write("".join(path + "\n" for path in paths))
    return paths, listing


def vd_detect_refusal(rc, err):
    """What vd-detect refused, from a run that exited with status 1 after saying why on
    stderr ("vd-detect: MESSAGE", its GError: a model file or a precision this engine
    does not run); None for any other failure (a crash, a signal), which stops the
    benchmark."""
    if rc != 1:
        return None
    said = [line[len("vd-detect: "):] for line in err.splitlines() if line.startswith("vd-detect: ")]
    return said[-1] if said else None


def without_refused(refused, order, vd_names, ref_names, peer_ref):
    """The sides to report, those compared and the peers' reference (None where it is a
    vd-detect side that was refused), less the refused sides."""
    keep = lambda names: [n for n in names if n not in refused]  # noqa: E731
    return keep(order), keep(vd_names), keep(ref_names), (None if peer_ref in refused else peer_ref)


def calibrate_vd_detect(exe, model_path, frames, out, threads, env, timeout):
    """vd-detect --calibrate: the model file with the int8 calibration of frames, as
    out; returns the seconds it took, and None, or None and vd-detect's message where
    it refuses the model (vd_detect_refusal)."""
    t = time.monotonic()
    cmd = [exe, "--model", model_path, "--threads", str(threads), "--calibrate", out] + frames
    try:
        p = subprocess.run(cmd, env=env, timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench_cpu.py: vd-detect --calibrate ran for more than {timeout:.0f} s (--timeout)")
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace")
        why = vd_detect_refusal(p.returncode, err)
        if why is not None:
            return None, why
        sys.exit(f"bench_cpu.py: vd-detect --calibrate failed ({p.returncode}):\n{err[-3000:]}")
    return time.monotonic() - t, None


def quantize_openvino(peer_py, onnx_path, listing, n, ignore, nncf_version, env, timeout):
    """The ONNX model quantized by NNCF on the calibration frames listed in listing
    (nncf_worker, in the peers' venv; ignore: --nncf-ignore), as OpenVINO IR beside the
    ONNX model, cached under its name, n, ignore and the NNCF version. Returns the .xml
    path and what nncf_worker reported (None when cached); when NNCF fails, None and
    {"failed": its message}."""
    xml = f"{onnx_path[:-len('.onnx')]}_nncf{nncf_version}_int8_n{n}_ignore-{ignore}.xml"
    if os.path.exists(xml) and os.path.exists(xml[:-len(".xml")] + ".bin"):
        print(f"OpenVINO int8 model {xml} (cached)", flush=True)
        return xml, None
    print(f"quantizing {os.path.basename(onnx_path)} with NNCF on {n} calibration frames ...", flush=True)
    cmd = [peer_py, os.path.abspath(__file__), "--nncf-quantize", xml, "--onnx", onnx_path, "--image", listing,
           "--nncf-ignore", ignore]
    try:
        p = subprocess.run(cmd, env=env, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench_cpu.py: NNCF quantization ran for more than {timeout:.0f} s (--timeout)")
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        # NNCF fails on some graphs (Keypoint R-CNN's, NNCF 2.x: an InternalError in
        # its graph builder); the int8 peers are then reported as not run, the rest
        # of the benchmark goes on
        err = (out + p.stderr.decode(errors="replace")).strip()
        print(f"NNCF quantization of {onnx_path} failed ({p.returncode}):\n{err[-3000:]}", flush=True)
        last = err.splitlines()[-1] if err else f"exit status {p.returncode}"
        return None, {"failed": f"NNCF's quantization failed ({last[:300]})"}
    res = json.loads(out.strip().splitlines()[-1])
    print(f"quantized {xml} in {res['seconds']:.0f} s: {res['fake_quantize']} FakeQuantize operations",
          flush=True)
    return xml, res


def match_fraction(pc, ref, peer, score=0.5, iou=0.9):
    """(torchvision's detections with score >= score, how many of them a peer detection
    matches: same label, IoU >= iou, one to one; parity_common.match)."""
    keep = [k for k, sc in enumerate(ref["scores"]) if sc >= score]
    boxes = [ref["boxes"][k] for k in keep]
    labels = [ref["labels"][k] for k in keep]
    if not keep or not peer["boxes"]:
        return len(keep), 0
    pairs, _ = pc.match(boxes, peer["boxes"], iou, labels, peer["labels"])
    return len(keep), sum(1 for _, j in pairs if j >= 0)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------

# The peak RSS a child reports includes the RSS of the process that forked it (Linux
# copies the parent's high-water mark into the child at fork and keeps it across exec),
# so a child of this driver, which holds torch and a model, would report at least the
# driver's size. Each side is therefore started by this small launcher (a bare Python,
# about 10 MiB), which reads its child's peak with getrusage(RUSAGE_CHILDREN).
_LAUNCHER = """
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
sys.stderr.write("\\nbench-cpu-maxrss-kib: %d\\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)
"""
_MAXRSS_TAG = "bench-cpu-maxrss-kib:"


def run_roofline(exe, threads, env, timeout):
    """vd-roofline's peaks on this machine (its JSON)."""
    print(f"measuring the kernels' peaks with {exe} ({threads} threads) ...", flush=True)
    run = subprocess.run([exe, "--threads", str(threads)], capture_output=True, text=True, env=env,
                         timeout=timeout)
    if run.returncode != 0:
        sys.exit(f"bench_cpu.py: vd-roofline failed ({run.returncode}):\n{run.stderr[-3000:]}")
    peaks = json.loads(run.stdout)
    for p in peaks["peaks"]:
        print(f"  peak {p['kernel']:11s} {p['precision']:4s} {p['shape']:26s} {p['ms']:9.1f} ms "
              f"{p['gflops']:8.1f} GFLOP/s  {p['impl']}")
    bw = peaks["bandwidth"]
    print(f"  memory copy {bw['bytes'] / 2**20:.0f} MiB read + written: {bw['gbs']:.1f} GB/s")
    return peaks


def roofline_table(stages_ms, stages_gflop, precision, peaks, box_head_kernel):
    """Per stage: GFLOP, ms, GFLOP/s, the peak its kernel kind reaches in @precision
    (vd-roofline's), achieved / peak; a stage without products gets the bandwidth."""
    by = {(p["kernel"], p["precision"]): p for p in peaks["peaks"]}
    rows = []
    for stage, ms in stages_ms.items():
        gflop = stages_gflop.get(stage, 0.0)
        row = {"stage": stage, "gflop": gflop, "ms": ms,
               "gflops": gflop / (ms / 1000) if ms > 0 else 0.0}
        if gflop > 0:
            kernel = box_head_kernel if stage == "box_head" else "convolution"
            prec = precision if precision in ("fp32", "bf16") else "fp32"
            if precision == "int8" and stage in ("backbone", "fpn", "rpn"):
                # int8 quantises the body's convolutions, the FPN's lateral and 3x3
                # output ones and the RPN's 3x3 one (docs/engine.md, "int8 on the CPU")
                prec = "int8"
            elif precision == "int8":
                # the rest (the heads) runs bf16 where the CPU has it natively, which
                # is where vd-roofline measures a bf16 peak, else float32
                prec = "bf16" if (kernel, "bf16") in by else "fp32"
            peak = by.get((kernel, prec)) or by.get((kernel, "fp32"))
            row.update({"peak_kernel": kernel, "peak_precision": peak["precision"],
                        "peak_gflops": peak["gflops"], "fraction": row["gflops"] / peak["gflops"]})
        else:
            row.update({"peak_kernel": "memory", "peak_gbs": peaks["bandwidth"]["gbs"]})
        rows.append(row)
    return rows


def print_roofline(title, rows):
    print(f"| {title} | GFLOP | ms | GFLOP/s | peak GFLOP/s | achieved/peak |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["peak_kernel"] == "memory":
            peak, frac = f"memory, {r['peak_gbs']:.1f} GB/s", "-"
        else:
            peak = f"{r['peak_gflops']:.0f} ({r['peak_kernel']} {r['peak_precision']})"
            frac = f"{100 * r['fraction']:.0f} %"
        print(f"| {r['stage']} | {r['gflop']:.2f} | {r['ms']:.1f} | {r['gflops']:.0f} | {peak} | {frac} |")
    gflop = sum(r["gflop"] for r in rows)
    ms = sum(r["ms"] for r in rows)
    print(f"| all stages | {gflop:.2f} | {ms:.1f} | {gflop / (ms / 1000) if ms else 0:.0f} | | |")


def run_measured(cmd, env, timeout):
    """Runs cmd through the launcher; returns (exit status, stdout, stderr, peak RSS of
    cmd's process in MiB)."""
    try:
        p = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER] + cmd, env=env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench_cpu.py: {cmd[0]} ran for more than {timeout:.0f} s (--timeout)")
    out = p.stdout.decode(errors="replace")
    err_lines = p.stderr.decode(errors="replace").splitlines()
    rss = 0.0
    if err_lines and err_lines[-1].startswith(_MAXRSS_TAG):
        rss = int(err_lines[-1][len(_MAXRSS_TAG):]) / 1024.0
        err_lines = err_lines[:-1]
    return p.returncode, out, "\n".join(err_lines), rss


def parse_size(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}")
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return w, h


def spread(times):
    s = sorted(times)
    med = statistics.median(s)
    if len(s) >= 2:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1 = q3 = s[0]
    return med, s[0], s[-1], q1, q3


def build_other_detector(args, pc, workdir, first_frame):
    """--arch retinanet_resnet50_fpn, keypointrcnn_resnet50_fpn or
    ssdlite320_mobilenet_v3_large: the builder's model with random weights (the seed
    of its parity test; --min-size/--max-size, except for SSDlite's fixed size),
    calibrated on the first frame as its parity test calibrates it
    (parity_one_stage.calibrate, parity_common.calibrate, parity_ssd.calibrate), and
    exported as export_torchvision --builder NAME does (the builder's name in the
    file). Returns the model file's path."""
    import torch
    import torchvision
    import export_torchvision
    family, seed = OTHER_ARCHS[args.arch]
    kwargs = {"weights": None, "weights_backbone": None,
              "num_classes": args.num_classes or (2 if family == "keypointrcnn" else 91)}
    if family != "ssdlite":
        kwargs.update(min_size=args.min_size or 800, max_size=args.max_size or 1333)
    torch.manual_seed(seed)
    model = getattr(torchvision.models.detection, args.arch)(**kwargs).eval()
    print(f"building {args.arch} with random weights, calibrating on a {first_frame.shape[1]}x"
          f"{first_frame.shape[0]} frame ...", flush=True)
    t = time.monotonic()
    if family == "retinanet":
        import parity_one_stage
        desc = parity_one_stage.calibrate(model, [first_frame])
    elif family == "keypointrcnn":
        desc = pc.calibrate(model, [first_frame])
    else:
        try:
            import parity_ssd
        except ImportError:
            parity_ssd = None
        if parity_ssd is not None:
            desc = parity_ssd.calibrate(model, [first_frame])
        else:
            # a tree without the SSD parity tests: the norm layers only
            norms, _ = pc.calibrate_body(model, [first_frame], torch.Generator().manual_seed(0))
            desc = (f"{len(norms)} norm layers calibrated; tests/parity/parity_ssd.py is missing, the "
                    "heads keep torchvision's initialisation (few detections, if any, score >= 0.5)")
    print(f"  {desc}", flush=True)
    path = os.path.join(workdir, f"bench_{args.arch}_{args.dtype}.safetensors")
    export_torchvision.export(model, path, dtype=args.dtype, builder=args.arch)
    print(f"exported {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s", flush=True)
    return path


def build_model_file(args, pc, workdir, first_frame):
    if args.arch in OTHER_ARCHS:
        return build_other_detector(args, pc, workdir, first_frame)
    name = args.arch
    if args.arch.startswith("mobilenet"):
        model = pc.build_mobilenet_v3_fpn("fasterrcnn_" + args.arch, seed=3)
        if args.min_size is not None or args.max_size is not None:
            model.transform.min_size = (args.min_size or model.transform.min_size[-1],)
            model.transform.max_size = args.max_size or model.transform.max_size
    elif args.arch.startswith("maskrcnn"):
        import torch
        import torchvision
        torch.manual_seed(11)
        model = getattr(torchvision.models.detection, args.arch)(
            weights=None, weights_backbone=None, num_classes=91, min_size=args.min_size or 800,
            max_size=args.max_size or 1333).eval()
    elif args.arch in ("resnet50", "resnet50_fpn_v2"):
        # seeds: those of the parity tests of the same architecture
        model = (pc.build_resnet50_fpn_coco(seed=50) if args.arch == "resnet50"
                 else pc.build_resnet50_fpn_v2(seed=6))
        if args.min_size is not None or args.max_size is not None:
            model.transform.min_size = (args.min_size or 800,)
            model.transform.max_size = args.max_size or 1333
    else:
        depth = int(args.arch[len("resnet"):])
        model = pc.build_resnet_fpn(depth, args.num_classes or 91, args.min_size or 800,
                                    args.max_size or 1333, seed=depth)
    print(f"building {name} with random weights, calibrating on a {first_frame.shape[1]}x"
          f"{first_frame.shape[0]} frame ...", flush=True)
    t = time.monotonic()
    pc.calibrate(model, [first_frame])
    if model.roi_heads.has_mask():
        pc.calibrate_masks(model, first_frame)
    path = os.path.join(workdir, f"bench_{name}_{args.dtype}.safetensors")
    pc.export_model(model, path, dtype=args.dtype)
    print(f"exported {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s", flush=True)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="benchmark this visiondetect model file (ResNet-FPN or MobileNetV3-Large-FPN, "
                        "or one of --arch's other detectors written with its builder's name) "
                        "instead of building one")
    p.add_argument("--arch", default="resnet50",
                   choices=["resnet50", "resnet50_fpn_v2", "resnet34", "resnet18",
                            "mobilenet_v3_large_fpn", "mobilenet_v3_large_320_fpn",
                            "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2"] + list(OTHER_ARCHS),
                   help="architecture to build when --model is not given (default resnet50: "
                        "fasterrcnn_resnet50_fpn, 91 classes; resnet50_fpn_v2: "
                        "fasterrcnn_resnet50_fpn_v2, 91 classes; mobilenet_v3_large_fpn and "
                        "mobilenet_v3_large_320_fpn: torchvision's fasterrcnn_ builders of those "
                        "names, 91 classes, their sizes; maskrcnn_resnet50_fpn and _v2: "
                        "torchvision's Mask R-CNN builders, 91 classes, mask logits calibrated too; "
                        "retinanet_resnet50_fpn (91 classes), keypointrcnn_resnet50_fpn (2 classes, 17 "
                        "keypoints), ssdlite320_mobilenet_v3_large (91 classes, fixed 320x320): "
                        "torchvision's builders, calibrated as their parity tests)")
    p.add_argument("--num-classes", type=int, help="classes of a built resnet18/34 model (91), or of "
                   "one of torchvision's other detectors (91; keypointrcnn_resnet50_fpn 2)")
    p.add_argument("--min-size", type=int, help="min_size of a built model (800)")
    p.add_argument("--max-size", type=int, help="max_size of a built model (1333)")
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"],
                   help="storage dtype of a built model file (f32)")
    p.add_argument("--sizes", default="640x480,1280x720",
                   help="comma-separated frame sizes WIDTHxHEIGHT (default 640x480,1280x720)")
    p.add_argument("--threads", type=int, default=2, help="threads for all sides (default 2)")
    p.add_argument("--repeats", type=int, default=5,
                   help="repetitions: fresh processes per side, rotating (default 5)")
    p.add_argument("--runs", type=int, default=1, help="timed runs per process (default 1)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per process first (default 1)")
    p.add_argument("--vd-detect", default=os.path.join(ROOT, "build", "tools", "vd-detect"),
                   help="vd-detect executable (default build/tools/vd-detect)")
    p.add_argument("--vd-detect-also", action="append", default=[], metavar="LABEL=PATH",
                   help="another vd-detect build measured in the same run (for example one against "
                        "another oneDNN, or a command that runs one inside a chroot with the work "
                        "folder at the same path): sides vd-detect-LABEL-PRECISION; repeatable")
    p.add_argument("--torch-linear", default="native",
                   help="torchvision's box-head linears, comma-separated: as installed (native) "
                        "and/or as oneDNN 1x1 convolutions (onednn; see above)")
    p.add_argument("--precisions", default="fp32,bf16",
                   help="vd-detect precisions, comma-separated: fp32, bf16, int8 (calibrated first with "
                        "vd-detect --calibrate, see above) (default fp32,bf16)")
    p.add_argument("--peers", default="",
                   help="also run these on the model exported to ONNX, comma-separated: onnxruntime, "
                        "openvino (f32, and bf16 where the CPU has it), openvino-int8 (quantized with "
                        "NNCF; f32, and bf16 where the CPU has it, for the rest); default none")
    p.add_argument("--calibration-frames", type=int, default=32,
                   help="int8: calibration frames per frame size, the same for vd-detect and NNCF "
                        "(default 32)")
    p.add_argument("--nncf-ignore", default="box-ops", choices=["box-ops", "none"],
                   help="openvino-int8: leave NNCF's quantizers off the box arithmetic of the RPN, the "
                        "RoI pooling and the box head's post-processing (box-ops, the default; see above), "
                        "or quantize wherever NNCF's defaults do (none)")
    p.add_argument("--peer-venv", default=os.path.join(ROOT, "build-bench", "venv"),
                   help="virtual environment with the peers' runtimes, created when missing "
                        "(default build-bench/venv)")
    p.add_argument("--peer-python", metavar="PATH",
                   help="run the peers with this python as it is (no venv made, nothing installed): one "
                        "that imports numpy and the peers' runtimes, e.g. a wrapper that runs a venv's "
                        "python in an arm64 root under qemu (tools/bench/arm/run-detect.sh)")
    p.add_argument("--only", choices=["torchvision", "vd-detect"],
                   help="run one of torchvision and vd-detect only (the --peers run all the same)")
    p.add_argument("--workdir", help="keep the model file, frames and ONNX models here (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per process (1800)")
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    p.add_argument("--roofline", action="store_true",
                   help="measure the kernels' peaks (vd-roofline) and give each stage's GFLOP/s against "
                        "them (implies --only vd-detect)")
    p.add_argument("--vd-roofline", default=os.path.join(ROOT, "build", "tools", "vd-roofline"),
                   help="the vd-roofline to run with --roofline (default: build/tools/vd-roofline)")
    # internal: the torchvision and peer worker processes
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--peer-worker", choices=["onnxruntime", "openvino"], help=argparse.SUPPRESS)
    p.add_argument("--nncf-quantize", help=argparse.SUPPRESS)
    p.add_argument("--onnx", help=argparse.SUPPRESS)
    p.add_argument("--ov-precision", default="f32", help=argparse.SUPPRESS)
    p.add_argument("--image", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.torch_worker:
        return torch_worker(args)
    if args.peer_worker:
        return peer_worker(args)
    if args.nncf_quantize:
        return nncf_worker(args)
    linears = [x.strip() for x in args.torch_linear.split(",") if x.strip()]
    precisions = [x.strip() for x in args.precisions.split(",") if x.strip()]
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    if not linears or any(x not in ("native", "onednn") for x in linears):
        p.error("--torch-linear takes native and/or onednn")
    if not precisions or any(x not in ("fp32", "bf16", "int8", "fp16", "auto") for x in precisions):
        p.error("--precisions takes fp32, bf16, int8 (fp16, auto)")
    if any(x not in ("onnxruntime", "openvino", "openvino-int8") for x in peers):
        p.error("--peers takes onnxruntime, openvino and/or openvino-int8")
    if args.threads < 1 or args.repeats < 1 or args.runs < 1 or args.warmup < 0 or args.calibration_frames < 1:
        p.error("--threads, --repeats, --runs and --calibration-frames must be >= 1, --warmup >= 0")
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    if args.roofline:
        if args.only == "torchvision":
            p.error("--roofline measures vd-detect: not with --only torchvision")
        args.only = "vd-detect"
        if not os.access(args.vd_roofline, os.X_OK):
            p.error(f"{args.vd_roofline} is not an executable (build it with ninja -C build, or pass "
                    "--vd-roofline)")
    if args.only != "torchvision" and not os.access(args.vd_detect, os.X_OK):
        p.error(f"{args.vd_detect} is not an executable (build it with ninja -C build, or pass --vd-detect)")
    vd_builds = [("", args.vd_detect)]
    for spec in args.vd_detect_also:
        label, sep, path = spec.partition("=")
        if not sep or not label or not os.access(path, os.X_OK):
            p.error(f"--vd-detect-also {spec}: expected LABEL=PATH with an executable PATH")
        vd_builds.append((label + "-", path))

    pc = _import_parity_common()
    import numpy as np
    import torch
    import torchvision
    torch.set_num_threads(args.threads)

    peer_py, peer_versions = None, None
    if peers:
        runtimes = ["onnxruntime" if x == "onnxruntime" else "openvino" for x in peers]
        if args.peer_python:
            peer_py = args.peer_python
            peer_versions = python_versions(peer_py, peer_versions_check(runtimes, "openvino-int8" in peers))
            if peer_versions is None:
                sys.exit(f"bench_cpu.py: --peer-python {peer_py} cannot import numpy and {', '.join(runtimes)}")
        else:
            peer_py, peer_versions = ensure_peer_venv(os.path.abspath(args.peer_venv),
                                                      int8="openvino-int8" in peers, runtimes=runtimes)
    # (name, runtime, OpenVINO precision hint, int8 model)
    peer_sides = []
    for peer in dict.fromkeys(peers):
        if peer == "onnxruntime":
            peer_sides.append(("onnxruntime", "onnxruntime", None, False))
        else:
            int8 = peer == "openvino-int8"
            peer_sides.append((peer, "openvino", "f32", int8))
            if cpu_has_bf16():
                peer_sides.append((f"{peer}-bf16", "openvino", "bf16", int8))
    vd_int8 = args.only != "torchvision" and "int8" in precisions
    int8_peers = [name for name, _, _, int8 in peer_sides if int8]

    workdir = args.workdir or tempfile.mkdtemp(prefix="vd-bench-")
    os.makedirs(workdir, exist_ok=True)
    try:
        frames = []
        for w, h in sizes:
            path = os.path.join(workdir, f"frame_{w}x{h}.npy")
            img = pc.synthetic_image(h, w, seed=FRAME_SEED)
            np.save(path, img)
            frames.append((w, h, path, img))
        model_path = args.model or build_model_file(args, pc, workdir, frames[0][3])
        cfg = json.loads(pc.read_safetensors(model_path)[1]["config"])
        if "onednn" in linears and "roi_heads" not in cfg:
            p.error("--torch-linear onednn: the one-stage detectors have no box-head linears")
        onnx_paths = {}
        if peer_sides:
            for w, h, _, img in frames:
                onnx_paths[(w, h)] = export_onnx(model_path, img, workdir, args.threads)

        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        peaks = run_roofline(args.vd_roofline, args.threads, env, args.timeout) if args.roofline else None
        # int8: per frame size, the calibration frames, vd-detect's calibrated model file
        # and NNCF's quantized OpenVINO model
        vd_int8_models, ov_int8_models, calibration = {}, {}, {}
        # the sides vd-detect refused (their message): they are reported, not timed
        refused, vd_int8_refusal, ov_int8_failure = {}, None, None
        if vd_int8 or int8_peers:
            stem = os.path.splitext(os.path.basename(model_path))[0]
            for w, h, _, _ in frames:
                n = args.calibration_frames
                print(f"writing {n} {w}x{h} calibration frames (seeds {CALIBRATION_SEED}.."
                      f"{CALIBRATION_SEED + n - 1}) ...", flush=True)
                calib_paths, listing = write_calibration_frames(pc, workdir, w, h, n)
                cal = {"frames": n, "seeds": [CALIBRATION_SEED, CALIBRATION_SEED + n - 1]}
                if vd_int8:
                    out = os.path.join(workdir, f"{stem}_int8_{w}x{h}_n{n}.safetensors")
                    print(f"calibrating {os.path.basename(model_path)} for int8 with vd-detect --calibrate "
                          f"on {n} frames ...", flush=True)
                    sec, why = calibrate_vd_detect(args.vd_detect, model_path, calib_paths, out, args.threads,
                                                   env, args.timeout)
                    if why is not None:
                        print(f"vd-detect --calibrate refused: {why}", flush=True)
                        vd_int8_refusal = why
                        cal["vd-detect"] = {"refused": why}
                    else:
                        print(f"calibrated {out} in {sec:.0f} s", flush=True)
                        vd_int8_models[(w, h)] = out
                        cal["vd-detect"] = {"model": out, "seconds": sec}
                if int8_peers:
                    xml, res = quantize_openvino(peer_py, onnx_paths[(w, h)], listing, n, args.nncf_ignore,
                                                 peer_versions["nncf"], env, args.timeout)
                    if xml is None:
                        ov_int8_failure = res["failed"]
                    ov_int8_models[(w, h)] = xml
                    cal["openvino-int8"] = dict(res or {"cached": True}, model=xml, nncf_ignore=args.nncf_ignore)
                calibration[(w, h)] = cal
        # vd-detect prints time_ms lines only when it repeats: at least 2 runs, the extra
        # one untimed.
        vd_repeat = max(2, args.warmup + args.runs)
        sides = {}
        side_precision = {}  # vd-detect side -> its precision
        # the sides that run the int8 model of the frame size (vd_int8_models, ov_int8_models)
        int8_sides = set(int8_peers)
        if args.only != "vd-detect":
            for lin in linears:
                name = "torchvision" if lin == "native" else f"torchvision-{lin}"
                sides[name] = ("torch", [sys.executable, os.path.abspath(__file__), "--torch-worker",
                                         "--model", model_path, "--threads", str(args.threads),
                                         "--runs", str(args.runs), "--warmup", str(args.warmup),
                                         "--torch-linear", lin])
        if args.only != "torchvision":
            for label, exe in vd_builds:
                for prec in precisions:
                    sides[f"vd-detect-{label}{prec}"] = (
                        "vd", [exe, "--device", "cpu", "--threads",
                               str(args.threads), "--precision", prec, "--json", "--stages",
                               "--repeat", str(vd_repeat)])
                    side_precision[f"vd-detect-{label}{prec}"] = prec
                    if prec == "int8":
                        int8_sides.add(f"vd-detect-{label}{prec}")
        for name, runtime, ov_prec, _ in peer_sides:
            sides[name] = ("peer", [peer_py, os.path.abspath(__file__), "--peer-worker", runtime,
                                    "--threads", str(args.threads), "--runs", str(args.runs),
                                    "--warmup", str(args.warmup)]
                           + (["--ov-precision", ov_prec] if ov_prec else []))
        if vd_int8_refusal is not None:
            refused.update((n, vd_int8_refusal) for n in int8_sides if n.startswith("vd-detect-"))
        if ov_int8_failure is not None:
            refused.update((n, ov_int8_failure) for n in int8_sides if not n.startswith("vd-detect-"))
        vd_names = [n for n in sides if sides[n][0] == "vd"]
        # the sides vd-detect is compared with
        ref_names = [n for n in sides if sides[n][0] != "vd"]
        torch_names = [n for n in sides if sides[n][0] == "torch"]
        peer_names = [n for n in sides if sides[n][0] == "peer"]
        check_ref = "torchvision" if "torchvision" in torch_names else (torch_names[0] if torch_names else None)
        # the peers' reference: torchvision, else vd-detect in fp32 (same weights, --only vd-detect)
        peer_ref = check_ref or next((n for n in vd_names if n.endswith("-fp32")), None)

        blas = "generic (netlib reference BLAS)" if "BLAS_INFO=generic" in torch.__config__.show() else "optimised"
        print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, BLAS {blas}, "
              f"box-head linears {','.join(linears)}; vd-detect {','.join(precisions)}; threads {args.threads}; "
              f"{args.repeats} repetitions x ({args.warmup} warm-up + {args.runs} timed) runs per side")
        if peer_versions:
            print(f"peers ({peer_py}): "
                  + (f"onnxruntime {peer_versions['onnxruntime']}, " if "onnxruntime" in peer_versions else "")
                  + (f"openvino {peer_versions['openvino']} (get_version {peer_versions['openvino_build']}), "
                     if "openvino" in peer_versions else "")
                  + f"numpy {peer_versions['numpy']}"
                  + (f", nncf {peer_versions['nncf']}" if "nncf" in peer_versions else "")
                  + f"; sides {', '.join(peer_names)}")
        if calibration:
            print(f"int8: {args.calibration_frames} calibration frames per size (seeds {CALIBRATION_SEED}.."
                  f"{CALIBRATION_SEED + args.calibration_frames - 1}; the timed frame's {FRAME_SEED}) for "
                  + ", ".join(sorted(int8_sides))
                  + (f"; NNCF's ignored scope {args.nncf_ignore}" if int8_peers else ""))
        print(f"model {model_path}: {describe_model(cfg)}")
        results = []
        warnings_out = []
        for w, h, frame, img in frames:
            rh, rw = resized_size(pc, cfg, h, w)
            side = {name: {"times": [], "rss": 0.0, "dets": None, "stages": {}, "gflop": None, "load": [],
                           "first": [], "out": None, "info": None} for name in sides}
            order = list(sides)
            for rep in range(args.repeats):
                k = rep % len(order)
                for name in order[k:] + order[:k]:
                    if name in refused:
                        continue
                    kind, cmd = sides[name]
                    stages = {}
                    load_ms = first_ms = None
                    res = None
                    if kind in ("torch", "peer"):
                        extra = ["--image", frame]
                        if kind == "peer":
                            extra += ["--onnx", ov_int8_models[(w, h)] if name in int8_sides
                                      else onnx_paths[(w, h)]]
                        rc, out, err, rss = run_measured(cmd + extra, env, args.timeout)
                        if rc != 0:
                            sys.exit(f"bench_cpu.py: {name} worker failed ({rc}):\n{err[-3000:]}")
                        res = json.loads(out.strip().splitlines()[-1])
                        times, dets = res["times_ms"], res["detections"]
                        load_ms, first_ms = res.get("load_ms"), res.get("first_ms")
                    else:
                        model = vd_int8_models[(w, h)] if name in int8_sides else model_path
                        rc, out, err, rss = run_measured(cmd + ["--model", model, frame], env, args.timeout)
                        why = vd_detect_refusal(rc, err) if rc != 0 else None
                        if why is not None:
                            refused[name] = why
                            print(f"  {w}x{h} {name}: refused: {why}", flush=True)
                            continue
                        if rc != 0:
                            sys.exit(f"bench_cpu.py: vd-detect failed ({rc}):\n{err[-3000:]}")
                        all_times = [float(l.split(":", 1)[1]) for l in err.splitlines()
                                     if l.startswith("time_ms:")]
                        all_stages = [dict((kv.split("=")[0], float(kv.split("=")[1]))
                                           for kv in l.split(":", 1)[1].split())
                                      for l in err.splitlines() if l.startswith("stages_ms:")]
                        # each stage's arithmetic (the same every run of a frame)
                        all_gflop = [dict((kv.split("=")[0], float(kv.split("=")[1]))
                                          for kv in l.split(":", 1)[1].split())
                                     for l in err.splitlines() if l.startswith("stages_gflop:")]
                        if all_gflop:
                            side[name]["gflop"] = all_gflop[-1]
                        loads = [float(l.split(":", 1)[1]) for l in err.splitlines() if l.startswith("load_ms:")]
                        if len(all_times) != vd_repeat or len(all_stages) != vd_repeat:
                            sys.exit(f"bench_cpu.py: vd-detect printed {len(all_times)} time_ms lines for "
                                     f"--repeat {vd_repeat}:\n{err[-3000:]}")
                        times = all_times[args.warmup:args.warmup + args.runs]
                        load_ms = loads[0] if loads else None  # None: a vd-detect without load_ms
                        first_ms = all_times[0]
                        for st in all_stages[args.warmup:args.warmup + args.runs]:
                            for key, v in st.items():
                                stages.setdefault(key, []).append(v)
                        lines = [l for l in out.splitlines() if l.strip()]
                        dets = None
                        if lines:
                            found = json.loads(lines[-1])["detections"]
                            dets = len(found)
                            res = {"boxes": [d["box"] for d in found], "scores": [d["score"] for d in found],
                                   "labels": [d["label"] for d in found]}
                    s = side[name]
                    s["times"] += times
                    s["rss"] = max(s["rss"], rss)
                    s["dets"] = dets
                    if load_ms is not None:
                        s["load"].append(load_ms)
                    if first_ms is not None:
                        s["first"].append(first_ms)
                    if res is not None and "boxes" in res:
                        s["out"] = {key: res[key] for key in ("boxes", "scores", "labels")}
                    if res is not None and res.get("info"):
                        s["info"] = res["info"]
                    for key, v in stages.items():
                        s["stages"].setdefault(key, []).extend(v)
                    lf = ""
                    if load_ms is not None:
                        lf += f", load {load_ms:.0f} ms"
                    if first_ms is not None:
                        lf += f", first inference {first_ms:.1f} ms"
                    print(f"  {w}x{h} repetition {rep + 1}/{args.repeats} {name}: "
                          + ", ".join(f"{t:.1f}" for t in times) + f" ms, peak RSS {rss:.0f} MiB{lf}", flush=True)
            print(f"frame {w}x{h} (resized {rw}x{rh}):")
            row = {"width": w, "height": h}
            order, vd_names, ref_names, peer_ref = without_refused(refused, order, vd_names, ref_names, peer_ref)
            peer_names = [n for n in peer_names if n not in refused]
            if any(n in refused for n in sides):
                row["refused"] = {n: refused[n] for n in sides if n in refused}
                for name, why in row["refused"].items():
                    print(f"  {name:24s} refused: {why}")
            for name in order:
                s = side[name]
                med, lo, hi, q1, q3 = spread(s["times"])
                print(f"  {name:24s} median {med:9.1f} ms  min {lo:9.1f}  max {hi:9.1f}  "
                      f"IQR {q1:.1f}..{q3:.1f} ({100 * (q3 - q1) / med:.1f} % of median)  "
                      f"n={len(s['times'])}  peak RSS {s['rss']:7.0f} MiB  detections {s['dets']}")
                row[name] = {"median_ms": med, "min_ms": lo, "max_ms": hi, "q1_ms": q1, "q3_ms": q3,
                             "n": len(s["times"]), "peak_rss_mib": s["rss"], "detections": s["dets"],
                             "load_ms": statistics.median(s["load"]) if s["load"] else None,
                             "first_ms": statistics.median(s["first"]) if s["first"] else None}
                if s["info"]:
                    row[name]["info"] = s["info"]
                    print("  " + " " * 24 + " " + ", ".join(f"{k} {v}" for k, v in s["info"].items()))
                if s["stages"]:
                    st_med = {key: statistics.median(v) for key, v in s["stages"].items()}
                    row[name]["stages_ms"] = st_med
                    print("  " + " " * 24 + " stages (median ms): "
                          + " ".join(f"{key} {v:.1f}" for key, v in st_med.items()))
                    if s["gflop"] is not None:
                        row[name]["stages_gflop"] = s["gflop"]
                    if peaks is not None and s["gflop"] is not None:
                        box_kernel = ("convolution" if cfg.get("architecture") in ("retinanet", "fcos")
                                      or cfg["roi_heads"].get("box_head", {}).get("type") == "conv_fc"
                                      else "matmul")
                        row[name]["roofline"] = roofline_table(st_med, s["gflop"], side_precision[name],
                                                               peaks, box_kernel)
            ratios = {}
            for rname in ref_names:
                for vname in vd_names:
                    t, v = row[rname], row[vname]
                    ratio = t["median_ms"] / v["median_ms"]
                    rss_ratio = t["peak_rss_mib"] / v["peak_rss_mib"] if v["peak_rss_mib"] else float("nan")
                    ratios[f"{rname}/{vname}"] = {"time": ratio, "rss": rss_ratio}
                    print(f"  {rname} / {vname}: median time {ratio:.2f}x, peak RSS {rss_ratio:.2f}x")
            row["ratios"] = ratios
            # sanity check of the ONNX export: the peers against torchvision (or,
            # without a torchvision side, against vd-detect in fp32: the same weights)
            checks = {}
            for pname in peer_names:
                pout = side[pname]["out"]
                n_peer = sum(1 for sc in pout["scores"] if sc >= 0.5)
                chk = {"peer_detections_0.5": n_peer, "reference": peer_ref}
                if peer_ref is None:
                    msg = "no torchvision or vd-detect fp32 side to compare with"
                    chk["match_fraction"] = None
                else:
                    n_ref, matched = match_fraction(pc, side[peer_ref]["out"], pout)
                    frac = matched / n_ref if n_ref else None
                    chk.update({"reference_detections_0.5": n_ref, "matched": matched, "match_fraction": frac})
                    msg = (f"{n_peer} detections >= 0.5 ({peer_ref} {n_ref}); {peer_ref}'s matched "
                           f"(same label, IoU >= 0.9): {matched}/{n_ref}"
                           + (f" = {100 * frac:.1f} %" if frac is not None else ""))
                    if frac is None:
                        warn = (f"WARNING: {w}x{h} {pname}: {peer_ref} has no detection >= 0.5, "
                                "the ONNX export is not checked")
                    elif frac < 0.9:
                        # openvino-bf16, openvino-int8 and openvino-int8-bf16 against openvino
                        f32 = checks.get("openvino") if pname.startswith("openvino-") else None
                        rounding, vd_same = (("int8 quantization", "vd-detect-int8") if "-int8" in pname
                                             else ("bf16 rounding", "vd-detect-bf16"))
                        if f32 is not None and f32["match_fraction"] is not None and f32["match_fraction"] >= 0.9:
                            # the same ONNX model in f32 matches: the rounding, not the export
                            warn = (f"WARNING: {w}x{h} {pname} matches only {100 * frac:.1f} % of {peer_ref}'s "
                                    f"detections (< 90 %), while openvino (f32, same ONNX model) "
                                    f"matches {100 * f32['match_fraction']:.1f} %: the export is faithful, the "
                                    f"difference is {rounding} (compare it with {vd_same})")
                        elif f32 is None and "-int8" in pname:
                            warn = (f"WARNING: {w}x{h} {pname} matches only {100 * frac:.1f} % of {peer_ref}'s "
                                    "detections (< 90 %): int8 quantization or an unfaithful ONNX export (the "
                                    "openvino peer, f32, would tell which)")
                        else:
                            warn = (f"WARNING: {w}x{h} {pname} matches only {100 * frac:.1f} % of {peer_ref}'s "
                                    "detections (< 90 %): the ONNX export is not faithful, its times are of a "
                                    "different computation")
                    else:
                        warn = None
                    if warn:
                        print("  " + "!" * 8 + " " + warn)
                        warnings_out.append(warn)
                print(f"  check {pname}: {msg}")
                checks[pname] = chk
            if checks:
                row["peer_check"] = checks
            # int8 against the same runtime in fp32: the fp32 side's detections >= 0.5
            # that the int8 side matches with the same label and IoU >= 0.5 (the same
            # objects found), and IoU >= 0.9 (the same boxes)
            int8_checks = {}
            for name in order:
                if name not in int8_sides:
                    continue
                base = "openvino" if name.startswith("openvino-") else name[:-len("int8")] + "fp32"
                if base not in side:
                    continue
                n_base, matched = match_fraction(pc, side[base]["out"], side[name]["out"], iou=0.5)
                _, matched_09 = match_fraction(pc, side[base]["out"], side[name]["out"], iou=0.9)
                n_int8 = sum(1 for sc in side[name]["out"]["scores"] if sc >= 0.5)
                int8_checks[name] = {"fp32_side": base, "detections_0.5": n_int8, "fp32_detections_0.5": n_base,
                                     "matched_iou_0.5": matched, "matched_iou_0.9": matched_09}
                print(f"  check {name} against {base}: {n_int8} detections >= 0.5 ({base} {n_base}); "
                      f"{base}'s matched (same label): {matched}/{n_base} with IoU >= 0.5, "
                      f"{matched_09}/{n_base} with IoU >= 0.9")
            if int8_checks:
                row["int8_check"] = int8_checks
            if (w, h) in calibration:
                row["calibration"] = calibration[(w, h)]
            # the same check of vd-detect (no warning: the parity tests are its check;
            # this one says that the torchvision side ran the weights vd-detect ran)
            if check_ref is not None:
                vd_checks = {}
                for vname in vd_names:
                    n_ref, matched = match_fraction(pc, side[check_ref]["out"], side[vname]["out"])
                    vd_checks[vname] = {"reference": check_ref, "reference_detections_0.5": n_ref,
                                        "matched": matched}
                    print(f"  check {vname}: {check_ref}'s {n_ref} detections >= 0.5 matched "
                          f"(same label, IoU >= 0.9): {matched}/{n_ref}")
                row["vd_check"] = vd_checks
            results.append(row)

        # Markdown summary
        print()
        print(f"| frame | side | median ms | IQR ms | peak RSS MiB | " +
              " | ".join(f"x vs {t}" for t in ref_names) + " |")
        print("|---|---|---:|---:|---:|" + "---:|" * len(ref_names))
        for row in results:
            for name in order:
                r = row[name]
                cells = []
                for rname in ref_names:
                    key = f"{rname}/{name}"
                    cells.append(f"{row['ratios'][key]['time']:.2f} (RSS {row['ratios'][key]['rss']:.2f})"
                                 if key in row["ratios"] else "")
                print(f"| {row['width']}x{row['height']} | {name} | {r['median_ms']:.1f} | "
                      f"{r['q1_ms']:.1f}..{r['q3_ms']:.1f} | {r['peak_rss_mib']:.0f} | " + " | ".join(cells) + " |")
            for name, why in row.get("refused", {}).items():
                print(f"| {row['width']}x{row['height']} | {name} | refused: {why} | | |" + " |" * len(ref_names))
        print()
        print("| frame | side | load ms | first inference ms |")
        print("|---|---|---:|---:|")
        fmt = lambda v: "n/a" if v is None else f"{v:.1f}"  # noqa: E731
        for row in results:
            for name in order:
                print(f"| {row['width']}x{row['height']} | {name} | {fmt(row[name]['load_ms'])} | "
                      f"{fmt(row[name]['first_ms'])} |")
        if peer_names:
            print()
            print(f"| frame | peer | detections >= 0.5 | {peer_ref or 'torchvision'}'s matched (IoU >= 0.9) |")
            print("|---|---|---:|---:|")
            for row in results:
                for pname in peer_names:
                    c = row["peer_check"][pname]
                    if c["match_fraction"] is not None:
                        m = f"{c['matched']}/{c['reference_detections_0.5']} ({100 * c['match_fraction']:.1f} %)"
                    elif c.get("reference_detections_0.5") == 0:
                        m = "n/a (none >= 0.5)"
                    else:
                        m = "n/a"
                    print(f"| {row['width']}x{row['height']} | {pname} | {c['peer_detections_0.5']} | {m} |")
        if any("int8_check" in row for row in results):
            print()
            print("| frame | int8 side | detections >= 0.5 | fp32 side | its detections >= 0.5 | "
                  "matched (IoU >= 0.5) | matched (IoU >= 0.9) |")
            print("|---|---|---:|---|---:|---:|---:|")
            for row in results:
                for name, c in row.get("int8_check", {}).items():
                    n = c["fp32_detections_0.5"]
                    print(f"| {row['width']}x{row['height']} | {name} | {c['detections_0.5']} | {c['fp32_side']} | "
                          f"{n} | {c['matched_iou_0.5']}/{n} | {c['matched_iou_0.9']}/{n} |")
        stage_rows = [(row, name) for row in results for name in order if "stages_ms" in row[name]]
        if stage_rows:
            keys = list(stage_rows[0][0][stage_rows[0][1]]["stages_ms"])
            print()
            print("| frame | side | " + " | ".join(keys) + " |")
            print("|---|---|" + "---:|" * len(keys))
            for row, name in stage_rows:
                st = row[name]["stages_ms"]
                print(f"| {row['width']}x{row['height']} | {name} | " +
                      " | ".join(f"{st.get(k, float('nan')):.1f}" for k in keys) + " |")
        if peaks is not None:
            for row in results:
                for name in order:
                    if "roofline" in row[name]:
                        print()
                        print_roofline(f"{row['width']}x{row['height']} {name}", row[name]["roofline"])
        if warnings_out:
            print()
            for warn in warnings_out:
                print(warn)
        if args.json:
            print(json.dumps({"threads": args.threads, "torch_linear": linears, "precisions": precisions,
                              "peers": peer_names, "peer_versions": peer_versions,
                              "calibration_frames": args.calibration_frames if calibration else None,
                              "model": model_path, "roofline_peaks": peaks, "results": results}))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
