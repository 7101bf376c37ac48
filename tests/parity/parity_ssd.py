# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parity of SSD and SSDlite against torchvision: their reference step by step, their
calibration and a whole test, over parity_common's images, engine run and
comparisons and parity_one_stage's comparison of the dense head's outputs.

Stages compared: resized size (the fixed size), input, default boxes (exact), every
feature map ('features.0' .. 'features.5': VGG16's first after its L2 norm), the
heads' outputs over every default box ('cls_logits' [boxes][K], 'bbox_regression'
[boxes][4], parity_common.HEAD_REL_TOL of max|ref|), then the detections with the
other detectors' criterion."""

import os
import time

import parity_common as pc
import parity_one_stage as pos
from parity_common import np, torch, log


def reference(model, img_u8):
    """SSD.forward in eval mode, step by step: a dict of numpy arrays named as
    vd-detect's --dump files, plus 'boxes', 'scores', 'labels' (final detections in
    the image's pixels, torchvision's order)."""
    h0, w0 = img_u8.shape[:2]
    x = pc.to_tensor(img_u8)
    with torch.no_grad():
        images, _ = model.transform([x])
        features = model.backbone(images.tensors)
        feats = list(features.values())
        head_outputs = model.head(feats)
        anchors = model.anchor_generator(images, feats)
        found = model.postprocess_detections(head_outputs, anchors, images.image_sizes)
        dets = model.transform.postprocess(found, images.image_sizes, [(h0, w0)])[0]
    per_level = [f.size(2) * f.size(3) * a for f, a in
                 zip(feats, model.anchor_generator.num_anchors_per_location())]
    out = {
        "image_size": np.array(images.image_sizes[0], np.float32),
        "input": images.tensors.numpy(),
        "anchors": anchors[0].numpy(),
        "cls_logits": head_outputs["cls_logits"][0].numpy(),
        "bbox_regression": head_outputs["bbox_regression"][0].numpy(),
        "boxes": dets["boxes"].numpy(),
        "scores": dets["scores"].numpy(),
        "labels": dets["labels"].numpy(),
        "_levels": per_level,
    }
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
    best = None
    for a in [3, 6]:
        lo, hi = -10.0, 40.0
        for _ in range(10):
            b = 0.5 * (lo + hi)
            counts = counts_for(a, b)
            if sum(n for n, _, _ in counts) > target * len(counts):
                lo = b
            else:
                hi = b
        cost = 0.0
        for n, low, high in counts:
            high_kept = min(high, cap)
            low_kept = min(low, cap - high_kept)
            cost += (abs(n - target) / target + 4 * max(0, 20 - low_kept) / 20
                     + 4 * max(0, 20 - high_kept) / 20)
        cost += 0.05 * a * len(counts)
        if pc.VERBOSE:
            log(f"  cls_logits gain {a}: background shift {b:.3g}, cost {cost:.3f}, counts {counts}")
        if best is None or cost < best[0]:
            best = (cost, a, b, counts)
    _, a, b, counts = best
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
    for name in [k for k in ref if k.startswith("features.")]:
        a = dump.get(name)
        r = ref[name]
        if a is None or a.shape != r.shape:
            report.check(name, False, "missing from the dump" if a is None else
                         f"shape ours {list(a.shape)}, torchvision {list(r.shape)}")
            continue
        diff = np.abs(a.astype(np.float64) - r)
        d = float(diff.max())
        scale = float(np.abs(r).max())
        rel = d / scale if scale > 0 else d
        stats["feature_rel"] = max(stats.get("feature_rel", 0.0), rel)
        where = np.unravel_index(int(diff.argmax()), diff.shape)
        report.check(name, rel <= feature_rel_tol,
                     f"shape {list(r.shape)}, max|diff| {d:.3g} = {rel:.3g} of max|ref| {scale:.3g} "
                     f"(tol {feature_rel_tol:g}); worst at {list(map(int, where))}")


def run_parity(args, name, model, h, w, seed, class_names=None, calibrate_kwargs=None,
               feature_rel_tol=pc.FEATURE_REL_TOL_RESNET50, engine_timeout=300):
    """Calibrates @model on one image of @h x @w (scene @seed), exports it, runs the
    engine and the reference, compares; returns the exit status."""
    t_start = time.monotonic()
    os.makedirs(args.workdir, exist_ok=True)
    work = os.path.abspath(args.workdir)
    img = pc.synthetic_image(h, w, seed)

    t = time.monotonic()
    desc = calibrate(model, [img], **(calibrate_kwargs or {}))
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
    ref = reference(model, img)
    log(f"{name}: torchvision {time.monotonic() - t:.1f} s, resized "
        f"{ref['image_size'].astype(int).tolist()}, {len(ref['anchors'])} default boxes "
        f"(per level {ref['_levels']}), {len(ref['scores'])} detections")
    ref_dir = os.path.join(work, "reference", "0")
    os.makedirs(ref_dir, exist_ok=True)
    for k, v in ref.items():
        if not k.startswith("_"):
            np.save(os.path.join(ref_dir, k + ".npy"), v)
    report = pc.Report(f"{name} image 0 {h}x{w}")
    with torch.no_grad():
        det = model([pc.to_tensor(img)])[0]
    report.check("reference self-check",
                 all(np.array_equal(det[k].numpy(), ref[k]) for k in ("boxes", "scores", "labels")),
                 "the step-by-step reference gives model(image)'s detections")
    spread_ok = pc.check_reference_spread(report, ref, thr)
    report.check("reference cap", len(ref["scores"]) == model.detections_per_img,
                 f"{len(ref['scores'])} detections, the cap {model.detections_per_img} "
                 "(the ordering at the cut is compared)")
    stats = {}
    if results is not None:
        dump = pc.load_dump(dump_dir, 0)
        pc.compare_front(report, ref, results[0], dump, (h, w), stats, feature_rel_tol)
        compare_features(report, ref, dump, stats, feature_rel_tol)
        pos.compare_head(report, ref, dump, stats)
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
