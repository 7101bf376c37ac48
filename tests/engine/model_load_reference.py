#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reference data for tests/engine/test_model_load.c (run with /usr/bin/python3).

  model_load_reference.py cli DIR
      builds the model that `export_torchvision.py --builder resnet_fpn:18 --num-classes 3`
      builds, gives every parameter and batch-norm buffer random values, and writes
      DIR/state_dict.pt (for --state-dict), DIR/names.txt (for --class-names) and
      DIR/reference.json.
  model_load_reference.py custom DIR
      builds a non-default FasterRCNN (returned_layers [2, 3], BatchNorm2d with mixed eps,
      anchors of different shapes per level, a 5x5 pooler on two levels, small box head,
      custom thresholds and transform) and exports it with export(..., dtype="bf16") to
      DIR/custom.safetensors, writing DIR/reference.json.
  model_load_reference.py reject
      checks that export() rejects the unsupported models with a clear ExportError;
      prints one line per model and exits 1 if any was accepted.

reference.json maps a module name to the folded float32 weight and bias the loader must
produce, as the bit patterns of the floats (int32), computed the way torchvision's
FrozenBatchNorm2d computes its affine transform in float32:
scale = w * (rv + eps).rsqrt(); shift = b - rm * scale; weight * scale[:, None, None, None].
"""

import json
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import export_torchvision  # noqa: E402

from torchvision.models.detection import FasterRCNN  # noqa: E402
from torchvision.models.detection.anchor_utils import AnchorGenerator  # noqa: E402
from torchvision.models.detection.backbone_utils import resnet_fpn_backbone  # noqa: E402
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead  # noqa: E402
from torchvision.models.detection.rpn import RPNHead  # noqa: E402
from torchvision.ops import MultiScaleRoIAlign  # noqa: E402


def randomize(model, generator):
    """Every float parameter and buffer gets random values; variances stay positive."""
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=generator) * 1.5 + 0.25)
            elif name.endswith("running_mean") or name.endswith(".bias"):
                t.copy_(torch.randn(t.shape, generator=generator) * 0.5)
            else:
                t.copy_(torch.randn(t.shape, generator=generator) * 0.2 + (
                    1.0 if "bn" in name or "downsample.1" in name else 0.0))


def bits(t):
    return t.detach().to(torch.float32).contiguous().view(torch.int32).flatten().tolist()


def stored(t, dtype):
    """The float32 value the loader sees for a parameter stored in @dtype."""
    return t.detach().to(dtype).to(torch.float32)


def fold(model, conv_name, bn_name, dtype=torch.float32):
    modules = dict(model.named_modules())
    conv, bn = modules[conv_name], modules[bn_name]
    w, b = stored(bn.weight, dtype), stored(bn.bias, dtype)
    rm, rv = stored(bn.running_mean, dtype), stored(bn.running_var, dtype)
    scale = w * (rv + bn.eps).rsqrt()
    shift = b - rm * scale
    weight = stored(conv.weight, dtype) * scale[:, None, None, None]
    return {"weight": bits(weight), "bias": bits(shift), "eps": float(bn.eps)}


def plain(model, name, dtype=torch.float32):
    m = dict(model.named_modules())[name]
    return {"weight": bits(stored(m.weight, dtype)), "bias": bits(stored(m.bias, dtype))}


def cli(directory):
    generator = torch.Generator().manual_seed(1234)
    # exactly what export_torchvision.py builds for --builder resnet_fpn:18 --num-classes 3
    backbone = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
    model = FasterRCNN(backbone, num_classes=3).eval()
    randomize(model, generator)
    torch.save(model.state_dict(), os.path.join(directory, "state_dict.pt"))
    with open(os.path.join(directory, "names.txt"), "w") as f:
        f.write("cat\ndog\n")
    reference = {
        "backbone.body.conv1": fold(model, "backbone.body.conv1", "backbone.body.bn1"),
        "backbone.body.layer1.1.conv2": fold(model, "backbone.body.layer1.1.conv2",
                                             "backbone.body.layer1.1.bn2"),
        "backbone.body.layer3.0.downsample.0": fold(model, "backbone.body.layer3.0.downsample.0",
                                                    "backbone.body.layer3.0.downsample.1"),
        "backbone.fpn.inner_blocks.0.0": plain(model, "backbone.fpn.inner_blocks.0.0"),
        "rpn.head.cls_logits": plain(model, "rpn.head.cls_logits"),
        "roi_heads.box_predictor.cls_score": plain(model, "roi_heads.box_predictor.cls_score"),
    }
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f)


def custom(directory):
    generator = torch.Generator().manual_seed(99)
    backbone = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5,
                                   returned_layers=[2, 3], norm_layer=nn.BatchNorm2d)
    # FPN levels '0' (layer2), '1' (layer3), 'pool': 2 anchors per location everywhere
    anchors = AnchorGenerator(sizes=((16, 32), (64,), (128,)),
                              aspect_ratios=((1.0,), (0.5, 2.0), (0.5, 2.0)))
    model = FasterRCNN(
        backbone, num_classes=None, min_size=256, max_size=400,
        image_mean=[0.5, 0.25, 0.125], image_std=[0.5, 0.5, 0.25],
        rpn_anchor_generator=anchors, rpn_head=RPNHead(256, 2),
        rpn_pre_nms_top_n_test=300, rpn_post_nms_top_n_test=200, rpn_nms_thresh=0.6,
        rpn_score_thresh=0.01,
        box_roi_pool=MultiScaleRoIAlign(["0", "1", "2", "3"], 5, 1),
        box_head=TwoMLPHead(256 * 25, 64), box_predictor=FastRCNNPredictor(64, 4),
        box_score_thresh=0.2, box_nms_thresh=0.4, box_detections_per_img=50,
        bbox_reg_weights=(5.0, 5.0, 2.0, 2.0)).eval()
    randomize(model, generator)
    modules = dict(model.named_modules())
    modules["backbone.body.bn1"].eps = 0.0
    modules["backbone.body.layer2.0.bn2"].eps = 1e-3
    export_torchvision.export(model, os.path.join(directory, "custom.safetensors"),
                              class_names=["a", "b", "c"], dtype="bf16")
    bf16 = torch.bfloat16
    reference = {
        "backbone.body.conv1": fold(model, "backbone.body.conv1", "backbone.body.bn1", bf16),
        "backbone.body.layer2.0.conv2": fold(model, "backbone.body.layer2.0.conv2",
                                             "backbone.body.layer2.0.bn2", bf16),
        "backbone.body.layer2.0.downsample.0": fold(model, "backbone.body.layer2.0.downsample.0",
                                                    "backbone.body.layer2.0.downsample.1", bf16),
        "backbone.fpn.inner_blocks.1.0": plain(model, "backbone.fpn.inner_blocks.1.0", bf16),
        "rpn.head.cls_logits": plain(model, "rpn.head.cls_logits", bf16),
        "roi_heads.box_predictor.cls_score": plain(model, "roi_heads.box_predictor.cls_score", bf16),
    }
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f)


def _dilated_mobilenet():
    """A MobileNetV3-Large-FPN with the last stage dilated (mobilenet_v3_large(dilated=True)),
    which the exporter refuses."""
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import _mobilenet_extractor
    backbone = _mobilenet_extractor(mobilenet_v3_large(weights=None, dilated=True), True, 6)
    anchors = AnchorGenerator(((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3)
    return FasterRCNN(backbone, 3, rpn_anchor_generator=anchors)


def _conv_head_without_norm():
    """fasterrcnn_resnet50_fpn_v2 with a FastRCNNConvFCHead built without norm_layer
    (convolutions with bias), which the exporter refuses."""
    import torchvision.models.detection as detection
    from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead
    model = detection.fasterrcnn_resnet50_fpn_v2(weights=None, weights_backbone=None)
    model.roi_heads.box_head = FastRCNNConvFCHead((256, 7, 7), [256] * 4, [1024], norm_layer=None)
    return model


def _dilated_mask_head():
    """maskrcnn_resnet50_fpn with MaskRCNNHeads(dilation=2), which the exporter refuses."""
    import torchvision.models.detection as detection
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads
    model = detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    model.roi_heads.mask_head = MaskRCNNHeads(256, [256] * 4, 2)
    return model


def _resnext_retinanet():
    """RetinaNet (exported, refused at load) on a ResNeXt body, which the exporter refuses."""
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    backbone = resnet_fpn_backbone(backbone_name="resnext50_32x4d", weights=None,
                                   returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
    return RetinaNet(backbone, 3)


def reject():
    import torchvision.models.detection as detection
    cases = [
        ("dilated MobileNetV3", "dilated", _dilated_mobilenet),
        ("conv box head without norm", "without batch-norm", _conv_head_without_norm),
        ("ResNeXt", "groups",
         lambda: FasterRCNN(resnet_fpn_backbone(backbone_name="resnext50_32x4d", weights=None), 3)),
        ("wide ResNet", "width_per_group",
         lambda: FasterRCNN(resnet_fpn_backbone(backbone_name="wide_resnet50_2", weights=None), 3)),
        ("Keypoint R-CNN on ResNeXt", "groups",
         lambda: detection.KeypointRCNN(resnet_fpn_backbone(backbone_name="resnext50_32x4d",
                                                            weights=None), 2)),
        ("Mask R-CNN with a dilated mask head", "dilated", _dilated_mask_head),
        ("RetinaNet on ResNeXt", "groups", _resnext_retinanet),
        ("a classifier", "not a torchvision FasterRCNN",
         lambda: __import__("torchvision").models.resnet18(weights=None)),
    ]
    failed = 0
    for label, needle, build in cases:
        model = build()
        try:
            export_torchvision.model_config(model)
            print(f"{label}: ACCEPTED (should be rejected)")
            failed += 1
        except export_torchvision.ExportError as e:
            ok = needle in str(e)
            print(f"{label}: {'rejected' if ok else 'rejected WITHOUT naming ' + repr(needle)}: {e}")
            failed += 0 if ok else 1
    return 1 if failed else 0


def main():
    torch.set_num_threads(1)
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "cli" and len(sys.argv) == 3:
        cli(sys.argv[2])
    elif mode == "custom" and len(sys.argv) == 3:
        custom(sys.argv[2])
    elif mode == "reject" and len(sys.argv) == 2:
        return reject()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
