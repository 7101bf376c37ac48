#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Export a torchvision detector to a visiondetect model file.

The engine runs the R-CNN family (Faster R-CNN with a ResNet-FPN or MobileNetV3-FPN
backbone, Mask R-CNN, Keypoint R-CNN: engine/KEYPOINTRCNN.md), the one-stage
RetinaNet (v1 and v2) and FCOS (engine/RETINANET.md), and SSD300 and SSDlite320
(engine/SSD.md: their feature extractors and SSDlite's heads as lists of layers, each
naming its module).

The output is one .safetensors file written by hand (struct + json, no safetensors
package): an 8-byte little-endian header length, a JSON header, then the tensor data.
Tensors are named by the model's state_dict() keys (num_batches_tracked is skipped)
and stored as F32 (default), F16 or BF16. The architecture goes into the header's
"__metadata__" map:

    {"format": "visiondetect", "format_version": "1", "config": "<JSON string>"}

The config JSON is read by engine/vd_model_config.c and the families' loader files; every value below comes from the model
object itself, not from the builder's defaults:

    {
      "architecture": "fasterrcnn",
      "transform": {"min_size": 800, "max_size": 1333,
                    "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
                    "size_divisible": 32, "resize_scale": "float32"},
                    # resize_scale: how the torchvision that ran the export rounds the
                    # resize scale min(min_size / min(h, w), max_size / max(h, w)):
                    # "float32" (0.10 to 0.15) or "double" (0.16 and later); found by
                    # running its transform (resize_scale_rule); files without it: double
                    # + "resize_arithmetic": "torch1" (torch 1.13) or "torch2" (2.x, x86
                    # FMA build): the bilinear resize's rounding, found by resizing a
                    # probe image (resize_arithmetic_rule); files without it: torch1
      "backbone": {"type": "resnet", "depth": 50, "block": "bottleneck",
                   "layers": [3, 4, 6, 3], "stem_channels": 64, "width_per_group": 64,
                   "groups": 1, "returned_layers": [1, 2, 3, 4],
                   "norm": "frozen_batch_norm", "norm_eps": 0.0},
                   # + "norm_eps_per_module": {"backbone.body.bn1": 1e-05, ...} when the
                   #   batch-norm modules disagree (the map then lists every one of them)
                   # or, for the MobileNetV3-Large-FPN builders (engine/MOBILENETV3.md):
                   # {"type": "mobilenet_v3", "arch": "mobilenet_v3_large", "stem_channels": 16,
                   #  "blocks": [{"kernel": 3, "expanded_channels": 16, "out_channels": 16,
                   #              "se_channels": 0, "activation": "relu", "stride": 1,
                   #              "dilation": 1}, ...one per InvertedResidual (15)],
                   #  "last_channels": 960, "returned_layers": [13, 16],  # features indices
                   #  "norm_eps": 1e-05}
      "fpn": {"in_channels": [256, 512, 1024, 2048], "out_channels": 256,
              "extra_block": "maxpool"},                      # or "none"
      "anchors": {"sizes": [[32], [64], [128], [256], [512]],
                  "aspect_ratios": [[0.5, 1.0, 2.0], ...one list per level]},
      "rpn": {"pre_nms_top_n": 1000, "post_nms_top_n": 1000, "nms_thresh": 0.7,
              "score_thresh": 0.0, "min_size": 0.001},
      "roi_heads": {"output_size": 7, "sampling_ratio": 2,
                    "featmap_names": ["0", "1", "2", "3"], "representation_size": 1024,
                    "score_thresh": 0.05, "nms_thresh": 0.5, "detections_per_img": 100,
                    "bbox_reg_weights": [10.0, 10.0, 5.0, 5.0], "min_size": 0.01},
      "num_classes": 91,
      "class_names": ["__background__", "person", ...]
    }

Usage (Debian's interpreter, which has torch and torchvision):

    /usr/bin/python3 tools/export_torchvision.py --builder fasterrcnn_resnet50_fpn \\
        --pretrained --coco-names fasterrcnn_resnet50_fpn_coco.safetensors
    /usr/bin/python3 tools/export_torchvision.py --builder resnet_fpn:18 --num-classes 3 \\
        --state-dict my_training.pth --class-names names.txt my_model.safetensors

As a module:

    sys.path.insert(0, "tools"); import export_torchvision
    export_torchvision.export(model, "model.safetensors", class_names=None, dtype="f32")

Mask R-CNN (maskrcnn_resnet50_fpn, maskrcnn_resnet50_fpn_v2: engine/MASKRCNN.md) writes
"architecture": "maskrcnn" and "roi_heads": {..., "mask_head": {"output_size": 14,
"sampling_ratio": 2, "featmap_names": ["0", "1", "2", "3"], "conv_channels": [256, 256,
256, 256], "dilation": 1, "norm": "none" or "batch_norm" (v2), "dim_reduced": 256}}.

Only the Faster R-CNN family with a torchvision ResNet + FPN or MobileNetV3 + FPN
(fasterrcnn_mobilenet_v3_large_fpn, fasterrcnn_mobilenet_v3_large_320_fpn) backbone,
TwoMLPHead or FastRCNNConvFCHead box head and FastRCNNPredictor is supported;
fasterrcnn_resnet50_fpn_v2 adds "fpn": {"norm": "batch_norm"}, "rpn": {"conv_depth": 2}
and "roi_heads": {"box_head": {"type": "conv_fc", "conv_channels": [256, 256, 256, 256],
"norm": "batch_norm"}} (representation_size: its one Linear's width). Anything else
(ResNeXt/wide ResNets, dilated MobileNets) raises ExportError.

torchvision's other builders (OTHER_BUILDERS: --builder retinanet_resnet50_fpn,
retinanet_resnet50_fpn_v2, fcos_resnet50_fpn, ssd300_vgg16, ssdlite320_mobilenet_v3_large,
keypointrcnn_resnet50_fpn) write "architecture" (the family) and "builder" (the
builder's name, or the one the model object implies when export() is given none), and
the rest, as always read from the model object:

    Keypoint R-CNN ("keypointrcnn"): the Faster R-CNN config above, plus
      "roi_heads": {..., "keypoint_head": {"output_size": 14, "sampling_ratio": 2,
                    "featmap_names": ["0", "1", "2", "3"], "conv_channels": [512, ...8],
                    "deconv_kernel": 4, "deconv_stride": 2, "deconv_padding": 1,
                    "up_scale": 2}},   # KeypointRCNNHeads (3x3 conv + ReLU each),
                                       # KeypointRCNNPredictor (ConvTranspose2d, then
                                       # bilinear up_scale)
      "num_keypoints": 17,
      + with --coco-names (then "class_names": ["__background__", "person"]):
      "keypoint_names": ["nose", "left_eye", ...17], "keypoint_skeleton": [[15, 13], ...]
                        # COCO's person skeleton, pairs of 0-based keypoint indices

    RetinaNet ("retinanet") and FCOS ("fcos"):
      "transform": as above,
      "backbone": the ResNet description above (returned_layers [2, 3, 4]),
      "fpn": {"in_channels": [512, 1024, 2048], "out_channels": 256,
              "extra_block": "p6p7", "extra_in_channels": 256 (v2: 2048),
              "extra_out_channels": 256, "use_P5": true (v2: false)},  # LastLevelP6P7
      "anchors": {"sizes": [[32, 40, 50], ...], "aspect_ratios": [[0.5, 1.0, 2.0], ...]},
      "head": {"type": "retinanet" or "fcos", "in_channels": 256, "num_anchors": 9,
               "classification_convs": 4, "regression_convs": 4,
               "norm": "none" or "group_norm", "num_groups": 32, "norm_eps": 1e-05,
               # RetinaNet: "bbox_reg_weights": [1, 1, 1, 1], "bbox_xform_clip": log(1000/16)
               # FCOS: "centerness": true, "box_coder": "linear", "normalize_by_size": true
               "score_thresh": 0.05, "nms_thresh": 0.5, "detections_per_img": 300,
               "topk_candidates": 1000},
      "num_classes", "class_names"

    SSD300 ("ssd") and SSDlite320 ("ssdlite"):
      "transform": {..., "size_divisible": 1, "fixed_size": [300, 300]}
                   # torchvision's (width, height); no "resize_scale" (no scale to round)
      "backbone": {"type": "vgg16", "features": [ops], "l2_norm": {"channels": 512,
                   "eps": 1e-12}, "extra": [[ops], ...one list per extra feature map]}
                  # "scale_weight" is the L2 norm's per-channel scale
                  or {"type": "mobilenet_v3", "arch": "mobilenet_v3_large",
                      "stages": [[ops], [ops]], "extra": [[ops], ...], "norm_eps": 0.001}
                  # ops, in order: {"op": "conv", "name", "in_channels", "out_channels",
                  #   "kernel", "stride", "padding", "dilation", "groups", "bias"},
                  #   {"op": "batch_norm", "name"}, {"op": "relu" | "relu6" | "hardswish"},
                  #   {"op": "maxpool", "name", "kernel", "stride", "padding", "ceil_mode"},
                  #   {"op": "squeeze_excitation", "name", "channels", "squeeze_channels"},
                  #   {"op": "inverted_residual",
                  #   "residual": bool, "layers": [ops]}
      "anchors": {"type": "default_boxes", "aspect_ratios": [[2.0], [2.0, 3.0], ...],
                  "scales": [0.07, 0.15, ...one more than the levels], "steps": [8, 16, ...]
                  or null (SSDlite), "clip": true},   # DefaultBoxGenerator
      "head": {"type": "ssd" or "ssdlite", "in_channels": [512, 1024, ...],
               "num_anchors": [4, 6, 6, 6, 4, 4], "kernel": 3 (SSD) or
               "classification": [[ops], ...], "regression": [[ops], ...] (SSDlite),
               "bbox_reg_weights": [10, 10, 5, 5], "bbox_xform_clip": log(1000/16),
               "score_thresh", "nms_thresh", "detections_per_img", "topk_candidates"},
      "num_classes", "class_names"

A config may also hold "norm_eps_per_module" beside "norm_eps" wherever the batch-norms
disagree, as for the R-CNN family.
"""

import argparse
import collections
import json
import math
import struct
import sys

FORMAT = "visiondetect"
FORMAT_VERSION = "1"

_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}

# Blocks per stage of the standard torchvision ResNets, to name the depth.
_RESNET_LAYERS = {
    ("basic", (2, 2, 2, 2)): 18,
    ("basic", (3, 4, 6, 3)): 34,
    ("bottleneck", (3, 4, 6, 3)): 50,
    ("bottleneck", (3, 4, 23, 3)): 101,
    ("bottleneck", (3, 8, 36, 3)): 152,
}


# torchvision's MobileNetV3-Large-FPN builders and their weight enums
_MOBILENET_BUILDERS = {
    "fasterrcnn_mobilenet_v3_large_fpn": "FasterRCNN_MobileNet_V3_Large_FPN_Weights",
    "fasterrcnn_mobilenet_v3_large_320_fpn": "FasterRCNN_MobileNet_V3_Large_320_FPN_Weights",
}


# torchvision's other detection builders and their weight enums: exported with their
# configuration; the engine runs every one (docs/models.md)
OTHER_BUILDERS = {
    "retinanet_resnet50_fpn": "RetinaNet_ResNet50_FPN_Weights",
    "retinanet_resnet50_fpn_v2": "RetinaNet_ResNet50_FPN_V2_Weights",
    "fcos_resnet50_fpn": "FCOS_ResNet50_FPN_Weights",
    "ssd300_vgg16": "SSD300_VGG16_Weights",
    "ssdlite320_mobilenet_v3_large": "SSDLite320_MobileNet_V3_Large_Weights",
    "keypointrcnn_resnet50_fpn": "KeypointRCNN_ResNet50_FPN_Weights",
}
# the ones of OTHER_BUILDERS this engine runs
RUN_BUILDERS = ("retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2", "fcos_resnet50_fpn",
                "keypointrcnn_resnet50_fpn", "ssd300_vgg16", "ssdlite320_mobilenet_v3_large")


class ExportError(Exception):
    """The model cannot be represented in a visiondetect model file."""


def _import_torch():
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        raise ExportError(
            f"cannot import torch/torchvision ({e}); run this script with /usr/bin/python3 "
            "(Debian's python3-torchvision)") from e
    return torch


def _default_class_names(num_classes):
    return ["__background__"] + [f"class{i}" for i in range(1, num_classes)]


def coco_class_names():
    """The 91 COCO category names torchvision's detection weights use (index = label)."""
    from torchvision.models._meta import _COCO_CATEGORIES
    return list(_COCO_CATEGORIES)


def _check_conv(conv, name, kernel, stride, padding, bias=None):
    import torch.nn as nn
    if type(conv) is not nn.Conv2d:
        raise ExportError(f"{name}: expected a Conv2d, found {type(conv).__name__}")
    ks = tuple(conv.kernel_size)
    if ks != (kernel, kernel) or tuple(conv.stride) != (stride, stride) \
            or tuple(conv.padding) != (padding, padding):
        raise ExportError(
            f"{name}: expected a {kernel}x{kernel} convolution with stride {stride} and padding "
            f"{padding}, found kernel {ks}, stride {tuple(conv.stride)}, padding {tuple(conv.padding)}")
    if tuple(conv.dilation) != (1, 1):
        raise ExportError(f"{name}: dilated convolutions (replace_stride_with_dilation) are not supported")
    if conv.groups != 1:
        raise ExportError(f"{name}: grouped convolutions (ResNeXt, groups={conv.groups}) are not supported")
    if conv.padding_mode != "zeros":
        raise ExportError(f"{name}: padding mode {conv.padding_mode!r} is not supported")
    if bias is not None and (conv.bias is not None) != bias:
        raise ExportError(f"{name}: expected a convolution {'with' if bias else 'without'} bias")


def _norm_eps(bn, name):
    import torch.nn as nn
    from torchvision.ops.misc import FrozenBatchNorm2d
    if isinstance(bn, FrozenBatchNorm2d):
        return float(bn.eps)
    if isinstance(bn, nn.BatchNorm2d):
        if not bn.affine or not bn.track_running_stats:
            raise ExportError(f"{name}: BatchNorm2d without affine parameters or running statistics "
                              "is not supported")
        return float(bn.eps)
    raise ExportError(f"{name}: expected FrozenBatchNorm2d or BatchNorm2d, found {type(bn).__name__}")


def _sequence_conv(module, name, relu=False):
    """The Conv2d inside a torchvision >= 0.13 Conv2dNormActivation (or a bare Conv2d of
    older models), rejecting any norm in it and any activation but the RPN's ReLU."""
    import torch.nn as nn
    if isinstance(module, nn.Conv2d):
        return module
    if isinstance(module, nn.Sequential):
        children = list(module.children())
        if relu and len(children) == 2 and type(children[1]) is nn.ReLU:
            children = children[:1]
        if len(children) == 1 and isinstance(children[0], nn.Conv2d):
            return children[0]
        kinds = ", ".join(type(c).__name__ for c in children)
        raise ExportError(f"{name}: expected a plain convolution, found a block of [{kinds}] "
                          "(FPN/RPN with normalisation, as in fasterrcnn_resnet50_fpn_v2, "
                          "is not supported)")
    raise ExportError(f"{name}: expected a convolution, found {type(module).__name__}")


def _describe_backbone(model, allow_p6p7=False):
    """Checks the ResNet body and returns the backbone config (without norm eps) and a
    list of (module name, batch-norm module)."""
    import torch.nn as nn
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.resnet import BasicBlock, Bottleneck
    from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork

    backbone = model.backbone
    if not isinstance(backbone, BackboneWithFPN):
        raise ExportError(f"backbone {type(backbone).__name__} is not a torchvision BackboneWithFPN; "
                          "only ResNet-FPN backbones are supported")
    body = backbone.body
    children = dict(body.named_children())
    if "0" in children and "conv1" not in children:
        return _describe_mobilenet(model)
    if "conv1" not in children or "layer1" not in children:
        shown = ", ".join(list(children)[:6]) + (", ..." if len(children) > 6 else "")
        raise ExportError(f"backbone is not a ResNet (MobileNetV3 and other backbones are not "
                          f"supported yet); its body has the modules {shown}")
    expected_order = ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"]
    names = list(children)
    if names != expected_order[:len(names)]:
        raise ExportError(f"backbone body has unexpected modules {names}; expected a torchvision ResNet")
    _check_conv(body.conv1, "backbone.body.conv1", 7, 2, 3, bias=False)
    if body.conv1.in_channels != 3 or body.conv1.out_channels != 64:
        raise ExportError("backbone.body.conv1: expected 3 -> 64 channels (stem_channels 64)")
    mp = body.maxpool
    if not isinstance(mp, nn.MaxPool2d) or mp.kernel_size not in (3, (3, 3)) \
            or mp.stride not in (2, (2, 2)) or mp.padding not in (1, (1, 1)) \
            or mp.dilation not in (1, (1, 1)) or mp.ceil_mode:
        raise ExportError("backbone.body.maxpool: expected MaxPool2d(3, stride 2, padding 1)")

    norms = [("backbone.body.bn1", body.bn1)]
    block_type = None
    layers = []
    inplanes = 64
    for stage in range(1, 5):
        lname = f"layer{stage}"
        if lname not in children:
            break
        layer = children[lname]
        blocks = list(layer.children())
        if not isinstance(layer, nn.Sequential) or not blocks:
            raise ExportError(f"backbone.body.{lname}: expected a non-empty Sequential of ResNet blocks")
        planes = 64 << (stage - 1)
        for bi, block in enumerate(blocks):
            prefix = f"backbone.body.{lname}.{bi}"
            if type(block) is BasicBlock:
                kind, expansion = "basic", 1
            elif type(block) is Bottleneck:
                kind, expansion = "bottleneck", 4
            else:
                raise ExportError(f"{prefix}: block type {type(block).__name__} is not a torchvision "
                                  "BasicBlock or Bottleneck")
            if block_type is None:
                block_type = kind
            elif block_type != kind:
                raise ExportError(f"{prefix}: mixed block types in one ResNet")
            stride = 2 if (stage > 1 and bi == 0) else 1
            if kind == "basic":
                _check_conv(block.conv1, prefix + ".conv1", 3, stride, 1, bias=False)
                _check_conv(block.conv2, prefix + ".conv2", 3, 1, 1, bias=False)
                convs = [(block.conv1, inplanes, planes), (block.conv2, planes, planes)]
                norms += [(prefix + ".bn1", block.bn1), (prefix + ".bn2", block.bn2)]
            else:
                if block.conv2.groups != 1:
                    raise ExportError(f"{prefix}.conv2: groups={block.conv2.groups}; ResNeXt "
                                      "(groups != 1) is not supported")
                if block.conv2.out_channels != planes:
                    raise ExportError(f"{prefix}.conv2: width {block.conv2.out_channels} instead of "
                                      f"{planes}; wide ResNets (width_per_group != 64) are not supported")
                _check_conv(block.conv1, prefix + ".conv1", 1, 1, 0, bias=False)
                _check_conv(block.conv2, prefix + ".conv2", 3, stride, 1, bias=False)
                _check_conv(block.conv3, prefix + ".conv3", 1, 1, 0, bias=False)
                convs = [(block.conv1, inplanes, planes), (block.conv2, planes, planes),
                         (block.conv3, planes, planes * 4)]
                norms += [(prefix + ".bn1", block.bn1), (prefix + ".bn2", block.bn2),
                          (prefix + ".bn3", block.bn3)]
            for ci, (conv, cin, cout) in enumerate(convs):
                if conv.in_channels != cin or conv.out_channels != cout:
                    raise ExportError(f"{prefix}.conv{ci + 1}: {conv.in_channels} -> {conv.out_channels} "
                                      f"channels, expected {cin} -> {cout}")
            out_channels = planes * expansion
            needs_downsample = stride != 1 or inplanes != out_channels
            if block.downsample is None:
                if needs_downsample:
                    raise ExportError(f"{prefix}: missing the downsample shortcut")
            else:
                ds = list(block.downsample.children())
                if not needs_downsample or len(ds) != 2:
                    raise ExportError(f"{prefix}.downsample: unexpected shortcut (expected conv1x1 + norm "
                                      "on the first block of a stage only)")
                _check_conv(ds[0], prefix + ".downsample.0", 1, stride, 0, bias=False)
                if ds[0].in_channels != inplanes or ds[0].out_channels != out_channels:
                    raise ExportError(f"{prefix}.downsample.0: wrong channel counts")
                norms.append((prefix + ".downsample.1", ds[1]))
            inplanes = out_channels
        layers.append(len(blocks))

    n_present = len(layers)
    full = None
    for (kind, std), depth in _RESNET_LAYERS.items():
        if kind == block_type and tuple(std[:n_present]) == tuple(layers):
            if n_present == 4 or full is None:
                full = (depth, list(std))
            if n_present == 4:
                break
    if n_present == 4:
        all_layers = layers
        depth = 2 + (2 if block_type == "basic" else 3) * sum(layers)
    elif full is not None:
        # IntermediateLayerGetter drops the stages after the last returned one: name the
        # standard ResNet they came from; the loader reads only the stages it computes.
        depth, std = full
        all_layers = layers + std[n_present:]
    else:
        depth = 0
        all_layers = layers + [0] * (4 - n_present)

    fpn = backbone.fpn
    if not isinstance(fpn, FeaturePyramidNetwork):
        raise ExportError(f"backbone.fpn is {type(fpn).__name__}, not a torchvision FeaturePyramidNetwork")
    return_layers = body.return_layers  # {"layer1": "0", ...}
    returned = []
    for lname, out_name in return_layers.items():
        if not lname.startswith("layer") or not lname[5:].isdigit():
            raise ExportError(f"backbone returns {lname!r}; only ResNet stages layer1..layer4 are supported")
        returned.append((int(lname[5:]), out_name))
    returned.sort()
    if [name for _, name in returned] != [str(i) for i in range(len(returned))]:
        raise ExportError(f"backbone return_layers {return_layers} do not name the stages '0', '1', ... "
                          "in order")
    returned_layers = [s for s, _ in returned]
    if max(returned_layers) != n_present:
        raise ExportError("backbone body keeps stages after the last returned one")

    expansion = 1 if block_type == "basic" else 4
    in_channels = [(64 << (s - 1)) * expansion for s in returned_layers]
    fpn_cfg = _describe_fpn(backbone, in_channels, norms, allow_p6p7)
    backbone_cfg = {
        "type": "resnet",
        "depth": depth,
        "block": block_type,
        "layers": all_layers,
        "stem_channels": 64,
        "width_per_group": 64,
        "groups": 1,
        "returned_layers": returned_layers,
    }
    return backbone_cfg, fpn_cfg, norms


def _is_conv_norm(module):
    import torch.nn as nn
    children = list(module.children()) if isinstance(module, nn.Sequential) else []
    return len(children) >= 2 and type(children[0]) is nn.Conv2d and \
        isinstance(children[1], nn.modules.batchnorm._NormBase)


def _describe_fpn(backbone, in_channels, norms, allow_p6p7=False):
    """Checks BackboneWithFPN's FeaturePyramidNetwork (plain convolutions, or conv +
    batch-norm as in fasterrcnn_resnet50_fpn_v2, whose norms are appended to @norms)
    over backbone outputs of @in_channels; returns the fpn config."""
    from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork
    fpn = backbone.fpn
    if not isinstance(fpn, FeaturePyramidNetwork):
        raise ExportError(f"backbone.fpn is {type(fpn).__name__}, not a torchvision FeaturePyramidNetwork")
    if len(fpn.inner_blocks) != len(in_channels) or len(fpn.layer_blocks) != len(in_channels):
        raise ExportError("FPN level count does not match the returned backbone layers")
    fpn_channels = backbone.out_channels
    # fasterrcnn_resnet50_fpn_v2: Conv2dNormActivation(norm_layer=BatchNorm2d) blocks,
    # conv without bias + norm, no activation; all levels alike
    normed = _is_conv_norm(fpn.inner_blocks[0])
    for i, cin in enumerate(in_channels):
        if normed:
            inner, inner_bn = _conv_norm_act(fpn.inner_blocks[i], f"backbone.fpn.inner_blocks.{i}", None)
            outer, outer_bn = _conv_norm_act(fpn.layer_blocks[i], f"backbone.fpn.layer_blocks.{i}", None)
            norms.append((f"backbone.fpn.inner_blocks.{i}.1", inner_bn))
            norms.append((f"backbone.fpn.layer_blocks.{i}.1", outer_bn))
        else:
            inner = _sequence_conv(fpn.inner_blocks[i], f"backbone.fpn.inner_blocks.{i}")
            outer = _sequence_conv(fpn.layer_blocks[i], f"backbone.fpn.layer_blocks.{i}")
        _check_conv(inner, f"backbone.fpn.inner_blocks.{i}", 1, 1, 0, bias=not normed)
        _check_conv(outer, f"backbone.fpn.layer_blocks.{i}", 3, 1, 1, bias=not normed)
        if inner.in_channels != cin or inner.out_channels != fpn_channels \
                or outer.in_channels != fpn_channels or outer.out_channels != fpn_channels:
            raise ExportError(f"backbone.fpn level {i}: channel counts do not match the backbone "
                              f"({cin} -> {fpn_channels})")

    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool, LastLevelP6P7
    extra = fpn.extra_blocks
    p6p7 = None
    if extra is None:
        extra_block = "none"
    elif type(extra) is LastLevelMaxPool:
        extra_block = "maxpool"
    elif type(extra) is LastLevelP6P7 and allow_p6p7:
        # RetinaNet and FCOS: P6 = conv3x3/2(C5 or P5), P7 = conv3x3/2(relu(P6))
        _check_conv(extra.p6, "backbone.fpn.extra_blocks.p6", 3, 2, 1, bias=True)
        _check_conv(extra.p7, "backbone.fpn.extra_blocks.p7", 3, 2, 1, bias=True)
        if extra.p7.in_channels != extra.p6.out_channels or extra.p7.out_channels != extra.p6.out_channels:
            raise ExportError("backbone.fpn.extra_blocks: p7's channels do not follow p6's")
        use_p5 = bool(extra.use_P5)
        if extra.p6.in_channels != (fpn_channels if use_p5 else in_channels[-1]):
            raise ExportError(f"backbone.fpn.extra_blocks.p6: {extra.p6.in_channels} input channels do "
                              f"not match its input ({'P5' if use_p5 else 'C5'})")
        extra_block = "p6p7"
        p6p7 = {"extra_in_channels": int(extra.p6.in_channels),
                "extra_out_channels": int(extra.p6.out_channels), "use_P5": use_p5}
    else:
        raise ExportError(f"FPN extra block {type(extra).__name__} is not supported (only LastLevelMaxPool "
                          f"{'LastLevelP6P7 ' if allow_p6p7 else ''}or none)")
    cfg = {"in_channels": list(in_channels), "out_channels": fpn_channels, "extra_block": extra_block}
    if p6p7 is not None:
        cfg.update(p6p7)
    if normed:
        cfg["norm"] = "batch_norm"
    return cfg


def _conv_norm_act(module, name, activation):
    """The (Conv2d, norm) of a torchvision Conv2dNormActivation with the activation
    @activation ("relu", "hardswish" or None), else ExportError."""
    import torch.nn as nn
    children = list(module.children()) if isinstance(module, nn.Sequential) else []
    kinds = ", ".join(type(c).__name__ for c in children)
    acts = {"relu": nn.ReLU, "hardswish": nn.Hardswish}
    want = 2 if activation is None else 3
    if len(children) != want or type(children[0]) is not nn.Conv2d \
            or (activation is not None and type(children[2]) is not acts[activation]):
        raise ExportError(f"{name}: expected Conv2d, norm{', ' + activation if activation else ''}; "
                          f"found [{kinds}]")
    conv = children[0]
    if conv.bias is not None:
        raise ExportError(f"{name}.0: expected a convolution without bias before its norm")
    if tuple(conv.dilation) != (1, 1):
        raise ExportError(f"{name}.0: dilated convolutions (dilated=True) are not supported")
    if conv.padding_mode != "zeros":
        raise ExportError(f"{name}.0: padding mode {conv.padding_mode!r} is not supported")
    return conv, children[1]


def _check_mnv3_conv(conv, name, out_c, in_c, kernel, stride, groups):
    if conv.out_channels != out_c or conv.in_channels != in_c or conv.groups != groups \
            or tuple(conv.kernel_size) != (kernel, kernel) or tuple(conv.stride) != (stride, stride) \
            or tuple(conv.padding) != ((kernel - 1) // 2,) * 2:
        raise ExportError(f"{name}: expected a {kernel}x{kernel} convolution {in_c} -> {out_c} with "
                          f"stride {stride}, padding {(kernel - 1) // 2} and {groups} groups; found "
                          f"{conv}")


def _describe_mobilenet(model):
    """Checks a torchvision MobileNetV3 body (_mobilenet_extractor with fpn=True) and
    returns the backbone config (without norm eps), the FPN config and the norms."""
    import torch.nn as nn
    from torchvision.models.mobilenetv3 import InvertedResidual
    from torchvision.ops.misc import SqueezeExcitation

    backbone = model.backbone
    body = backbone.body
    features = list(body.children())
    names = [n for n, _ in body.named_children()]
    if names != [str(i) for i in range(len(names))] or len(features) < 2:
        raise ExportError(f"backbone body modules {names[:6]} are not MobileNetV3 features 0, 1, ...")
    norms = []
    stem, bn = _conv_norm_act(features[0], "backbone.body.0", "hardswish")
    _check_mnv3_conv(stem, "backbone.body.0.0", stem.out_channels, 3, 3, 2, 1)
    norms.append(("backbone.body.0.1", bn))
    in_c = stem.out_channels
    blocks = []
    last_channels = None
    for i, f in enumerate(features[1:], start=1):
        prefix = f"backbone.body.{i}"
        if type(f) is not InvertedResidual:
            if i != len(features) - 1 or i == 1:
                raise ExportError(f"{prefix}: {type(f).__name__} is not an InvertedResidual block "
                                  "(only the last feature is the 1x1 conv)")
            conv, bn = _conv_norm_act(f, prefix, "hardswish")
            _check_mnv3_conv(conv, prefix + ".0", conv.out_channels, in_c, 1, 1, 1)
            norms.append((prefix + ".1", bn))
            last_channels = conv.out_channels
            break
        parts = list(f.block.children())
        j = 0
        # expand (when present) and depthwise share the block's activation
        last = list(parts[0].children())[-1] if parts and isinstance(parts[0], nn.Sequential) else None
        act = "relu" if type(last) is nn.ReLU else "hardswish"
        exp = _conv_norm_act(parts[0], f"{prefix}.block.0", act)[0].out_channels
        if exp != in_c:
            conv, bn = _conv_norm_act(parts[j], f"{prefix}.block.{j}", act)
            _check_mnv3_conv(conv, f"{prefix}.block.{j}.0", exp, in_c, 1, 1, 1)
            norms.append((f"{prefix}.block.{j}.1", bn))
            j += 1
        if j >= len(parts):
            raise ExportError(f"{prefix}: missing the depthwise convolution")
        dw, bn = _conv_norm_act(parts[j], f"{prefix}.block.{j}", act)
        kernel, stride = dw.kernel_size[0], dw.stride[0]
        _check_mnv3_conv(dw, f"{prefix}.block.{j}.0", exp, exp, kernel, stride, exp)
        norms.append((f"{prefix}.block.{j}.1", bn))
        j += 1
        se_channels = 0
        if j < len(parts) and isinstance(parts[j], SqueezeExcitation):
            se = parts[j]
            if type(se.activation) is not nn.ReLU or type(se.scale_activation) is not nn.Hardsigmoid:
                raise ExportError(f"{prefix}.block.{j}: SE activations {type(se.activation).__name__}/"
                                  f"{type(se.scale_activation).__name__}; expected ReLU/Hardsigmoid")
            se_channels = se.fc1.out_channels
            for fc, o, n in ((se.fc1, se_channels, exp), (se.fc2, exp, se_channels)):
                _check_conv(fc, f"{prefix}.block.{j}.fc", 1, 1, 0, bias=True)
                if fc.out_channels != o or fc.in_channels != n:
                    raise ExportError(f"{prefix}.block.{j}: SE channel counts are inconsistent")
            j += 1
        if j != len(parts) - 1:
            raise ExportError(f"{prefix}: unexpected modules in the block: "
                              f"{[type(p).__name__ for p in parts]}")
        proj, bn = _conv_norm_act(parts[j], f"{prefix}.block.{j}", None)
        out_c = proj.out_channels
        _check_mnv3_conv(proj, f"{prefix}.block.{j}.0", out_c, exp, 1, 1, 1)
        norms.append((f"{prefix}.block.{j}.1", bn))
        if f.use_res_connect != (stride == 1 and in_c == out_c):
            raise ExportError(f"{prefix}: residual connection does not follow torchvision's rule")
        blocks.append({"kernel": int(kernel), "expanded_channels": int(exp), "out_channels": int(out_c),
                       "se_channels": int(se_channels), "activation": act, "stride": int(stride),
                       "dilation": 1})
        in_c = out_c

    return_layers = body.return_layers  # {"13": "0", "16": "1"}
    returned = sorted((int(k), v) for k, v in return_layers.items())
    if [v for _, v in returned] != [str(i) for i in range(len(returned))]:
        raise ExportError(f"backbone return_layers {return_layers} do not name the outputs '0', '1', ... "
                          "in order")
    returned_layers = [k for k, _ in returned]
    if returned_layers[-1] != len(features) - 1:
        raise ExportError("backbone body keeps features after the last returned one")
    if last_channels is None:
        # IntermediateLayerGetter dropped the last conv: torchvision's value, 6x the last block
        last_channels = 6 * in_c
    channels = [stem.out_channels] + [b["out_channels"] for b in blocks] + [last_channels]
    in_channels = [channels[k] for k in returned_layers]
    # informational: mobilenet_v3_small's first block has SE, large's has not
    arch = "mobilenet_v3_small" if blocks and blocks[0]["se_channels"] else "mobilenet_v3_large"
    backbone_cfg = {
        "type": "mobilenet_v3",
        "arch": arch,
        "stem_channels": int(stem.out_channels),
        "blocks": blocks,
        "last_channels": int(last_channels),
        "returned_layers": returned_layers,
    }
    return backbone_cfg, _describe_fpn(backbone, in_channels, norms), norms


def _describe_conv_fc_head(box_head, in_c, pooled, norms):
    """FastRCNNConvFCHead (fasterrcnn_resnet50_fpn_v2): 3x3 Conv2dNormActivation
    blocks with BatchNorm2d and ReLU on the pooled RoI features, Flatten, one Linear +
    ReLU. Returns (its config, the representation size); its norms go to @norms."""
    import torch.nn as nn
    children = list(box_head.children())
    n_conv = 0
    while n_conv < len(children) and isinstance(children[n_conv], nn.Sequential):
        n_conv += 1
    rest = children[n_conv:]
    if n_conv == 0 or len(rest) != 3 or type(rest[0]) is not nn.Flatten \
            or type(rest[1]) is not nn.Linear or type(rest[2]) is not nn.ReLU:
        raise ExportError("roi_heads.box_head: expected FastRCNNConvFCHead's 3x3 conv blocks, Flatten "
                          "and exactly one Linear + ReLU")
    channels = []
    prev = in_c
    for j in range(n_conv):
        name = f"roi_heads.box_head.{j}"
        if not _is_conv_norm(children[j]):
            raise ExportError(f"{name}: conv box head blocks without batch-norm are not supported")
        conv, bn = _conv_norm_act(children[j], name, "relu")
        _check_conv(conv, name + ".0", 3, 1, 1, bias=False)
        if conv.in_channels != prev:
            raise ExportError(f"{name}: expected {prev} input channels")
        prev = conv.out_channels
        channels.append(int(prev))
        norms.append((name + ".1", bn))
    fc = rest[1]
    if fc.in_features != prev * pooled * pooled:
        raise ExportError(f"roi_heads.box_head.{n_conv + 1}: {fc.in_features} inputs instead of "
                          f"{prev * pooled * pooled}")
    return {"type": "conv_fc", "conv_channels": channels, "norm": "batch_norm"}, int(fc.out_features)


def _describe_mask_head(roi, in_c, fpn_names, num_classes, norms):
    """Mask R-CNN's mask branch (engine/MASKRCNN.md): MultiScaleRoIAlign, MaskRCNNHeads
    (3x3 Conv2dNormActivation blocks: conv with bias + ReLU, or conv + BatchNorm2d +
    ReLU as in maskrcnn_resnet50_fpn_v2, whose norms go to @norms), MaskRCNNPredictor
    (ConvTranspose2d 2x2 stride 2 + ReLU, 1x1 conv to the classes). Returns its config."""
    import torch.nn as nn
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor

    pool, head, predictor = roi.mask_roi_pool, roi.mask_head, roi.mask_predictor
    out_size = _square_roi_pool(pool, "mask")
    if getattr(pool, "canonical_scale", 224) != 224 or getattr(pool, "canonical_level", 4) != 4:
        raise ExportError("a mask pooler with a canonical scale/level other than 224/4 is not supported")
    if int(pool.sampling_ratio) < 1:
        raise ExportError(f"mask pooler sampling_ratio {pool.sampling_ratio} (adaptive) is not supported")
    featmap_names = [str(n) for n in pool.featmap_names]
    used = [n for n in fpn_names if n in featmap_names]
    if not used or used != fpn_names[:len(used)]:
        raise ExportError(f"the mask pooler's featmap_names {featmap_names} do not select the first FPN "
                          f"levels of {fpn_names}")
    if type(head) is not MaskRCNNHeads:
        raise ExportError(f"mask head {type(head).__name__} is not MaskRCNNHeads")
    channels = []
    normed = None
    prev = in_c
    for j, block in enumerate(head.children()):
        name = f"roi_heads.mask_head.{j}"
        block_normed = _is_conv_norm(block)
        if normed is None:
            normed = block_normed
        elif normed != block_normed:
            raise ExportError(f"{name}: mask head blocks mix normalised and plain convolutions")
        if block_normed:
            conv, bn = _conv_norm_act(block, name, "relu")
            norms.append((name + ".1", bn))
        else:
            children = list(block.children()) if isinstance(block, nn.Sequential) else []
            if len(children) != 2 or type(children[0]) is not nn.Conv2d or type(children[1]) is not nn.ReLU:
                raise ExportError(f"{name}: expected Conv2d + ReLU (or Conv2d, BatchNorm2d, ReLU)")
            conv = children[0]
        if tuple(conv.dilation) != (1, 1):
            raise ExportError(f"{name}.0: a dilated mask head (dilation {conv.dilation[0]}) is not "
                              "supported")
        _check_conv(conv, name + ".0", 3, 1, 1, bias=not block_normed)
        if conv.in_channels != prev:
            raise ExportError(f"{name}: expected {prev} input channels, found {conv.in_channels}")
        prev = conv.out_channels
        channels.append(int(prev))
    if not channels:
        raise ExportError("roi_heads.mask_head has no convolutions")
    if type(predictor) is not MaskRCNNPredictor:
        raise ExportError(f"mask predictor {type(predictor).__name__} is not MaskRCNNPredictor")
    deconv, logits = predictor.conv5_mask, predictor.mask_fcn_logits
    if type(deconv) is not nn.ConvTranspose2d or tuple(deconv.kernel_size) != (2, 2) \
            or tuple(deconv.stride) != (2, 2) or tuple(deconv.padding) != (0, 0) \
            or tuple(deconv.output_padding) != (0, 0) or tuple(deconv.dilation) != (1, 1) \
            or deconv.groups != 1 or deconv.bias is None:
        raise ExportError("roi_heads.mask_predictor.conv5_mask: expected ConvTranspose2d(kernel 2, "
                          "stride 2, padding 0) with bias")
    if deconv.in_channels != prev:
        raise ExportError(f"roi_heads.mask_predictor.conv5_mask: expected {prev} input channels")
    if type(predictor.relu) is not nn.ReLU:
        raise ExportError("roi_heads.mask_predictor.relu: expected ReLU")
    _check_conv(logits, "roi_heads.mask_predictor.mask_fcn_logits", 1, 1, 0, bias=True)
    if logits.in_channels != deconv.out_channels or logits.out_channels != num_classes:
        raise ExportError("roi_heads.mask_predictor.mask_fcn_logits: channel counts do not match the "
                          f"transposed convolution ({deconv.out_channels}) and the classes ({num_classes})")
    return {
        "output_size": int(out_size[0]),
        "sampling_ratio": int(pool.sampling_ratio),
        "featmap_names": featmap_names,
        "conv_channels": channels,
        "dilation": 1,
        "norm": "batch_norm" if normed else "none",
        "dim_reduced": int(deconv.out_channels),
    }


def _square_roi_pool(pool, what):
    """@pool's output size as (n, n), checked: a MultiScaleRoIAlign with a square output
    (@what names the head in the messages)."""
    from torchvision.ops.poolers import MultiScaleRoIAlign
    if type(pool) is not MultiScaleRoIAlign:
        raise ExportError(f"{what} RoI pooler {type(pool).__name__} is not MultiScaleRoIAlign")
    out_size = pool.output_size
    if isinstance(out_size, int):
        out_size = (out_size, out_size)
    if len(out_size) != 2 or out_size[0] != out_size[1]:
        raise ExportError(f"{what} RoI output size {tuple(out_size)} is not square")
    return out_size


def _floats(values):
    return [float(v) for v in values]


# Frame sizes where the two resize-scale rules give different resized sizes:
# ((h, w, min_size, max_size), resized (h, w) with the float32 scale, with the double one).
# torch evaluates 0.10-0.15's `min_size / float32 tensor` as reciprocal() * min_size, two
# float32 roundings: 427x640 loses its pixel that way, where a correctly rounded float32
# division keeps 800; 480x640 keeps 800 that way, where such a division would give 799.
_RESIZE_SCALE_PROBES = [
    ((288, 352, 352, 1333), (351, 430), (352, 430)),
    ((427, 640, 800, 1333), (799, 1199), (800, 1199)),
    ((480, 640, 800, 1333), (800, 1066), (800, 1066)),
    ((291, 1181, 800, 1333), (328, 1332), (328, 1333)),  # the long side bounds the scale
]


def resize_scale_rule(transform):
    """How @transform's torchvision rounds GeneralizedRCNNTransform's resize scale:
    "float32" (0.10 to 0.15 compute it on 0-d float32 tensors) or "double" (0.16 and
    later, in eager mode). Decided by resizing blank images of the probe sizes with the
    transform's own code, not by the version number: the engine must compute what the
    torchvision the weights come from computes. Raises ExportError when the sizes fit
    neither rule."""
    import torch
    rules = {"float32", "double"}
    for (h, w, min_size, max_size), size_f32, size_f64 in _RESIZE_SCALE_PROBES:
        probe = type(transform)(min_size, max_size, transform.image_mean, transform.image_std).eval()
        with torch.no_grad():
            got = tuple(probe.resize(torch.zeros(1, h, w))[0].shape[-2:])
        fits = {rule for rule, size in (("float32", size_f32), ("double", size_f64)) if got == size}
        if not fits:
            raise ExportError(
                f"this torchvision resizes {h}x{w} (min_size {min_size}, max_size {max_size}) to "
                f"{got[0]}x{got[1]}, which neither the float32 resize scale ({size_f32[0]}x{size_f32[1]}) "
                f"nor the double one ({size_f64[0]}x{size_f64[1]}) gives")
        rules &= fits
    if len(rules) != 1:
        raise ExportError("this torchvision's resize sizes fit the float32 resize scale at some probe "
                          "sizes and the double one at others")
    return rules.pop()


# Widths (in, out) of the resize-arithmetic probe: upsampling and downsampling ones where
# torch 1.13's double source index and torch 2.x's float32 one give different lambdas.
_RESIZE_ARITHMETIC_PROBES = [(640, 1066), (480, 800), (427, 1199), (1920, 1333), (53, 31)]


def _resize_lambdas(n_in, n_out, rule):
    """(i0, l0, l1) per output index of one bilinear axis (align_corners=False) under
    @rule: "torch1" (torch 1.13: source index in double), "torch2" (torch 2.x on
    x86 AVX2/AVX512: in float32, r * (d + 0.5) - 0.5 fused, one rounding) or
    "torch2-nofma" (torch 2.x without FMA: two float32 roundings); numpy, exact."""
    import numpy as np
    f32, f64 = np.float32, np.float64
    r = f32(f32(n_in) / f32(n_out))
    d = np.arange(n_out, dtype=f64) + 0.5
    if rule == "torch1":
        src = np.maximum(f64(r) * d - 0.5, 0.0)
        i0 = np.floor(src)
        l1 = np.clip(src - i0, 0.0, 1.0).astype(f32)
    else:
        if rule == "torch2":  # r * (d + 0.5) is exact in double: one rounding to float32
            src = (f64(r) * d - 0.5).astype(f32)
        else:
            src = ((r * d.astype(f32)).astype(f32) - f32(0.5)).astype(f32)
        src = np.maximum(src, f32(0))
        i0 = np.minimum(np.floor(src), f32(n_in - 1))
        l1 = np.clip((src - i0).astype(f32), f32(0), f32(1)).astype(f32)
    return i0.astype(np.int64), (f32(1) - l1).astype(f32), l1


def resize_arithmetic_rule():
    """The arithmetic of this torch's CPU bilinear resize (align_corners=False), which
    the engine reproduces under "transform.resize_arithmetic": "torch1" (torch 1.13:
    source index and lambdas in double) or "torch2" (torch 2.x's x86 AVX2/AVX512
    kernels: in float32 with r * (d + 0.5) - 0.5 fused; for small outputs a
    channels-last kernel with its own blend, see vd_math.h). Decided numerically, not
    by the version: a [1, 3, 2, W] image of alternating columns 0, 1 resized to 2 x W'
    gives each output column's lambda itself (l1 after an even column, l0 after an odd
    one; one of the two products is 0, so fusion and kernel do not matter), compared
    with each rule's lambdas. Raises ExportError when they fit no rule the engine has
    (torch 2.x built without FMA rounds r * (d + 0.5) first: "torch2-nofma")."""
    import numpy as np
    import torch
    rules = {"torch1", "torch2", "torch2-nofma"}
    differ = set()
    for n_in, n_out in _RESIZE_ARITHMETIC_PROBES:
        x = (torch.arange(n_in) % 2).to(torch.float32).expand(1, 3, 2, n_in).contiguous()
        with torch.no_grad():
            got = torch.nn.functional.interpolate(x, size=(2, n_out), mode="bilinear",
                                                  align_corners=False)[0, :, 0].numpy()
        want = {}
        for rule in sorted(rules | {"torch1", "torch2", "torch2-nofma"}):
            i0, l0, l1 = _resize_lambdas(n_in, n_out, rule)
            want[rule] = (i0, np.where(i0 % 2 == 0, l1, l0))
        keep = np.ones(n_out, dtype=bool)  # both taps in the image under every rule
        for i0, _ in want.values():
            keep &= i0 < n_in - 1
        for rule in list(rules):
            if not all(np.array_equal(got[c][keep].view(np.uint32), want[rule][1][keep].view(np.uint32))
                       for c in range(3)):
                rules.discard(rule)
        if not np.array_equal(want["torch1"][1][keep], want["torch2"][1][keep]):
            differ.add((n_in, n_out))
    if not differ:
        raise ExportError("the resize-arithmetic probes do not tell torch1 from torch2")
    if rules == {"torch2-nofma"}:
        raise ExportError("this torch resizes with float32 source indices rounded twice (a build "
                          "without FMA), which no resize arithmetic of the engine reproduces")
    if len(rules) != 1:
        raise ExportError(f"this torch's bilinear resize fits {sorted(rules) or 'no'} resize "
                          "arithmetic ('torch1', 'torch2' expected)")
    return rules.pop()


def model_config(model, class_names=None, builder=None, keypoint_names=None, keypoint_skeleton=None):
    """The visiondetect config dict of a torchvision detector (FasterRCNN, MaskRCNN,
    KeypointRCNN, RetinaNet, FCOS, SSD); raises ExportError when the model cannot be
    represented. @builder: the builder's name recorded as "builder" (None: inferred from
    the model for the families that write it). @keypoint_names (num_keypoints names) and
    @keypoint_skeleton (pairs of 0-based keypoint indices): Keypoint R-CNN only."""
    from torchvision.models.detection.keypoint_rcnn import KeypointRCNN
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.models.detection.ssd import SSD
    if isinstance(model, (RetinaNet, FCOS, SSD)):
        if keypoint_names is not None or keypoint_skeleton is not None:
            raise ExportError(f"{type(model).__name__} has no keypoints")
        return _one_stage_config(model, class_names, builder)
    if isinstance(model, KeypointRCNN):
        config = _rcnn_config(model, class_names, keypoints=True)
        return _add_keypoints(model, config, builder, keypoint_names, keypoint_skeleton)
    if keypoint_names is not None or keypoint_skeleton is not None:
        raise ExportError(f"{type(model).__name__} has no keypoints")
    return _rcnn_config(model, class_names)


def _rcnn_config(model, class_names=None, keypoints=False):
    """The config of the R-CNN family (FasterRCNN, MaskRCNN; KeypointRCNN's box part
    with @keypoints)."""
    from torchvision.models.detection.faster_rcnn import (FasterRCNN, FastRCNNConvFCHead,
                                                          FastRCNNPredictor, TwoMLPHead)
    from torchvision.models.detection.rpn import RPNHead
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    from torchvision.models.detection.mask_rcnn import MaskRCNN

    if not isinstance(model, FasterRCNN):
        raise ExportError(f"{type(model).__name__} is not a torchvision FasterRCNN")
    roi = model.roi_heads
    if not keypoints and (roi.has_keypoint() or type(model).__name__ == "KeypointRCNN"):
        raise ExportError(f"{type(model).__name__}: keypoint heads are not supported")
    masked = isinstance(model, MaskRCNN) or roi.has_mask()
    if masked and not (isinstance(model, MaskRCNN) and roi.has_mask()):
        raise ExportError(f"{type(model).__name__}: a mask head needs torchvision's MaskRCNN with its "
                          "mask pooler, head and predictor")

    # transform
    tr = model.transform
    if type(tr) is not GeneralizedRCNNTransform:
        raise ExportError(f"transform {type(tr).__name__} is not GeneralizedRCNNTransform")
    if getattr(tr, "fixed_size", None) is not None:
        raise ExportError("GeneralizedRCNNTransform with fixed_size is not supported")
    min_size = tr.min_size
    if isinstance(min_size, (list, tuple)):
        min_size = min_size[-1]
    transform_cfg = {
        "min_size": int(min_size),
        "max_size": int(tr.max_size),
        "image_mean": _floats(tr.image_mean),
        "image_std": _floats(tr.image_std),
        "size_divisible": int(tr.size_divisible),
        "resize_scale": resize_scale_rule(tr),
        "resize_arithmetic": resize_arithmetic_rule(),
    }
    if len(transform_cfg["image_mean"]) != 3 or len(transform_cfg["image_std"]) != 3:
        raise ExportError("image_mean and image_std must have 3 entries (RGB)")

    backbone_cfg, fpn_cfg, norms = _describe_backbone(model)
    norms_heads = []  # the conv box head's batch-norms

    n_fpn_levels = len(backbone_cfg["returned_layers"]) + (1 if fpn_cfg["extra_block"] == "maxpool" else 0)
    fpn_names = [str(i) for i in range(len(backbone_cfg["returned_layers"]))]
    if fpn_cfg["extra_block"] == "maxpool":
        fpn_names.append("pool")

    # anchors and RPN
    rpn = model.rpn
    ag = rpn.anchor_generator
    sizes = [_floats(s) for s in ag.sizes]
    ratios = [_floats(r) for r in ag.aspect_ratios]
    if len(sizes) != n_fpn_levels or len(ratios) != n_fpn_levels:
        raise ExportError(f"the anchor generator has {len(sizes)} size levels and {len(ratios)} ratio "
                          f"levels but the FPN gives {n_fpn_levels} feature maps")
    per_location = {len(s) * len(r) for s, r in zip(sizes, ratios)}
    if len(per_location) != 1:
        raise ExportError("the anchor count per location differs between levels; the shared RPN head "
                          "needs the same count everywhere")
    anchors_per_location = per_location.pop()
    head = rpn.head
    if type(head) is not RPNHead:
        raise ExportError(f"RPN head {type(head).__name__} is not torchvision's RPNHead")
    import torch.nn as nn
    convs = [head.conv] if isinstance(head.conv, nn.Conv2d) else list(head.conv.children())
    # conv_depth 2 in fasterrcnn_resnet50_fpn_v2: each a 3x3 conv (bias) + ReLU, no norm
    if not 1 <= len(convs) <= 4:
        raise ExportError(f"RPN head with {len(convs)} convolutions is not supported (1 to 4)")
    c = fpn_cfg["out_channels"]
    for j, module in enumerate(convs):
        rpn_conv = _sequence_conv(module, f"rpn.head.conv.{j}", relu=True)
        _check_conv(rpn_conv, f"rpn.head.conv.{j}", 3, 1, 1, bias=True)
        if rpn_conv.in_channels != c or rpn_conv.out_channels != c:
            raise ExportError(f"rpn.head.conv.{j}: channel counts do not match the FPN channels")
    _check_conv(head.cls_logits, "rpn.head.cls_logits", 1, 1, 0, bias=True)
    _check_conv(head.bbox_pred, "rpn.head.bbox_pred", 1, 1, 0, bias=True)
    if head.cls_logits.out_channels != anchors_per_location \
            or head.bbox_pred.out_channels != 4 * anchors_per_location:
        raise ExportError("RPN head channel counts do not match the FPN channels and anchors")
    if tuple(float(w) for w in rpn.box_coder.weights) != (1.0, 1.0, 1.0, 1.0):
        raise ExportError(f"RPN box coder weights {rpn.box_coder.weights} are not (1, 1, 1, 1)")
    for name, coder in (("rpn", rpn.box_coder), ("roi_heads", roi.box_coder)):
        if not math.isclose(coder.bbox_xform_clip, math.log(1000.0 / 16), rel_tol=0, abs_tol=1e-12):
            raise ExportError(f"{name} box coder clip {coder.bbox_xform_clip} is not log(1000/16)")
    rpn_cfg = {
        "pre_nms_top_n": int(rpn._pre_nms_top_n["testing"]),
        "post_nms_top_n": int(rpn._post_nms_top_n["testing"]),
        "nms_thresh": float(rpn.nms_thresh),
        "score_thresh": float(rpn.score_thresh),
        "min_size": float(rpn.min_size),
    }
    if len(convs) != 1:
        rpn_cfg["conv_depth"] = len(convs)

    # RoI heads
    pool = roi.box_roi_pool
    out_size = _square_roi_pool(pool, "box")
    if getattr(pool, "canonical_scale", 224) != 224 or getattr(pool, "canonical_level", 4) != 4:
        raise ExportError("MultiScaleRoIAlign with a canonical scale/level other than 224/4 is not supported")
    featmap_names = [str(n) for n in pool.featmap_names]
    used = [n for n in fpn_names if n in featmap_names]
    if not used or used != fpn_names[:len(used)]:
        raise ExportError(f"the box pooler's featmap_names {featmap_names} do not select the first FPN "
                          f"levels of {fpn_names}")
    box_head = roi.box_head
    predictor = roi.box_predictor
    if type(predictor) is not FastRCNNPredictor:
        raise ExportError(f"box predictor {type(predictor).__name__} is not FastRCNNPredictor")
    box_head_cfg = None
    if type(box_head) is TwoMLPHead:
        rep = box_head.fc7.out_features
        if box_head.fc6.in_features != c * out_size[0] * out_size[1] or box_head.fc6.out_features != rep \
                or box_head.fc7.in_features != rep:
            raise ExportError("box head feature sizes are inconsistent")
    elif type(box_head) is FastRCNNConvFCHead:
        box_head_cfg, rep = _describe_conv_fc_head(box_head, c, out_size[0], norms_heads)
    else:
        raise ExportError(f"box head {type(box_head).__name__} is not supported (TwoMLPHead or "
                          "FastRCNNConvFCHead)")
    if predictor.cls_score.in_features != rep or predictor.bbox_pred.in_features != rep:
        raise ExportError("box head feature sizes are inconsistent")
    num_classes = predictor.cls_score.out_features
    if predictor.bbox_pred.out_features != 4 * num_classes:
        raise ExportError("class-agnostic box regression is not supported (bbox_pred must give "
                          "4 * num_classes outputs)")
    roi_cfg = {
        "output_size": int(out_size[0]),
        "sampling_ratio": int(pool.sampling_ratio),
        "featmap_names": featmap_names,
        "representation_size": int(rep),
        "score_thresh": float(roi.score_thresh),
        "nms_thresh": float(roi.nms_thresh),
        "detections_per_img": int(roi.detections_per_img),
        "bbox_reg_weights": _floats(roi.box_coder.weights),
        "min_size": 1e-2,  # hard-coded in RoIHeads.postprocess_detections
    }
    if box_head_cfg is not None:
        roi_cfg["box_head"] = box_head_cfg
    if masked:
        roi_cfg["mask_head"] = _describe_mask_head(roi, c, fpn_names, num_classes, norms_heads)
    # one eps for every batch-norm folded (backbone, FPN, box head), or the map
    eps_by_module = collections.OrderedDict((name, _norm_eps(bn, name)) for name, bn in norms + norms_heads)
    counts = collections.Counter(eps_by_module.values())
    backbone_cfg["norm_eps"] = counts.most_common(1)[0][0]
    if len(counts) > 1:
        backbone_cfg["norm_eps_per_module"] = dict(eps_by_module)

    if class_names is None:
        class_names = _default_class_names(num_classes)
    class_names = _check_class_names(class_names, num_classes)

    return {
        "architecture": "maskrcnn" if masked else "fasterrcnn",
        "transform": transform_cfg,
        "backbone": backbone_cfg,
        "fpn": fpn_cfg,
        "anchors": {"sizes": sizes, "aspect_ratios": ratios},
        "rpn": rpn_cfg,
        "roi_heads": roi_cfg,
        "num_classes": int(num_classes),
        "class_names": class_names,
    }


def _check_class_names(class_names, num_classes):
    class_names = [str(n) for n in class_names]
    if len(class_names) == num_classes - 1:
        class_names = ["__background__"] + class_names
    if len(class_names) != num_classes:
        raise ExportError(f"{len(class_names)} class names given for {num_classes} classes "
                          "(give num_classes names, or num_classes - 1 without the background)")
    return class_names


# COCO's person skeleton (person_keypoints annotations' "skeleton", made 0-based): pairs
# of indices into the 17 keypoint names
COCO_KEYPOINT_SKELETON = [
    [15, 13], [13, 11], [16, 14], [14, 12], [11, 12], [5, 11], [6, 12], [5, 6], [5, 7],
    [6, 8], [7, 9], [8, 10], [1, 2], [0, 1], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6],
]


def coco_keypoint_names():
    """COCO's 17 person keypoint names, in the order of torchvision's keypoint weights."""
    from torchvision.models._meta import _COCO_PERSON_KEYPOINT_NAMES
    return list(_COCO_PERSON_KEYPOINT_NAMES)


def _add_keypoints(model, config, builder, names, skeleton):
    """Keypoint R-CNN: the box part's @config plus roi_heads.keypoint_head and the
    keypoint names/skeleton."""
    import torch.nn as nn
    from torchvision.models.detection.keypoint_rcnn import KeypointRCNNHeads, KeypointRCNNPredictor
    roi = model.roi_heads
    if not roi.has_keypoint():
        raise ExportError("KeypointRCNN without its keypoint pooler, head and predictor")
    pool, head, predictor = roi.keypoint_roi_pool, roi.keypoint_head, roi.keypoint_predictor
    out_size = _square_roi_pool(pool, "keypoint")
    if type(head) is not KeypointRCNNHeads:
        raise ExportError(f"keypoint head {type(head).__name__} is not KeypointRCNNHeads")
    channels = []
    prev = config["fpn"]["out_channels"]
    children = list(head.children())
    for j, m in enumerate(children):
        name = f"roi_heads.keypoint_head.{j}"
        if j % 2 == 1:
            if type(m) is not nn.ReLU:
                raise ExportError(f"{name}: expected ReLU after each convolution")
            continue
        _check_conv(m, name, 3, 1, 1, bias=True)
        if m.in_channels != prev:
            raise ExportError(f"{name}: expected {prev} input channels, found {m.in_channels}")
        prev = m.out_channels
        channels.append(int(prev))
    if not channels or len(children) != 2 * len(channels):
        raise ExportError("roi_heads.keypoint_head: expected 3x3 convolutions each followed by ReLU")
    if type(predictor) is not KeypointRCNNPredictor:
        raise ExportError(f"keypoint predictor {type(predictor).__name__} is not KeypointRCNNPredictor")
    deconv = predictor.kps_score_lowres
    if type(deconv) is not nn.ConvTranspose2d or deconv.in_channels != prev or deconv.groups != 1 \
            or tuple(deconv.dilation) != (1, 1) or tuple(deconv.output_padding) != (0, 0) \
            or deconv.bias is None:
        raise ExportError("roi_heads.keypoint_predictor.kps_score_lowres: expected a ConvTranspose2d "
                          f"with bias from {prev} channels")
    num_keypoints = int(deconv.out_channels)
    # "architecture" and "builder" first, as the other families write them
    rest = {k: v for k, v in config.items() if k != "architecture"}
    config.clear()
    config.update({"architecture": "keypointrcnn", "builder": builder or "keypointrcnn_resnet50_fpn"})
    config.update(rest)
    config["roi_heads"]["keypoint_head"] = {
        "output_size": int(out_size[0]),
        "sampling_ratio": int(pool.sampling_ratio),
        "featmap_names": [str(n) for n in pool.featmap_names],
        "conv_channels": channels,
        "deconv_kernel": int(deconv.kernel_size[0]),
        "deconv_stride": int(deconv.stride[0]),
        "deconv_padding": int(deconv.padding[0]),
        "up_scale": int(predictor.up_scale),  # bilinear, align_corners=False
    }
    config["num_keypoints"] = num_keypoints
    if names is not None:
        names = [str(n) for n in names]
        if len(names) != num_keypoints:
            raise ExportError(f"{len(names)} keypoint names given for {num_keypoints} keypoints")
        config["keypoint_names"] = names
    if skeleton is not None:
        for pair in skeleton:
            if len(pair) != 2 or not all(0 <= int(i) < num_keypoints for i in pair):
                raise ExportError(f"keypoint skeleton pair {pair} is not two keypoint indices")
        config["keypoint_skeleton"] = [[int(a), int(b)] for a, b in skeleton]
    return config


def _transform_config(tr):
    """The GeneralizedRCNNTransform of any family, fixed_size (SSD) included."""
    from torchvision.models.detection.transform import GeneralizedRCNNTransform
    if type(tr) is not GeneralizedRCNNTransform:
        raise ExportError(f"transform {type(tr).__name__} is not GeneralizedRCNNTransform")
    min_size = tr.min_size
    if isinstance(min_size, (list, tuple)):
        min_size = min_size[-1]  # what eval() uses
    cfg = {
        "min_size": int(min_size),
        "max_size": int(tr.max_size),
        "image_mean": _floats(tr.image_mean),
        "image_std": _floats(tr.image_std),
        "size_divisible": int(tr.size_divisible),
    }
    fixed = getattr(tr, "fixed_size", None)
    if fixed is not None:
        cfg["fixed_size"] = [int(v) for v in fixed]  # torchvision's order: (width, height)
    else:
        cfg["resize_scale"] = resize_scale_rule(tr)
    cfg["resize_arithmetic"] = resize_arithmetic_rule()
    if len(cfg["image_mean"]) != 3 or len(cfg["image_std"]) != 3:
        raise ExportError("image_mean and image_std must have 3 entries (RGB)")
    return cfg


def _norm_eps_config(cfg, norms):
    """"norm_eps" (the most common eps) and, when they differ, "norm_eps_per_module"."""
    if not norms:
        return
    eps_by_module = collections.OrderedDict((name, _norm_eps(bn, name)) for name, bn in norms)
    counts = collections.Counter(eps_by_module.values())
    cfg["norm_eps"] = counts.most_common(1)[0][0]
    if len(counts) > 1:
        cfg["norm_eps_per_module"] = dict(eps_by_module)


def _describe_ops(module, name, norms):
    """A plain list of the layers of @module (Sequential, Conv2dNormActivation,
    InvertedResidual, SqueezeExcitation, Conv2d, activations, MaxPool2d) in order, for
    the SSD backbones and SSDlite's heads; batch-norms go to @norms."""
    import torch.nn as nn
    from torchvision.models.mobilenetv3 import InvertedResidual
    from torchvision.ops.misc import SqueezeExcitation
    acts = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Hardswish: "hardswish"}
    if type(module) is nn.Conv2d:
        if module.padding_mode != "zeros":
            raise ExportError(f"{name}: padding mode {module.padding_mode!r} is not supported")
        return [{"op": "conv", "name": name, "in_channels": int(module.in_channels),
                 "out_channels": int(module.out_channels), "kernel": int(module.kernel_size[0]),
                 "stride": int(module.stride[0]), "padding": int(module.padding[0]),
                 "dilation": int(module.dilation[0]), "groups": int(module.groups),
                 "bias": module.bias is not None}]
    if type(module) in acts:
        return [{"op": acts[type(module)]}]
    if type(module) is nn.MaxPool2d:
        def one(v):
            return int(v[0] if isinstance(v, (tuple, list)) else v)
        return [{"op": "maxpool", "name": name, "kernel": one(module.kernel_size),
                 "stride": one(module.stride),
                 "padding": one(module.padding), "ceil_mode": bool(module.ceil_mode)}]
    if isinstance(module, nn.modules.batchnorm._NormBase):
        norms.append((name, module))
        return [{"op": "batch_norm", "name": name}]
    if type(module) is nn.GroupNorm:
        if not module.affine:
            raise ExportError(f"{name}: GroupNorm without affine parameters is not supported")
        return [{"op": "group_norm", "num_groups": int(module.num_groups), "eps": float(module.eps)}]
    if type(module) is SqueezeExcitation:
        if type(module.activation) is not nn.ReLU or type(module.scale_activation) is not nn.Hardsigmoid:
            raise ExportError(f"{name}: SE activations are not ReLU/Hardsigmoid")
        return [{"op": "squeeze_excitation", "name": name, "channels": int(module.fc1.in_channels),
                 "squeeze_channels": int(module.fc1.out_channels)}]
    if type(module) is InvertedResidual:
        ops = _describe_ops(module.block, name + ".block", norms)
        return [{"op": "inverted_residual", "residual": bool(module.use_res_connect), "layers": ops}]
    if isinstance(module, nn.Sequential):
        ops = []
        for child_name, child in module.named_children():
            ops += _describe_ops(child, f"{name}.{child_name}", norms)
        return ops
    raise ExportError(f"{name}: {type(module).__name__} is not supported")


def _one_stage_config(model, class_names, builder):
    """RetinaNet, FCOS, SSD (VGG16) and SSDlite (MobileNetV3): their config."""
    from torchvision.models.detection.anchor_utils import AnchorGenerator, DefaultBoxGenerator
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.models.detection.ssd import SSD, SSDHead, SSDFeatureExtractorVGG
    from torchvision.models.detection.ssdlite import SSDLiteHead, SSDLiteFeatureExtractorMobileNet

    transform_cfg = _transform_config(model.transform)
    norms = []
    head = model.head
    head_cfg = {}
    if isinstance(model, (RetinaNet, FCOS)):
        family = "retinanet" if isinstance(model, RetinaNet) else "fcos"
        backbone_cfg, fpn_cfg, norms = _describe_backbone(model, allow_p6p7=True)
        ag = model.anchor_generator
        if type(ag) is not AnchorGenerator:
            raise ExportError(f"anchor generator {type(ag).__name__} is not AnchorGenerator")
        anchors_cfg = {"sizes": [_floats(s) for s in ag.sizes],
                       "aspect_ratios": [_floats(r) for r in ag.aspect_ratios]}
        n_levels = len(backbone_cfg["returned_layers"]) + (2 if fpn_cfg["extra_block"] == "p6p7" else
                                                          1 if fpn_cfg["extra_block"] == "maxpool" else 0)
        if len(anchors_cfg["sizes"]) != n_levels or len(anchors_cfg["aspect_ratios"]) != n_levels:
            raise ExportError(f"the anchor generator has {len(anchors_cfg['sizes'])} levels but the FPN "
                              f"gives {n_levels} feature maps")
        cls, reg = head.classification_head, head.regression_head
        head_cfg["type"] = family
        head_cfg["in_channels"] = int(fpn_cfg["out_channels"])
        head_cfg["num_anchors"] = int(cls.num_anchors)
        if any(len(s) * len(r) != cls.num_anchors
                               for s, r in zip(anchors_cfg["sizes"], anchors_cfg["aspect_ratios"])):
            raise ExportError("the head's anchor count does not match the anchor generator's")
        for part, sub in (("classification", cls), ("regression", reg)):
            ops = _describe_ops(sub.conv, f"head.{part}_head.conv", [])
            convs = [o for o in ops if o["op"] == "conv"]
            gns = [o for o in ops if o["op"] == "group_norm"]
            if any(o["op"] not in ("conv", "relu", "group_norm") for o in ops) \
                    or (gns and len(gns) != len(convs)):
                raise ExportError(f"head.{part}_head.conv: expected 3x3 convolutions with ReLU, each "
                                  "with one GroupNorm or none")
            if any(o["kernel"] != 3 or o["stride"] != 1 or o["in_channels"] != head_cfg["in_channels"]
                   or o["out_channels"] != head_cfg["in_channels"] for o in convs):
                raise ExportError(f"head.{part}_head.conv: expected 3x3 stride-1 convolutions of "
                                  f"{head_cfg['in_channels']} channels")
            head_cfg[f"{part}_convs"] = len(convs)
            if gns:
                head_cfg["norm"] = "group_norm"
                head_cfg["num_groups"] = gns[0]["num_groups"]
                head_cfg["norm_eps"] = gns[0]["eps"]
        head_cfg.setdefault("norm", "none")
        num_classes = int(cls.num_classes)
        _check_conv(cls.cls_logits, "head.classification_head.cls_logits", 3, 1, 1, bias=True)
        _check_conv(reg.bbox_reg, "head.regression_head.bbox_reg", 3, 1, 1, bias=True)
        if cls.cls_logits.out_channels != cls.num_anchors * num_classes \
                or reg.bbox_reg.out_channels != 4 * cls.num_anchors:
            raise ExportError("the head's output channels do not match its anchors and classes")
        if family == "fcos" and reg.bbox_ctrness.out_channels != cls.num_anchors:
            raise ExportError("head.regression_head.bbox_ctrness: one output per anchor expected")
        if family == "retinanet":
            coder = model.box_coder
            head_cfg["bbox_reg_weights"] = _floats(coder.weights)
            head_cfg["bbox_xform_clip"] = float(coder.bbox_xform_clip)
        else:
            head_cfg["centerness"] = True
            head_cfg["box_coder"] = "linear"
            head_cfg["normalize_by_size"] = bool(model.box_coder.normalize_by_size)
    elif isinstance(model, SSD):
        bb = model.backbone
        ag = model.anchor_generator
        if type(ag) is not DefaultBoxGenerator:
            raise ExportError(f"anchor generator {type(ag).__name__} is not DefaultBoxGenerator")
        anchors_cfg = {"type": "default_boxes",
                       "aspect_ratios": [_floats(r) for r in ag.aspect_ratios],
                       "scales": _floats(ag.scales),
                       "steps": None if ag.steps is None else [int(s) for s in ag.steps],
                       "clip": bool(ag.clip)}
        if type(bb) is SSDFeatureExtractorVGG:
            family = "ssd"
            backbone_cfg = {"type": "vgg16",
                            "features": _describe_ops(bb.features, "backbone.features", norms),
                            "l2_norm": {"channels": int(bb.scale_weight.numel()), "eps": 1e-12},
                            "extra": [_describe_ops(m, f"backbone.extra.{i}", norms)
                                      for i, m in enumerate(bb.extra)]}
        elif type(bb) is SSDLiteFeatureExtractorMobileNet:
            family = "ssdlite"
            backbone_cfg = {"type": "mobilenet_v3", "arch": "mobilenet_v3_large",
                            "stages": [_describe_ops(m, f"backbone.features.{i}", norms)
                                       for i, m in enumerate(bb.features)],
                            "extra": [_describe_ops(m, f"backbone.extra.{i}", norms)
                                      for i, m in enumerate(bb.extra)]}
        else:
            raise ExportError(f"SSD backbone {type(bb).__name__} is not torchvision's VGG16 or "
                              "MobileNetV3 feature extractor")
        if type(head) not in (SSDHead, SSDLiteHead):
            raise ExportError(f"SSD head {type(head).__name__} is not SSDHead or SSDLiteHead")
        cls_list = list(head.classification_head.module_list)
        reg_list = list(head.regression_head.module_list)
        num_classes = int(head.classification_head.num_columns)
        last_convs = [[m for m in c.modules() if type(m).__name__ == "Conv2d"][-1] for c in cls_list]
        first_convs = [[m for m in c.modules() if type(m).__name__ == "Conv2d"][0] for c in cls_list]
        head_cfg["type"] = family
        head_cfg["in_channels"] = [int(c.in_channels) for c in first_convs]
        head_cfg["num_anchors"] = [int(c.out_channels) // num_classes for c in last_convs]
        if head_cfg["num_anchors"] != [int(n) for n in ag.num_anchors_per_location()]:
            raise ExportError("the SSD head's anchor counts do not match the default box generator's")
        if len(reg_list) != len(cls_list):
            raise ExportError("the SSD classification and regression heads have different level counts")
        if family == "ssdlite":
            head_cfg["classification"] = [_describe_ops(m, f"head.classification_head.module_list.{i}",
                                                        norms) for i, m in enumerate(cls_list)]
            head_cfg["regression"] = [_describe_ops(m, f"head.regression_head.module_list.{i}", norms)
                                      for i, m in enumerate(reg_list)]
        else:
            head_cfg["kernel"] = int(last_convs[0].kernel_size[0])
        coder = model.box_coder
        head_cfg["bbox_reg_weights"] = _floats(coder.weights)
        head_cfg["bbox_xform_clip"] = float(coder.bbox_xform_clip)
        fpn_cfg = None
    else:
        raise ExportError(f"{type(model).__name__} is not a torchvision one-stage detector")
    head_cfg.update({
        "score_thresh": float(model.score_thresh),
        "nms_thresh": float(model.nms_thresh),
        "detections_per_img": int(model.detections_per_img),
        "topk_candidates": int(model.topk_candidates),
    })
    _norm_eps_config(backbone_cfg, norms)

    if class_names is None:
        class_names = _default_class_names(num_classes)
    config = {
        "architecture": family,
        "builder": builder or _infer_builder(model, family, head_cfg),
        "transform": transform_cfg,
        "backbone": backbone_cfg,
    }
    if fpn_cfg is not None:
        config["fpn"] = fpn_cfg
    config.update({
        "anchors": anchors_cfg,
        "head": head_cfg,
        "num_classes": num_classes,
        "class_names": _check_class_names(class_names, num_classes),
    })
    return config


def _infer_builder(model, family, head_cfg):
    return {
        "retinanet": "retinanet_resnet50_fpn_v2" if head_cfg.get("norm") == "group_norm"
        else "retinanet_resnet50_fpn",
        "fcos": "fcos_resnet50_fpn",
        "ssd": "ssd300_vgg16",
        "ssdlite": "ssdlite320_mobilenet_v3_large",
    }[family]


def num_classes_of(model):
    """The class count of any supported torchvision detector."""
    if hasattr(model, "roi_heads"):
        return int(model.roi_heads.box_predictor.cls_score.out_features)
    cls = model.head.classification_head
    return int(getattr(cls, "num_classes", None) or cls.num_columns)


def _tensor_bytes(torch, tensor, dtype):
    t = tensor.detach().to("cpu").contiguous()
    if not t.is_floating_point():
        raise ExportError(f"tensor of dtype {t.dtype} is not floating point")
    if dtype == "F32":
        t = t.to(torch.float32)
        view = torch.int32
    elif dtype == "F16":
        t = t.to(torch.float16)
        view = torch.int16
    else:
        t = t.to(torch.bfloat16)
        view = torch.int16
    # little-endian raw bytes, whatever the host (safetensors is little-endian)
    arr = t.view(view).numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def export(model, path, class_names=None, dtype="f32", builder=None, keypoint_names=None,
           keypoint_skeleton=None):
    """Writes @model (a torchvision detector, see model_config) to @path as a
    visiondetect .safetensors file. @class_names: None ("__background__", "class1", ...)
    or a list of num_classes names (or num_classes - 1, background then added).
    @dtype: "f32", "f16" or "bf16". @builder, @keypoint_names, @keypoint_skeleton: as
    model_config's. Returns the config dict written."""
    torch = _import_torch()
    if dtype not in _DTYPES:
        raise ExportError(f"dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
    st_dtype = _DTYPES[dtype]
    config = model_config(model, class_names, builder, keypoint_names, keypoint_skeleton)

    tensors = []
    for name, value in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        tensors.append((name, list(value.shape), _tensor_bytes(torch, value, st_dtype)))

    header = {"__metadata__": {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": json.dumps(config, separators=(",", ":")),
    }}
    offset = 0
    for name, shape, data in tensors:
        header[name] = {"dtype": st_dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for _, _, data in tensors:
            f.write(data)
    return config


def _build(args):
    torch = _import_torch()
    from torchvision.models.detection import FasterRCNN, fasterrcnn_resnet50_fpn
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    kwargs = {}
    if args.min_size is not None:
        kwargs["min_size"] = args.min_size
    if args.max_size is not None:
        kwargs["max_size"] = args.max_size
    num_classes = args.num_classes if args.num_classes is not None else 91

    if args.builder == "fasterrcnn_resnet50_fpn":
        from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights
        weights = FasterRCNN_ResNet50_FPN_Weights.COCO_V1 if args.pretrained else None
        if weights is not None and num_classes != 91:
            raise ExportError("--pretrained COCO weights have 91 classes; drop --num-classes")
        model = fasterrcnn_resnet50_fpn(weights=weights, weights_backbone=None,
                                        num_classes=num_classes, **kwargs)
    elif args.builder == "fasterrcnn_resnet50_fpn_v2":
        from torchvision.models.detection import (FasterRCNN_ResNet50_FPN_V2_Weights,
                                                  fasterrcnn_resnet50_fpn_v2)
        weights = FasterRCNN_ResNet50_FPN_V2_Weights.COCO_V1 if args.pretrained else None
        if weights is not None and num_classes != 91:
            raise ExportError("--pretrained COCO weights have 91 classes; drop --num-classes")
        # BatchNorm2d (eps 1e-5) in the backbone, the FPN and the box head, folded at load
        model = fasterrcnn_resnet50_fpn_v2(weights=weights, weights_backbone=None,
                                           num_classes=num_classes, **kwargs)
    elif args.builder in ("maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2"):
        from torchvision.models import detection
        weights = None
        if args.pretrained:
            enum = "MaskRCNN_ResNet50_FPN_Weights" if args.builder == "maskrcnn_resnet50_fpn" \
                else "MaskRCNN_ResNet50_FPN_V2_Weights"
            weights = getattr(detection, enum).COCO_V1
            if num_classes != 91:
                raise ExportError("--pretrained COCO weights have 91 classes; drop --num-classes")
        # v1 with COCO_V1 weights: FrozenBatchNorm2d with eps 0 (overwrite_eps), taken
        # from the model; v2: BatchNorm2d (eps 1e-5) also in the mask head, folded at load
        model = getattr(detection, args.builder)(weights=weights, weights_backbone=None,
                                                  num_classes=num_classes, **kwargs)
    elif args.builder.startswith("resnet_fpn:"):
        depth = args.builder.split(":", 1)[1]
        if depth not in ("18", "34", "50", "101", "152"):
            raise ExportError(f"resnet_fpn depth {depth!r} is not one of 18, 34, 50, 101, 152")
        weights = None
        if args.pretrained:
            from torchvision.models import get_model_weights
            weights = get_model_weights(f"resnet{depth}").IMAGENET1K_V1
        backbone = resnet_fpn_backbone(backbone_name=f"resnet{depth}", weights=weights,
                                       trainable_layers=5 if weights is None else 3)
        model = FasterRCNN(backbone, num_classes=num_classes, **kwargs)
    elif args.builder in _MOBILENET_BUILDERS:
        from torchvision.models import detection
        builder = getattr(detection, args.builder)
        weights = None
        if args.pretrained:
            weights = getattr(detection, _MOBILENET_BUILDERS[args.builder]).COCO_V1
            if num_classes != 91:
                raise ExportError("--pretrained COCO weights have 91 classes; drop --num-classes")
        # without weights the builder uses nn.BatchNorm2d (eps 1e-5), with them
        # FrozenBatchNorm2d (eps 1e-5): the same inference
        model = builder(weights=weights, weights_backbone=None, num_classes=num_classes, **kwargs)
    elif args.builder in OTHER_BUILDERS:
        from torchvision.models import detection
        if args.pretrained:
            default_classes = 2 if args.builder.startswith("keypointrcnn") else 91
            if args.num_classes is not None and args.num_classes != default_classes:
                raise ExportError(f"--pretrained COCO weights have {default_classes} classes; drop "
                                  "--num-classes")
            num_classes = default_classes
            weights = getattr(detection, OTHER_BUILDERS[args.builder]).DEFAULT
        else:
            weights = None
            if args.num_classes is None and args.builder.startswith("keypointrcnn"):
                num_classes = 2  # the builder's default: background and person
        if args.num_keypoints is not None:
            if not args.builder.startswith("keypointrcnn"):
                raise ExportError("--num-keypoints is for keypointrcnn_resnet50_fpn only")
            kwargs["num_keypoints"] = args.num_keypoints
        if args.builder.startswith("ssd"):
            # SSD resizes to a fixed size: its builders take no min/max size
            for key in ("min_size", "max_size"):
                if key in kwargs:
                    raise ExportError(f"--{key.replace('_', '-')}: {args.builder} resizes every frame "
                                      "to its fixed size")
        # random weights: nn.BatchNorm2d (eps 1e-5; SSDlite's 1e-3) where the pretrained
        # builders freeze them, the same inference
        model = getattr(detection, args.builder)(weights=weights, weights_backbone=None,
                                                 num_classes=num_classes, **kwargs)
    else:
        raise ExportError(f"unknown builder {args.builder!r} (fasterrcnn_resnet50_fpn, "
                          "fasterrcnn_resnet50_fpn_v2, maskrcnn_resnet50_fpn, maskrcnn_resnet50_fpn_v2, "
                          f"{', '.join(_MOBILENET_BUILDERS)}, {', '.join(OTHER_BUILDERS)} or "
                          "resnet_fpn:<depth>)")

    if args.state_dict:
        sd = torch.load(args.state_dict, map_location="cpu")
        if isinstance(sd, dict) and "model" in sd and isinstance(sd["model"], dict):
            sd = sd["model"]
        if not isinstance(sd, dict):
            raise ExportError(f"{args.state_dict} does not hold a state dict")
        result = model.load_state_dict(sd, strict=True)
        del result
    if args.norm_eps is not None:
        import torch.nn as nn
        from torchvision.ops.misc import FrozenBatchNorm2d
        body = getattr(model.backbone, "body", model.backbone)
        for module in body.modules():
            if isinstance(module, (FrozenBatchNorm2d, nn.BatchNorm2d)):
                module.eps = args.norm_eps
    return model.eval()


def _download_failed(exc):
    import urllib.error
    e = exc
    while e is not None:
        if isinstance(e, (urllib.error.URLError, ConnectionError, TimeoutError)):
            return True
        e = e.__cause__ or e.__context__
    return False


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Export a torchvision detector to a visiondetect .safetensors model. "
                    "Run with /usr/bin/python3 (Debian's torch/torchvision).")
    parser.add_argument("--builder", default="fasterrcnn_resnet50_fpn",
                        help="fasterrcnn_resnet50_fpn (default), fasterrcnn_resnet50_fpn_v2, "
                             "maskrcnn_resnet50_fpn, maskrcnn_resnet50_fpn_v2, "
                             "fasterrcnn_mobilenet_v3_large_fpn, "
                             "fasterrcnn_mobilenet_v3_large_320_fpn, resnet_fpn:<depth> "
                             "(18, 34, 50, 101, 152: resnet_fpn_backbone + FasterRCNN), "
                             "keypointrcnn_resnet50_fpn, retinanet_resnet50_fpn, "
                             "retinanet_resnet50_fpn_v2, fcos_resnet50_fpn, ssd300_vgg16, "
                             "ssdlite320_mobilenet_v3_large"
                             + "".join(f", {b} (which this engine refuses at load for now)"
                                       for b in OTHER_BUILDERS if b not in RUN_BUILDERS))
    parser.add_argument("--num-keypoints", type=int,
                        help="keypoints of keypointrcnn_resnet50_fpn (default 17)")
    parser.add_argument("--num-classes", type=int, help="classes including background (default 91)")
    parser.add_argument("--state-dict", metavar="FILE",
                        help="weights to load (torch.save'd state dict, or a checkpoint dict with "
                             "'model'); a COCO_V1 checkpoint also needs --norm-eps 0")
    parser.add_argument("--pretrained", action="store_true",
                        help="torchvision's pretrained weights (COCO_V1 for fasterrcnn_resnet50_fpn, "
                             "ImageNet backbone for resnet_fpn, the builder's DEFAULT weights for "
                             "the others); needs network or a cached download")
    parser.add_argument("--min-size", type=int, help="transform min_size (default 800)")
    parser.add_argument("--max-size", type=int, help="transform max_size (default 1333)")
    parser.add_argument("--norm-eps", type=float,
                        help="override the eps of every backbone batch-norm (0 for COCO_V1 weights)")
    parser.add_argument("--class-names", metavar="FILE",
                        help="one class name per line: num_classes lines, or num_classes - 1 "
                             "without the background")
    parser.add_argument("--coco-names", action="store_true",
                        help="use COCO's 91 category names (needs 91 classes); for "
                             "keypointrcnn_resnet50_fpn COCO's person with its 17 keypoint "
                             "names and skeleton")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="f32",
                        help="storage type of the tensors (default f32)")
    parser.add_argument("output", help="the .safetensors file to write")
    args = parser.parse_args(argv)

    try:
        if args.class_names and args.coco_names:
            raise ExportError("--class-names and --coco-names are exclusive")
        try:
            model = _build(args)
        except ExportError:
            raise
        except Exception as e:
            if args.pretrained and _download_failed(e):
                raise ExportError(f"cannot download the pretrained weights ({e}); connect to the "
                                  "network, or put the file in torch's hub cache (~/.cache/torch/hub/"
                                  "checkpoints), or pass --state-dict") from e
            raise
        names = None
        kp_names = kp_skeleton = None
        num_classes = num_classes_of(model)
        keypoints = args.builder.startswith("keypointrcnn")
        if args.coco_names and keypoints:
            # COCO's person category and its 17 keypoints with the skeleton
            if num_classes != 2:
                raise ExportError(f"--coco-names needs 2 classes (background, person) for "
                                  f"{args.builder}, the model has {num_classes}")
            names = ["__background__", "person"]
            kp_names = coco_keypoint_names()
            if len(kp_names) != model.roi_heads.keypoint_predictor.out_channels:
                raise ExportError(f"--coco-names needs 17 keypoints, the model has "
                                  f"{model.roi_heads.keypoint_predictor.out_channels}")
            kp_skeleton = COCO_KEYPOINT_SKELETON
        elif args.coco_names:
            if num_classes != 91:
                raise ExportError(f"--coco-names needs 91 classes, the model has {num_classes}")
            names = coco_class_names()
        elif args.class_names:
            with open(args.class_names, encoding="utf-8") as f:
                names = [line.strip() for line in f if line.strip()]
        builder = args.builder if args.builder in OTHER_BUILDERS else None
        config = export(model, args.output, class_names=names, dtype=args.dtype, builder=builder,
                        keypoint_names=kp_names, keypoint_skeleton=kp_skeleton)
    except (ExportError, OSError, RuntimeError) as e:
        print(f"export_torchvision: error: {e}", file=sys.stderr)
        return 1
    bb = config["backbone"]
    name = bb["arch"] if bb["type"] == "mobilenet_v3" else bb["type"] if bb["type"] == "vgg16" \
        else f"resnet{bb['depth']}"
    if "fpn" in config:
        name += "-fpn"
    print(f"wrote {args.output}: {config.get('builder', config['architecture'])} {name}, "
          f"{config['num_classes']} classes, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
