#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The CPU roi_align op, forward and backward, against torchvision.ops.roi_align.

vd_roi_align_forward and vd_roi_align_backward (engine/cpu/vd_cpu_ops.h) are
called through tests/engine/ops_module.c (ctypes) and compared with torch 1.13 /
torchvision 0.14.1 on the CPU:

1. Forward and gradient (torch.autograd through torchvision.ops.roi_align) on
   random maps and RoIs: several shapes (non-square bins, channel counts that
   are not multiples of the backward's 16-channel blocks), several images per
   batch (fractional batch indices truncated), aligned on and off,
   sampling_ratio 0, 1, 2 and -1, and RoIs covering the map, at its edges, with
   samples exactly on the border lines y = -1, y = H, x = -1, x = W and just
   beyond them, partly and fully outside the map, of zero and negative size,
   and much larger than the map. Bit for bit: the engine evaluates torchvision's
   float32 operations and adds every gradient contribution to a gradient
   element in torchvision's order (RoI, bin row, bin column, sample row, sample
   column, then the four neighbours), so the float32 sums are the same sums;
   there is no rounding difference to allow for.
2. torch.autograd.gradcheck on the engine's op wrapped as an autograd Function,
   the way torchvision's test_ops.py checks RoIAlign (a 1x8x5x5 map, its three
   RoIs, 2x2 bins, sampling_ratio 1, ten seeds), plus aligned=True, adaptive
   sampling, and two images with edge, outside, zero-size and negative RoIs.
   The engine's op is float32 only, so gradcheck runs in float32 with the
   step and tolerance derived in gradcheck_tolerance(). gradcheck also runs the
   backward twice and requires identical results (nondet_tol=0): the backward
   is deterministic.
3. Bad arguments fail with a message naming the cause.

Usage: roi_align_grad_vs_torchvision.py LIBVDOPS.so. Exit 77 (skip) without
torchvision.
"""
import ctypes
import math
import sys
import warnings

try:
    import numpy as np
    import torch
    from torchvision.ops import roi_align
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

from ops_common import check, failures, load_ops_module, ptr  # noqa: E402

lib = load_ops_module()
U = 2.0 ** -24  # unit roundoff of float32


def engine_call(fn, src, n_images, h, w, c, rois, scale, pooled, sampling, aligned, dst):
    message = ctypes.create_string_buffer(512)
    ok = fn(ptr(src), n_images, h, w, c, ptr(rois), len(rois), ctypes.c_float(scale),
            pooled[0], pooled[1], sampling, int(aligned), ptr(dst), message, len(message))
    return ok, message.value.decode()


def engine_forward(x_nchw, rois, pooled, scale, sampling, aligned):
    n, c, h, w = x_nchw.shape
    nhwc = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    out = np.full((len(rois), pooled[0], pooled[1], c), np.nan, np.float32)
    ok, msg = engine_call(lib.vdt_roi_align_forward, nhwc, n, h, w, c, rois, scale, pooled,
                          sampling, aligned, out)
    assert ok, msg
    return out.transpose(0, 3, 1, 2)


def engine_backward(grad_nchw, rois, shape, pooled, scale, sampling, aligned):
    n, c, h, w = shape
    g = np.ascontiguousarray(grad_nchw.transpose(0, 2, 3, 1))
    out = np.full((n, h, w, c), np.nan, np.float32)  # every element must be written
    ok, msg = engine_call(lib.vdt_roi_align_backward, g, n, h, w, c, rois, scale, pooled,
                          sampling, aligned, out)
    assert ok, msg
    return out.transpose(0, 3, 1, 2)


def make_rois(rng, n_random, n_images, h, w, scale):
    """Random RoIs in image pixels plus the edge and degenerate cases."""
    iw, ih = w / scale, h / scale  # the map's extent in image pixels
    x1 = rng.uniform(-0.2 * iw, 1.1 * iw, n_random)
    y1 = rng.uniform(-0.2 * ih, 1.1 * ih, n_random)
    bw = rng.uniform(0, 0.7 * iw, n_random)
    bh = rng.uniform(0, 0.7 * ih, n_random)
    boxes = [np.stack([x1, y1, x1 + bw, y1 + bh], 1)]
    p = 1 / scale  # one feature pixel
    special = [
        [0, 0, iw, ih],                            # the whole map
        [-p, -p, iw + p, ih + p],                  # one pixel beyond every edge
        [iw - 0.5 * p, ih - 0.5 * p, iw, ih],      # the bottom-right corner
        [-0.3 * iw, -0.2 * ih, 0.4 * iw, 0.5 * ih],  # partly outside (top left)
        [0.7 * iw, 0.6 * ih, 1.4 * iw, 1.3 * ih],  # partly outside (bottom right)
        [1.2 * iw, 0.1 * ih, 1.5 * iw, 0.5 * ih],  # fully outside, right
        [-0.9 * iw, -0.8 * ih, -0.3 * iw, -0.2 * ih],  # fully outside, top left
        [0.2 * iw, ih + 2 * p, 0.6 * iw, ih + 5 * p],  # fully outside, below
        [-3 * p, -2.5 * p, -1.2 * p, -1.1 * p],    # just beyond -1
        [0.3 * iw, 0.4 * ih, 0.3 * iw, 0.4 * ih],  # a point
        [0.5 * iw, 0.1 * ih, 0.5 * iw, 0.8 * ih],  # zero width
        [0.1 * iw, 0.5 * ih, 0.9 * iw, 0.5 * ih],  # zero height
        [0.8 * iw, 0.7 * ih, 0.2 * iw, 0.3 * ih],  # negative size
        [0.6 * iw, 0.2 * ih, 0.5 * iw, 0.9 * ih],  # negative width
        [-iw, -ih, 2 * iw, 2 * ih],                # three times the map
        [0.25 * p, 0.5 * p, 0.75 * p, 0.9 * p],    # smaller than a pixel
    ]
    boxes.append(np.array(special))
    boxes = np.concatenate(boxes)
    batch = rng.integers(0, n_images, len(boxes)).astype(np.float64)
    batch[::7] += 0.5  # truncated to the image index, as torchvision's int conversion
    return np.concatenate([batch[:, None], boxes], 1).astype(np.float32)


def border_rois():
    """Scale-1 RoIs whose single sample (1x1 bin, sampling_ratio 1, aligned
    False, 1-pixel extent) lies exactly at y or x = -1, H, W, or one float
    step beyond: the strict comparisons of the outside rule."""
    h, w = 7, 9
    rows = []
    for y in (-1.0, float(h), 3.0):
        for x in (-1.0, float(w), 4.0):
            rows.append([0, x - 0.5, y - 0.5, x + 0.5, y + 0.5])
    for y, x in ((np.nextafter(np.float32(-1), np.float32(-2)), 2.0),
                 (np.nextafter(np.float32(h), np.float32(h + 1)), 2.0),
                 (3.0, np.nextafter(np.float32(w), np.float32(w + 1)))):
        rows.append([0, float(x) - 0.5, float(y) - 0.5, float(x) + 0.5, float(y) + 0.5])
    return np.array(rows, np.float32), (1, 2, h, w)


def tv_forward_rejects(rois, pooled, scale, sampling, aligned):
    """RoIs torchvision's CPU forward cannot take: with aligned=True and adaptive
    sampling, a RoI whose extent is negative along exactly one axis gets a
    negative sample grid on that axis only, and the kernel's table of
    grid_h * grid_w * bins entries raises "cannot create std::vector larger
    than max_size()". Its loops would run no sample (torchvision's CUDA kernel
    returns 0 there), which is what the engine computes."""
    if not aligned or sampling > 0:
        return np.zeros(len(rois), bool)
    s, half = np.float32(scale), np.float32(0.5)
    x1, y1, x2, y2 = ((rois[:, i] * s) - half for i in range(1, 5))
    gh = np.ceil((y2 - y1) / np.float32(pooled[0]))
    gw = np.ceil((x2 - x1) / np.float32(pooled[1]))
    return gh * gw < 0


def compare(name, rng, shape, rois, pooled, scale, sampling, aligned):
    n, c, h, w = shape
    feat = rng.standard_normal(shape).astype(np.float32)
    grad = rng.standard_normal((len(rois), c) + pooled).astype(np.float32)
    rejected = tv_forward_rejects(rois, pooled, scale, sampling, aligned)
    x = torch.from_numpy(feat).requires_grad_(True)
    if not rejected.any():
        ref = roi_align(x, torch.from_numpy(rois), pooled, spatial_scale=scale,
                        sampling_ratio=sampling, aligned=aligned)
        ref.backward(torch.from_numpy(grad))
        ref_out, ref_grad = ref.detach().numpy(), x.grad.numpy()
    else:
        # the forward on the RoIs it takes, the others must be zero; the
        # gradient from the kernel autograd runs for roi_align's backward
        try:
            roi_align(x, torch.from_numpy(rois), pooled, spatial_scale=scale,
                      sampling_ratio=sampling, aligned=aligned)
            check(f"{name} torchvision rejects {np.count_nonzero(rejected)} RoIs", False,
                  "but it took them: tv_forward_rejects is wrong")
        except ValueError:
            pass
        ref_out = np.zeros((len(rois), c) + pooled, np.float32)
        ref_out[~rejected] = roi_align(x.detach(), torch.from_numpy(rois[~rejected]), pooled,
                                       spatial_scale=scale, sampling_ratio=sampling,
                                       aligned=aligned).numpy()
        ref_grad = torch.ops.torchvision._roi_align_backward(
            torch.from_numpy(grad), torch.from_numpy(rois), scale, pooled[0], pooled[1], n, c, h,
            w, sampling, aligned).numpy()
    out = engine_forward(feat, rois, pooled, scale, sampling, aligned)
    gi = engine_backward(grad, rois, shape, pooled, scale, sampling, aligned)
    same_out = np.array_equal(out, ref_out)
    same_grad = np.array_equal(gi, ref_grad)
    nonzero = np.count_nonzero(ref_grad)
    note = f" ({np.count_nonzero(rejected)} RoIs torchvision's forward rejects)" if rejected.any() else ""
    check(f"{name} forward", same_out, f"max |diff| {np.abs(out - ref_out).max():.3g}{note}")
    check(f"{name} backward", same_grad,
          f"max |diff| {np.abs(gi - ref_grad).max():.3g}, "
          f"{np.count_nonzero(gi != ref_grad)} of {gi.size} differ, {nonzero} non-zero")


def test_against_torchvision(rng):
    cases = [
        # (name, (N, C, H, W), pooled, spatial_scale, random RoIs)
        ("1x1x7x9 3x3", (1, 1, 7, 9), (3, 3), 1.0, 20),
        ("3x20x17x23 2x3", (3, 20, 17, 23), (2, 3), 0.5, 40),
        ("2x33x13x11 5x4", (2, 33, 13, 11), (5, 4), 0.25, 40),
        ("2x64x50x76 7x7", (2, 64, 50, 76), (7, 7), 1 / 16, 60),
    ]
    for name, shape, pooled, scale, n_random in cases:
        rois = make_rois(rng, n_random, shape[0], shape[2], shape[3], scale)
        for aligned in (False, True):
            for sampling in (0, 1, 2, -1):
                compare(f"{name} aligned={aligned} sampling_ratio={sampling}", rng, shape, rois,
                        pooled, scale, sampling, aligned)
    rois, shape = border_rois()
    for aligned in (False, True):
        compare(f"border samples aligned={aligned}", rng, shape, rois, (1, 1), 1.0, 1, aligned)


class EngineRoIAlign(torch.autograd.Function):
    """The engine's forward and backward as one differentiable function."""

    @staticmethod
    def forward(ctx, x, rois, pooled, scale, sampling, aligned):
        ctx.cfg = (rois, tuple(x.shape), pooled, scale, sampling, aligned)
        return torch.from_numpy(np.ascontiguousarray(
            engine_forward(x.detach().numpy(), rois, pooled, scale, sampling, aligned)))

    @staticmethod
    def backward(ctx, grad):
        rois, shape, pooled, scale, sampling, aligned = ctx.cfg
        gi = engine_backward(grad.detach().contiguous().numpy(), rois, shape, pooled, scale,
                             sampling, aligned)
        return torch.from_numpy(np.ascontiguousarray(gi)), None, None, None, None, None


GRADCHECK_EPS = 2.0 ** -3  # a power of two: x +- eps and the division by 2 eps are exact or
                           # rounded once


def gradcheck_tolerance(rois, pooled, scale, sampling, aligned, max_value):
    """Absolute tolerance between gradcheck's two float32 Jacobians.

    The op is linear, so central differences have no truncation error; what
    is left is float32 rounding. With S the most samples in one bin and M the
    largest |input| after the step (max_value + eps):
    - each forward output, ((sum over S samples of a four-term blend) / S), is
      off by at most (S + 5) u M (4 for the blend, S - 1 for the sum, 1 for
      the division); the difference of two of them, divided by 2 eps, by
      (S + 5) u M / eps; the subtraction of the two outputs adds u M / eps and
      rounding x +- eps at most 2 u M / (2 eps) more;
    - the analytical Jacobian sums at most 4 S shares (1 * w) / S per element,
      each rounded twice: (4 S + 2) u, the entries being at most 1.
    """
    s = 1
    for roi in rois:
        if sampling > 0:
            grid = sampling * sampling
        else:
            offset = 0.5 if aligned else 0.0
            x1, y1, x2, y2 = (float(v) * scale - offset for v in roi[1:])
            rw, rh = x2 - x1, y2 - y1
            if not aligned:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            grid = max(math.ceil(rh / pooled[0]), 0) * max(math.ceil(rw / pooled[1]), 0)
        s = max(s, grid)
    m = max_value + GRADCHECK_EPS
    return (s + 7) * U * m / GRADCHECK_EPS + (4 * s + 2) * U


def run_gradcheck(name, x, rois, pooled, scale, sampling, aligned):
    atol = gradcheck_tolerance(rois, pooled, scale, sampling, aligned, float(x.abs().max()))

    def fn(z):
        return EngineRoIAlign.apply(z, rois, pooled, scale, sampling, aligned)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not a double precision" input: on purpose
            ok = torch.autograd.gradcheck(fn, (x,), eps=GRADCHECK_EPS, atol=atol, rtol=0.0,
                                          nondet_tol=0.0)
        detail = f"atol {atol:.3g}"
    except Exception as e:  # gradcheck raises on a mismatch
        ok, detail = False, str(e).splitlines()[0] + f" (atol {atol:.3g})"
    check(f"gradcheck {name}", ok, detail)


def test_gradcheck():
    # torchvision's test_ops.py RoIAlign.test_backward setting
    tv_rois = np.array([[0, 0, 0, 4, 4], [0, 0, 2, 3, 4], [0, 2, 2, 4, 4]], np.float32)
    for seed in range(10):
        torch.random.manual_seed(seed)
        x = torch.rand(1, 8, 5, 5, dtype=torch.float32, requires_grad=True)
        run_gradcheck(f"test_ops setting seed {seed}", x, tv_rois, (2, 2), 1.0, 1, False)
    edge_rois = np.array([
        [1, -2, -1.5, 2, 6],      # partly outside, top left
        [0, 3.5, 3.5, 7, 7],      # partly outside, bottom right
        [1, -6, -6, -2, -2],      # fully outside: no gradient
        [0, 4, 1, 4, 3],          # zero width
        [1, 3, 3, 1, 1],          # negative size
        [0, 4.5, 4.5, 5.5, 5.5],  # samples beyond the last row and column
        [1.5, 0, 0, 5, 5],        # the whole map of image 1 (batch index truncated)
    ], np.float32)
    for seed in range(3):
        torch.random.manual_seed(100 + seed)
        x = torch.rand(1, 8, 5, 5, dtype=torch.float32, requires_grad=True)
        run_gradcheck(f"test_ops RoIs aligned sampling_ratio=1 seed {seed}", x, tv_rois, (2, 2),
                      1.0, 1, True)
        run_gradcheck(f"test_ops RoIs adaptive seed {seed}", x, tv_rois, (2, 2), 1.0, 0, False)
        x2 = torch.rand(2, 3, 5, 6, dtype=torch.float32, requires_grad=True)
        for aligned in (False, True):
            for sampling in (0, 2):
                run_gradcheck(f"edge RoIs 2 images aligned={aligned} sampling_ratio={sampling} "
                              f"seed {seed}", x2, edge_rois, (2, 3), 1.0, sampling, aligned)


def test_errors():
    feat = np.zeros((2, 4, 4, 3), np.float32)
    dst = np.zeros((1, 2, 2, 3), np.float32)
    gi = np.zeros((2, 4, 4, 3), np.float32)
    for batch, reason in ((2.0, "batch index 2"), (-1.0, "batch index -1"),
                          (float("nan"), "batch index nan")):
        rois = np.array([[0, 0, 0, 2, 2], [batch, 0, 0, 2, 2]], np.float32)
        ok_f, msg_f = engine_call(lib.vdt_roi_align_forward, feat, 2, 4, 4, 3, rois, 1.0,
                                  (2, 2), 0, False, dst)
        ok_b, msg_b = engine_call(lib.vdt_roi_align_backward, dst, 2, 4, 4, 3, rois, 1.0,
                                  (2, 2), 0, False, gi)
        check(f"error: {reason}", not ok_f and not ok_b and "RoI 1" in msg_f and
              reason in msg_f and reason in msg_b, f"'{msg_f}' / '{msg_b}'")
    rois = np.array([[0, 0, 0, 2, 2]], np.float32)
    ok, msg = engine_call(lib.vdt_roi_align_backward, dst, 2, 4, 4, 0, rois, 1.0, (2, 2), 0,
                          False, gi)
    check("error: zero channels", not ok and "0 channels" in msg, f"'{msg}'")


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(20240612)
    test_against_torchvision(rng)
    test_gradcheck()
    test_errors()
    if failures:
        print(f"FAILED ({len(failures)}):", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
