# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
# Sourced by the arm64 bench scripts (run-layers.sh, run-detect.sh): the Debian 13
# arm64 root that tests/debian13-arm64.sh keeps (VISIONDETECT_ARM64_ROOT; with its
# amd64 cross build root in x86-build/), used in place: held with the same lock
# ($root.lock, one user at a time), mounted (proc, sys read-only, dev) in a mount
# namespace of this run's own, so that the mounts go with the run however it ends. The
# root must exist: tests/debian13-arm64.sh --build-only makes it. A bench's packages
# are added to it with apt-get (the arm64 root's apt runs emulated: slow, once).
#
# Before sourcing: set -euo pipefail; armb_self (the script's path) and its arguments
# passed to armb_enter.

armb_root=${VISIONDETECT_ARM64_ROOT:-/var/cache/visiondetect/debian13-arm64}
: "${armb_self:?the sourcing script sets armb_self}"

armb_log() { printf '%s: %s\n' "${armb_name:-arm-bench}" "$*" >&2; }
armb_die() { armb_log "$*"; exit 1; }

# armb_enter "$@": as root, in a mount namespace of its own, the root locked and mounted
armb_enter() {
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || armb_die "needs root (chroot, mount)"
    exec sudo -E "$BASH" "$armb_self" "$@"
  fi
  if [ "${ARMB_IN_NS:-0}" != 1 ]; then
    ARMB_IN_NS=1 exec unshare --mount --propagation private -- "$BASH" "$armb_self" "$@"
  fi
  [ -x "$armb_root/bin/sh" ] && [ -x "$armb_root/x86-build/bin/sh" ] ||
    armb_die "$armb_root is not a Debian 13 arm64 root with x86-build/ (make it with tests/debian13-arm64.sh --build-only)"
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] ||
    armb_die "no qemu-aarch64 in binfmt_misc (tests/debian13-arm64.sh sets it up)"
  exec 9> "$armb_root.lock"
  if ! flock -n 9; then
    armb_log "another run holds $armb_root.lock: waiting for it"
    flock 9
  fi
  local r
  for r in "$armb_root" "$armb_root/x86-build"; do
    mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$r/sys"
    mount --rbind /dev "$r/dev"
    cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
  done
}

# armb_cpuinfo CPU: the arm64 root's /proc/cpuinfo made an aarch64 one for QEMU_CPU=CPU
# (2 cores), where it is known here. qemu-user 7.2 shows an aarch64 program the host's
# x86 /proc/cpuinfo, which cpuinfo (the library that XNNPACK and ONNX Runtime detect
# the CPU with) cannot parse: ONNX Runtime 1.32 dies of SIGSEGV at import. oneDNN and
# ACL read the ISA from the auxiliary vector, as cpuinfo does its features.
armb_cpuinfo() {
  local features part variant revision f i
  case $1 in
    neoverse-n1) part=0xd0c variant=0x3 revision=1
      features="fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs" ;;
    cortex-a76) part=0xd0b variant=0x4 revision=1
      features="fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp" ;;
    *) armb_log "no aarch64 /proc/cpuinfo known for QEMU_CPU=$1: the root sees the host's"
       return 0 ;;
  esac
  f="$(mktemp /tmp/armb-cpuinfo.XXXXXX)"
  for i in 0 1; do
    printf 'processor\t: %s\nBogoMIPS\t: 50.00\nFeatures\t: %s\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: %s\nCPU part\t: %s\nCPU revision\t: %s\n\n' \
      "$i" "$features" "$variant" "$part" "$revision"
  done > "$f"
  mount --bind "$f" "$armb_root/proc/cpuinfo"
  rm -f "$f"   # the mount keeps it
}

# armb_x86 CMD...: in the amd64 build root
armb_x86() {
  chroot "$armb_root/x86-build" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# armb_arm CMD...: in the arm64 root, under QEMU_CPU=$armb_cpu when set; VAR=VALUE
# words first pass more environment
armb_arm() {
  local e=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
    DEBIAN_FRONTEND=noninteractive)
  [ -z "${armb_cpu:-}" ] || e+=(QEMU_CPU="$armb_cpu")
  chroot "$armb_root" "${e[@]}" "$@"
}

# armb_packages x86|arm PACKAGE...: installed there unless they already are
armb_packages() {
  local where=$1 run=armb_x86 missing=() p armb_cpu=   # apt under qemu's default CPU
  shift
  [ "$where" = arm ] && run=armb_arm
  for p in "$@"; do
    $run dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
      missing+=("$p")
  done
  [ ${#missing[@]} = 0 ] && return 0
  armb_log "installing in the $where root: ${missing[*]}"
  $run apt-get update -q >/dev/null
  $run apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}
