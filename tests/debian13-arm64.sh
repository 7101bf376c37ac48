#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The engine and the main job on arm64, emulated: a Debian 13 (trixie) arm64 root, or
# a Debian 12 (bookworm) one with --debian 12, made with debootstrap --foreign from the
# host's mirror and finished under qemu-user (binfmt_misc), a fresh clone of this
# repository's HEAD there, the engine and the GStreamer plugin (Debian 12: the engine
# alone, unless --gst) built for arm64 (no CUDA, no torch, no GStreamer analytics
# library), then run under QEMU_CPU=neoverse-n1 (NEON only, a Graviton 2; QEMU_CPU=max
# has SVE, BF16, I8MM): vd-detect --info under both, a detection of the bundled model
# on a generated frame, the parity with the x86 engine (built natively in the build
# root below: three models on two frames, stage by stage; tests/arm64/), the main job
# (pipelines/annotate.sh on a short generated clip, its MP4 and JSON Lines checked as
# tests/debian13.sh checks them: detections in the JSON) and meson's engine suite.
#
# The build, on an amd64 host, is a cross build (Debian's multiarch cross toolchain
# and the arm64 -dev packages, vd_engine_cross_packages and vd_gst_cross_packages) in
# an amd64 build root of the same release kept inside the arm64 root (x86-build/
# there), where the clone is bound at the same path: native speed, the same objects
# as the emulated gcc's, byte for byte. The arm64 root has vd_engine_run_packages
# (the engine's libraries alone: no compiler, no -dev package, no Python, no meson;
# --run and --shell add meson and python3; with `--build native`, or --run on a
# native build/, vd_engine_packages, gcc and the -dev packages, to build there,
# emulated) and vd_gst_run_packages (GStreamer's tools and the main job's elements;
# with --build native vd_gst_dev_packages too); vd-detect's checks, the arm64 side
# of the parity and the main job run there. The engine suite runs from the build
# root, meson there starting the arm64 test programs through binfmt_misc on its
# multiarch arm64 libraries (the -dev packages' runtime ones, the same versions),
# and the run's Python checks run there too, natively (a native build: both in the
# arm64 root). The plugin
# is built without GStreamer's analytics library (-Danalytics=disabled: its arm64
# -dev package pulls in OpenCV's, and the analytics code is the same C that the
# Debian 13 amd64 run checks) and without introspection data.
#
# tests/run.sh's part `arm64` (VISIONDETECT_ARM64=0 leaves it out of its default run;
# Debian 13 only: with --debian 12 the engine suite fails, see docs/testing.md).
# Emulated, the engine suite runs without kernels-nhwc, kernels-xnnpack,
# int8-xnnpack and context-xnnpack, which on a NEON-only CPU repeat the kernels,
# int8 and context tests (the
# engine runs XNNPACK on NHWC there anyway), without winograd (the engine's own
# Winograd runs on x86 alone, engine/cpu/vd_cpu_isa.c: own_winograd_ok; aarch64's
# 3x3 convolutions are XNNPACK's or oneDNN's), without vd-detect-stages (the lines
# vd-detect --stages prints: the plan's counts, taken before a layer's library is
# chosen, printed by the same C everywhere), and without fuzz-one-stage (the
# one-stage detectors' fuzz seeds: the loader's and the decoding's C, which are not
# Arm-specific: two minutes on the host, where fuzz takes one and four emulated; the
# R-CNN seeds still run in fuzz, with 100 header mutations each instead of 2000:
# VD_FUZZ_ITERATIONS; the poisoned weights, whose NaNs and infinities reach XNNPACK's
# operators, 20 models a seed instead of 60, a quarter of them poisoned in a head:
# VD_FUZZ_POISONED), and VD_TEST_EMULATED=1 shrinks the kernels test's
# models further than VD_TEST_SMALL (64/96 pixels, 8 proposals: the same kernels,
# layer for layer, docs/testing.md); where
# VISIONDETECT_ARM64_EXPORTS names a folder with the kernels test's torchvision
# exports (*-512.safetensors: tests/run.sh passes the host build's), they are copied
# into the clone's build and the test checks those models too (the root has no
# torch).
#
#   tests/debian13-arm64.sh [OPTION]... [SUITE]...
#
#   SUITE...       meson suites run in the root's build (default: engine)
#   --worktree     also apply the working tree's uncommitted changes to the clone (git
#                  diff HEAD, and the untracked files git does not ignore)
#   --debian 13|12 the Debian release (default 13, trixie; 12 is bookworm, whose
#                  root is another, VISIONDETECT_ARM64_DEBIAN12_ROOT)
#   --no-gst       the engine alone: built without GStreamer (-Dgstreamer=disabled),
#                  no main job, none of the plugin's packages installed (the default
#                  with --debian 12: there, without a usable XNNPACK, oneDNN runs
#                  reference kernels under neoverse-n1 and one frame takes 10-20
#                  minutes emulated)
#   --gst          the plugin and the main job (the default with Debian 13)
#   --no-parity    leave the parity with the x86 engine out (the default with
#                  --debian 12, where each emulated frame takes minutes)
#   --parity       the parity phase (the default with Debian 13)
#   --frames N     the main job's clip: N frames of videotestsrc's ball, 320x240
#                  (default 3, one of each colour scheme; each frame's inference takes
#                  about 20 s emulated)
#   --build-only   stop after the build
#   --build cross|native
#                  cross (the default on an amd64 host) or native: meson and gcc in
#                  the arm64 root, emulated (the default elsewhere)
#   --cpu CPU      QEMU_CPU for the checks, the tests and --run (default: QEMU_CPU
#                  from the environment, else neoverse-n1; qemu-aarch64 -cpu help
#                  lists them)
#   --timeout-multiplier N
#                  meson test's, for emulation (default 10)
#   --run CMD      run CMD (sh -c) in the root's clone (/build/visiondetect in the
#                  root) with the root mounted and QEMU_CPU=CPU, nothing else: the
#                  clone as the last run left it (build/ included; cloned when there
#                  is none); its exit status is the run's
#   --shell        an interactive bash there, like --run
#   --update       with --run or --shell: first bring the clone to HEAD (and, with
#                  --worktree, the working tree) in place, keeping build/, and
#                  rebuild what changed there (ninja -C build, in the build root for
#                  a cross build), so that `--update --run 'meson test -C build
#                  --no-rebuild ops'` tests the working tree in seconds
#   -h, --help     this text
#
# The root is kept in VISIONDETECT_ARM64_ROOT (default /var/cache/visiondetect/
# debian13-arm64; with --debian 12, VISIONDETECT_ARM64_DEBIAN12_ROOT, default
# /var/cache/visiondetect/debian12-arm64) and reused like tests/debian13.sh's
# (tests/debian-root.sh has what the two share: the stamp, the mirror, the mounts
# undone on every exit, the mount namespace, the phases and the summary line); the
# build root in it likewise, with a stamp of its own. A root whose stamp names
# another release is refused, never made again in place. VISIONDETECT_ARM64_MIRROR
# overrides the mirror; VISIONDETECT_ARM64_UNSHARE=0 runs in the caller's mount
# namespace.
#
# The host needs an aarch64 interpreter in binfmt_misc: binfmt_misc is mounted when it
# is not, qemu-user-static and binfmt-support are installed when missing (Debian
# packages, as the other commands install theirs), and when that registers none
# (binfmt_misc mounted after they were installed) the entry is enabled with
# update-binfmts, else registered here (qemu-aarch64, flags F). An entry without the F
# flag (the emulator opened at each exec, by its path in the root) gets the emulator
# copied into the root.
#
# Environment passed into the root: CI, ONEDNN_*, DNNL_*, QEMU_* (QEMU_CPU as --cpu
# says, for the checks, the tests and --run only: the packages and the build run
# under qemu's default CPU); otherwise env -i with PATH, HOME=/root and LANG=C.UTF-8.
# Also: VISIONDETECT_ARM64_WORKTREE=1 (same as --worktree), VISIONDETECT_ARM64_EXPORTS
# (above).
# Needs root (runs itself with sudo otherwise), git, and debootstrap (installed when
# missing).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
self="$repo/tests/debian13-arm64.sh"
vdr_prefix=VISIONDETECT_ARM64
vdr_arch=arm64
vdr_root_env_globs=(CI 'ONEDNN_*' 'DNNL_*' 'QEMU_*')
# shellcheck source=tests/debian-root.sh
source "$repo/tests/debian-root.sh"
vdr_become_root "$@"

worktree="${VISIONDETECT_ARM64_WORKTREE:-0}" build_only=0 suites=() cpu="${QEMU_CPU:-neoverse-n1}"
multiplier=10 run_cmd="" shell=0 update=0 build=native debian=13 gst="" frames=3 parity=""
[ "$(dpkg --print-architecture 2>/dev/null)" != amd64 ] || build=cross
while [ $# -gt 0 ]; do
  case "$1" in
    --worktree) worktree=1 ;;
    --build-only) build_only=1 ;;
    --build) [ $# -ge 2 ] || die "--build needs cross or native"; build=$2; shift ;;
    --debian) [ $# -ge 2 ] || die "--debian needs 13 or 12"; debian=$2; shift ;;
    --no-gst) gst=0 ;;
    --gst) gst=1 ;;
    --no-parity) parity=0 ;;
    --parity) parity=1 ;;
    --frames) [ $# -ge 2 ] || die "--frames needs a number"; frames=$2; shift ;;
    --cpu) [ $# -ge 2 ] || die "--cpu needs a CPU"; cpu=$2; shift ;;
    --timeout-multiplier) [ $# -ge 2 ] || die "--timeout-multiplier needs a number"; multiplier=$2; shift ;;
    --run) [ $# -ge 2 ] || die "--run needs a command"; run_cmd=$2; shift ;;
    --shell) shell=1 ;;
    --update) update=1 ;;
    -h|--help) vdr_usage; exit 0 ;;
    arm64) die "arm64 is this run: no root inside the root" ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) suites+=("$1") ;;
  esac
  shift
done
[ ${#suites[@]} -gt 0 ] || suites=(engine)
[[ "$multiplier" =~ ^[1-9][0-9]*$ ]] || die "--timeout-multiplier: a whole number, not '$multiplier'"
[[ "$cpu" =~ ^[A-Za-z0-9._-]+$ ]] || die "--cpu: a qemu CPU name, not '$cpu'"
[[ "$frames" =~ ^[1-9][0-9]*$ ]] || die "--frames: a whole number, not '$frames'"
# the release: its suite, its root (and the variable that moves it), its stamps
case "$debian" in
  13|trixie) debian=13 vdr_suite=trixie root_var=VISIONDETECT_ARM64_ROOT ;;
  12|bookworm) debian=12 vdr_suite=bookworm root_var=VISIONDETECT_ARM64_DEBIAN12_ROOT ;;
  *) die "--debian: 13 (trixie) or 12 (bookworm), not '$debian'" ;;
esac
[ -n "$gst" ] || if [ "$debian" -ge 13 ]; then gst=1; else gst=0; fi
[ -n "$parity" ] || if [ "$debian" -ge 13 ]; then parity=1; else parity=0; fi
vdr_stamp_format="visiondetect Debian $debian arm64 root, format 1"
build_stamp_format="visiondetect Debian $debian amd64 build root for arm64, format 1"
[ -z "$run_cmd" ] || [ $shell -eq 0 ] || die "--run and --shell: one of them"
case "$build" in
  native) ;;
  cross) [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] \
           || die "--build cross needs an amd64 Debian host (its build root is amd64)" ;;
  *) die "--build: cross or native, not '$build'" ;;
esac
[ $update -eq 0 ] || [ -n "$run_cmd" ] || [ $shell -eq 1 ] || die "--update goes with --run or --shell"
vdr_label="Debian $debian arm64 ($vdr_suite, QEMU_CPU=$cpu)"
# QEMU_CPU is --cpu's, and only where it is given (in_root_cpu); the rest runs under
# qemu's default CPU
unset QEMU_CPU

# vdr_set_root reads VISIONDETECT_ARM64_ROOT: the release's own variable's value
# shellcheck disable=SC2034  # read by vdr_set_root, through vdr_prefix
VISIONDETECT_ARM64_ROOT="${!root_var:-}"
vdr_set_root "/var/cache/visiondetect/debian$debian-arm64"
# another release's root is not made again in place (its stamp's format differs)
if [ -f "$root/$stamp_name" ] && ! grep -qx "suite $vdr_suite" "$root/$stamp_name"; then
  die "$root holds a root of another release ($(sed -n 's/^suite //p' "$root/$stamp_name")), not $vdr_suite: set $root_var to another folder"
fi

# the build root (amd64, for the cross build), inside the arm64 root; with a cross
# build the run's Python and meson run there (in_python_root, tests/debian-root.sh)
build_root="$root/x86-build"
[ "$build" != cross ] || vdr_python_root="$build_root"
cross_file="$clone_dir/.git/arm64-cross.ini"   # in the clone: the same file in both roots

if [ -n "$run_cmd" ] || [ $shell -eq 1 ]; then
  planned=(root clone packages)
  [ $update -eq 0 ] || planned+=(build)
  planned+=(run)
else
  planned=(root clone packages)
  [ "$build" != cross ] || planned+=(build-root)
  planned+=(build)
  if [ $build_only -eq 0 ]; then
    planned+=(info detect)
    [ $parity -eq 0 ] || planned+=(parity)
    [ $gst -eq 0 ] || planned+=(annotate)
    planned+=(tests)
  fi
fi

# ---- the emulator ------------------------------------------------------------------
binfmt=/proc/sys/fs/binfmt_misc
binfmt_entry=""   # the enabled binfmt_misc entry for aarch64 ELF files
# aarch64 ELF executables: e_ident (64-bit, little-endian, version 1), e_machine 183
aarch64_magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
aarch64_mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
find_binfmt_entry() {
  local f
  binfmt_entry=""
  for f in "$binfmt"/*; do
    case "$(basename "$f")" in register|status) continue ;; esac
    [ -f "$f" ] || continue
    head -n 1 "$f" | grep -qx enabled || continue
    grep -q '^magic 7f454c460201010000000000000000000200b700$' "$f" || continue
    binfmt_entry=$f
    return 0
  done
  return 1
}
setup_binfmt() {
  local qemu
  if [ ! -e "$binfmt/status" ]; then
    log "mounting binfmt_misc on $binfmt"
    mount -t binfmt_misc binfmt_misc "$binfmt" || die "binfmt_misc cannot be mounted: no arm64 emulation"
  fi
  [ "$(cat "$binfmt/status")" = enabled ] || die "binfmt_misc is disabled ($binfmt/status)"
  find_binfmt_entry && return 0
  # shellcheck source=tools/debian-packages.sh
  source "$repo/tools/debian-packages.sh"
  vd_install_missing_packages qemu-user-static binfmt-support
  find_binfmt_entry && return 0
  if command -v update-binfmts >/dev/null; then
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    find_binfmt_entry && return 0
  fi
  qemu="$(command -v qemu-aarch64-static)" || die "no qemu-aarch64-static after installing qemu-user-static"
  [ ! -e "$binfmt/qemu-aarch64" ] || die "$binfmt/qemu-aarch64 exists but is not an enabled aarch64 entry"
  log "registering $qemu for aarch64 ELF files in binfmt_misc (qemu-aarch64, flags F)"
  printf ':qemu-aarch64:M::%s:%s:%s:F' "$aarch64_magic" "$aarch64_mask" "$qemu" > "$binfmt/register"
  find_binfmt_entry || die "the aarch64 binfmt_misc entry did not register"
}
# An entry without F opens its interpreter at each exec, by its path in the root.
vdr_prepare_root() {
  local interpreter
  [ -n "$binfmt_entry" ] || return 0   # an arm64 host
  grep -q '^flags:.*F' "$binfmt_entry" && return 0
  interpreter="$(sed -n 's/^interpreter //p' "$binfmt_entry")"
  mkdir -p "$1$(dirname "$interpreter")"
  cp -L "$interpreter" "$1$interpreter"
}

# ---- the build root ----------------------------------------------------------------
# Made or reused like the arm64 root (the shared code, with root, vdr_arch and the
# stamp's format as the build root's), mounted (proc, dev; the arm64 root's /build
# bound onto its /build, so that the clone has the same path in both), arm64 added to
# dpkg and vd_engine_cross_packages installed (and vd_gst_cross_packages, unless
# --no-gst).
build_root_phase() {
  local note t0
  begin build-root "$build_root (amd64: the cross toolchain and the arm64 -dev packages)"
  # the shared functions on the build root (bash's dynamic scope)
  local root="$build_root" vdr_arch="" vdr_stamp_format="$build_stamp_format"
  if root_usable; then
    note="reused, $(sed -n 's/^made //p' "$root/$stamp_name")"
  else
    t0=$SECONDS
    if [ -e "$root" ]; then
      log "$root is not usable ($why): making it again"
      remove_tree "$root"
    fi
    make_root
    note="made: debootstrap $(dur "$debootstrap_s"), base setup $(dur "$setup_s")"
  fi
  setup_mounts
  copy_host_network_files "$root"
  mkdir -p "$root/build" "$(dirname "$clone")"
  mount --bind "$(dirname "$clone")" "$root/build"
  mounted+=("$root/build")
  t0=$SECONDS
  # shellcheck disable=SC2016  # expanded in the build root
  in_root "$clone_dir" bash -c 'dpkg --configure -a &&
    { dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64 && apt-get update -q; }; } &&
    source tools/debian-packages.sh && pkgs=("${vd_engine_cross_packages[@]}") &&
    { [ "$1" = 0 ] || pkgs+=("${vd_gst_cross_packages[@]}"); } && vd_install_missing_packages "${pkgs[@]}" &&
    { dpkg-query -W -f="\${Package} \${Version} \${Architecture}\n" gcc-aarch64-linux-gnu libdnnl-dev:arm64 \
        libgstreamer1.0-dev:arm64 meson 2>/dev/null || true; }' \
    debian13-arm64.sh "$gst" \
    || exit
  finish "$note; packages $(dur $((SECONDS - t0)))"
}
# in_build_root COMMAND ARG...: in the clone, in the build root
in_build_root() { in_root_at "$build_root" "$clone_dir" "$@"; }

# meson's cross file: Debian's triplet-named tools (the arm64 root has the same names
# for its own gcc and pkgconf, so the build tree works in both); Debian 12's meson
# (1.0) knows pkg-config by its older key, pkgconfig, which 1.3 and later deprecate
write_cross_file() {
  local pkg_config_key=pkg-config
  [ "$debian" -ge 13 ] || pkg_config_key=pkgconfig
  cat > "$root$cross_file" <<CROSS
[binaries]
c = 'aarch64-linux-gnu-gcc'
ar = 'aarch64-linux-gnu-gcc-ar'
strip = 'aarch64-linux-gnu-strip'
$pkg_config_key = 'aarch64-linux-gnu-pkg-config'

[properties]
# the arm64 programs run through binfmt_misc
needs_exe_wrapper = false

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'aarch64'
endian = 'little'
CROSS
}

# COMMAND in the clone under QEMU_CPU=CPU: in_root_cpu CPU COMMAND ARG... in the
# arm64 root; in_python_root_cpu CPU COMMAND ARG... in the root whose Python and
# meson run (the build root of a cross build, where the arm64 programs meson starts
# run through binfmt_misc on its multiarch arm64 libraries; the arm64 root with a
# native build)
with_cpu() {   # with_cpu RUNNER CPU COMMAND ARG...
  local runner=$1 c=$2 saved=("${root_env[@]}")
  shift 2
  root_env+=("QEMU_CPU=$c")
  # emulated: the kernels test runs its models at a small size (tests/engine/test_kernels.c),
  # the fuzz test a twentieth of its header mutations (the loader's C, not Arm-specific;
  # the host's ASan + UBSan run has them all) and a third of its poisoned models (each a
  # context and a frame: XNNPACK's operators on NaN and infinities, both heads)
  [ "$(uname -m)" = aarch64 ] ||
    root_env+=(VD_TEST_EMULATED=1 VD_FUZZ_ITERATIONS=100 VD_FUZZ_POISONED=20)
  local rc=0
  "$runner" "$@" || rc=$?
  root_env=("${saved[@]}")
  return "$rc"
}
in_clone() { in_root "$clone_dir" "$@"; }
in_root_cpu() { with_cpu in_clone "$@"; }
in_python_root_cpu() { with_cpu in_python_root "$@"; }

# ---- the run -----------------------------------------------------------------------
vdr_start
if [ "$(uname -m)" = aarch64 ]; then
  log "an arm64 host: the root runs natively (QEMU_CPU has no effect)"
else
  setup_binfmt
  log "aarch64 through $binfmt_entry: $(sed -n 's/^interpreter //p' "$binfmt_entry") ($(sed -n 's/^flags: //p' "$binfmt_entry"))"
fi
vdr_root_phase
if [ -n "$run_cmd" ] || [ $shell -eq 1 ]; then
  if [ $update -eq 1 ] || [ ! -d "$clone/.git" ]; then
    vdr_clone_phase "$worktree" 1
  else
    begin clone "the clone as the last run left it"
    finish "kept, HEAD $(git -c safe.directory='*' -C "$clone" rev-parse --short=12 HEAD)"
  fi
else
  vdr_clone_phase "$worktree"
fi

# the arm64 root's packages: the engine's (to run its suite, or with a native build to
# build it too), and the main job's (to run it; to build it too in a native build). A
# --run on a clone whose build/ is native builds there: the native lists.
pkg_build=$build
if [ -n "$run_cmd$([ $shell -eq 1 ] && echo shell)" ] && [ -f "$clone/build/build.ninja" ] &&
   ! grep -q '^cross_file' "$clone/build/meson-private/cmd_line.txt" 2>/dev/null; then
  pkg_build=native
fi
gst_packages=none
[ $gst -eq 0 ] || gst_packages=$pkg_build
begin packages "tools/debian-packages.sh's $(case $pkg_build in
  cross) echo vd_engine_run_packages ;; *) echo vd_engine_packages ;; esac)$(case $gst_packages in
  cross) echo ", vd_gst_run_packages" ;; native) echo ", vd_gst_run_packages, vd_gst_dev_packages" ;;
  esac) (emulated apt)"
# (--run and --shell: meson and python3 too, for commands such as `meson test` in
# the root, which the run itself starts from the build root)
interactive=0
[ -z "$run_cmd" ] && [ $shell -eq 0 ] || interactive=1
# shellcheck disable=SC2016  # expanded in the root
# (dpkg --configure -a first: finishes an installation a killed run interrupted)
in_root "$clone_dir" bash -c 'dpkg --configure -a && source tools/debian-packages.sh &&
  case "$1" in
    cross) pkgs=("${vd_engine_run_packages[@]}"); [ "$3" = 0 ] || pkgs+=(meson python3) ;;
    *) pkgs=("${vd_engine_packages[@]}") ;;
  esac &&
  case "$2" in
    cross) pkgs+=("${vd_gst_run_packages[@]}") ;;
    native) pkgs+=("${vd_gst_run_packages[@]}" "${vd_gst_dev_packages[@]}") ;;
  esac && vd_install_missing_packages "${pkgs[@]}" &&
  { dpkg-query -W -f="\${Package} \${Version} \${Architecture}\n" "libdnnl[0-9]*" meson gcc \
      gstreamer1.0-tools 2>/dev/null || true; }' \
  debian13-arm64.sh "$pkg_build" "$gst_packages" "$interactive" \
  || exit
finish

if [ -n "$run_cmd" ] || [ $shell -eq 1 ]; then
  if [ $update -eq 1 ]; then
    if [ ! -f "$clone/build/build.ninja" ]; then
      begin build "none: no build/ in the clone yet"
      finish "no build/"
    elif grep -q '^cross_file' "$clone/build/meson-private/cmd_line.txt" 2>/dev/null; then
      build_root_phase
      begin build "ninja -C build (cross, in the build root)"
      in_build_root ninja -C build || exit
      finish
    else
      begin build "ninja -C build (native, emulated)"
      in_root "$clone_dir" ninja -C build || exit
      finish
    fi
  fi
  if [ $shell -eq 1 ]; then
    begin run "an interactive bash in $clone_dir (QEMU_CPU=$cpu)"
    # in the foreground: it needs the terminal
    rc=0
    # shellcheck disable=SC2016  # expanded by the root's bash
    chroot "$root" /usr/bin/env -i "${root_env[@]}" QEMU_CPU="$cpu" TERM="${TERM:-dumb}" \
      /bin/bash -c 'cd "$1" && exec bash -i' sh "$clone_dir" || rc=$?
  else
    begin run "$run_cmd (QEMU_CPU=$cpu)"
    rc=0
    in_root_cpu "$cpu" sh -c "$run_cmd" || rc=$?
  fi
  [ $rc -eq 0 ] || exit "$rc"
  finish "exit 0"
  exit 0
fi

setup_args=(--buildtype=release -Dcuda=disabled -Dparity_tests=disabled)
if [ $gst -eq 1 ]; then
  # the plugin without the analytics library and introspection data (see the top)
  setup_args+=(-Dgstreamer=enabled -Danalytics=disabled -Dintrospection=disabled)
  build_what="the engine and the plugin (release; no CUDA, parity tests, analytics or introspection)"
else
  setup_args+=(-Dgstreamer=disabled)
  build_what="the engine (release; no GStreamer, CUDA or parity tests)"
fi
# shellcheck disable=SC2016  # expanded by the root's sh
setup_and_build='meson setup build "$@" >/tmp/meson-setup.log 2>&1 || { cat /tmp/meson-setup.log; exit 1; }
  grep -A11 "^  Features" /tmp/meson-setup.log || true
  ninja -C build'
if [ "$build" = cross ]; then
  build_root_phase
  write_cross_file
  begin build "meson setup build --cross-file && ninja -C build, in the build root: $build_what"
  in_build_root sh -c "$setup_and_build" sh --cross-file "$cross_file" "${setup_args[@]}" || exit
  finish "cross, gcc $(in_build_root aarch64-linux-gnu-gcc -dumpfullversion)"
else
  begin build "meson setup build && ninja -C build, emulated: $build_what"
  in_root "$clone_dir" sh -c "$setup_and_build" sh "${setup_args[@]}" || exit
  finish "native, emulated gcc $(in_root "$clone_dir" gcc -dumpfullversion)"
fi
[ $build_only -eq 0 ] || exit 0

begin info "vd-detect --info under QEMU_CPU=$cpu and QEMU_CPU=max"
info_note="" cpus=("$cpu")
[ "$cpu" = max ] || cpus+=(max)
for c in "${cpus[@]}"; do
  out="$(in_root_cpu "$c" build/tools/vd-detect --info 2>&1)" || {
    printf '%s\n' "$out" >&2
    die "vd-detect --info fails under QEMU_CPU=$c"
  }
  printf 'QEMU_CPU=%s:\n%s\n' "$c" "$out" | sed 's/^/  /' >&2
  info_note+="${info_note:+; }$c: $(printf '%s\n' "$out" | sed -n 's/^engine: cpu: //p' | cut -d, -f1-3)"
  # where XNNPACK runs the layers: without /sys (a chroot or container without
  # sysfs) it cannot initialise, and the engine must keep oneDNN's, saying why
  # (--propagation unchanged: this run's namespace is private already, and qemu-user
  # refuses unshare's own change of the root's propagation)
  if [ "$c" = "$cpu" ] && grep -q 'layers XNNPACK' <<< "$out"; then
    out="$(in_root_cpu "$c" unshare -m --propagation unchanged sh -c 'umount -l /sys && exec build/tools/vd-detect --info' 2>&1)" || {
      printf '%s\n' "$out" >&2
      die "vd-detect --info fails without /sys under QEMU_CPU=$c"
    }
    grep -q 'layers oneDNN (.*XNNPACK did not initialise' <<< "$out" || {
      printf '%s\n' "$out" >&2
      die "without /sys, vd-detect --info does not say that XNNPACK did not initialise"
    }
    info_note+=" (without /sys: layers oneDNN, saying why)"
  fi
done
finish "$info_note"

# A 320x240 frame with a red disc (a ball) and a blue square (a box) over a grey
# gradient, written as a PPM by Python (in_python_root), then the bundled model on it: the
# ball and the box must be found (the model's classes: models/README.md).
make_frame='
import sys
w, h = 320, 240
grey = bytearray()
for x in range(w):
    grey += bytes((60 + x * 60 // w,)) * 3
rows = []
for y in range(h):
    row = bytearray(grey)
    if 85 <= y < 155:
        row[190 * 3:260 * 3] = bytes((30, 60, 210)) * 70
    dy = y - 120
    if dy * dy <= 35 * 35:
        half = int((35 * 35 - dy * dy) ** 0.5)
        row[(90 - half) * 3:(91 + half) * 3] = bytes((220, 30, 30)) * (2 * half + 1)
    rows.append(bytes(row))
with open(sys.argv[1], "wb") as f:
    f.write(b"P6\n%d %d\n255\n" % (w, h) + b"".join(rows))'
check_detections='
import json, sys
dets = json.load(open(sys.argv[1]))["detections"]
print(", ".join("%s %.4f [%s]" % (d["label_name"], d["score"], " ".join("%.2f" % v for v in d["box"]))
                for d in dets))
sys.exit(0 if {"ball", "box"} <= {d["label_name"] for d in dets} else 1)'
begin detect "the bundled model on a generated frame (QEMU_CPU=$cpu)"
in_python_root python3 -c "$make_frame" build/arm64-frame.ppm || die "the frame's Python failed"
in_root_cpu "$cpu" sh -c 'build/tools/vd-detect --json build/arm64-frame.ppm > build/arm64-frame.json' \
  || die "vd-detect failed on build/arm64-frame.ppm"
note="$(in_python_root python3 -c "$check_detections" build/arm64-frame.json)" || {
  cat "$clone/build/arm64-frame.json" >&2
  die "vd-detect did not find the ball and the box on build/arm64-frame.ppm (found: ${note:-nothing})"
}
finish "$note"

# Parity with the x86 engine (tests/arm64/parity.sh says how): the engine built natively
# in the amd64 build root (oneDNN, its default layers) and this one run on the same
# model files (the bundled model, ResNet-50-FPN, MobileNetV3-Large-320-FPN and Mask
# R-CNN with random weights: tests/engine/make_parity_models.c) and frames (the detect
# phase's and a 360x480 one; Mask R-CNN the first only), every dumped stage compared
# (tests/arm64/parity.py: its tolerances and why), after a self-check that a model 1 %
# off fails the comparison.
# The x86 engine needs the amd64 build root: an amd64 host's cross build.
if [ $parity -eq 1 ] && [ "$build" = cross ]; then
  begin parity "the x86 engine (oneDNN) against this one (QEMU_CPU=$cpu) on 3 models and 2 frames, stage by stage"
  t0=$SECONDS
  in_build_root bash tests/arm64/parity.sh x86 build/parity || die "the x86 engine's side of the parity failed"
  x86_s=$((SECONDS - t0)) t0=$SECONDS
  in_root_cpu "$cpu" bash tests/arm64/parity.sh arm64 build/parity || die "the arm64 engine's side of the parity failed"
  arm64_s=$((SECONDS - t0)) t0=$SECONDS
  in_build_root python3 tests/arm64/parity.py compare build/parity || exit
  finish "x86 $(dur "$x86_s") (build, models, runs, self-check), arm64 $(dur "$arm64_s"), compare $(dur $((SECONDS - t0)))"
elif [ $parity -eq 1 ]; then
  begin parity "the x86 engine against this one"
  finish "skipped: the x86 engine is built in the cross build's amd64 build root (--build cross, an amd64 host)"
fi

# The main job as tests/debian13.sh runs it, on a clip short enough for emulation:
# pipelines/annotate.sh with the plugin built above (VISIONDETECT_NO_BUILD=1: its
# package step and build are the amd64 run's; here the packages phase and the build
# did them), checked the same way (tests/debian-root.sh, vdr_check_annotated).
if [ $gst -eq 1 ]; then
  begin annotate "VISIONDETECT_NO_BUILD=1 pipelines/annotate.sh --frames $frames --size 320x240 (the main job, QEMU_CPU=$cpu)"
  rm -f "$clone/out/annotated.mp4" "$clone/out/annotated.jsonl"
  in_root_cpu "$cpu" env VISIONDETECT_NO_BUILD=1 pipelines/annotate.sh --frames "$frames" --size 320x240 \
    || die "pipelines/annotate.sh failed"
  note="$(vdr_check_annotated)" || exit
  finish "$note"
fi

# Each test's result and seconds from meson's log (testlog.json), one line each.
test_table='
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print("  %-8s %7.1f s  %s" % (t["result"], t["duration"], t["name"]))'
# the kernels test's torchvision exports from the host's build (see the header)
exports="${VISIONDETECT_ARM64_EXPORTS:-}"
if [ -n "$exports" ] && compgen -G "$exports/*-512.safetensors" >/dev/null; then
  mkdir -p "$clone/build/exports"
  cp "$exports"/*-512.safetensors "$clone/build/exports/"
  root_env+=("VD_TEST_EXPORTS=$clone_dir/build/exports")
  log "the kernels test's torchvision exports from $exports"
fi
begin tests "meson test --suite ${suites[*]} (QEMU_CPU=$cpu, timeouts x$multiplier)"
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done
# emulated: the suites' tests by name, the kernels test's repeats left out (see the
# header)
if [ "$(uname -m)" != aarch64 ]; then
  mapfile -t names < <(in_python_root meson test -C build --no-rebuild --list \
                         "${suite_args[@]}" | sed -n 's|^.* / ||p' |
                       grep -vx -e kernels-nhwc -e kernels-xnnpack -e int8-xnnpack -e context-xnnpack \
                         -e winograd -e vd-detect-stages -e fuzz-one-stage)
  [ ${#names[@]} -gt 0 ] || die "meson test --list: no test in ${suites[*]}"
  suite_args+=("${names[@]}")
fi
rc=0
in_python_root_cpu "$cpu" meson test -C build --no-rebuild --print-errorlogs --num-processes 2 \
  --timeout-multiplier "$multiplier" "${suite_args[@]}" || rc=$?
if [ -f "$clone/build/meson-logs/testlog.json" ]; then
  log "each test under QEMU_CPU=$cpu:"
  in_python_root python3 -c "$test_table" build/meson-logs/testlog.json >&2 || true
fi
[ $rc -eq 0 ] || exit "$rc"
finish "${suites[*]}"
