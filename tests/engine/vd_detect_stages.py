#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""vd-detect --stages: the lines tools/bench_cpu.py reads.

Runs the bundled model on a generated 320x256 frame twice (--repeat 2) and checks,
per run, three stderr lines in this order: stages_ms, stages_gflop and stages_gflops,
each "NAME=VALUE" for the same stages in the same order (preprocess, backbone, fpn,
rpn, roi_align, box_head, postprocess); the products' stages count arithmetic, the
bandwidth-bound ones none; and each rate is the stage's GFLOP over its time (to the
printed digits: the rate is computed from unrounded values, then rounded to 0.01).

Usage: vd_detect_stages.py VD_DETECT
"""

import os
import random
import subprocess
import sys
import tempfile

STAGES = ["preprocess", "backbone", "fpn", "rpn", "roi_align", "box_head", "postprocess"]
COUNTED = {"backbone", "fpn", "rpn", "box_head"}


def parse(line, prefix):
    assert line.startswith(prefix + ":"), f"expected a {prefix} line, got {line!r}"
    pairs = [kv.split("=") for kv in line[len(prefix) + 1:].split()]
    assert [k for k, _ in pairs] == STAGES, f"{prefix}: stages {[k for k, _ in pairs]}"
    return {k: float(v) for k, v in pairs}


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="vd-stages-") as tmp:
        frame = os.path.join(tmp, "frame.ppm")
        rng = random.Random(5)
        with open(frame, "wb") as f:
            f.write(b"P6\n320 256\n255\n" + bytes(rng.randrange(256) for _ in range(320 * 256 * 3)))
        run = subprocess.run([exe, "--device", "cpu", "--threads", "1", "--stages", "--repeat", "2",
                              frame], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = [l for l in run.stderr.splitlines() if l.startswith("stages_")]
    assert len(lines) == 6, run.stderr
    for i in range(0, 6, 3):
        ms = parse(lines[i], "stages_ms")
        gflop = parse(lines[i + 1], "stages_gflop")
        rate = parse(lines[i + 2], "stages_gflops")
        for s in STAGES:
            assert (gflop[s] > 0) == (s in COUNTED), f"{s}: {gflop[s]} GFLOP"
            if ms[s] > 0.05:  # well above the 0.001 ms the times are printed to
                want = gflop[s] / (ms[s] / 1000.0)
                assert abs(rate[s] - want) <= 0.01 + 0.002 * want, f"{s}: {rate[s]} GFLOP/s, want {want}"
    print("ok: vd-detect --stages prints ms, GFLOP and GFLOP/s per stage")
    return 0


if __name__ == "__main__":
    sys.exit(main())
