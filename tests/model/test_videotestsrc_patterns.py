#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end test of the bundled model on every videotestsrc pattern: the first
pipeline a GStreamer user types,

    videotestsrc pattern=P ! video/x-raw,width=W,height=H ! visiondetect \\
        ! visionjson location=dets.jsonl ! filesink location=frames.raw

for every pattern the installed videotestsrc has (read from gst-inspect-1.0, so a newer
GStreamer's new patterns are checked too) at several frame sizes, with the format left
to negotiation as in that first pipeline. visiondetect runs with its defaults (the
bundled model found on its own, default threshold) on the CPU.
  - Every pattern other than ball: no detection in any frame.
  - ball: exactly one detection in every frame, a 'ball' whose box has IoU >= 0.7 with
    the ball's true box (measured from the frame's own pixels).
Exit 77 when gst-launch-1.0, gst-inspect-1.0, the plugin or the model file is missing.

    GST_PLUGIN_PATH=build/gst /usr/bin/python3 tests/model/test_videotestsrc_patterns.py \\
        --workdir /tmp/patterns [--frames N] [--size 640x480 ...] [--pattern smpte ...]
"""

import argparse
import os
import shutil
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is missing")
    sys.exit(77)

from gst_model_test import (add_common_args, detect_elements, read_jsonl, run_pipeline, skip_reason,
                            videotestsrc_patterns)
from test_videotestsrc_ball import iou, true_box

# videotestsrc's own default and a 720p camera's: every pattern is drawn relative to the
# frame, and the model resizes both to its own size (640x480 lies between them)
DEFAULT_SIZES = ["320x240", "1280x720"]


def run_one(args, pattern, size):
    w, h = (int(v) for v in size.split("x"))
    d = os.path.join(args.workdir, f"{pattern}-{size}")
    os.makedirs(d, exist_ok=True)
    jsonl, raw_path = os.path.join(d, "dets.jsonl"), os.path.join(d, "frames.raw")
    # the frames go to the file as RGB, after the detector, which saw them in whatever
    # format it negotiated with videotestsrc
    cmd = [args.gst_launch, "-q",
           "videotestsrc", f"pattern={pattern}", f"num-buffers={args.frames}", "!",
           f"video/x-raw,width={w},height={h},framerate=30/1", "!",
           *detect_elements(args), "!",
           "visionjson", f"location={jsonl}", "!",
           "videoconvert", "!", "video/x-raw,format=RGB", "!",
           "filesink", f"location={raw_path}"]
    label = f"{pattern} {size}"
    if not run_pipeline(cmd, label):
        return False, label
    frames = read_jsonl(jsonl)
    if len(frames) != args.frames:
        print(f"FAIL {label}: {len(frames)} JSON lines for {args.frames} frames")
        return False, label
    bad = []
    if pattern == "ball":
        raw = np.fromfile(raw_path, np.uint8)
        fs = w * h * 3
        for i, fr in enumerate(frames):
            objs = fr.get("objects", [])
            gt = true_box(raw[i * fs:(i + 1) * fs], w, h, "RGB")
            ok = False
            if len(objs) == 1 and objs[0]["label"] == "ball" and gt is not None:
                r = objs[0]["rect"]
                ok = iou([r["x"], r["y"], r["x"] + r["w"], r["y"] + r["h"]], gt) >= 0.7
            if not ok:
                bad.append((i, gt, objs))
        want = "exactly its ball"
    else:
        bad = [(i, None, fr["objects"]) for i, fr in enumerate(frames) if fr.get("objects")]
        want = "no detection"
    ok = not bad
    print(f"{'ok  ' if ok else 'FAIL'} {label}: {want} in {len(frames) - len(bad)}/{len(frames)} frames",
          flush=True)
    for i, gt, objs in bad[:3]:
        shown = [(o["label"], round(o["confidence"], 3),
                  [round(o["rect"][k]) for k in ("x", "y", "w", "h")]) for o in objs]
        print(f"    frame {i}: {'true box ' + str(gt) + ', ' if gt else ''}detections {shown}")
    return ok, label


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, frames=5, workdir="videotestsrc-patterns", config_help=argparse.SUPPRESS)
    ap.add_argument("--size", action="append", default=None,
                    help="WIDTHxHEIGHT; repeatable (default: " + ", ".join(DEFAULT_SIZES) + ")")
    ap.add_argument("--pattern", action="append", default=None,
                    help="a videotestsrc pattern; repeatable (default: every pattern)")
    args = ap.parse_args(argv)

    reason = skip_reason(args, ("visiondetect", "visionjson", "videotestsrc"))
    inspect = shutil.which("gst-inspect-1.0")
    if not reason and not inspect:
        reason = "gst-inspect-1.0 not found"
    if reason:
        print(f"SKIP: {reason}")
        return 77
    patterns = args.pattern or videotestsrc_patterns(inspect)
    if not args.pattern and ("ball" not in patterns or len(patterns) < 20):
        print(f"FAIL: videotestsrc's patterns not read from gst-inspect-1.0: {patterns}")
        return 1
    os.makedirs(args.workdir, exist_ok=True)
    failed = [label for p in patterns for s in (args.size or DEFAULT_SIZES)
              for ok, label in [run_one(args, p, s)] if not ok]
    n = len(patterns) * len(args.size or DEFAULT_SIZES)
    print(f"{n - len(failed)}/{n} pattern/size runs as expected"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
