#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Train visiondetect's bundled demo model: a small torchvision Faster R-CNN (ResNet-18
FPN) that detects synthetic shapes (ball, box, triangle, ring).

Scenes are generated on the fly (numpy + PIL), deterministically from (seed, index):
random colours, sizes, rotations and positions, 1-8 objects per image, partly
overlapping, over varied backgrounds (flat colours, gradients, noise, checkers, colour
bars, smooth photo-like textures), plus scenes drawn exactly like GStreamer's
`videotestsrc pattern=ball` (a radius-20 aliased disc, black or coloured background,
white or coloured ball, at common frame sizes).

The architecture is one the engine supports and the exporter writes
(tools/export_torchvision.py):
  ResNet-18 body up to layer3 (layer4 dropped), trainable batch norm (folded at load),
  FPN 64 channels on layer1..layer3 + max-pool level (strides 4, 8, 16, 32),
  anchors 2 sizes x 3 ratios per level, RoIAlign 7x7 on the first three levels,
  TwoMLPHead 256, 5 classes (background + 4 shapes), min/max size 256/464.

Usage (Debian's interpreter, which has torch and torchvision; CPU):

    nice -n 5 /usr/bin/python3 tools/train_demo.py --minutes 80 --out-dir /tmp/train \\
        --export models/visiondetect-shapes.safetensors

    # bit-reproducible run (same seed, same iteration count, same thread count):
    /usr/bin/python3 tools/train_demo.py --seed 1 --iters 3000 --out-dir /tmp/train

With --iters the learning-rate schedule follows the iteration count (deterministic);
with --minutes only it follows the elapsed time and stops when the budget is spent
(the iteration count reached is printed, pass it to --iters to reproduce the run).
A checkpoint (out-dir/checkpoint.pt) is written every --checkpoint-minutes and at the
end; --resume continues from it.

The scene generator (make_scene, CLASS_NAMES) and the model builder (build_model) are
imported by tools/eval_demo.py and the tests.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

CLASS_NAMES = ["__background__", "ball", "box", "triangle", "ring"]

# Streams of the scene generator: training scenes and held-out scenes never share a key.
# STREAM_EVAL scenes are drawn as before distractors existed (the held-out mAP stays
# comparable); STREAM_DISTRACT holds held-out frames without any shape (distractors
# only, and videotestsrc's sweep motions), on which nothing should be detected.
STREAM_TRAIN = 0
STREAM_EVAL = 1
STREAM_DISTRACT = 2
# Training-side frames without shapes, drawn like STREAM_DISTRACT's, from which
# tools/eval_demo.py --mine picks the ones a model answers (hard negatives).
STREAM_MINE = 3
# Text drawn over videotestsrc pattern frames by key (pattern_text_frame()): the
# candidates tools/eval_demo.py --mine-videotestsrc --mine-text draws, and the training
# side's copies of the ones it picked.
STREAM_PATTERN_TEXT = 4

# Share of training scenes with nothing but distractors (--empty-share).
EMPTY_SHARE = 0.04

# Share of the other shape scenes drawn over distractors (--distract-share).
DISTRACT_SHARE = 0.4

# Mined hard negatives (--hard-negatives: eval_demo.py --mine's JSON files, their
# (seed, index) pairs in the order given) and the share of training scenes drawn from
# them (--hard-share). None: no such scenes, and make_scene draws exactly the random
# numbers it drew before the option existed.
HARD_NEGATIVES = None
HARD_SHARE = 0.0

# Share of the training scenes drawn over distractors (the empty ones and those of
# --distract-share) that also get one of the training-only kinds of
# add_more_distractors() (--more-distractors): TrueType text and thin outline figures.
# 0: none, and make_scene draws exactly the random numbers it drew before the option
# existed. The held-out and mined frames (distractor_scene) never get them.
MORE_SHARE = 0.0

# Share of the training shape scenes with occluders (--occluders): 1-2 flat bands
# across the frame drawn over the shapes, through one of them, like a pillar or a pole
# in front of a camera. The shapes keep their whole boxes (as where they overlap each
# other); one left with less than a quarter of its area visible is dropped from the
# ground truth. 0: none, and make_scene draws exactly the random numbers it drew before
# the option existed.
OCCLUDE_SHARE = 0.0

# Frames of GStreamer's own videotestsrc patterns other than ball
# (tools/capture_videotestsrc.py; --videotestsrc-frames DIR or a file of the frames a
# model answers, tools/eval_demo.py --mine-videotestsrc): per source given, {pattern:
# [PNG paths]}; and the share of training scenes drawn from them (--pattern-share): a
# source chosen uniformly (where there are several), a pattern of it uniformly, then
# one of its frames. None: no such scenes, and make_scene draws exactly the random
# numbers it drew before the option existed.
PATTERN_FRAMES = None
PATTERN_SHARE = 0.0
# The share of those pattern frames that get lines of text over them as overlays draw
# them (--pattern-text; add_overlay_text()). 0: none, and no random number is drawn for it.
PATTERN_TEXT_SHARE = 0.0

# The TrueType fonts of add_more_distractors(): Debian's fonts-dejavu-core (and -extra
# where installed), which Pango and Cairo pull in.
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_FILES = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
              "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansCondensed-Bold.ttf",
              "DejaVuSerifCondensed.ttf"]

# Frame sizes of the videotestsrc-like scenes.
VTS_SIZES = [(320, 240), (640, 480), (352, 288), (480, 360), (800, 600), (720, 576),
             (640, 360), (1280, 720), (400, 300), (512, 384)]

SMPTE = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191),
         (191, 0, 0), (0, 0, 191)]


# ---------------------------------------------------------------------------------------
# Scene generation
# ---------------------------------------------------------------------------------------

def _rand_colour(rng):
    return rng.integers(0, 256, size=3).astype(np.float32)


def _smooth_noise(rng, w, h, cell, channels=3):
    """Smooth random field in [0, 255]: low-resolution noise upsampled bicubically."""
    lw, lh = max(2, w // cell + 2), max(2, h // cell + 2)
    low = rng.integers(0, 256, size=(lh, lw, channels)).astype(np.uint8)
    img = Image.fromarray(low if channels == 3 else low[:, :, 0])
    img = img.resize((lw * cell, lh * cell), Image.BICUBIC)
    arr = np.asarray(img, dtype=np.float32)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return arr[:h, :w]


def make_background(rng, w, h):
    kind = rng.choice(["flat", "gradient", "noise", "checkers", "bars", "texture", "black"],
                      p=[0.16, 0.18, 0.12, 0.12, 0.10, 0.24, 0.08])
    if kind == "flat":
        bg = np.broadcast_to(_rand_colour(rng), (h, w, 3)).copy()
    elif kind == "black":
        bg = np.zeros((h, w, 3), np.float32)
    elif kind == "gradient":
        c0, c1 = _rand_colour(rng), _rand_colour(rng)
        a = rng.uniform(0, 2 * math.pi)
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        t = xs * math.cos(a) + ys * math.sin(a)
        t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
        bg = c0 + (c1 - c0) * t[:, :, None]
    elif kind == "noise":
        base = _rand_colour(rng)
        bg = base + rng.normal(0, rng.uniform(5, 40), size=(h, w, 3)).astype(np.float32)
    elif kind == "checkers":
        cell = int(rng.integers(6, 64))
        c0, c1 = _rand_colour(rng), _rand_colour(rng)
        ys, xs = np.mgrid[0:h, 0:w]
        m = ((xs // cell + ys // cell) % 2).astype(np.float32)[:, :, None]
        bg = c0 * (1 - m) + c1 * m
    elif kind == "bars":
        n = int(rng.integers(4, 9))
        cols = SMPTE if rng.random() < 0.5 else [tuple(_rand_colour(rng)) for _ in range(n)]
        n = len(cols)
        xs = (np.arange(w) * n // w)
        bg = np.asarray(cols, np.float32)[xs][None, :, :].repeat(h, axis=0)
        if rng.random() < 0.5:
            bg = np.asarray(cols, np.float32)[(np.arange(h) * n // h)][:, None, :].repeat(w, axis=1)
    else:  # texture: smooth multi-octave colour noise, like a blurred photo
        bg = np.zeros((h, w, 3), np.float32)
        total = 0.0
        for cell, weight in ((int(rng.integers(48, 160)), 1.0), (int(rng.integers(12, 48)), 0.5),
                             (int(rng.integers(3, 12)), 0.2 * rng.random())):
            bg += weight * _smooth_noise(rng, w, h, cell)
            total += weight
        bg /= total
        # stretch the contrast a little (averaging octaves flattens it)
        mean = bg.mean(axis=(0, 1), keepdims=True)
        bg = mean + (bg - mean) * rng.uniform(1.0, 2.5)
    if rng.random() < 0.2:
        bg = bg + rng.normal(0, rng.uniform(2, 12), size=bg.shape).astype(np.float32)
    return np.clip(bg, 0, 255)


def _shape_mask(rng, cls, w, h, size, cx, cy, ss):
    """Alpha mask (float32 HxW in [0,1]) of one shape drawn with supersampling factor ss."""
    W, H = w * ss, h * ss
    img = Image.new("L", (W, H), 0)
    d = ImageDraw.Draw(img)
    X, Y, S = cx * ss, cy * ss, size * ss
    if cls == 1:  # ball: disc
        r = S / 2
        d.ellipse([X - r, Y - r, X + r, Y + r], fill=255)
    elif cls == 2:  # box: square or rectangle, rotated
        aspect = 1.0 if rng.random() < 0.4 else rng.uniform(1.2, 2.5)
        a, b = S / math.sqrt(aspect), S * math.sqrt(aspect) * 0.8
        th = rng.uniform(0, math.pi / 2) if rng.random() < 0.7 else 0.0
        c, s = math.cos(th), math.sin(th)
        pts = [(X + (dx * c - dy * s), Y + (dx * s + dy * c))
               for dx, dy in ((-b / 2, -a / 2), (b / 2, -a / 2), (b / 2, a / 2), (-b / 2, a / 2))]
        d.polygon(pts, fill=255)
    elif cls == 3:  # triangle: random, not too thin
        th0 = rng.uniform(0, 2 * math.pi)
        angles = [th0, th0 + math.radians(120 + rng.uniform(-30, 30)),
                  th0 + math.radians(240 + rng.uniform(-30, 30))]
        r = S / 2 * 1.1
        pts = [(X + r * rng.uniform(0.8, 1.0) * math.cos(t), Y + r * rng.uniform(0.8, 1.0) * math.sin(t))
               for t in angles]
        d.polygon(pts, fill=255)
    else:  # ring: annulus
        r = S / 2
        ri = r * rng.uniform(0.45, 0.78)
        d.ellipse([X - r, Y - r, X + r, Y + r], fill=255)
        d.ellipse([X - ri, Y - ri, X + ri, Y + ri], fill=0)
    if ss > 1:
        img = img.reduce(ss)
    return np.asarray(img, dtype=np.float32) / 255.0


def _mask_box(mask):
    ys = np.nonzero(mask.max(axis=1) >= 0.5)[0]
    xs = np.nonzero(mask.max(axis=0) >= 0.5)[0]
    if len(xs) == 0 or len(ys) == 0:
        return None
    return [float(xs[0]), float(ys[0]), float(xs[-1] + 1), float(ys[-1] + 1)]


def _box_iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / ua if ua > 0 else 0.0


def _pick_colour(rng, img, mask):
    """An object colour that stands out from what lies under the mask."""
    sel = mask >= 0.5
    under = img[sel].mean(axis=0) if sel.any() else img.reshape(-1, 3).mean(axis=0)
    best, best_d = None, -1.0
    for _ in range(12):
        c = _rand_colour(rng)
        if rng.random() < 0.15:  # saturated primaries and white/black are common in video
            c = np.asarray([(0, 0, 0), (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255),
                            (255, 255, 0)][int(rng.integers(0, 6))], np.float32)
        dist = float(np.linalg.norm(c - under))
        if dist > best_d:
            best, best_d = c, dist
        if dist >= 110:
            break
    return best


def _contrasting(rng, img):
    """A colour that stands out from the mean of @img, or a random one."""
    if rng.random() < 0.5:
        return _pick_colour(rng, img, np.ones(img.shape[:2], np.float32))
    return _rand_colour(rng)


def _draw_on(img, draw_fn):
    """Runs draw_fn(ImageDraw, colour_index) on an 'L' coverage mask and returns it
    (float32 HxW in [0, 1])."""
    h, w = img.shape[:2]
    cov = Image.new("L", (w, h), 0)
    draw_fn(ImageDraw.Draw(cov))
    return np.asarray(cov, np.float32) / 255.0


def _line_through(rng, w, h):
    """End points of a straight line across the whole frame: axis-aligned (as guide
    lines and borders usually are) or at any angle."""
    if rng.random() < 0.6:
        if rng.random() < 0.5:
            y = rng.uniform(0, h)
            return (-1.0, y, w + 1.0, y)
        x = rng.uniform(0, w)
        return (x, -1.0, x, h + 1.0)
    a = rng.uniform(0, math.pi)
    cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), float(w + h)
    return (cx - r * math.cos(a), cy - r * math.sin(a), cx + r * math.cos(a), cy + r * math.sin(a))


def add_distractors(rng, img):
    """Draws things that are not shapes over @img (float32 HxWx3, in place): thin
    straight lines across the frame, crosshairs, grids, line segments and text. They
    are what the model saw nothing of and answered with large 'box' detections
    (videotestsrc's sweep motions draw guide lines through the frame)."""
    h, w = img.shape[:2]
    for _ in range(int(rng.integers(1, 3))):
        kind = rng.choice(["lines", "crosshair", "grid", "segments", "text"],
                          p=[0.3, 0.15, 0.2, 0.15, 0.2])
        colour = _contrasting(rng, img)
        width = int(rng.choice([1, 1, 1, 2, 3]))
        if kind == "lines":
            n = int(rng.integers(1, 7))
            cov = _draw_on(img, lambda d: [d.line(_line_through(rng, w, h), fill=255, width=width)
                                           for _ in range(n)])
        elif kind == "crosshair":
            pts = [(rng.uniform(0, w), rng.uniform(0, h)) for _ in range(int(rng.integers(1, 3)))]
            if rng.random() < 0.5:
                pts[0] = (w / 2, h / 2)
            cov = _draw_on(img, lambda d: [(d.line((-1, y, w + 1, y), fill=255, width=width),
                                            d.line((x, -1, x, h + 1), fill=255, width=width))
                                           for x, y in pts])
        elif kind == "grid":
            step = int(rng.integers(16, max(17, min(w, h) // 2)))
            ox, oy = int(rng.integers(0, step)), int(rng.integers(0, step))

            def grid(d):
                for x in range(ox, w, step):
                    d.line((x, 0, x, h), fill=255, width=width)
                for y in range(oy, h, step):
                    d.line((0, y, w, y), fill=255, width=width)
            cov = _draw_on(img, grid)
        elif kind == "segments":
            n = int(rng.integers(2, 12))

            def segments(d):
                for _ in range(n):
                    x, y = rng.uniform(0, w), rng.uniform(0, h)
                    a, length = rng.uniform(0, 2 * math.pi), rng.uniform(0.1, 0.6) * min(w, h)
                    d.line((x, y, x + length * math.cos(a), y + length * math.sin(a)), fill=255,
                           width=width)
            cov = _draw_on(img, segments)
        else:  # text: PIL's bitmap font, scaled up, a few words anywhere
            cov = np.zeros((h, w), np.float32)
            for _ in range(int(rng.integers(1, 5))):
                n_chars = int(rng.integers(3, 16))
                chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 :-./"
                text = "".join(chars[int(i)] for i in rng.integers(0, len(chars), n_chars))
                small = Image.new("L", (6 * n_chars + 4, 14), 0)
                ImageDraw.Draw(small).text((2, 1), text, fill=255)
                scale = rng.uniform(1.0, 4.0)
                tw, th = int(small.width * scale), int(small.height * scale)
                if tw >= w or th >= h:
                    continue
                big = np.asarray(small.resize((tw, th), Image.BILINEAR), np.float32) / 255.0
                x, y = int(rng.integers(0, w - tw)), int(rng.integers(0, h - th))
                cov[y:y + th, x:x + tw] = np.maximum(cov[y:y + th, x:x + tw], big)
        img *= 1 - cov[:, :, None]
        img += colour * cov[:, :, None]
    return img


def _fonts():
    """The fonts of FONT_FILES that are installed (at least DejaVuSans.ttf)."""
    paths = [os.path.join(FONT_DIR, f) for f in FONT_FILES if os.path.exists(os.path.join(FONT_DIR, f))]
    if not paths:
        raise RuntimeError(f"--more-distractors needs the DejaVu fonts in {FONT_DIR} "
                           "(Debian's fonts-dejavu-core)")
    return paths


def _overlay_text(rng):
    """A string like those video overlays carry: a date and time, a running time, a
    caption, or a few round and pointed glyphs (O, 0, Q, A, V, 7, ...)."""
    r = rng.random()
    if r < 0.4:
        y, mo, d = int(rng.integers(1990, 2040)), int(rng.integers(1, 13)), int(rng.integers(1, 29))
        hh, mm, ss = int(rng.integers(0, 24)), int(rng.integers(0, 60)), int(rng.integers(0, 60))
        return [f"{y}-{mo:02d}-{d:02d} {hh:02d}:{mm:02d}:{ss:02d}", f"{hh:02d}:{mm:02d}:{ss:02d}",
                f"{hh}:{mm:02d}:{ss:02d}.{int(rng.integers(0, 1000)):03d}", f"{d:02d}/{mo:02d}/{y}",
                f"{y}-{mo:02d}-{d:02d}"][int(rng.integers(0, 5))]
    pool = ("O0QDCGUoaeAV7YTv48B96" if r < 0.7 else
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 :-./%")
    n_chars = int(rng.choice([1, 1, 2, 3, 4, 6, 8, 12]))
    return "".join(pool[int(i)] for i in rng.integers(0, len(pool), n_chars)).strip() or "O"


def _text_item(rng, img, fonts):
    """Draws one line of text over @img (float32 HxWx3, in place) in a TrueType font,
    the way overlays draw it: plain, or with an outline (stroke) and a drop shadow."""
    from PIL import ImageFont
    h, w = img.shape[:2]
    text = _overlay_text(rng)
    # up to 60 % of the frame's short side (overlays that scale with the frame draw
    # glyphs a quarter of its height and more), smaller where the line would not fit
    size = int(np.exp(rng.uniform(math.log(10), math.log(max(11, 0.6 * min(w, h))))))
    font_file = fonts[int(rng.integers(0, len(fonts)))]
    font = ImageFont.truetype(font_file, size)
    fill = (255.0, 255.0, 255.0) if rng.random() < 0.4 else tuple(_contrasting(rng, img))
    stroke = int(rng.integers(1, max(2, size // 10 + 1))) if rng.random() < 0.5 else 0
    edge = (0.0, 0.0, 0.0) if rng.random() < 0.6 else tuple(_rand_colour(rng))
    shadow = int(rng.integers(1, max(2, size // 16 + 2))) if rng.random() < 0.4 else 0
    x0, y0, x1, y1 = font.getbbox(text, stroke_width=stroke)
    fit = min(1.0, (w - 12 - shadow) / max(1, x1 + 4 + shadow), (h - 12 - shadow) / max(1, y1 + 4 + shadow))
    if fit < 1.0:
        size = max(6, int(size * fit))
        stroke = min(stroke, max(1, size // 10)) if stroke else 0
        font = ImageFont.truetype(font_file, size)
        x0, y0, x1, y1 = font.getbbox(text, stroke_width=stroke)
    layer = Image.new("RGBA", (x1 + 4 + shadow, y1 + 4 + shadow), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    as_int = lambda c, a=255: tuple(int(v) for v in c) + (a,)  # noqa: E731
    if shadow:
        d.text((2 + shadow, 2 + shadow), text, font=font, fill=as_int((0, 0, 0), 200),
               stroke_width=stroke, stroke_fill=as_int((0, 0, 0), 200))
    d.text((2, 2), text, font=font, fill=as_int(fill), stroke_width=stroke, stroke_fill=as_int(edge))
    if rng.random() < 0.2:
        layer = layer.rotate(rng.uniform(-30, 30), resample=Image.BILINEAR, expand=True)
    arr = np.asarray(layer, np.float32)
    th, tw = arr.shape[:2]
    if tw >= w or th >= h:
        return
    x, y = int(rng.integers(0, w - tw)), int(rng.integers(0, h - th))
    alpha = arr[:, :, 3:] / 255.0
    region = img[y:y + th, x:x + tw]
    region *= 1 - alpha
    region += arr[:, :, :3] * alpha


def add_overlay_text(rng, img):
    """Draws 1-4 lines of text (_text_item()) over @img (float32 HxWx3, in place)."""
    fonts = _fonts()
    for _ in range(int(rng.integers(1, 5))):
        _text_item(rng, img, fonts)
    return img


def pattern_text_frame(img, seed, index, k):
    """Text candidate @k of videotestsrc frame @index (uint8 HxWx3): add_overlay_text()
    with the random numbers of key (@seed, STREAM_PATTERN_TEXT, @index, @k) over a copy
    of @img. Returns uint8 HxWx3."""
    rng = np.random.default_rng([int(seed), STREAM_PATTERN_TEXT, int(index), int(k)])
    out = add_overlay_text(rng, img.astype(np.float32))
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def add_more_distractors(rng, img):
    """Draws one of the training-only distractor kinds over @img (float32 HxWx3, in
    place): lines of text in TrueType fonts as video overlays draw them (dates and
    times, captions, round and pointed glyphs such as O, 0, Q, A, V, 7; plain, outlined
    or shadowed: letters, not shapes), or thin outline figures (triangles, rectangles,
    circles and polylines drawn with lines of 1-3 pixels, at least 24 line widths
    across, so that a circle's inner radius is over 91 % of its outer, thinner than
    any ring's 78 %)."""
    h, w = img.shape[:2]
    if rng.random() < 0.7:
        return add_overlay_text(rng, img)
    colour = _contrasting(rng, img)
    n = int(rng.integers(1, 5))
    width = int(rng.choice([1, 1, 2, 3]))

    def outlines(d):
        for _ in range(n):
            kind = rng.choice(["triangle", "rectangle", "circle", "polyline"])
            size = rng.uniform(max(16.0, 24.0 * width), 0.8 * min(w, h))
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            if kind == "circle":
                r = size / 2
                ry = r * (rng.uniform(0.7, 1.0) if rng.random() < 0.3 else 1.0)
                d.ellipse([cx - r, cy - ry, cx + r, cy + ry], outline=255, width=width)
                continue
            k = {"triangle": 3, "rectangle": 4}.get(kind, int(rng.integers(3, 7)))
            th0 = rng.uniform(0, 2 * math.pi)
            if kind == "rectangle":
                angles = [th0, th0 + math.pi - rng.uniform(0.6, 2.5)]
                angles += [angles[0] + math.pi, angles[1] + math.pi]
                radii = [size / 2] * 4
            else:
                angles = sorted(th0 + rng.uniform(0, 2 * math.pi, k))
                radii = size / 2 * rng.uniform(0.5, 1.0, k)
            pts = [(cx + r * math.cos(a), cy + r * math.sin(a)) for a, r in zip(angles, radii)]
            if kind != "polyline":
                pts.append(pts[0])
            d.line(pts, fill=255, width=width, joint="curve")
    cov = _draw_on(img, outlines)
    img *= 1 - cov[:, :, None]
    img += colour * cov[:, :, None]
    return img


def add_occluders(rng, img, masks, boxes, labels, areas):
    """--occluders: 1-2 flat bands (vertical 3 times in 4, else horizontal; 4-90 pixels
    wide; grey half the time, else any colour) across @img (float32 HxWx3) over the
    shapes, the first through a point of a random shape so that it cuts it. The shapes
    keep their boxes; those with less than a quarter of their area left visible are
    dropped. Returns (img, boxes, labels)."""
    h, w = img.shape[:2]
    for k in range(int(rng.choice([1, 1, 1, 2]))):
        vertical = rng.random() < 0.75
        width = int(np.exp(rng.uniform(math.log(4), math.log(90))))
        if k == 0:
            x0, y0, x1, y1 = boxes[int(rng.integers(0, len(boxes)))]
            centre = rng.uniform(x0, x1) if vertical else rng.uniform(y0, y1)
        else:
            centre = rng.uniform(0, w if vertical else h)
        lo = int(max(0, round(centre - width / 2)))
        hi = int(min(w if vertical else h, lo + width))
        if hi <= lo:
            continue
        colour = (np.full(3, rng.uniform(60, 200), np.float32) if rng.random() < 0.5
                  else _rand_colour(rng))
        band = np.zeros((h, w), np.float32)
        if vertical:
            band[:, lo:hi] = 1.0
        else:
            band[lo:hi, :] = 1.0
        img = img * (1 - band[:, :, None]) + colour[None, None, :] * band[:, :, None]
        masks = [m * (1 - band) for m in masks]
    keep = [i for i, m in enumerate(masks) if float((m >= 0.5).sum()) >= 0.25 * areas[i]]
    return img, [boxes[i] for i in keep], [labels[i] for i in keep]


def videotestsrc_sweep(rng):
    """A frame like videotestsrc pattern=ball motion=sweep or hsweep: a large disc
    (radius a quarter of the frame height) and one-pixel lines across the frame
    through its centre and through the frame's centre. Returns (uint8 HxWx3, [box],
    [label])."""
    w, h = VTS_SIZES[int(rng.integers(0, len(VTS_SIZES)))]
    radius = h // 4 if rng.random() < 0.7 else int(rng.integers(10, max(11, h // 3)))
    fg = (255, 255, 255) if rng.random() < 0.5 else tuple(int(v) for v in _rand_colour(rng))
    bg = (0, 0, 0) if rng.random() < 0.7 else tuple(int(v) for v in _rand_colour(rng))
    if np.linalg.norm(np.subtract(fg, bg)) < 100:
        bg = (0, 0, 0) if sum(fg) > 300 else (255, 255, 255)
    a = rng.uniform(0, 2 * math.pi)
    x = w / 2 + (h / 4) * math.cos(a)
    y = h / 2 + (h / 4) * math.sin(a)
    x = min(max(x, radius), w - radius)
    y = min(max(y, radius), h - radius)
    img, boxes, labels = draw_ball_frame(w, h, x, y, radius, fg, bg)
    img[int(h // 2), :] = fg
    img[:, int(w // 2)] = fg
    img[int(y), :] = fg
    img[:, int(x)] = fg
    return img, boxes, labels


def distractor_scene(seed, index, stream=STREAM_DISTRACT):
    """Frame number @index without any shape: a background with distractors, or
    videotestsrc's sweep lines without the ball. STREAM_DISTRACT: held-out frames;
    STREAM_MINE: training-side candidates for hard-negative mining. Returns uint8
    HxWx3."""
    rng = np.random.default_rng([int(seed), int(stream), int(index)])
    if rng.random() < 0.2:
        w, h = VTS_SIZES[int(rng.integers(0, len(VTS_SIZES)))]
        fg = (255, 255, 255) if rng.random() < 0.5 else tuple(int(v) for v in _rand_colour(rng))
        img = np.zeros((h, w, 3), np.uint8)
        for x, y in ((w / 2, h / 2), (rng.uniform(0, w), rng.uniform(0, h))):
            img[int(y), :] = fg
            img[:, int(x)] = fg
        return img
    short = int(rng.integers(200, 420))
    long_ = int(short * rng.uniform(1.0, 1.8))
    w, h = (long_, short) if rng.random() < 0.75 else (short, long_)
    img = add_distractors(rng, make_background(rng, w, h))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def videotestsrc_ball(rng, w=None, h=None, radius=20, fg=None, bg=None):
    """A frame like videotestsrc pattern=ball: an aliased disc drawn row by row exactly as
    gst_video_test_src_ball() does. Returns (uint8 HxWx3, [box], [label])."""
    if w is None:
        w, h = VTS_SIZES[int(rng.integers(0, len(VTS_SIZES)))]
    if fg is None:
        fg = (255, 255, 255) if rng.random() < 0.5 else tuple(int(v) for v in _rand_colour(rng))
    if bg is None:
        bg = (0, 0, 0) if rng.random() < 0.7 else tuple(int(v) for v in _rand_colour(rng))
        if np.linalg.norm(np.subtract(fg, bg)) < 100:
            bg = (0, 0, 0) if sum(fg) > 300 else (255, 255, 255)
    t = rng.uniform(0, 10000)
    x = radius + (0.5 + 0.5 * math.sin(2 * math.pi * t / 200)) * (w - 2 * radius)
    y = radius + (0.5 + 0.5 * math.sin(2 * math.pi * math.sqrt(2) * t / 200)) * (h - 2 * radius)
    return draw_ball_frame(w, h, x, y, radius, fg, bg)


def draw_ball_frame(w, h, x, y, radius, fg, bg):
    img = np.empty((h, w, 3), np.uint8)
    img[:] = np.asarray(bg, np.uint8)
    x0 = y0 = None
    x1 = y1 = None
    for i in range(h):
        if i < y - radius or i > y + radius:
            continue
        r = int(np.rint(math.sqrt(max(0.0, radius * radius - (i - y) * (i - y)))))
        a = max(0, int(x - r))
        b = min(w, int(x + r + 1))
        if b > a:
            img[i, a:b] = np.asarray(fg, np.uint8)
            x0 = a if x0 is None else min(x0, a)
            x1 = b if x1 is None else max(x1, b)
            y0 = i if y0 is None else y0
            y1 = i + 1
    return img, [[float(x0), float(y0), float(x1), float(y1)]], [1]


def make_scene(seed, index, stream=STREAM_TRAIN):
    """Scene number @index of the stream (@seed, @stream): (uint8 HxWx3, boxes Nx4 float32
    [x1, y1, x2, y2] in pixels, labels N int64)."""
    rng = np.random.default_rng([int(seed), int(stream), int(index)])
    if stream == STREAM_TRAIN and HARD_NEGATIVES and rng.random() < HARD_SHARE:
        # a mined frame without shapes that a model answered, mirrored half the time
        mined_seed, mined_index = HARD_NEGATIVES[int(rng.integers(0, len(HARD_NEGATIVES)))]
        img = distractor_scene(mined_seed, mined_index, STREAM_MINE)
        if rng.random() < 0.5:
            img = np.ascontiguousarray(img[:, ::-1])
        return img, np.zeros((0, 4), np.float32), np.zeros((0,), np.int64)
    if stream == STREAM_TRAIN and PATTERN_FRAMES and rng.random() < PATTERN_SHARE:
        # a videotestsrc pattern frame (nothing in it is a shape), mirrored half the time
        source = PATTERN_FRAMES[int(rng.integers(0, len(PATTERN_FRAMES)))
                                if len(PATTERN_FRAMES) > 1 else 0]
        names = sorted(source)
        frames = source[names[int(rng.integers(0, len(names)))]]
        path, text_key = frames[int(rng.integers(0, len(frames)))]
        with Image.open(path) as im:
            img = np.array(im.convert("RGB"))
        if text_key is not None:  # a mined frame with the text it was mined with
            img = pattern_text_frame(img, *text_key)
        if rng.random() < 0.5:
            img = np.ascontiguousarray(img[:, ::-1])
        if PATTERN_TEXT_SHARE > 0 and rng.random() < PATTERN_TEXT_SHARE:
            img = add_overlay_text(rng, img.astype(np.float32))
            img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
        return img, np.zeros((0, 4), np.float32), np.zeros((0,), np.int64)
    # training scenes only: distractors (the held-out stream is drawn as it always was)
    distract = stream == STREAM_TRAIN and rng.random() < DISTRACT_SHARE
    if stream == STREAM_TRAIN and rng.random() < 0.05:
        img, boxes, labels = videotestsrc_sweep(rng)
        return img, np.asarray(boxes, np.float32), np.asarray(labels, np.int64)
    if stream == STREAM_TRAIN and rng.random() < EMPTY_SHARE:  # nothing but distractors
        img = add_distractors(rng, make_background(rng, int(rng.integers(200, 640)),
                                                   int(rng.integers(200, 480))))
        if MORE_SHARE > 0 and rng.random() < MORE_SHARE:
            img = add_more_distractors(rng, img)
        return (np.clip(np.rint(img), 0, 255).astype(np.uint8), np.zeros((0, 4), np.float32),
                np.zeros((0,), np.int64))
    if rng.random() < 0.18:
        img, boxes, labels = videotestsrc_ball(rng)
        if rng.random() < 0.15:  # the same with a random radius
            w, h = img.shape[1], img.shape[0]
            img, boxes, labels = videotestsrc_ball(rng, w, h, radius=int(rng.integers(8, 80)))
        return img, np.asarray(boxes, np.float32), np.asarray(labels, np.int64)

    short = int(rng.integers(200, 420))
    long_ = int(short * rng.uniform(1.0, 1.8))
    w, h = (long_, short) if rng.random() < 0.75 else (short, long_)
    img = make_background(rng, w, h)
    if distract:
        img = add_distractors(rng, img)
        if MORE_SHARE > 0 and rng.random() < MORE_SHARE:
            img = add_more_distractors(rng, img)
    n = int(rng.choice([1, 2, 3, 4, 5, 6, 7, 8], p=[0.12, 0.16, 0.17, 0.16, 0.14, 0.11, 0.08, 0.06]))
    ss = 2 if rng.random() < 0.6 else 1
    masks, boxes, labels, areas = [], [], [], []
    smin = max(10.0, 0.045 * short)
    smax = 0.6 * short
    for _ in range(n):
        for _attempt in range(10):
            cls = int(rng.integers(1, 5))
            size = float(np.exp(rng.uniform(math.log(smin), math.log(smax))))
            margin = 0.3 * size
            cx = rng.uniform(margin, w - margin)
            cy = rng.uniform(margin, h - margin)
            mask = _shape_mask(rng, cls, w, h, size, cx, cy, ss)
            box = _mask_box(mask)
            if box is None or (box[2] - box[0]) < 6 or (box[3] - box[1]) < 6:
                continue
            ok = True
            for m, b in zip(masks, boxes):
                if _box_iou(box, b) > 0.45:
                    ok = False
                    break
                area = float((m >= 0.5).sum())
                if area > 0 and float(((m >= 0.5) & (mask >= 0.5)).sum()) / area > 0.35:
                    ok = False
                    break
            if not ok:
                continue
            colour = _pick_colour(rng, img, mask)
            shade = rng.random() < 0.3
            if shade:  # a linear light gradient across the object
                a = rng.uniform(0, 2 * math.pi)
                ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
                t = ((xs - cx) * math.cos(a) + (ys - cy) * math.sin(a)) / max(1.0, size)
                fill = np.clip(colour[None, None, :] * (1.0 + 0.35 * t[:, :, None]), 0, 255)
            else:
                fill = colour[None, None, :]
            alpha = mask[:, :, None]
            img = img * (1 - alpha) + fill * alpha
            # earlier objects lose what this one covers
            masks = [m * (1 - mask) for m in masks]
            masks.append(mask)
            boxes.append(box)
            labels.append(cls)
            areas.append(float((mask >= 0.5).sum()))
            break
    if OCCLUDE_SHARE > 0 and boxes and rng.random() < OCCLUDE_SHARE:
        img, boxes, labels = add_occluders(rng, img, masks, boxes, labels, areas)
    if rng.random() < 0.15:
        img = img + rng.normal(0, rng.uniform(2, 10), size=img.shape).astype(np.float32)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if not boxes:
        return img, np.zeros((0, 4), np.float32), np.zeros((0,), np.int64)
    return img, np.asarray(boxes, np.float32), np.asarray(labels, np.int64)


# ---------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------

ARCH = {
    "min_size": 256,
    "max_size": 464,
    "fpn_channels": 64,
    "representation": 256,
    "anchor_sizes": ((16, 24), (32, 48), (64, 96), (128, 192)),
    "aspect_ratios": (0.5, 1.0, 2.0),
}


def build_model(num_classes=len(CLASS_NAMES)):
    import torch.nn as nn
    from torchvision.models import resnet18
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

    body = resnet18(weights=None, norm_layer=nn.BatchNorm2d)
    c = ARCH["fpn_channels"]
    backbone = BackboneWithFPN(body, return_layers={"layer1": "0", "layer2": "1", "layer3": "2"},
                               in_channels_list=[64, 128, 256], out_channels=c,
                               extra_blocks=LastLevelMaxPool())
    anchors = AnchorGenerator(sizes=ARCH["anchor_sizes"],
                              aspect_ratios=(ARCH["aspect_ratios"],) * len(ARCH["anchor_sizes"]))
    pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2"], output_size=7, sampling_ratio=2)
    rep = ARCH["representation"]
    model = FasterRCNN(
        backbone, num_classes=None,
        min_size=ARCH["min_size"], max_size=ARCH["max_size"],
        rpn_anchor_generator=anchors,
        rpn_pre_nms_top_n_train=600, rpn_post_nms_top_n_train=300,
        rpn_pre_nms_top_n_test=300, rpn_post_nms_top_n_test=100,
        rpn_batch_size_per_image=128,
        box_roi_pool=pool,
        box_head=TwoMLPHead(c * 7 * 7, rep),
        box_predictor=FastRCNNPredictor(rep, num_classes),
        box_batch_size_per_image=128,
        box_score_thresh=0.05, box_detections_per_img=50,
    )
    return model


def linears_on_onednn(model):
    """Runs the box head's linear layers as 1x1 convolutions (same parameters, same
    maths): on the CPU torch's convolutions use oneDNN, while Debian's torch runs
    nn.Linear on the reference BLAS, which made them 40% of a training step. The
    modules, their parameters and the exported weights are unchanged."""
    import torch.nn.functional as F

    def conv_forward(module):
        def forward(x):
            n = x.shape[0]
            y = F.conv2d(x.reshape(n, module.in_features, 1, 1),
                         module.weight.reshape(module.out_features, module.in_features, 1, 1),
                         module.bias)
            return y.reshape(n, module.out_features)
        return forward

    head, predictor = model.roi_heads.box_head, model.roi_heads.box_predictor
    for module in (head.fc6, head.fc7, predictor.cls_score, predictor.bbox_pred):
        module.forward = conv_forward(module)
    return model


def load_checkpoint_model(path):
    import torch
    model = build_model()
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"] if "model" in state else state)
    model.eval()
    return model


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------

def _batch(torch, seed, it, batch_size):
    images, targets = [], []
    for k in range(batch_size):
        img, boxes, labels = make_scene(seed, it * batch_size + k, STREAM_TRAIN)
        images.append(torch.from_numpy(img).permute(2, 0, 1).contiguous())
        targets.append({"boxes": torch.from_numpy(boxes).reshape(-1, 4),
                        "labels": torch.from_numpy(labels)})
    return images, targets


class _Batches:
    """Map-style dataset: item i is training batch i (scenes i*bs .. i*bs+bs-1)."""

    def __init__(self, seed, batch_size, first):
        self.seed, self.batch_size, self.first = seed, batch_size, first

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        import torch
        return _batch(torch, self.seed, self.first + i, self.batch_size)


def _batch_stream(torch, args, it0):
    """Batches it0, it0+1, ... in order; generated in worker processes when --workers > 0."""
    if args.workers <= 0:
        it = it0
        while True:
            yield _batch(torch, args.seed, it, args.batch_size)
            it += 1
    loader = torch.utils.data.DataLoader(_Batches(args.seed, args.batch_size, it0), batch_size=None,
                                         shuffle=False, num_workers=args.workers, prefetch_factor=4,
                                         persistent_workers=True)
    yield from loader


def _save(torch, path, payload):
    tmp = path + ".tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)


def main(argv=None):
    global EMPTY_SHARE, DISTRACT_SHARE, HARD_NEGATIVES, HARD_SHARE, MORE_SHARE, OCCLUDE_SHARE
    global PATTERN_FRAMES, PATTERN_SHARE, PATTERN_TEXT_SHARE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iters", type=int, default=0,
                    help="iterations (deterministic schedule); 0: run for --minutes")
    ap.add_argument("--minutes", type=float, default=80.0, help="wall-clock budget")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda where torch has it")
    ap.add_argument("--workers", type=int, default=0,
                    help="scene-generating worker processes (0: generate in the training loop)")
    ap.add_argument("--out-dir", default="/tmp/train")
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--empty-share", type=float, default=EMPTY_SHARE,
                    help="share of training scenes with no shape, only distractors")
    ap.add_argument("--distract-share", type=float, default=DISTRACT_SHARE,
                    help="share of shape scenes drawn over distractors (lines, grids, text)")
    ap.add_argument("--hard-negatives", action="append", default=None, metavar="FILE",
                    help="JSON of mined frames without shapes (tools/eval_demo.py --mine); "
                         "repeat to draw from the frames of several files")
    ap.add_argument("--hard-share", type=float, default=0.1,
                    help="share of training scenes drawn from --hard-negatives")
    ap.add_argument("--more-distractors", type=float, default=MORE_SHARE, metavar="SHARE",
                    help="share of the scenes drawn over distractors that also get TrueType "
                         "text or thin outline figures (training only; default 0: none)")
    ap.add_argument("--occluders", type=float, default=OCCLUDE_SHARE, metavar="SHARE",
                    help="share of the shape scenes with flat bands across the frame over "
                         "the shapes, cutting them (training only; default 0: none)")
    ap.add_argument("--videotestsrc-frames", action="append", default=None, metavar="SOURCE",
                    help="frames of videotestsrc's patterns other than ball to train on as "
                         "frames without shapes: a folder of tools/capture_videotestsrc.py, "
                         "or the JSON of tools/eval_demo.py --mine-videotestsrc; repeatable "
                         "(each source drawn from equally often)")
    ap.add_argument("--pattern-share", type=float, default=0.1,
                    help="share of training scenes drawn from --videotestsrc-frames")
    ap.add_argument("--pattern-text", type=float, default=PATTERN_TEXT_SHARE, metavar="SHARE",
                    help="share of the --videotestsrc-frames scenes that also get lines of "
                         "TrueType text as overlays draw them (default 0: none)")
    ap.add_argument("--init", default=None,
                    help="start from the weights of this model file (.safetensors written by "
                         "the exporter; F16/BF16 widened), e.g. to fine-tune the bundled model")
    ap.add_argument("--keep-snapshots", action="store_true",
                    help="also keep model-<iter>.pt at every checkpoint")
    ap.add_argument("--export", default=None, help="write the final model here (.safetensors)")
    ap.add_argument("--export-dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--cpu-linear", default="onednn", choices=["onednn", "native"],
                    help="on the CPU, run the box head's linears as oneDNN 1x1 convolutions "
                         "(default; same maths, faster steps with Debian's torch: "
                         "tools/bench/CPU.md) or as nn.Linear")
    args = ap.parse_args(argv)

    EMPTY_SHARE = args.empty_share
    DISTRACT_SHARE = args.distract_share
    MORE_SHARE = args.more_distractors
    OCCLUDE_SHARE = args.occluders
    if args.pattern_text > 0 and not args.videotestsrc_frames:
        ap.error("--pattern-text needs --videotestsrc-frames")
    if MORE_SHARE > 0 or args.pattern_text > 0:
        try:
            _fonts()
        except RuntimeError as e:
            ap.error(str(e))
    if args.hard_negatives:
        HARD_NEGATIVES = []
        for path in args.hard_negatives:
            try:
                with open(path) as f:
                    mined = json.load(f)
                pairs = [(int(mined["seed"]), int(i)) for i in mined["indices"]]
            except (OSError, ValueError, TypeError, KeyError) as e:
                ap.error(f"{path}: not a file of tools/eval_demo.py --mine ({e!r})")
            if not pairs:
                ap.error(f"{path}: no mined frames")
            # a frame mined twice (by two models, from one seed) is drawn as often as once
            seen = set(HARD_NEGATIVES)
            HARD_NEGATIVES += [p for p in pairs if p not in seen]
            print(f"hard negatives: {len(pairs)} mined frames (seed {pairs[0][0]}) in {path}",
                  flush=True)
        HARD_SHARE = args.hard_share
        print(f"hard negatives: {len(HARD_NEGATIVES)} frames in all, share {HARD_SHARE}",
              flush=True)
    if args.videotestsrc_frames:
        PATTERN_FRAMES = []
        for source in args.videotestsrc_frames:
            path = os.path.join(source, "index.json") if os.path.isdir(source) else source
            try:
                with open(path) as f:
                    index = json.load(f)
                folder = index.get("source", os.path.dirname(path))
                by_pattern = {}
                for e in index["frames"]:
                    key = tuple(int(v) for v in e["text"]) if "text" in e else None
                    if key is not None and len(key) != 3:
                        raise ValueError(f"text key {e['text']!r}")
                    by_pattern.setdefault(e["pattern"], []).append(
                        (os.path.join(folder, e["file"]), key))
            except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
                ap.error(f"{source}: not a folder of tools/capture_videotestsrc.py nor a file of "
                         f"tools/eval_demo.py --mine-videotestsrc ({e!r})")
            if not by_pattern:
                ap.error(f"{source}: no frames")
            PATTERN_FRAMES.append(by_pattern)
            print(f"videotestsrc frames: {sum(map(len, by_pattern.values()))} of "
                  f"{len(by_pattern)} patterns in {source}", flush=True)
        PATTERN_SHARE = args.pattern_share
        PATTERN_TEXT_SHARE = args.pattern_text
        print(f"videotestsrc frames: share {PATTERN_SHARE}, with text {PATTERN_TEXT_SHARE}",
              flush=True)
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    ckpt_path = os.path.join(args.out_dir, "checkpoint.pt")

    device = torch.device(args.device)
    if args.init:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import eval_demo
        model, _ = eval_demo.torchvision_model(args.init)
        print(f"initialised from {args.init}", flush=True)
    else:
        model = build_model()
    model = model.to(device)
    if device.type == "cpu" and args.cpu_linear == "onednn":
        linears_on_onednn(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim > 1]
    no_decay = [p for p in params if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    it0, elapsed0 = 0, 0.0
    if args.resume and os.path.exists(ckpt_path):
        st = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["optimizer"])
        it0, elapsed0 = st["iter"], st["elapsed"]
        torch.set_rng_state(st["torch_rng"])
        print(f"resumed from {ckpt_path} at iteration {it0} ({elapsed0 / 60:.1f} min)", flush=True)

    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters; arch {ARCH}; seed {args.seed}; "
          f"batch {args.batch_size}; threads {args.threads}; "
          f"{'iters ' + str(args.iters) if args.iters else 'time budget'} {args.minutes} min", flush=True)

    budget = args.minutes * 60.0
    t_start = time.time() - elapsed0
    last_ckpt = time.time()
    smooth = None
    it = it0
    t_log = time.time()

    def progress():
        if args.iters:
            return it / args.iters
        return (time.time() - t_start) / budget

    def model_state():
        return {k: v.detach().to("cpu") for k, v in model.state_dict().items()}

    def payload():
        return {"model": model_state(), "optimizer": opt.state_dict(), "iter": it,
                "elapsed": time.time() - t_start, "torch_rng": torch.get_rng_state(),
                "args": vars(args), "arch": ARCH, "class_names": CLASS_NAMES}

    batches = _batch_stream(torch, args, it0)
    while True:
        p = progress()
        if p >= 1.0 or (time.time() - t_start) >= budget:
            break
        if it < args.warmup:
            lr = args.lr * (0.02 + 0.98 * it / args.warmup)
        else:
            lr = args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))
        for g in opt.param_groups:
            g["lr"] = lr
        images, targets = next(batches)
        images = [im.to(device, non_blocking=True).float().div_(255.0) for im in images]
        targets = [{k: v.to(device, non_blocking=True) for k, v in t.items()} for t in targets]
        losses = model(images, targets)
        loss = sum(losses.values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        it += 1
        vals = {k: float(v) for k, v in losses.items()}
        vals["total"] = float(loss)
        smooth = vals if smooth is None else {k: 0.95 * smooth[k] + 0.05 * vals[k] for k in vals}
        if it % args.log_every == 0:
            now = time.time()
            rate = args.log_every / max(1e-6, now - t_log)
            t_log = now
            print(f"it {it:6d}  {(now - t_start) / 60:6.1f} min  lr {lr:.2e}  "
                  f"{rate * args.batch_size:5.2f} img/s  loss {smooth['total']:.3f} "
                  f"(rpn obj {smooth['loss_objectness']:.3f} box {smooth['loss_rpn_box_reg']:.3f}; "
                  f"cls {smooth['loss_classifier']:.3f} box {smooth['loss_box_reg']:.3f})", flush=True)
        if time.time() - last_ckpt >= args.checkpoint_minutes * 60:
            _save(torch, ckpt_path, payload())
            _save(torch, os.path.join(args.out_dir, "latest.pt"), {"model": model_state(), "iter": it})
            if args.keep_snapshots:
                _save(torch, os.path.join(args.out_dir, f"model-{it:06d}.pt"), {"model": model_state()})
            last_ckpt = time.time()
            print(f"checkpoint at iteration {it}", flush=True)

    _save(torch, ckpt_path, payload())
    _save(torch, os.path.join(args.out_dir, "final.pt"), {"model": model_state(), "iter": it})
    print(f"done: {it} iterations ({it * args.batch_size} images) in "
          f"{(time.time() - t_start) / 60:.1f} min; reproduce with --seed {args.seed} --iters {it}",
          flush=True)
    if args.export:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import export_torchvision
        model.to("cpu").eval()
        export_torchvision.export(model, args.export, class_names=CLASS_NAMES, dtype=args.export_dtype)
        print(f"exported {args.export} ({os.path.getsize(args.export) / 2**20:.2f} MiB, "
              f"{args.export_dtype})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
