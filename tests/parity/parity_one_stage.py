# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity of the one-stage detectors (RetinaNet, FCOS) against torchvision: their
reference step by step, their calibration and a whole test, over parity_common's
images, engine run and stage comparisons (the front stages and the detections are
every kind's; the dense head's outputs are compared here instead of the RPN's
proposals and the box head's).

Stages compared: resized size, input, anchors (exact), every FPN level with P6 and
P7 ('fpn.0', 'fpn.1', 'fpn.2', 'fpn.p6', 'fpn.p7'), the head's outputs over every
anchor of every level ('cls_logits' [anchors][K], 'bbox_regression' [anchors][4],
FCOS's 'bbox_ctrness' [anchors][1], parity_common.HEAD_REL_TOL of max|ref|), then
the detections with the two-stage detectors' criterion."""

import collections
import os
import time

import parity_common as pc
from parity_common import np, torch, log


def forward_head(model, img_u8):
    """The transform, the backbone, the head and the anchors of a one-stage detector
    or SSD in eval mode on @img_u8: (images, features, head_outputs, anchors)."""
    x = pc.to_tensor(img_u8)
    with torch.no_grad():
        images, _ = model.transform([x])
        features = model.backbone(images.tensors)
        feats = list(features.values())
        head_outputs = model.head(feats)
        anchors = model.anchor_generator(images, feats)
    return images, features, head_outputs, anchors


def head_reference(images, anchors, head_outputs, dets, per_level):
    """The arrays of reference() common to the one-stage detectors and SSD: sizes,
    input, anchors, the head's outputs, the detections, '_levels' (anchors per level)."""
    return {
        "image_size": np.array(images.image_sizes[0], np.float32),
        "input": images.tensors.numpy(),
        "anchors": anchors[0].numpy(),
        "cls_logits": head_outputs["cls_logits"][0].numpy(),
        "bbox_regression": head_outputs["bbox_regression"][0].numpy(),
        **({"bbox_ctrness": head_outputs["bbox_ctrness"][0].numpy()}
           if "bbox_ctrness" in head_outputs else {}),
        "boxes": dets["boxes"].numpy(),
        "scores": dets["scores"].numpy(),
        "labels": dets["labels"].numpy(),
        "_levels": per_level,
    }


def reference(model, img_u8):
    """RetinaNet.forward or FCOS.forward in eval mode, step by step: a dict of numpy arrays named as
    vd-detect's --dump files, plus 'boxes', 'scores', 'labels' (final detections in
    the image's pixels, torchvision's order)."""
    h0, w0 = img_u8.shape[:2]
    images, features, head_outputs, anchors = forward_head(model, img_u8)
    feats = list(features.values())
    with torch.no_grad():
        per_level = [f.size(2) * f.size(3) for f in feats]
        a = head_outputs["cls_logits"].size(1) // sum(per_level)
        per_level = [hw * a for hw in per_level]
        split = {k: list(v.split(per_level, dim=1)) for k, v in head_outputs.items()}
        split_anchors = [list(t.split(per_level)) for t in anchors]
        found = model.postprocess_detections(split, split_anchors, images.image_sizes)
        dets = model.transform.postprocess(found, images.image_sizes, [(h0, w0)])[0]
    out = head_reference(images, anchors, head_outputs, dets, per_level)
    for name, f in features.items():
        out["fpn." + name] = f.numpy()
    return out


def reference_matches_model(model, img_u8, ref):
    """Self-check of reference(): model(image) gives the same detections bit for bit."""
    with torch.no_grad():
        det = model([pc.to_tensor(img_u8)])[0]
    return all(np.array_equal(det[k].numpy(), ref[k]) for k in ("boxes", "scores", "labels"))


def _standardise_on_first_call(conv):
    """A forward hook that, at @conv's first call (the first, largest level of the
    first image), divides its weights and bias by the standard deviation of its output
    and returns the output so divided: each layer of a branch then gives activations
    of about unit spread to the next, as a trained head does (torchvision's
    initialisation, std 0.01 weights, shrinks them about threefold per layer)."""
    def hook(module, inputs, output):
        if getattr(module, "_vd_standardised", False):
            return None
        sd = float(output.std())
        module.weight.div_(sd)
        if module.bias is not None:
            module.bias.div_(sd)
        module._vd_standardised = True
        return output / sd
    return conv.register_forward_hook(hook)


def search_gain_and_shift(counts_for, gains, lo, hi, target, cap, shift_raises_count,
                          shift_name):
    """The gain a of the classification logits (of @gains) and the shift b of them (in
    @lo..@hi) for calibrate: @counts_for(a, b) gives per image the detections before
    the cap (total, <0.5, >=0.5). For each a, bisects b to about @target detections
    per image (the count rises with b when @shift_raises_count, falls otherwise),
    then keeps the a whose images are furthest from the limits (after the cap of
    @cap, the top scores need both sides of 0.5); returns (a, b, counts)."""
    best = None
    for a in gains:
        b_lo, b_hi = lo, hi
        for _ in range(10):
            b = 0.5 * (b_lo + b_hi)
            counts = counts_for(a, b)
            if (sum(n for n, _, _ in counts) > target * len(counts)) == shift_raises_count:
                b_hi = b
            else:
                b_lo = b
        cost = 0.0
        for n, low, high in counts:
            high_kept = min(high, cap)
            low_kept = min(low, cap - high_kept)
            cost += (abs(n - target) / target + 4 * max(0, 20 - low_kept) / 20
                     + 4 * max(0, 20 - high_kept) / 20)
        cost += 0.05 * a * len(counts)
        if pc.VERBOSE:
            log(f"  cls_logits gain {a}: {shift_name} {b:.3g}, cost {cost:.3f}, counts {counts}")
        if best is None or cost < best[0]:
            best = (cost, a, b, counts)
    return best[1:]


@torch.no_grad()
def calibrate(model, images_u8, seed=0, delta_std=0.3, target=400, cap=300):
    """Makes a random-weight RetinaNet or FCOS produce non-degenerate detections on
    images_u8.

    1. The body's norm layers as parity_common.calibrate_body() sets them.
    2. The head's hidden convolutions standardised layer by layer
       (_standardise_on_first_call); v2's GroupNorm layers given random affine
       parameters.
    3. bbox_reg scaled so that the deltas have std @delta_std (FCOS: and shifted to
       mean 1, distances of about the anchor's size, seldom cut by its ReLU; its
       centerness logits standardised).
    4. cls_logits standardised per output channel (anchor and class) over the
       locations of every level and image, then logits = a * z + b with a searched
       gain a and shift b, so that the detections before the detections_per_img cap
       number about @target per image (the model's cap set to @cap below that, so the
       cap cuts the ordered list), with scores on both sides of 0.5.
    Returns a short description of what was chosen."""
    g = torch.Generator().manual_seed(seed)
    norms, per_image = pc.calibrate_body(model, images_u8, g)
    for img in images_u8[1:]:
        batch, _ = model.transform([pc.to_tensor(img)])
        per_image.append((batch, model.backbone(batch.tensors)))

    head = model.head
    cls, reg = head.classification_head, head.regression_head
    # v2's GroupNorm layers: random affine parameters, as calibrate_body() gives the
    # body's norms
    group_norms = [m for m in head.modules() if isinstance(m, torch.nn.GroupNorm)]
    for m in group_norms:
        m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
        m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
    hidden = [m for branch in (cls.conv, reg.conv) for m in branch.modules()
              if isinstance(m, torch.nn.Conv2d)]
    handles = [_standardise_on_first_call(m) for m in hidden]
    try:
        head(list(per_image[0][1].values()))
    finally:
        for h in handles:
            h.remove()

    feats = [list(f.values()) for _, f in per_image]
    fcos = hasattr(reg, "bbox_ctrness")
    if fcos:
        # the convolutions' raw outputs, before FCOSRegressionHead's ReLU
        hidden_out = [reg.conv(x) for f in feats for x in f]
        deltas = torch.cat([reg.bbox_reg(x).flatten() for x in hidden_out])
        ctr = torch.cat([reg.bbox_ctrness(x).flatten() for x in hidden_out])
        c_mu, c_sd = float(ctr.mean()), float(ctr.std())
        reg.bbox_ctrness.weight.div_(c_sd)
        reg.bbox_ctrness.bias.sub_(c_mu).div_(c_sd)
    else:
        deltas = torch.cat([reg(f).flatten() for f in feats])
    gain = delta_std / float(deltas.std())
    reg.bbox_reg.weight.mul_(gain)
    reg.bbox_reg.bias.mul_(gain)
    if fcos:
        reg.bbox_reg.bias.add_(1.0 - float(deltas.mean()) * gain)

    K, A = cls.num_classes, cls.num_anchors
    raw = torch.cat([cls(f)[0] for f in feats])  # [anchors of every image][K]
    raw = raw.reshape(-1, A * K)                  # [locations][A * K], channel a * K + k
    mu, sd = raw.mean(0), raw.std(0).clamp_min(1e-6)
    cls.cls_logits.weight.div_(sd[:, None, None, None])
    cls.cls_logits.bias.sub_(mu).div_(sd)

    # the postprocess on z (the standardised logits) for each (a, b)
    cases = []
    for (batch, _), f in zip(per_image, feats):
        out = head(f)
        per_level = [t.size(2) * t.size(3) * A for t in f]
        anchors = model.anchor_generator(batch, f)
        cases.append(({k: list(v.split(per_level, dim=1)) for k, v in out.items()},
                      [list(t.split(per_level)) for t in anchors], batch.image_sizes))
    thr = model.score_thresh

    def counts_for(a, b):
        counts = []
        for split, anchors, sizes in cases:
            scaled = dict(split, cls_logits=[a * z + b for z in split["cls_logits"]])
            s = model.postprocess_detections(scaled, anchors, sizes)[0]["scores"]
            counts.append((len(s), int(((s >= thr) & (s < 0.5)).sum()), int((s >= 0.5).sum())))
        return counts

    model.detections_per_img = 10 ** 6
    a, b, counts = search_gain_and_shift(counts_for, [1, 1.5, 2, 2.5, 3], -30.0, 10.0, target,
                                         cap, shift_raises_count=True, shift_name="shift")
    model.detections_per_img = cap
    cls.cls_logits.weight.mul_(a)
    cls.cls_logits.bias.mul_(a).add_(b)
    return (f"calibrated: {len(norms)} norm layers, {len(hidden)} head convolutions, "
            f"{len(group_norms)} GroupNorm layers; deltas "
            f"x{gain:.3g}; cls_logits gain {a}, shift {b:.3g}; detections before the cap of "
            f"{cap} (total, <0.5, >=0.5) per image {counts}")


def compare_dumped(report, names, ref, dump, stats, stat, tol):
    """Stages @names of @ref against the dump's: missing or of another shape a
    failure, else parity_common.check_relative within @tol (its fraction in @stat)."""
    for name in names:
        a = dump.get(name)
        r = ref[name]
        if a is None or a.shape != r.shape:
            report.check(name, False, "missing from the dump" if a is None else
                         f"shape ours {list(a.shape)}, torchvision {list(r.shape)}")
            continue
        pc.check_relative(report, name, a, r, stats, stat, tol)


def compare_head(report, ref, dump, stats):
    """The dense head's outputs over every anchor: HEAD_REL_TOL of max|ref|."""
    names = [n for n in ("cls_logits", "bbox_regression", "bbox_ctrness") if n in ref]
    compare_dumped(report, names, ref, dump, stats, "head_rel", pc.HEAD_REL_TOL)


def describe_reference(ref):
    """The reference's sizes, anchors and detections, for the log."""
    return (f"resized {ref['image_size'].astype(int).tolist()}, "
            f"padded {list(ref['input'].shape[2:])}, {len(ref['anchors'])} anchors "
            f"(per level {ref['_levels']}), {len(ref['scores'])} detections")


def compare_stages(report, ref, dump, stats, feature_rel_tol):
    """The stages between the front ones and the detections: the dense head's outputs
    (the FPN levels are among the front stages)."""
    compare_head(report, ref, dump, stats)


# What run_parity takes from a family of detectors: calibrate(model, images_u8,
# **kwargs) -> description, reference(model, img_u8) -> dict, describe_reference(ref)
# -> str for the log, compare_stages(report, ref, dump, stats, feature_rel_tol) for
# the stages between the front ones and the detections.
Family = collections.namedtuple("Family", "calibrate reference describe_reference compare_stages")
ONE_STAGE = Family(calibrate, reference, describe_reference, compare_stages)


def run_parity(args, name, model, h, w, seed, class_names=None, calibrate_kwargs=None,
               feature_rel_tol=pc.FEATURE_REL_TOL_RESNET50, engine_timeout=300,
               family=ONE_STAGE):
    """Calibrates @model on one image of @h x @w (scene @seed) with @family's
    calibrate, exports it, runs the engine and @family's reference, compares; returns
    the exit status."""
    t_start = time.monotonic()
    os.makedirs(args.workdir, exist_ok=True)
    work = os.path.abspath(args.workdir)
    img = pc.synthetic_image(h, w, seed)

    t = time.monotonic()
    desc = family.calibrate(model, [img], **(calibrate_kwargs or {}))
    log(f"{name}: {desc} ({time.monotonic() - t:.1f} s)")
    model_path = os.path.join(work, f"{name}.safetensors")
    try:
        pc.export_model(model, model_path, class_names=class_names)
    except Exception as exc:
        log(f"FAIL {name}: export failed: {type(exc).__name__}: {exc}")
        return 1
    path = os.path.join(work, f"image0_{h}x{w}.npy")
    np.save(path, img)

    thr = model.score_thresh
    dump_dir = os.path.join(work, "dump")
    engine_error = None
    try:
        results, dt, _ = pc.run_engine(args.vd_detect, model_path, [path], dump_dir, args.threads,
                                       thr, engine_timeout)
        log(f"{name}: vd-detect took {dt:.1f} s")
    except (RuntimeError, OSError) as exc:
        engine_error = str(exc)
        results = None

    t = time.monotonic()
    ref = family.reference(model, img)
    log(f"{name}: torchvision {time.monotonic() - t:.1f} s, {family.describe_reference(ref)}")
    ref_dir = os.path.join(work, "reference", "0")
    os.makedirs(ref_dir, exist_ok=True)
    for k, v in ref.items():
        if not k.startswith("_"):
            np.save(os.path.join(ref_dir, k + ".npy"), v)
    report = pc.Report(f"{name} image 0 {h}x{w}")
    report.check("reference self-check", reference_matches_model(model, img, ref),
                 "the step-by-step reference gives model(image)'s detections")
    spread_ok = pc.check_reference_spread(report, ref, thr)
    report.check("reference cap", len(ref["scores"]) == model.detections_per_img,
                 f"{len(ref['scores'])} detections, the cap {model.detections_per_img} "
                 "(the ordering at the cut is compared)")
    stats = {}
    if results is not None:
        dump = pc.load_dump(dump_dir, 0)
        pc.compare_front(report, ref, results[0], dump, (h, w), stats, feature_rel_tol)
        family.compare_stages(report, ref, dump, stats, feature_rel_tol)
        pc.compare_detections(report, ref, results[0], class_names, stats)
    log(f"SUMMARY {name}: detections matched {pc._fmt_fracs(stats.get('detection_frac'))}, "
        f"max|score diff| {stats.get('score_diff', float('nan')):.3g}, "
        f"max feature diff {stats.get('feature_rel', float('nan')):.3g} of max|ref|, "
        f"max head diff {stats.get('head_rel', float('nan')):.3g} of max|ref|, "
        f"max input diff {stats.get('input', float('nan')):.3g}; "
        f"{time.monotonic() - t_start:.0f} s")
    log(f"reference tensors in {ref_dir}/, ours in {dump_dir}/0/")
    if engine_error is not None:
        log(f"FAIL {name}: the engine did not run: {engine_error}")
        return 1
    first = report.first_failure()
    if first or not spread_ok:
        stage, message = first or ("reference spread", "")
        log(f"FAIL {name}: first divergence at '{stage}': {message}")
        return 1
    if not args.keep:
        os.remove(model_path)
    log(f"PASS {name}")
    return 0
