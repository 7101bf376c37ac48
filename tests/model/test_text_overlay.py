#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end test of the bundled model on frames without shapes under text overlays:

    videotestsrc pattern=P ! video/x-raw,width=W,height=H \\
        ! timeoverlay font-desc=F                                  (running time, centre)
        ! timeoverlay font-desc=F show-times-as-dates=true ...     (date and time, bottom)
        ! textoverlay font-desc=F text=CAPTION                     (a caption, top)
        ! videoconvert ! visiondetect ! visionjson location=dets.jsonl ! fakesink

for several patterns without shapes (black, white, snow, gradients, checkers, solid
colours), frame sizes and Pango fonts: letters and digits as cameras and recorders draw
them over their video (white with a black outline and a drop shadow), which the model
must not take for balls, rings, boxes or triangles. visiondetect runs with its defaults
(the bundled model found on its own, default threshold) on the CPU. Per configuration,
at least 95 % of the frames must have no detection at all.

The overlays are GStreamer's own (gst-plugins-base's pango plugin: Debian's
gstreamer1.0-x); the model was trained on text drawn by PIL (tools/train_demo.py), never
on these. Exit 77 when gst-launch-1.0, the overlays, the plugin or the model is missing.

    GST_PLUGIN_PATH=build/gst /usr/bin/python3 tests/model/test_text_overlay.py \\
        --workdir /tmp/overlay [--frames 48] [--config 640x480:black:Sans Bold 48 ...]
"""

import argparse
import os
import sys

from gst_model_test import add_common_args, detect_elements, read_jsonl, run_pipeline, skip_reason

# WIDTHxHEIGHT:PATTERN:FONT (videotestsrc's pattern, a Pango font description); the
# caption is chosen by the configuration's index
DEFAULT_CONFIGS = [
    "640x480:black:Sans 24",
    "640x480:black:Sans Bold 48",
    "640x480:white:Serif 72",
    "640x480:snow:Monospace Bold 48",
    "1280x720:gradient:Sans Bold 96",
    "320x240:colors:Sans 16",
    "640x480:checkers-8:Serif Bold 40",
    "800x600:solid-color:Sans Condensed Bold 64",
]

CAPTIONS = ["CAM 07 - GATE A", "Loading dock 3", "ZONE B / 0049", "Parking Lot 6",
            "OFFICE 2F", "Entrance 10", "Line 4 - Station 08", "QA AREA 9"]


def parse_config(text):
    size, pattern, font = text.split(":", 2)
    w, h = (int(v) for v in size.split("x"))
    return w, h, pattern, font


def run_config(args, cfg_text, index):
    w, h, pattern, font = parse_config(cfg_text)
    d = os.path.join(args.workdir, f"run{index}-{w}x{h}-{pattern}")
    os.makedirs(d, exist_ok=True)
    jsonl = os.path.join(d, "dets.jsonl")
    caption = CAPTIONS[index % len(CAPTIONS)]
    cmd = [args.gst_launch, "-q",
           "videotestsrc", f"pattern={pattern}", f"num-buffers={args.frames}", "!",
           f"video/x-raw,width={w},height={h},framerate=24/1", "!",
           "timeoverlay", f"font-desc={font}", "valignment=center", "halignment=center", "!",
           "timeoverlay", f"font-desc={font}", "show-times-as-dates=true",
           "datetime-format=%Y-%m-%d %H:%M:%S", "valignment=bottom", "halignment=left", "!",
           "textoverlay", f"font-desc={font}", f"text={caption}", "valignment=top",
           "halignment=right", "!",
           "videoconvert", "!", *detect_elements(args), "!",
           "visionjson", f"location={jsonl}", "!", "fakesink"]
    if not run_pipeline(cmd, cfg_text):
        return False
    frames = read_jsonl(jsonl)
    if len(frames) != args.frames:
        print(f"FAIL {cfg_text}: {len(frames)} JSON lines for {args.frames} frames")
        return False
    answered = [(i, fr["objects"]) for i, fr in enumerate(frames) if fr.get("objects")]
    clean = len(frames) - len(answered)
    ok = clean >= 0.95 * len(frames)
    labels = {}
    for _, objs in answered:
        for o in objs:
            labels[o["label"]] = labels.get(o["label"], 0) + 1
    print(f"{'ok  ' if ok else 'FAIL'} {cfg_text} ({caption!r}): no detection in {clean}/{len(frames)} "
          f"frames ({100 * clean / len(frames):.1f}%); detections {labels or 'none'}", flush=True)
    for i, objs in answered[:3]:
        print(f"    frame {i}: " + ", ".join(
            f"{o['label']} {o['confidence']:.2f} at {o['rect']}" for o in objs[:4]))
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, frames=48, workdir="text-overlay",
                    config_help="WIDTHxHEIGHT:PATTERN:FONT; repeatable")
    args = ap.parse_args(argv)

    reason = skip_reason(args, ("visiondetect", "timeoverlay", "textoverlay"),
                         "GST_PLUGIN_PATH; the overlays are in Debian's gstreamer1.0-x")
    if reason:
        print(f"SKIP: {reason}")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    results = [run_config(args, c, i) for i, c in enumerate(args.config or DEFAULT_CONFIGS)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
