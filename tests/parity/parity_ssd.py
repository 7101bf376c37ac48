# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity of SSD and SSDlite against torchvision: their reference step by step, their
calibration and their stages to compare, for parity_one_stage's whole test
(run_parity) over parity_common's images, engine run and comparisons and
parity_one_stage's comparison of the dense head's outputs.

Stages compared: resized size (the fixed size), input, default boxes (exact), every
feature map ('features.0' .. 'features.5': VGG16's first after its L2 norm), the
heads' outputs over every default box ('cls_logits' [boxes][K], 'bbox_regression'
[boxes][4], parity_common.HEAD_REL_TOL of max|ref|), then the detections with the
other detectors' criterion."""

import parity_common as pc
import parity_one_stage as pos
from parity_common import torch


def reference(model, img_u8):
    """SSD.forward in eval mode, step by step: a dict of numpy arrays named as
    vd-detect's --dump files, plus 'boxes', 'scores', 'labels' (final detections in
    the image's pixels, torchvision's order)."""
    h0, w0 = img_u8.shape[:2]
    images, features, head_outputs, anchors = pos.forward_head(model, img_u8)
    feats = list(features.values())
    with torch.no_grad():
        found = model.postprocess_detections(head_outputs, anchors, images.image_sizes)
        dets = model.transform.postprocess(found, images.image_sizes, [(h0, w0)])[0]
    per_level = [f.size(2) * f.size(3) * a for f, a in
                 zip(feats, model.anchor_generator.num_anchors_per_location())]
    out = pos.head_reference(images, anchors, head_outputs, dets, per_level)
    for i, f in enumerate(feats):
        out[f"features.{i}"] = f.numpy()
    return out


def _last_conv(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)][-1]


@torch.no_grad()
def calibrate(model, images_u8, seed=0, delta_std=1.0, target=400, cap=300):
    """Makes a random-weight SSD or SSDlite produce non-degenerate detections on
    images_u8.

    1. The norm layers (SSDlite's backbone, extras and heads) as
       parity_common.calibrate_body() sets them, the heads' from their actual input;
       VGG16's convolutions (no norm layers) standardised layer by layer
       (parity_one_stage._standardise_on_first_call), as a trained network keeps
       its activations of about unit spread.
    2. Each level's last regression convolution scaled to outputs of mean 0 and
       std @delta_std (BoxCoder's weights 10, 10, 5, 5 then divide them).
    3. Each level's last classification convolution standardised to mean 0 and
       std 1, then logits = a * z with the background column shifted by b (a shift
       of every column would cancel in the softmax), a searched gain a and shift b,
       so that the detections before the detections_per_img cap number about
       @target per image (the model's cap set to @cap below that, so the cap cuts
       the ordered list), with scores on both sides of 0.5.
    Returns a short description of what was chosen."""
    g = torch.Generator().manual_seed(seed)
    lite = not hasattr(model.backbone, "scale_weight")
    standardised = []
    if not lite:
        standardised = [m for m in model.backbone.modules() if isinstance(m, torch.nn.Conv2d)]
        handles = [pos._standardise_on_first_call(m) for m in standardised]
        try:
            batch, _ = model.transform([pc.to_tensor(images_u8[0])])
            model.backbone(batch.tensors)
        finally:
            for h in handles:
                h.remove()
        # the L2 norm's scale: random about torchvision's 20
        model.backbone.scale_weight.copy_(20.0 * (torch.rand(model.backbone.scale_weight.shape,
                                                             generator=g) + 0.5))
    norms, per_image = pc.calibrate_body(model, images_u8, g)
    for img in images_u8[1:]:
        batch, _ = model.transform([pc.to_tensor(img)])
        per_image.append((batch, model.backbone(batch.tensors)))
    feats = [list(f.values()) for _, f in per_image]

    head = model.head
    head_norms = pc.norm_layers(head)
    handles = [m.register_forward_pre_hook(pc.set_stats) for m in head_norms]
    try:
        head(feats[0])
    finally:
        for h in handles:
            h.remove()

    cls_list = list(head.classification_head.module_list)
    reg_list = list(head.regression_head.module_list)
    K = head.classification_head.num_columns
    for level, (c_mod, r_mod) in enumerate(zip(cls_list, reg_list)):
        for mod, std in ((r_mod, delta_std), (c_mod, 1.0)):
            conv = _last_conv(mod)
            out = torch.cat([mod(f[level]).flatten() for f in feats])
            mu, sd = float(out.mean()), max(float(out.std()), 1e-6)
            conv.weight.mul_(std / sd)
            conv.bias.sub_(mu).mul_(std / sd)

    # the postprocess on z (the standardised logits) for each (a, b)
    cases = []
    for (batch, _), f in zip(per_image, feats):
        out = head(f)
        anchors = model.anchor_generator(batch, f)
        cases.append((out, anchors, batch.image_sizes))
    thr = model.score_thresh

    def counts_for(a, b):
        counts = []
        for out, anchors, sizes in cases:
            logits = a * out["cls_logits"]
            logits[..., 0] += b
            s = model.postprocess_detections(dict(out, cls_logits=logits), anchors, sizes)[0]["scores"]
            counts.append((len(s), int(((s >= thr) & (s < 0.5)).sum()), int((s >= 0.5).sum())))
        return counts

    model.detections_per_img = 10 ** 6
    a, b, counts = pos.search_gain_and_shift(counts_for, [3, 6], -10.0, 40.0, target, cap,
                                             shift_raises_count=False,
                                             shift_name="background shift")
    model.detections_per_img = cap
    for c_mod in cls_list:
        conv = _last_conv(c_mod)
        conv.weight.mul_(a)
        conv.bias.mul_(a)
        conv.bias.view(-1, K)[:, 0] += b
    return (f"calibrated: {len(norms)} norm layers, {len(standardised)} standardised "
            f"convolutions; cls_logits gain {a}, background shift {b:.3g}; detections before "
            f"the cap of {cap} (total, <0.5, >=0.5) per image {counts}")


def compare_features(report, ref, dump, stats, feature_rel_tol):
    """Every feature map: @feature_rel_tol of max|ref|."""
    pos.compare_dumped(report, [k for k in ref if k.startswith("features.")], ref, dump, stats,
                       "feature_rel", feature_rel_tol)


def describe_reference(ref):
    """The reference's size, default boxes and detections, for the log."""
    return (f"resized {ref['image_size'].astype(int).tolist()}, "
            f"{len(ref['anchors'])} default boxes (per level {ref['_levels']}), "
            f"{len(ref['scores'])} detections")


def compare_stages(report, ref, dump, stats, feature_rel_tol):
    """The stages between the front ones and the detections: every feature map, then
    the heads' outputs."""
    compare_features(report, ref, dump, stats, feature_rel_tol)
    pos.compare_head(report, ref, dump, stats)


SSD = pos.Family(calibrate, reference, describe_reference, compare_stages)


def run_parity(args, name, model, h, w, seed, **kwargs):
    """parity_one_stage.run_parity for an SSD or SSDlite @model."""
    return pos.run_parity(args, name, model, h, w, seed, family=SSD, **kwargs)
