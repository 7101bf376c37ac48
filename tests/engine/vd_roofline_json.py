#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""vd-roofline --small: the JSON tools/bench_cpu.py --roofline reads.

Checks the keys, that fp32 has both kernels, that every kernel measured ran an
optimised oneDNN implementation (none "ref"), and that every rate is its GFLOP over its
time. The shapes are small and the run short: the figures themselves say nothing.

Usage: vd_roofline_json.py VD_ROOFLINE
"""

import json
import subprocess
import sys


def main():
    run = subprocess.run([sys.argv[1], "--small", "--threads", "1", "--runs", "1", "--warmup", "0"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["threads"] == 1 and out["onednn"] and out["isa"], out
    kinds = {(p["kernel"], p["precision"]) for p in out["peaks"]}
    assert {("convolution", "fp32"), ("matmul", "fp32")} <= kinds, kinds
    for p in out["peaks"]:
        assert p["precision"] in ("fp32", "bf16", "int8"), p
        assert not p["impl"].startswith("ref"), p
        assert p["gflop"] > 0 and p["ms"] > 0, p
        assert abs(p["gflops"] - p["gflop"] / (p["ms"] / 1000)) <= 0.05 + 0.01 * p["gflops"], p
    bw = out["bandwidth"]
    assert bw["bytes"] > 0 and bw["ms"] > 0 and bw["gbs"] > 0, bw
    print("ok: vd-roofline", ", ".join(f"{k} {p}" for k, p in sorted(kinds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
