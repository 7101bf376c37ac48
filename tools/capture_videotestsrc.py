#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Capture frames of every videotestsrc pattern (except ball) with GStreamer's own
videotestsrc, as training frames without shapes for tools/train_demo.py
(--videotestsrc-frames DIR): the demo model must answer nothing on them.

Per pattern and frame size, four variants (each one gst-launch-1.0 pipeline, the frames
converted to RGB and written as PNG, identical frames kept once):
  rgb     the defaults, rendered in RGB (frames 0, 7, 14: the animated patterns move)
  i420    rendered in I420 and converted to RGB (chroma subsampled, as most sources send)
  hspeed  horizontal-speed: the pattern scrolled sideways (frames 3, 9, 14)
  colours random foreground and background colours (the patterns that use them)
The random choices come from --seed. DIR/index.json lists the frames.

    /usr/bin/python3 tools/capture_videotestsrc.py --out-dir /var/tmp/vts-frames
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "model"))
from gst_model_test import videotestsrc_patterns  # noqa: E402

# Frame sizes captured for training. tests/model/test_videotestsrc_patterns.py checks
# 320x240, 640x480 and 1280x720; other sizes (480x360, 720x576, 960x540, 1600x900) are
# left out here so that a run of the test on them shows whether the model generalises.
TRAIN_SIZES = [(320, 240), (640, 480), (1280, 720), (176, 144), (352, 288), (800, 600),
               (1024, 768), (640, 360), (1920, 1080)]

# (variant, frames kept, format rendered in); the properties of hspeed and colours are drawn
VARIANTS = [("rgb", (0, 7, 14), "RGB"), ("i420", (0, 7), "I420"),
            ("hspeed", (3, 9, 14), "RGB"), ("colours", (0,), "RGB")]


def capture(gst_launch, pattern, w, h, fmt, props, frames, raw_path):
    n = max(frames) + 1
    cmd = [gst_launch, "-q", "videotestsrc", f"pattern={pattern}", f"num-buffers={n}", *props,
           "!", f"video/x-raw,format={fmt},width={w},height={h},framerate=30/1", "!",
           "videoconvert", "!", "video/x-raw,format=RGB", "!", "filesink", f"location={raw_path}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    raw = np.fromfile(raw_path, np.uint8)
    if raw.size != n * w * h * 3:
        raise RuntimeError(f"{' '.join(cmd)}: {raw.size} bytes for {n} frames")
    return [raw[i * w * h * 3:(i + 1) * w * h * 3].reshape(h, w, 3) for i in frames]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--gst-launch", default=shutil.which("gst-launch-1.0"))
    ap.add_argument("--gst-inspect", default=shutil.which("gst-inspect-1.0"))
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--size", action="append", default=None, help="WIDTHxHEIGHT; repeatable")
    args = ap.parse_args(argv)
    if not args.gst_launch or not args.gst_inspect:
        ap.error("gst-launch-1.0 and gst-inspect-1.0 are needed")
    sizes = ([tuple(int(v) for v in s.split("x")) for s in args.size] if args.size
             else TRAIN_SIZES)
    names = [p for p in videotestsrc_patterns(args.gst_inspect) if p != "ball"]
    if len(names) < 20:
        ap.error(f"videotestsrc's patterns not read: {names}")
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    raw_path = os.path.join(args.out_dir, "capture.raw")
    index = []
    for pattern in names:
        for w, h in sizes:
            seen = set()
            for variant, frames, fmt in VARIANTS:
                props = []
                if variant == "hspeed":
                    props = [f"horizontal-speed={int(rng.choice([-1, 1]) * rng.integers(2, 24))}"]
                elif variant == "colours":
                    fg, bg = (int(v) for v in rng.integers(0, 1 << 24, size=2))
                    props = [f"foreground-color={0xff000000 | fg}",
                             f"background-color={0xff000000 | bg}"]
                for k, img in zip(frames, capture(args.gst_launch, pattern, w, h, fmt, props,
                                                  frames, raw_path)):
                    key = hash(img.tobytes())
                    if key in seen:
                        continue
                    seen.add(key)
                    name = f"{pattern}-{w}x{h}-{variant}-{k}.png"
                    Image.fromarray(img).save(os.path.join(args.out_dir, name), compress_level=1)
                    index.append({"file": name, "pattern": pattern, "width": w, "height": h,
                                  "variant": variant, "props": props})
            print(f"{pattern} {w}x{h}: {len(seen)} frames", flush=True)
    os.remove(raw_path)
    with open(os.path.join(args.out_dir, "index.json"), "w") as f:
        json.dump({"seed": args.seed, "frames": index}, f, indent=1)
    print(f"{len(index)} frames of {len(names)} patterns in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
