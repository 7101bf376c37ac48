#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""GPU benchmark: visiondetect's CUDA engine against torchvision on the same
weights and frames, side by side in one run (issue 4, item 5).

    python3 tools/bench_gpu.py prepare --workdir DIR
    python3 tools/bench_gpu.py prepare-masks --workdir DIR
    python3 tools/bench_gpu.py prepare-v2 --workdir DIR
    python3 tools/bench_gpu.py prepare-mnv3 --workdir DIR
    python3 tools/bench_gpu.py bench --workdir DIR --bench-bin build/tests/gpu/vd-gpu-bench \
        [--json OUT.json] [--iters N]

prepare: a Faster R-CNN ResNet-50-FPN (91 classes, torchvision's default sizes
800/1333) and three synthetic 1280x720 frames (tests/parity/parity_common.py).
With torchvision's COCO weights in the torch hub cache (no download: the GPU
machines are offline) the model is the trained one; otherwise random weights
calibrated by parity_common.calibrate() so that the detections are not
degenerate. Writes DIR/model.safetensors (tools/export_torchvision.py, F32),
DIR/model.pt (the same weights for torchvision), DIR/frame-<i>.ppm and
DIR/model.json (which weights).

bench, on the first frame (1280x720, batch 1):
  - torchvision eager fp32 (its defaults: cuDNN may use TF32) and autocast fp16:
    median wall time per frame from the uint8 frame on the host to the
    detections on the host, frames per second, and host synchronisations per
    frame counted with torch.cuda.set_sync_debug_mode;
  - ours (vd-gpu-bench engine): fp32 and fp16, eager and CUDA-graph replay, the
    same wall time (vd_detect: host frame in, detections out), syncs per frame
    from the engine's counted wrapper, per-stage device times;
  - detections: ours fp32 against torchvision fp32 with TF32 off (label,
    IoU >= 0.99, |score diff| <= 1e-3) and ours fp16 against torchvision autocast
    (IoU >= 0.9, |score diff| <= 0.02);
  - batches (issue 11, item 6): ours fp16 with graphs at batch 4, 8 and 16
    (vd-gpu-bench engine --batch N: N copies of the frame per vd_detect),
    frames per second and host synchronisations per batch, next to
    torchvision autocast fp16 with a list of 8 frames per call;
  - micro-benchmarks: MultiScaleRoIAlign of 1000 RoIs over the FPN levels of the
    1280x720 input (256 channels, fp16 features under autocast for torchvision,
    our fp16 kernel) and batched NMS of 5000 boxes in 5 groups at IoU 0.7
    (torchvision.ops.batched_nms against vd_batched_nms_device), CUDA events,
    medians.
Prints a table and writes everything as JSON.
"""

import argparse
import json
import math
import os
import signal
import statistics
import struct
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))

import parity_common as pc  # noqa: E402  (exits 77 without numpy/torch/torchvision)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

WIDTH, HEIGHT = 1280, 720
FRAME_SEEDS = (11, 12, 13)
COCO_CHECKPOINT = "fasterrcnn_resnet50_fpn_coco-258fb6c6.pth"


def log(msg):
    print(msg, flush=True)


def write_ppm(path, img):
    h, w, _ = img.shape
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(np.ascontiguousarray(img).tobytes())


def read_ppm(path):
    """Reads what write_ppm writes (P6, no comments): three header fields after
    the magic, then exactly one whitespace byte before the pixels."""
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 2
    while len(fields) < 3:
        while data[pos:pos + 1].isspace():
            pos += 1
        end = pos
        while data[end:end + 1].isdigit():
            end += 1
        fields.append(int(data[pos:end]))
        pos = end
    w, h = fields[0], fields[1]
    pixels = data[pos + 1: pos + 1 + w * h * 3]
    return np.frombuffer(pixels, np.uint8).reshape(h, w, 3).copy()


def build_model(trained):
    """trained: torchvision's COCO_V1 weights from the hub cache (FrozenBN with
    eps 0, as the builder sets them up); else random weights (BatchNorm2d)."""
    torch.manual_seed(0)
    if trained:
        return torchvision.models.detection.fasterrcnn_resnet50_fpn(weights="COCO_V1").eval()
    return torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91).eval()


def coco_weights():
    """The cached COCO checkpoint, or None (never downloads)."""
    path = os.path.join(torch.hub.get_dir(), "checkpoints", COCO_CHECKPOINT)
    return path if os.path.exists(path) else None


def prepare(args):
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t0 = time.time()
    frames = [pc.synthetic_image(HEIGHT, WIDTH, seed=s) for s in FRAME_SEEDS]
    for i, img in enumerate(frames):
        write_ppm(os.path.join(args.workdir, f"frame-{i}.ppm"), img)
    log(f"frames: {len(frames)} x {WIDTH}x{HEIGHT} ({time.time() - t0:.1f} s)")
    # held-out scenes of the bundled, trained demo model (tools/train_demo.py),
    # for the fp16-against-fp32 criterion on a trained model: scenes with at
    # least 5 objects, so that the comparison is not of near-empty lists; first,
    # so that a failure of the model below leaves that check to device-check.sh
    try:
        sys.path.insert(0, HERE)
        import train_demo
        found, index = 0, 0
        while found < 3 and index < 200:
            img, boxes, _ = train_demo.make_scene(1, index, train_demo.STREAM_EVAL)
            index += 1
            if len(boxes) >= 5:
                write_ppm(os.path.join(args.workdir, f"demo-{found}.ppm"), img)
                found += 1
        log(f"demo scenes: {found}")
    except ImportError as e:
        log(f"no demo scenes: {e}")

    ckpt = coco_weights()
    if ckpt is not None:
        model = build_model(True)
        which = f"torchvision COCO_V1 weights ({ckpt})"
    else:
        model = build_model(False)
        desc = pc.calibrate(model, frames[:2])
        which = "random weights (seed 0), calibrated: " + desc
    log(f"model: {which} ({time.time() - t0:.1f} s)")
    pc.export_model(model, os.path.join(args.workdir, "model.safetensors"), dtype="f32")
    torch.save(model.state_dict(), os.path.join(args.workdir, "model.pt"))
    with open(os.path.join(args.workdir, "model.json"), "w") as f:
        json.dump({"weights": which, "trained": ckpt is not None}, f)
    log(f"exported ({time.time() - t0:.1f} s)")


# Mask R-CNN for test-gpu-engine --masks: the transform's sizes (smaller than the
# builders' 800/1333, to keep the CPU reference of the device check to seconds) and
# the one frame (height, width, seed)
MASK_MIN_SIZE, MASK_MAX_SIZE = 320, 533
MASK_FRAME = (300, 400, 7100)


def prepare_masks(args):
    """Mask R-CNN models and a frame for test-gpu-engine --masks (the CUDA mask branch
    against the CPU engine): maskrcnn_resnet50_fpn (91 classes, the v1 mask head), and
    the same with maskrcnn_resnet50_fpn_v2's mask head (MaskRCNNHeads with BatchNorm2d,
    folded at load: the mask head alone on a v1 body; prepare-v2 makes the whole v2
    model), random weights calibrated as the parity tests do
    (parity_common.calibrate, then calibrate_masks: mask logits of std 3 on the frame's
    detections). Writes DIR/mask-v1.safetensors, DIR/mask-v2head.safetensors (F32) and
    DIR/mask-frame-0.ppm."""
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t0 = time.time()
    h, w, seed = MASK_FRAME
    img = pc.synthetic_image(h, w, seed=seed)
    write_ppm(os.path.join(args.workdir, "mask-frame-0.ppm"), img)
    for name, v2_head in (("mask-v1", False), ("mask-v2head", True)):
        torch.manual_seed(11)
        model = torchvision.models.detection.maskrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=91, min_size=MASK_MIN_SIZE,
            max_size=MASK_MAX_SIZE)
        if v2_head:
            model.roi_heads.mask_head = MaskRCNNHeads(256, [256, 256, 256, 256], 1,
                                                      norm_layer=torch.nn.BatchNorm2d)
        model.eval()
        cache = []
        desc = pc.calibrate(model, [img], cache=cache)
        desc += "; " + pc.calibrate_masks(model, img, cached=cache[0])
        pc.export_model(model, os.path.join(args.workdir, f"{name}.safetensors"), dtype="f32")
        log(f"{name}: random weights (seed 11), calibrated: {desc} ({time.time() - t0:.1f} s)")


def prepare_v2(args):
    """The v2 models and a frame for test-gpu-engine --core and --masks (CUDA against
    the CPU engine on ResNet-50-FPN v2: BatchNorm2d in the FPN, the two-convolution RPN
    head, the four-convolution + one-Linear box head): fasterrcnn_resnet50_fpn_v2 and
    maskrcnn_resnet50_fpn_v2 (91 classes), at the mask checks' transform sizes
    (MASK_MIN_SIZE / MASK_MAX_SIZE) and on their frame, random weights calibrated as
    the parity tests do (parity_common.calibrate; calibrate_masks for the masks).
    Writes DIR/v2.safetensors, DIR/mask-v2.safetensors (F32) and DIR/v2-frame-0.ppm."""
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t0 = time.time()
    h, w, seed = MASK_FRAME
    img = pc.synthetic_image(h, w, seed=seed)
    write_ppm(os.path.join(args.workdir, "v2-frame-0.ppm"), img)
    for name, builder, model_seed in (("v2", "fasterrcnn_resnet50_fpn_v2", 6),
                                      ("mask-v2", "maskrcnn_resnet50_fpn_v2", 11)):
        torch.manual_seed(model_seed)
        model = getattr(torchvision.models.detection, builder)(
            weights=None, weights_backbone=None, num_classes=91, min_size=MASK_MIN_SIZE,
            max_size=MASK_MAX_SIZE).eval()
        cache = []
        desc = pc.calibrate(model, [img], cache=cache)
        if name == "mask-v2":
            desc += "; " + pc.calibrate_masks(model, img, cached=cache[0])
        pc.export_model(model, os.path.join(args.workdir, f"{name}.safetensors"), dtype="f32")
        log(f"{name} ({builder}): random weights (seed {model_seed}), calibrated: {desc} "
            f"({time.time() - t0:.1f} s)")


MNV3_FRAME = (240, 320, 7200)


def prepare_mnv3(args):
    """The MobileNetV3-Large-FPN models and a frame for test-gpu-engine --core (CUDA
    against the CPU engine on depthwise convolutions, hardswish, squeeze-excitation,
    the FPN over features 13 and 16 and 15 anchors per location):
    fasterrcnn_mobilenet_v3_large_fpn (800/1333) and fasterrcnn_mobilenet_v3_large_320_fpn
    (320/640, 150/150 RPN proposals), 91 classes, each at its builder's sizes, random
    weights calibrated as the parity tests do (parity_common.calibrate), on a small
    frame. Writes DIR/mnv3.safetensors, DIR/mnv3-320.safetensors (F32) and
    DIR/mnv3-frame-0.ppm."""
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t0 = time.time()
    h, w, seed = MNV3_FRAME
    img = pc.synthetic_image(h, w, seed=seed)
    write_ppm(os.path.join(args.workdir, "mnv3-frame-0.ppm"), img)
    for name, builder, model_seed in (("mnv3", "fasterrcnn_mobilenet_v3_large_fpn", 3),
                                      ("mnv3-320", "fasterrcnn_mobilenet_v3_large_320_fpn", 4)):
        model = pc.build_mobilenet_v3_fpn(builder, seed=model_seed)
        desc = pc.calibrate(model, [img])
        pc.export_model(model, os.path.join(args.workdir, f"{name}.safetensors"), dtype="f32")
        log(f"{name} ({builder}): random weights (seed {model_seed}), calibrated: {desc} "
            f"({time.time() - t0:.1f} s)")


# ---------------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else float("nan")


def load_torch_model(workdir):
    with open(os.path.join(workdir, "model.json")) as f:
        trained = json.load(f)["trained"]
    model = build_model(trained)
    model.load_state_dict(torch.load(os.path.join(workdir, "model.pt"), map_location="cpu"))
    return model.eval().cuda()


def torchvision_frame(model, frame_u8, amp):
    """Host uint8 HxWx3 -> detections on the host, as an application does."""
    x = torch.from_numpy(frame_u8).cuda().permute(2, 0, 1).float().div_(255.0)
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
        out = model([x])[0]
    return {k: v.float().cpu() if v.is_floating_point() else v.cpu() for k, v in out.items()}


def bench_torchvision(model, frame_u8, amp, iters, warmup):
    for _ in range(warmup):
        torchvision_frame(model, frame_u8, amp)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        torchvision_frame(model, frame_u8, amp)
        times.append((time.perf_counter() - t0) * 1000.0)
    # synchronising CUDA calls of one frame (torch's own detector of them)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            torchvision_frame(model, frame_u8, amp)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum(1 for w in caught if "synchroniz" in str(w.message).lower())
    med = median(times)
    return {"median_ms": med, "min_ms": min(times), "fps": 1000.0 / med, "iters": iters,
            "syncs_per_frame": syncs}


def bench_torchvision_batch(model, frame_u8, batch, iters, warmup):
    """Autocast fp16, @batch host frames per call (one list), as bench_torchvision."""
    def once():
        xs = [torch.from_numpy(frame_u8).cuda().permute(2, 0, 1).float().div_(255.0)
              for _ in range(batch)]
        with torch.autocast("cuda", dtype=torch.float16):
            outs = model(xs)
        return [{k: v.cpu() for k, v in o.items()} for o in outs]
    for _ in range(warmup):
        once()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1000.0)
    med = median(times)
    return {"batch": batch, "median_ms": med, "fps": batch * 1000.0 / med, "iters": iters}


def run_ours(bench_bin, args_list):
    cmd = [bench_bin] + args_list
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def match_fraction(ref, ours, iou_min, score_tol):
    if len(ref["scores"]) == 0:
        return 1.0, 0
    pairs, _ = pc.match(ref["boxes"], ours["boxes"], iou_min, ref["labels"], ours["labels"],
                        ref["scores"], ours["scores"], score_tol)
    m = sum(1 for _, j in pairs if j >= 0)
    return m / len(pairs), m


def our_detections(path):
    with open(path) as f:
        d = json.load(f)["detections"]
    return {"boxes": np.array([x["box"] for x in d], np.float64).reshape(-1, 4),
            "scores": np.array([x["score"] for x in d], np.float64),
            "labels": np.array([x["label"] for x in d], np.int64)}


def micro_roi_align(workdir, bench_bin, iters):
    from torchvision.ops import MultiScaleRoIAlign
    rh, rw, ph, pw = 750, 1333, 768, 1344  # 1280x720 through 800/1333
    g = torch.Generator().manual_seed(5)
    n = 1000
    xy = torch.rand(n, 2, generator=g) * torch.tensor([rw - 16.0, rh - 16.0])
    wh = torch.exp(torch.rand(n, 2, generator=g) * math.log(400.0)) + 4.0
    rois = torch.cat([xy, torch.minimum(xy + wh, torch.tensor([float(rw), float(rh)]))], 1)
    path = os.path.join(workdir, "rois_1000.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<i", n))
        f.write(rois.numpy().astype("<f4").tobytes())
    feats = {str(i): torch.randn(1, 256, ph // (4 << i), pw // (4 << i), device="cuda",
                                 dtype=torch.float16) for i in range(4)}
    pooler = MultiScaleRoIAlign(["0", "1", "2", "3"], 7, 2)
    boxes = [rois.cuda()]
    sizes = [(rh, rw)]

    def once():
        with torch.autocast("cuda", dtype=torch.float16):
            return pooler(feats, boxes, sizes)

    tv = time_cuda(once, iters)
    ours = run_ours(bench_bin, ["roi-align", path, "--height", str(ph), "--width", str(pw),
                                "--iters", str(iters)])
    return {"n_rois": n, "torchvision_autocast_fp16_ms": tv, "ours_fp16_ms": ours["fp16_median_ms"],
            "ours_fp32_ms": ours["fp32_median_ms"], "speedup_fp16": tv / ours["fp16_median_ms"]}


def micro_nms(workdir, bench_bin, iters):
    from torchvision.ops import batched_nms
    g = torch.Generator().manual_seed(6)
    n = 5000
    centres = torch.rand(600, 2, generator=g) * torch.tensor([1280.0, 720.0])
    sizes = torch.exp(torch.rand(600, 2, generator=g) * math.log(300.0)) + 8.0
    pick = torch.randint(0, 600, (n,), generator=g)
    c = centres[pick] + torch.randn(n, 2, generator=g) * sizes[pick] * 0.15
    wh = sizes[pick] * (0.7 + 0.6 * torch.rand(n, 2, generator=g))
    boxes = torch.cat([c - wh / 2, c + wh / 2], 1)
    scores = torch.rand(n, generator=g)
    idxs = torch.randint(0, 5, (n,), generator=g)
    path = os.path.join(workdir, "nms_5000.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<i", n))
        f.write(boxes.numpy().astype("<f4").tobytes())
        f.write(scores.numpy().astype("<f4").tobytes())
        f.write(idxs.numpy().astype("<i4").tobytes())
    b, s, i = boxes.cuda(), scores.cuda(), idxs.cuda()
    tv = time_cuda(lambda: batched_nms(b, s, i, 0.7), iters)
    kept_tv = int(batched_nms(b, s, i, 0.7).numel())
    ours = run_ours(bench_bin, ["nms", path, "--threshold", "0.7", "--iters", str(iters)])
    return {"n": n, "groups": 5, "threshold": 0.7, "torchvision_ms": tv,
            "torchvision_kept": kept_tv, "ours_ms": ours["median_ms"], "ours_kept": ours["kept"],
            "ours_keep1000_ms": ours["median_ms_keep1000"], "speedup": tv / ours["median_ms"]}


def time_cuda(fn, iters, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return median(times)


def bench(args):
    """Runs _bench; what it measured is written to args.json even when a step
    fails or the run is stopped (SIGTERM: device-check.sh's timeout), with the
    error."""
    results = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    try:
        _bench(args, results)
    except BaseException as e:
        results["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)


def _bench(args, results):
    torch.set_grad_enabled(False)
    results.update({"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0),
                    "torch_version": torch.__version__,
                    "torchvision_version": torchvision.__version__,
                    "input": f"{WIDTH}x{HEIGHT}", "batch": 1})
    with open(os.path.join(args.workdir, "model.json")) as f:
        results["weights"] = json.load(f)["weights"]
    frame_path = os.path.join(args.workdir, "frame-0.ppm")
    frame = read_ppm(frame_path)
    model_path = os.path.join(args.workdir, "model.safetensors")
    model = load_torch_model(args.workdir)

    tv = {}
    tv["eager_fp32"] = bench_torchvision(model, frame, False, args.tv_iters, 5)
    tv["autocast_fp16"] = bench_torchvision(model, frame, True, args.tv_iters, 5)
    results["torchvision"] = tv
    log(f"torchvision: {json.dumps(tv)}")

    ours = results["ours"] = {}
    for prec in ("fp32", "fp16"):
        for graphs in (False, True):
            key = f"{prec}{'_graph' if graphs else ''}"
            extra = ["--graphs"] if graphs else []
            det_path = os.path.join(args.workdir, f"ours_{prec}.json")
            ours[key] = run_ours(args.bench_bin,
                                 ["engine", "--model", model_path, "--image", frame_path,
                                  "--precision", prec, "--iters", str(args.iters), "--warmup", "10",
                                  "--detections", det_path] + extra)
            log(f"ours {key}: {json.dumps(ours[key])}")

    # batches: ours fp16 replayed at 4, 8, 16 frames per vd_detect, torchvision
    # autocast at 8 frames per call
    batched = results["ours_fp16_graph_batched"] = {}
    for b in (4, 8, 16):
        batched[str(b)] = run_ours(args.bench_bin,
                                   ["engine", "--model", model_path, "--image", frame_path,
                                    "--precision", "fp16", "--graphs", "--batch", str(b),
                                    "--iters", str(args.batch_iters), "--warmup", "3"])
        log(f"ours fp16 graph batch {b}: {json.dumps(batched[str(b)])}")
    tv["autocast_fp16_batch8"] = bench_torchvision_batch(model, frame, 8, 5, 2)
    log(f"torchvision autocast fp16 batch 8: {json.dumps(tv['autocast_fp16_batch8'])}")

    # detections against torchvision on the GPU
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ref32 = {k: v.numpy() for k, v in torchvision_frame(model, frame, False).items()}
    ref16 = {k: v.numpy() for k, v in torchvision_frame(model, frame, True).items()}
    o32 = our_detections(os.path.join(args.workdir, "ours_fp32.json"))
    o16 = our_detections(os.path.join(args.workdir, "ours_fp16.json"))
    f32, m32 = match_fraction(ref32, o32, 0.99, 1e-3)
    f16, m16 = match_fraction(ref16, o16, 0.9, 0.02)
    f16b, m16b = match_fraction(o32, o16, 0.9, 0.02)
    # how much fp16 moves this model at all: torchvision's own autocast against
    # its fp32 (a random calibrated model is far more sensitive than a trained one)
    ftv, _ = match_fraction(ref32, ref16, 0.9, 0.02)
    results["parity"] = {
        "torchvision_fp32_detections": int(len(ref32["scores"])),
        "ours_fp32_detections": int(len(o32["scores"])),
        "fp32_matched_fraction": f32,
        "fp32_ok": bool(f32 >= 0.97 and abs(len(o32["scores"]) - len(ref32["scores"]))
                        <= math.ceil(0.03 * len(ref32["scores"]))),
        "torchvision_fp16_detections": int(len(ref16["scores"])),
        "ours_fp16_detections": int(len(o16["scores"])),
        "fp16_vs_torchvision_autocast_matched_fraction": f16,
        "ours_fp16_vs_ours_fp32_matched_fraction": f16b,
        "torchvision_autocast_vs_torchvision_fp32_matched_fraction": ftv,
    }
    log(f"parity: {json.dumps(results['parity'])}")

    results["roi_align"] = micro_roi_align(args.workdir, args.bench_bin, args.micro_iters)
    log(f"roi_align: {json.dumps(results['roi_align'])}")
    results["nms"] = micro_nms(args.workdir, args.bench_bin, args.micro_iters)
    log(f"nms: {json.dumps(results['nms'])}")

    best16 = min(ours["fp16"]["median_ms"], ours["fp16_graph"]["median_ms"])
    results["targets"] = {
        "fp16_speedup_vs_autocast": tv["autocast_fp16"]["median_ms"] / best16,
        "fp16_speedup_ok (>= 5x)": tv["autocast_fp16"]["median_ms"] / best16 >= 5.0,
        "fp16_ms_ok (<= 4 ms)": best16 <= 4.0,
        "syncs_per_frame_ok (== 1)": all(abs(v["syncs_per_frame"] - 1.0) < 1e-9 for v in ours.values()),
        "roi_align_ok (>= 2x)": results["roi_align"]["speedup_fp16"] >= 2.0,
        "nms_ok (>= 3x)": results["nms"]["speedup"] >= 3.0,
        "batched_fps_ok (>= 1000 at batch 8 or 16)": max(batched["8"]["fps"], batched["16"]["fps"]) >= 1000.0,
        "batched_syncs_per_batch_ok (== 1)": all(abs(v["syncs_per_batch"] - 1.0) < 1e-9
                                                 for v in batched.values()),
        "batched_replayed_ok": all(v["replayed"] for v in batched.values()),
    }

    rows = [("torchvision eager fp32", tv["eager_fp32"]),
            ("torchvision autocast fp16", tv["autocast_fp16"])]
    rows += [(f"visiondetect {k.replace('_', ' ')}", v) for k, v in ours.items()]
    log("")
    log(f"{results['gpu']}, {WIDTH}x{HEIGHT}, batch 1, {results['weights'][:60]}")
    log(f"{'':32s} {'median ms':>10s} {'fps':>8s} {'syncs/frame':>12s}")
    for name, v in rows:
        log(f"{name:32s} {v['median_ms']:10.3f} {v['fps']:8.1f} {v['syncs_per_frame']:12.2f}")
    log(f"batches (fp16, graphs, 1280x720 copies of frame 0): {'batch':>5s} {'ms/batch':>9s} "
        f"{'fps':>8s} {'syncs/batch':>12s}")
    for b, v in batched.items():
        log(f"  visiondetect {'':24s} {b:>5s} {v['median_ms']:9.3f} {v['fps']:8.1f} "
            f"{v['syncs_per_batch']:12.2f}")
    tb = tv["autocast_fp16_batch8"]
    log(f"  torchvision autocast fp16 {'':11s} {8:5d} {tb['median_ms']:9.3f} {tb['fps']:8.1f}")
    r, n = results["roi_align"], results["nms"]
    log(f"RoIAlign 1000 RoIs: torchvision autocast {r['torchvision_autocast_fp16_ms']:.4f} ms, "
        f"ours fp16 {r['ours_fp16_ms']:.4f} ms ({r['speedup_fp16']:.1f}x), fp32 {r['ours_fp32_ms']:.4f} ms")
    log(f"batched NMS 5000 boxes: torchvision {n['torchvision_ms']:.4f} ms ({n['torchvision_kept']} kept), "
        f"ours {n['ours_ms']:.4f} ms ({n['ours_kept']} kept, {n['speedup']:.1f}x); "
        f"stopping at 1000 kept {n['ours_keep1000_ms']:.4f} ms")
    log(f"targets: {json.dumps(results['targets'])}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--workdir", required=True)
    pm = sub.add_parser("prepare-masks")
    pm.add_argument("--workdir", required=True)
    pv = sub.add_parser("prepare-v2")
    pv.add_argument("--workdir", required=True)
    pn = sub.add_parser("prepare-mnv3")
    pn.add_argument("--workdir", required=True)
    pb = sub.add_parser("bench")
    pb.add_argument("--workdir", required=True)
    pb.add_argument("--bench-bin", required=True)
    pb.add_argument("--json")
    pb.add_argument("--iters", type=int, default=200)
    pb.add_argument("--tv-iters", type=int, default=30)
    pb.add_argument("--micro-iters", type=int, default=200)
    pb.add_argument("--batch-iters", type=int, default=30)
    args = p.parse_args()
    if not torch.cuda.is_available() and args.cmd == "bench":
        print("SKIP: no CUDA device for torch")
        sys.exit(77)
    if args.cmd == "prepare":
        prepare(args)
    elif args.cmd == "prepare-masks":
        prepare_masks(args)
    elif args.cmd == "prepare-v2":
        prepare_v2(args)
    elif args.cmd == "prepare-mnv3":
        prepare_mnv3(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
