#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# int8's accuracy on arm64, emulated: the model suite's shapes-map-int8 criterion
# (tools/eval_demo.py --precisions fp32,int8: int8's mAP@0.5 within 0.01 of fp32's,
# at least 95 % of fp32's detections matched) with the engine of the arm64 root's
# build (what tests/debian13-arm64.sh last built there: run it first, e.g.
# `tests/debian13-arm64.sh --worktree --update --run true`) run under qemu-user, and
# the torchvision side and the scoring on this (amd64) host, whose Python has torch;
# the root has none. Long (about 20 s a frame per precision emulated): not part of the
# arm64 run.
#
#   tests/arm64/int8-accuracy.sh [--images N] [--cpu CPU] [--calibrate-with VD_DETECT]
#                                [--workdir DIR] [-- EVAL_DEMO_ARGS...]
#
#   --images N       held-out scenes (default 16; the model suite runs 40)
#   --cpu CPU        QEMU_CPU (default neoverse-n1: the dot product, no I8MM; `max`
#                    has I8MM)
#   --calibrate-with the vd-detect that calibrates (default build/tools/vd-detect,
#                    the host's build): calibration records float32 maxima, which
#                    the x86 and arm64 fp32 engines agree on (the parity phase's
#                    tolerances), and 64 calibration frames emulated would take 20
#                    minutes; `arm64` calibrates with the emulated engine instead
#   --workdir DIR    eval_demo's (default: a temporary folder)
#
# The root is VISIONDETECT_ARM64_ROOT (default /var/cache/visiondetect/debian13-arm64),
# the engine its clone's build/tools/vd-detect, run by qemu-aarch64-static with the
# root as its library prefix (QEMU_LD_PREFIX) and this host's /sys, which XNNPACK
# reads. Exit status: eval_demo's (0 pass, 1 a target missed, 77 skipped).
set -euo pipefail

die() { echo "int8-accuracy.sh: $*" >&2; exit 2; }

top=$(cd "$(dirname "$0")/../.." && pwd)
root=${VISIONDETECT_ARM64_ROOT:-/var/cache/visiondetect/debian13-arm64}
images=16
cpu=neoverse-n1
calibrate_with=$top/build/tools/vd-detect
workdir=
while [ $# -gt 0 ]; do
  case "$1" in
    --images) images=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --calibrate-with) calibrate_with=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done

engine=$root/build/visiondetect/build/tools/vd-detect
[ -x "$engine" ] || die "no arm64 build at $engine: run tests/debian13-arm64.sh first"
command -v qemu-aarch64-static >/dev/null || die "no qemu-aarch64-static (package qemu-user-static)"
[ "$calibrate_with" = arm64 ] || [ -x "$calibrate_with" ] ||
  die "no vd-detect to calibrate with at $calibrate_with (--calibrate-with)"

tmp=$(mktemp -d /tmp/vd-int8-accuracy-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
[ -n "$workdir" ] || workdir=$tmp/work

# vd-detect for eval_demo: the emulated arm64 engine; --calibrate the chosen one;
# a call made before (eval_demo runs fp32 twice: against torchvision, then as the
# reference of int8) answered from its first run
cat > "$tmp/vd-detect" <<EOF
#!/bin/sh
case " \$* " in
  *" --calibrate "*) [ "$calibrate_with" = arm64 ] || exec "$calibrate_with" "\$@" ;;
esac
run() { QEMU_LD_PREFIX="$root" QEMU_CPU="$cpu" qemu-aarch64-static "$engine" "\$@"; }
case " \$* " in *" --json "*) ;; *) run "\$@"; exit ;; esac
key=$tmp/cache-\$(printf '%s\\n' "\$@" | sha1sum | cut -c1-16)
if [ ! -f "\$key" ]; then
  run "\$@" > "\$key.part" || exit
  mv "\$key.part" "\$key"
fi
cat "\$key"
EOF
chmod +x "$tmp/vd-detect"
echo "int8-accuracy.sh: $images scenes, QEMU_CPU=$cpu, engine $engine" \
     "($("$tmp/vd-detect" --model "$top/models/visiondetect-shapes.safetensors" --info \
          2>/dev/null | grep -m1 -o 'ISA [^,]*' || echo '?'))," \
     "calibrated by $calibrate_with"
/usr/bin/python3 "$top/tools/eval_demo.py" --model "$top/models/visiondetect-shapes.safetensors" \
  --vd-detect "$tmp/vd-detect" --images "$images" --precisions fp32,int8 \
  --max-precision-diff 0.01 --min-matched 0.95 --calibration-images 64 --threads 2 \
  --workdir "$workdir" "$@"
