#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Which implementations Debian's arm64 oneDNN gives bf16 (bf16_probe.c: the engine's
# kinds of convolution and matmul, layouts oneDNN's choice), cross-built in the arm64
# root's amd64 build root and run in the arm64 root under each QEMU_CPU given: the
# evidence behind bf16's refusal on aarch64 (docs/engine.md, "bf16 on arm64"). Only
# primitive descriptors are made: seconds per CPU, emulated.
#
#   tools/bench/arm/bf16-probe.sh [CPU]...
#
#   CPU   QEMU_CPU values (default: neoverse-n1, max,sve=off, max,sve-max-vq=2 and
#         max,sve-max-vq=4: Advanced SIMD without BF16, Advanced SIMD with BF16, SVE
#         at 256 bits with BF16 as a Neoverse V1 has, SVE at 512 bits)
#
# The root: VISIONDETECT_ARM64_ROOT (default /var/cache/visiondetect/debian13-arm64, the
# test script's; held with its lock). The binary is left in the build root's
# /tmp/vd-armbench/. On an arm64 machine it builds with the machine's gcc and runs
# natively (no root, no qemu, CPU ignored); it needs libdnnl-dev there.
set -euo pipefail
armb_self="$(readlink -f "$0")"
armb_name=bf16-probe
here="$(dirname "$armb_self")"
# shellcheck source=tools/bench/arm/arm-root.sh
source "$here/arm-root.sh"
args=("$@")
case "${1:-}" in
  -h|--help) sed -n '3,18p' "$armb_self" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(neoverse-n1 'max,sve=off' 'max,sve-max-vq=2' 'max,sve-max-vq=4')

if [ "$(uname -m)" = aarch64 ]; then
  out="${TMPDIR:-/tmp}/vd-armbench"
  mkdir -p "$out"
  gcc -O1 -std=gnu11 -Wall -o "$out/bf16_probe" "$here/bf16_probe.c" -ldnnl
  exec "$out/bf16_probe"
fi
armb_enter "${args[@]}"

armb_packages x86 gcc-aarch64-linux-gnu libdnnl-dev:arm64
armb_packages arm libdnnl3.6

dir=/tmp/vd-armbench
mkdir -p "$armb_root/x86-build$dir"
cp "$here/bf16_probe.c" "$armb_root/x86-build$dir/"
armb_x86 aarch64-linux-gnu-gcc -O1 -std=gnu11 -Wall -o "$dir/bf16_probe" "$dir/bf16_probe.c" -ldnnl
# shellcheck disable=SC2016  # dpkg-query's format
armb_log "oneDNN $(armb_arm dpkg-query -W -f='${Version}' libdnnl3.6) (libdnnl3.6)"
for armb_cpu in "${cpus[@]}"; do
  armb_log "QEMU_CPU=$armb_cpu"
  armb_arm "/x86-build$dir/bf16_probe"
done
