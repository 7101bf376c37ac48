#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The engine against ONNX Runtime's aarch64 wheel, both under the same emulated arm64
# CPU, side by side in one run (issue 46, item 6; tools/bench/CPU.md): tools/bench_cpu.py
# on this host (torch builds the model files and exports the ONNX models, and it drives
# the run), its two sides run in the Debian 13 arm64 root under qemu-user through
# wrappers: vd-detect from the root's arm64 build of this repository's HEAD, and
# bench_cpu.py's ONNX Runtime worker in a venv inside the root (the wheels fetched on
# the host with pip download for the root's Python 3.13; a bench venv only, never a
# product dependency). Same weights, same frame, same threads; only ratios mean
# anything: emulation distorts absolute times and the ratios between instruction sets.
#
#   tools/bench/arm/run-detect.sh [OPTION]...
#
#   --cpu CPU        QEMU_CPU (default neoverse-n1: NEON only)
#   --threads N      threads of both sides (default 2)
#   --models LIST    bundled (models/visiondetect-shapes.safetensors) and/or mnv3
#                    (torchvision's fasterrcnn_mobilenet_v3_large_320_fpn, random weights
#                    calibrated, as tools/bench_cpu.py builds it); default bundled,mnv3
#   --size WxH       frame (default 640x480)
#   --repeats N      processes per side, rotated (default 3)
#   --runs N         timed runs per process after one warm-up (default 2)
#   --layout L       the engine's activation layout, VD_CPU_LAYOUT (nhwc, blocked;
#                    default: the engine's choice, which on a NEON-only CPU is NHWC with
#                    every convolution, pooling and linear layer on XNNPACK; blocked
#                    there runs oneDNN's reference kernels, very slow emulated)
#   --no-build       use the root's existing build (/build/visiondetect/build) as it is
#   --workdir DIR    wheels, wrappers, model files, ONNX models and reports (default
#                    /var/tmp/vd-armbench-detect; kept: the next run reuses them)
#
# The build: tests/debian13-arm64.sh --build-only (a fresh clone of HEAD, cross-built),
# unless --no-build. The root: VISIONDETECT_ARM64_ROOT (default the test script's,
# /var/cache/visiondetect/debian13-arm64), held with its lock while the benchmark runs.
# Needs the host's python3-torchvision (/usr/bin/python3) and pip (for pip download).
# The reports: DIR/report-MODEL-CPU-tN.txt (bench_cpu.py's output, its JSON last).
set -euo pipefail
armb_self="$(readlink -f "$0")"
armb_name=run-detect
here="$(dirname "$armb_self")"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=tools/bench/arm/arm-root.sh
source "$here/arm-root.sh"

cpu=neoverse-n1 threads=2 models=bundled,mnv3 size=640x480 repeats=3 runs=2 build=1 layout=
work=/var/tmp/vd-armbench-detect
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --layout) layout=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --workdir) work=$2; shift 2 ;;
    -h|--help) sed -n '3,30p' "$armb_self" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) armb_die "unknown argument $1 (--help)" ;;
  esac
done
case $work in /*) ;; *) work="$(pwd)/$work" ;; esac
vd=/build/visiondetect/build/tools/vd-detect   # in the root
venv=/opt/vd-bench-venv                         # in the root

if [ "${ARMB_IN_NS:-0}" != 1 ]; then
  # before the root is locked: the test script takes the same lock
  if [ $build = 1 ]; then
    armb_log "building HEAD for arm64: tests/debian13-arm64.sh --build-only"
    VISIONDETECT_ARM64_ROOT="$armb_root" "$repo/tests/debian13-arm64.sh" --build-only
  fi
  mkdir -p "$work/wheels"
  if ! ls "$work"/wheels/onnxruntime-*aarch64*.whl >/dev/null 2>&1; then
    armb_log "pip download onnxruntime numpy (aarch64, Python 3.13) into $work/wheels"
    pip download -q --platform manylinux_2_28_aarch64 --only-binary=:all: --python-version 3.13 \
      -d "$work/wheels" onnxruntime numpy
  fi
fi
armb_enter "${args[@]}"
[ -x "$armb_root$vd" ] || armb_die "no $vd in the root (run without --no-build)"

# the repository and the work folder at the same paths inside the root
for d in "$repo" "$work"; do
  mkdir -p "$armb_root$d"
  mount --bind "$d" "$armb_root$d"
done

armb_cpuinfo "$cpu"
armb_packages arm python3-venv
if ! armb_arm "$venv/bin/python" -c 'import numpy, onnxruntime' 2>/dev/null; then
  armb_log "making the bench venv $venv in the root (emulated pip)"
  armb_arm python3 -m venv "$venv"
  armb_arm "$venv/bin/pip" install -q --disable-pip-version-check --no-index \
    --find-links "$work/wheels" onnxruntime numpy
fi

# the wrappers bench_cpu.py runs: into the root, under QEMU_CPU, with the environment
# it sets (OMP_*, ONEDNN_*, DNNL_*, VD_*)
for w in vd-detect:"$vd" python:"$venv/bin/python"; do
  cat > "$work/${w%%:*}-arm64" <<EOF
#!/bin/sh
# run-detect.sh's wrapper: ${w#*:} in $armb_root under QEMU_CPU=$cpu
set -- env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 QEMU_CPU=$cpu \$(env | grep -E '^(OMP|ONEDNN|DNNL|VD)_[A-Z0-9_]*=[^ ]*\$') ${w#*:} "\$@"
exec chroot $armb_root "\$@"
EOF
  chmod +x "$work/${w%%:*}-arm64"
done

rev="$(git -c safe.directory='*' -C "$armb_root/build/visiondetect" log -1 --format='%h %s')"
if [ -n "$layout" ]; then
  export VD_CPU_LAYOUT=$layout
fi
armb_log "engine: $rev; QEMU_CPU=$cpu${layout:+, VD_CPU_LAYOUT=$layout}"
OMP_NUM_THREADS=$threads "$work/vd-detect-arm64" --info 2>&1 | grep -v MIDR_EL1 || true

status=0
IFS=, read -r -a model_list <<< "$models"
for m in "${model_list[@]}"; do
  case $m in
    bundled) margs=(--model "$repo/models/visiondetect-shapes.safetensors") ;;
    mnv3) margs=(--arch mobilenet_v3_large_320_fpn) ;;
    *) armb_die "--models: bundled or mnv3, not $m" ;;
  esac
  report="$work/report-$m-$cpu-t$threads${layout:+-$layout}.txt"
  armb_log "$m: bench_cpu.py, report in $report; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$repo" && OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench_cpu.py "${margs[@]}" \
    --only vd-detect --precisions fp32 --peers onnxruntime --peer-python "$work/python-arm64" \
    --vd-detect "$work/vd-detect-arm64" --sizes "$size" --threads "$threads" \
    --repeats "$repeats" --runs "$runs" --warmup 1 --workdir "$work/bench" --timeout 3600 --json) \
    > "$report" 2>&1 || { status=$?; armb_log "$m: bench_cpu.py failed ($status)"; }
  grep -v '^{' "$report" | sed -n '/^| frame | side | median/,$p' || true
done
armb_log "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
