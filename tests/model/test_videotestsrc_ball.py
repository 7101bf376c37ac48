#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end test of the bundled model in a pipeline:

    videotestsrc pattern=ball ! video/x-raw,format=F,width=W,height=H ! visiondetect \\
        ! visionjson location=dets.jsonl ! filesink location=frames.raw

for several frame sizes, formats and ball/background colours (a few hundred frames in
all). visiondetect runs with its defaults (the bundled model found on its own, default
threshold) on the CPU. The ball's true box is measured from each frame's own pixels
(the frames written after the detector, which passes them unchanged). Per run:
  - the ball is found (a 'ball' detection with IoU >= 0.7) in at least 95% of frames,
  - no other detection (above the element's default threshold) in at least 95% of frames.
With --lines, the configurations of videotestsrc's sweep motions instead (a ball a
quarter of the frame high, lines across the frame through its centre and the frame's):
the lines are not the ball and must not be detected as anything.
Exit 77 when gst-launch-1.0, the plugin or the model file is missing.

    GST_PLUGIN_PATH=build/gst /usr/bin/python3 tests/model/test_videotestsrc_ball.py \\
        --workdir /tmp/ball [--frames 100] [--config 640x480:RGB:0xffffffff:0xff000000 ...]
"""

import argparse
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is missing")
    sys.exit(77)

from gst_model_test import add_common_args, detect_elements, read_jsonl, run_pipeline, skip_reason

# WIDTHxHEIGHT:FORMAT:FOREGROUND:BACKGROUND[:MOTION] (ARGB colours, as videotestsrc
# takes them; MOTION one of videotestsrc's: wavy, the default, sweep or hsweep)
DEFAULT_CONFIGS = [
    "320x240:RGB:0xffffffff:0xff000000",   # white ball on black (videotestsrc's default)
    "640x480:RGB:0xffffff00:0xff000000",   # yellow on black
    "640x480:I420:0xff00ff00:0xff000000",  # green on black, I420 (colour conversion in the engine)
    "480x360:BGRx:0xffff4040:0xff202060",  # red on dark blue, BGRx
    "1280x720:RGB:0xffffffff:0xff000000",  # HD: the ball is 15 pixels wide at the model's scale
]

# videotestsrc's sweep motions: a ball of a quarter of the frame's height and
# one-pixel lines across the frame through its centre and the frame's (--lines)
LINES_CONFIGS = [
    "640x480:RGB:0xffffffff:0xff000000:sweep",
    "320x240:I420:0xffffff00:0xff000000:hsweep",
    "480x360:BGRx:0xff40ff40:0xff202060:sweep",
]


def parse_config(text):
    size, fmt, fg, bg, *motion = text.split(":")
    w, h = (int(v) for v in size.split("x"))
    return w, h, fmt, int(fg, 16), int(bg, 16), (motion[0] if motion else "wavy")


def frame_size(w, h, fmt):
    if fmt in ("RGB", "BGR"):
        return w * h * 3
    if fmt in ("RGBA", "BGRA", "RGBx", "BGRx", "xRGB", "ARGB"):
        return w * h * 4
    if fmt == "I420":
        cw, ch = (w + 1) // 2, (h + 1) // 2
        return w * h + 2 * cw * ch
    raise ValueError(fmt)


def true_box(raw, w, h, fmt):
    """[x1, y1, x2, y2] of the pixels that differ from the background (the most common
    value of the first row's first pixel), or None when the ball is not visible."""
    if fmt == "I420":
        y = raw[:w * h].reshape(h, w).astype(np.int32)
        bg = int(np.bincount(y.ravel()).argmax())
        mask = np.abs(y - bg) > 16
    else:
        c = 3 if fmt in ("RGB", "BGR") else 4
        px = raw.reshape(h, w, c)[:, :, :3].astype(np.int32)
        # the most common colour, found among the pixels packed into one integer each
        # (np.unique over rows of three is a hundred times slower)
        packed = (px[:, :, 0] << 16) | (px[:, :, 1] << 8) | px[:, :, 2]
        vals, counts = np.unique(packed, return_counts=True)
        key = int(vals[counts.argmax()])
        bg = np.array([key >> 16, (key >> 8) & 255, key & 255], np.int32)
        mask = np.abs(px - bg[None, None, :]).max(axis=2) > 16
    # the sweep motions' lines across the whole frame are not the ball
    mask[mask.mean(axis=1) > 0.9, :] = False
    mask[:, mask.mean(axis=0) > 0.9] = False
    ys = np.nonzero(mask.any(axis=1))[0]
    xs = np.nonzero(mask.any(axis=0))[0]
    if len(xs) == 0:
        return None
    return [float(xs[0]), float(ys[0]), float(xs[-1] + 1), float(ys[-1] + 1)]


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def run_config(args, cfg_text, index):
    w, h, fmt, fg, bg, motion = parse_config(cfg_text)
    d = os.path.join(args.workdir, f"run{index}-{w}x{h}-{fmt}")
    os.makedirs(d, exist_ok=True)
    jsonl, raw_path = os.path.join(d, "dets.jsonl"), os.path.join(d, "frames.raw")
    cmd = [args.gst_launch, "-q",
           "videotestsrc", "pattern=ball", f"motion={motion}", f"num-buffers={args.frames}",
           f"foreground-color={fg}", f"background-color={bg}", "!",
           f"video/x-raw,format={fmt},width={w},height={h},framerate=30/1", "!",
           *detect_elements(args), "!",
           "visionjson", f"location={jsonl}", "!",
           "filesink", f"location={raw_path}"]
    if not run_pipeline(cmd, cfg_text):
        return False
    frames = read_jsonl(jsonl)
    raw = np.fromfile(raw_path, np.uint8)
    fs = frame_size(w, h, fmt)
    n = len(raw) // fs
    if n != args.frames or len(frames) != args.frames:
        print(f"FAIL {cfg_text}: {n} frames written and {len(frames)} JSON lines for {args.frames} frames")
        return False
    found = clean = 0
    ious = []
    bad = []
    for i in range(n):
        gt = true_box(raw[i * fs:(i + 1) * fs], w, h, fmt)
        objs = frames[i].get("objects", [])
        best, best_k = 0.0, -1
        for k, o in enumerate(objs):
            r = o["rect"]
            box = [r["x"], r["y"], r["x"] + r["w"], r["y"] + r["h"]]
            v = iou(box, gt) if gt is not None else 0.0
            if o["label"] == "ball" and v > best:
                best, best_k = v, k
        ious.append(best)
        if best >= 0.7:
            found += 1
        others = [o for k, o in enumerate(objs) if k != best_k or best < 0.7]
        if not others:
            clean += 1
        if best < 0.7 or others:
            bad.append((i, gt, [(o["label"], round(o["confidence"], 3), o["rect"]) for o in objs]))
    found_frac, clean_frac = found / n, clean / n
    ok = found_frac >= 0.95 and clean_frac >= 0.95
    print(f"{'ok  ' if ok else 'FAIL'} {cfg_text}: ball found (IoU >= 0.7) in {found}/{n} frames "
          f"({100 * found_frac:.1f}%), no other detection in {clean}/{n} ({100 * clean_frac:.1f}%); "
          f"IoU median {np.median(ious):.3f}, min {np.min(ious):.3f}", flush=True)
    for i, gt, objs in bad[:5]:
        print(f"    frame {i}: true box {gt}, detections {objs}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, frames=60, workdir="videotestsrc-ball",
                    config_help="WIDTHxHEIGHT:FORMAT:FG:BG[:MOTION] (ARGB hex); repeatable")
    ap.add_argument("--lines", action="store_true",
                    help="the sweep-motion configurations (lines across the frame) instead")
    ap.add_argument("--with-lines", action="store_true",
                    help="the default configurations and the sweep-motion ones")
    args = ap.parse_args(argv)

    reason = skip_reason(args, ("visiondetect",))
    if reason:
        print(f"SKIP: {reason}")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    configs = args.config or ((LINES_CONFIGS if args.lines else DEFAULT_CONFIGS)
                              + (LINES_CONFIGS if args.with_lines else []))
    results = [run_config(args, c, i) for i, c in enumerate(configs)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
