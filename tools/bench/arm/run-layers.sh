#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The layer microbenchmark (layers_bench.c, layers_acl.cpp) cross-built in the arm64
# root's amd64 build root and run in the arm64 root under qemu-user: oneDNN (Debian's,
# the engine's library today) against XNNPACK and Arm Compute Library on the engine's
# fp32 layer shapes, once per thread count (issue 46, item 2; tools/bench/CPU.md).
#
#   tools/bench/arm/run-layers.sh [--cpu CPU] [--threads "1 2"] [--reps N] [-- BENCH-ARGS...]
#
#   --cpu CPU        QEMU_CPU for the runs (default neoverse-n1: NEON only)
#   --threads LIST   thread counts, one run each (default "1 2")
#   --reps N         rounds (one timed run of each library) per case at least, medians
#                    reported (default 3; layers_bench runs the small cases more
#                    rounds: --min-ms, 3000)
#   BENCH-ARGS       passed to layers_bench: --min-ms MS, --only NAME,..., --no-acl,
#                    --acl-fast-math
#
# The root: VISIONDETECT_ARM64_ROOT (default /var/cache/visiondetect/debian13-arm64, the
# test script's; held with its lock). Adds g++-aarch64-linux-gnu and the arm64 -dev
# packages of XNNPACK, pthreadpool and ACL to its build root, their libraries to the
# arm64 root, when missing. The binary is left in the build root's /tmp/vd-armbench/.
# On an arm64 machine (real hardware: the figures emulation cannot give) it builds with
# the machine's gcc and g++ and runs natively, no root and no qemu (--cpu ignored); it
# needs libdnnl-dev, libxnnpack-dev, libpthreadpool-dev and libarm-compute-dev there.
# Exit status: 1 when any library's output differs from oneDNN's (MISMATCH lines).
set -euo pipefail
armb_self="$(readlink -f "$0")"
armb_name=run-layers
here="$(dirname "$armb_self")"
# shellcheck source=tools/bench/arm/arm-root.sh
source "$here/arm-root.sh"

cpu=neoverse-n1 threads="1 2" reps=3 bench_args=()
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --) shift; bench_args=("$@"); break ;;
    -h|--help) sed -n '3,20p' "$armb_self" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) armb_die "unknown argument $1 (--help)" ;;
  esac
done

# on an arm64 machine: built with its own compilers and packages, run natively
if [ "$(uname -m)" = aarch64 ]; then
  out="${TMPDIR:-/tmp}/vd-armbench"
  mkdir -p "$out"
  v() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo '?'; }
  gcc -O2 -std=gnu11 -Wall -DLB_XNN_VERSION="\"$(v libxnnpack-dev)\"" -c "$here/layers_bench.c" \
    -o "$out/layers_bench.o"
  g++ -O2 -std=c++17 -Wall -DLB_ACL_VERSION="\"$(v libarm-compute-dev)\"" \
    -I/usr/include/aarch64-linux-gnu -c "$here/layers_acl.cpp" -o "$out/layers_acl.o"
  g++ -o "$out/layers_bench" "$out/layers_bench.o" "$out/layers_acl.o" -ldnnl -lXNNPACK \
    -lpthreadpool -larm_compute -lm
  status=0
  for t in $threads; do
    armb_log "native $(uname -m), $t thread(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    OMP_NUM_THREADS="$t" OMP_WAIT_POLICY=PASSIVE "$out/layers_bench" --threads "$t" \
      --reps "$reps" "${bench_args[@]}" || status=$?
  done
  exit "$status"
fi
armb_enter "${args[@]}"

armb_cpuinfo "$cpu"
armb_packages x86 g++-aarch64-linux-gnu libdnnl-dev:arm64 libxnnpack-dev:arm64 \
  libpthreadpool-dev:arm64 libarm-compute-dev:arm64
armb_packages arm libdnnl3.6 libxnnpack0.20241108 libpthreadpool0 libarm-compute43

dir=/tmp/vd-armbench
rm -rf "$armb_root/x86-build$dir/src"
mkdir -p "$armb_root/x86-build$dir/src"
cp "$here"/layers_bench.c "$here"/layers_bench.h "$here"/layers_acl.cpp "$armb_root/x86-build$dir/src/"
acl_version="$(armb_x86 dpkg-query -W -f='${Version}' libarm-compute-dev:arm64)"
xnn_version="$(armb_x86 dpkg-query -W -f='${Version}' libxnnpack-dev:arm64)"
armb_log "cross-building layers_bench (XNNPACK $xnn_version, ACL $acl_version)"
armb_x86 sh -ec "cd $dir
  aarch64-linux-gnu-gcc -O2 -std=gnu11 -Wall -DLB_XNN_VERSION='\"$xnn_version\"' \
    -c src/layers_bench.c -o layers_bench.o
  aarch64-linux-gnu-g++ -O2 -std=c++17 -Wall -DLB_ACL_VERSION='\"$acl_version\"' \
    -I/usr/include/aarch64-linux-gnu -c src/layers_acl.cpp -o layers_acl.o
  aarch64-linux-gnu-g++ -o layers_bench layers_bench.o layers_acl.o \
    -ldnnl -lXNNPACK -lpthreadpool -larm_compute -lm"

armb_cpu=$cpu
status=0
for t in $threads; do
  armb_log "QEMU_CPU=$cpu, $t thread(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  armb_arm OMP_NUM_THREADS="$t" OMP_WAIT_POLICY=PASSIVE "/x86-build$dir/layers_bench" \
    --threads "$t" --reps "$reps" "${bench_args[@]}" || status=$?
done
armb_log "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
