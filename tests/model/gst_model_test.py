# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the end-to-end model tests share (test_videotestsrc_ball.py,
test_text_overlay.py, test_videotestsrc_patterns.py; the build-tree tests
test_annotate_clip.py and test_readme_examples.py): their common options, the checks
that make them skip (exit 77), the visiondetect part of their pipelines, running a
pipeline and reading back visionjson's lines, and videotestsrc's list of patterns
(also tools/capture_videotestsrc.py's)."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED_MODEL = os.path.join(ROOT, "models", "visiondetect-shapes.safetensors")


def add_common_args(ap, frames, workdir, config_help):
    ap.add_argument("--gst-launch", default=shutil.which("gst-launch-1.0"))
    ap.add_argument("--frames", type=int, default=frames, help="frames per configuration")
    ap.add_argument("--config", action="append", default=None, help=config_help)
    ap.add_argument("--model", default=None,
                    help="model file (default: none given, the element finds the bundled one)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workdir", default=workdir)


def skip_reason(args, elements, hint="GST_PLUGIN_PATH"):
    """Why the test cannot run here (gst-launch-1.0, the bundled model or one of
    @elements missing), or None."""
    if not args.gst_launch or not os.access(args.gst_launch, os.X_OK):
        return "gst-launch-1.0 not found"
    if args.model is None and not os.path.exists(BUNDLED_MODEL):
        return f"no bundled model {BUNDLED_MODEL}"
    inspect = shutil.which("gst-inspect-1.0")
    if inspect:
        for element in elements:
            if subprocess.run([inspect, element], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode != 0:
                return f"no element {element} ({hint})"
    return None


def detect_elements(args):
    """visiondetect with the test's device and, where given, its model."""
    detect = ["visiondetect", f"device={args.device}"]
    if args.model:
        detect.append(f"model={args.model}")
    return detect


def run_pipeline(cmd, cfg_text):
    """Runs gst-launch-1.0 (@cmd); False, after saying why, when it fails."""
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        print(f"FAIL {cfg_text}: gst-launch-1.0 exited {res.returncode}\n  {' '.join(cmd)}\n{res.stderr}")
        return False
    return True


def read_jsonl(path):
    """visionjson's output: one object per frame."""
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def videotestsrc_patterns(inspect):
    """The nicks of videotestsrc's pattern enum (GstVideoTestSrcPattern), in its order,
    as gst-inspect-1.0 (@inspect) lists them."""
    out = subprocess.run([inspect, "videotestsrc"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    names, inside = [], False
    for line in out.splitlines():
        if 'Enum "GstVideoTestSrcPattern"' in line:
            inside = True
            continue
        m = re.match(r"\s+\(\d+\): (\S+)\s+- ", line)
        if inside and not m:
            break
        if inside:
            names.append(m.group(1))
    return names


def fail(message):
    """Ends the test as failed, saying why."""
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def build_tree_args():
    """The build-tree tests' options (--source-root, --build-root, --workdir), with
    the work folder made anew; returns (args, the work folder's real path)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--build-root", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = os.path.realpath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return args, work
