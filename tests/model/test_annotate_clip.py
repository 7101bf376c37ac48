#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The main job's own output: pipelines/annotate.sh with no input (videotestsrc's
ball, then synthetic scenes at 2 frames per second brought to 24 by videorate, whose
duplicates are GAP buffers) and the bundled model. Every frame of the clip shows
objects, so every line of out/annotated.jsonl must have detections: the duplicates
carry those of the frame they repeat ("repeated": true, the same objects), and the
MP4 has every frame (its video samples).

Usage: test_annotate_clip.py --source-root DIR --build-root DIR --workdir DIR
"""

import json
import os
import shutil
import subprocess
import sys

from gst_model_test import build_tree_args, fail



def main():
    args, work = build_tree_args()
    if shutil.which("gst-launch-1.0") is None:
        print("SKIP: gst-launch-1.0 not found")
        return 77
    env = {k: v for k, v in os.environ.items() if k != "VISIONDETECT_MODEL"}
    env.update(VISIONDETECT_NO_BUILD="1", VISIONDETECT_BUILD_DIR=args.build_root,
               GST_REGISTRY=os.path.join(work, "registry.bin"))
    video = os.path.join(work, "annotated.mp4")
    subprocess.run([os.path.join(args.source_root, "pipelines", "annotate.sh"), "--output", video],
                   check=True, env=env)

    frames = [json.loads(line) for line in open(os.path.join(work, "annotated.jsonl"))]
    # the generated clip: 48 frames of the ball, 8 scenes of half a second at 24 fps
    if len(frames) != 128:
        fail(f"annotated.jsonl: {len(frames)} frames, want 128")
    empty = [f["frame"] for f in frames if not f["objects"]]
    if empty:
        fail(f"{len(empty)} of {len(frames)} frames without detections: {empty[:20]}")
    repeated = [f for f in frames if f.get("repeated")]
    if not repeated:
        fail("no repeated frame: the scenes' duplicates were all inferred")
    def objects(f):
        return [(o["label"], o["confidence"], o["rect"]) for o in f["objects"]]
    for f in repeated:
        if f["inferred"] or objects(f) != objects(frames[f["frame"] - 1]):
            fail(f"frame {f['frame']}: repeated, but not the objects of the frame before")

    # the MP4 has every frame: its video samples, as the demuxer reads them (what
    # a decoder then outputs differs by release: GStreamer 1.26's chain gives 127
    # of the 128 samples it is given, 1.22's all of them)
    demuxed = subprocess.run(["gst-launch-1.0", "-v", "filesrc", f"location={video}", "!",
                              "qtdemux", "!", "video/x-h264", "!", "fakesink", "silent=false"],
                             check=True, env=env, capture_output=True, text=True).stdout
    samples = demuxed.count("last-message = chain")
    if samples != 128:
        fail(f"annotated.mp4: {samples} video samples, want 128")
    inferred = sum(1 for f in frames if f["inferred"])
    print(f"128 frames with detections: {inferred} inferred, {len(repeated)} repeated")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
