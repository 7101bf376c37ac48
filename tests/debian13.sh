#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The README's two commands on Debian 13 (trixie), in a minimal root made with
# debootstrap: in a fresh clone of this repository's HEAD there, pipelines/annotate.sh
# (the main job; its MP4 and JSON Lines checked, and its own build's GstAnalytics
# entries) and tests/run.sh with the suites chosen for Debian 13. Both install their
# packages inside the root themselves, from tools/debian-packages.sh; this script
# installs each list in a phase of its own first (nothing to do once the root has
# them): the main job's before the main job and the tests' after it, so that in a new
# root the main job builds with its own packages only.
#
# The main job's build (build/ as pipelines/annotate.sh leaves it, before tests/run.sh
# configures it again) is checked to write GStreamer's analytics entries, which
# Debian 13's GStreamer (1.26) has: the package of gstreamer-analytics-1.0 must be
# one of vd_main_packages or a dependency of one (a reused root holds the tests'
# packages too), and a buffer of annotate.sh's pipeline through that build's plugin
# must carry one object-detection entry per ROI meta, at least one in all
# (tests/gst/test_analytics.py main-build).
#
#   tests/debian13.sh [OPTION]... [SUITE]...
#
#   SUITE...       tests/run.sh's suites in the root (default: engine tracker parity gst
#                  model; no gpu: CUDA is host-only, Debian 13's main archive has no CUDA
#                  toolkit, so meson finds no nvcc in the root)
#   --worktree     also apply the working tree's uncommitted changes to the clone (git
#                  diff HEAD, and the untracked files git does not ignore)
#   --build-only   stop after the build (meson setup build && ninja -C build in the clone)
#   -h, --help     this text
#
# The ASan + UBSan engine run and the libFuzzer harnesses are left out in the root
# (VISIONDETECT_SANITIZERS=0): the host run covers the same engine code.
#
# The root is kept in VISIONDETECT_DEBIAN13_ROOT (default /var/cache/visiondetect/
# debian13) and reused while it has the stamp written after a successful debootstrap
# and base setup, and runs /bin/true; otherwise it is removed and made again, in
# ROOT.tmp first, renamed when complete. The mirror is the host's: the first deb entry
# of /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources whose suite
# is the host's release codename (VISIONDETECT_DEBIAN13_MIRROR overrides it).
# The host's resolv.conf and hosts are copied in. proc, sys, a dev of its own (tmpfs
# with the usual nodes, devpts, shm) are mounted for the run and unmounted on every exit; the run is in a mount namespace of its own
# where unshare(1) allows one (VISIONDETECT_DEBIAN13_UNSHARE=0: in the caller's), so a
# killed run leaves no mounts either.
#
# Environment passed into the root: CI, ONEDNN_*, DNNL_*; otherwise env -i with PATH,
# HOME=/root and LANG=C.UTF-8.
# Also: VISIONDETECT_DEBIAN13_WORKTREE=1 (same as --worktree).
# Needs root (runs itself with sudo otherwise), git, and debootstrap (installed when
# missing, like the README commands' packages). tests/debian-root.sh has what this
# run shares with tests/debian13-arm64.sh (the root, the mounts, the clone, the phases).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
self="$repo/tests/debian13.sh"
vdr_prefix=VISIONDETECT_DEBIAN13
vdr_suite=trixie
vdr_arch=""
vdr_label="Debian 13 ($vdr_suite)"
vdr_stamp_format="visiondetect Debian 13 root, format 1"
vdr_root_env_globs=(CI 'ONEDNN_*' 'DNNL_*')
# shellcheck source=tests/debian-root.sh
source "$repo/tests/debian-root.sh"
vdr_become_root "$@"

default_suites=(engine tracker parity gst model)
# Meson suites left out in the root, each with its reason (the bundled model before
# 2026-12-06 needed model-overlay here: Debian 13's font rendering drew a DejaVu
# Serif 72 glyph it answered as a ring at 0.50):
#   once: the tests whose code under test is the same in the root as on the host
#   (the model loader's fuzzing and malformed files, the soak's 20 000 frames, the
#   F16 weights' and eps-0 parity, which check the loader and the engine's own C; the
#   bundled model on videotestsrc's ball, which the main job here runs and the
#   patterns test checks with every pattern; its mAP against torchvision's, whose
#   engine side the parity suite checks here against this torchvision):
#   the host run has them, and the whole test command has to stay under 30 minutes
no_suites=(once)

worktree="${VISIONDETECT_DEBIAN13_WORKTREE:-0}" build_only=0 suites=()
while [ $# -gt 0 ]; do
  case "$1" in
    --worktree) worktree=1 ;;
    --build-only) build_only=1 ;;
    -h|--help) vdr_usage; exit 0 ;;
    debian13) die "debian13 is this run: no root inside the root" ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) suites+=("$1") ;;
  esac
  shift
done
[ ${#suites[@]} -gt 0 ] || suites=("${default_suites[@]}")

vdr_set_root /var/cache/visiondetect/debian13

planned=(root clone packages)
if [ $build_only -eq 1 ]; then planned+=(test-packages build); else planned+=(annotate test-packages analytics tests); fi

vdr_start
vdr_root_phase
vdr_clone_phase "$worktree"

begin packages "tools/debian-packages.sh's vd_main_packages, as pipelines/annotate.sh installs them"
# shellcheck disable=SC2016  # expanded in the root
# (dpkg --configure -a first: finishes an installation a killed run interrupted)
in_root "$clone_dir" bash -c 'dpkg --configure -a && source tools/debian-packages.sh &&
  vd_install_missing_packages "${vd_main_packages[@]}" &&
  { dpkg-query -W -f="\${Package} \${Version}\n" gcc libdnnl-dev libgstreamer1.0-dev \
      libgstreamer-plugins-bad1.0-dev meson || true; }' \
  debian13.sh \
  || exit
finish

# the tests' list, as tests/run.sh installs it (after the main job: see the top)
install_test_packages() {
  begin test-packages "tools/debian-packages.sh's vd_test_packages, as tests/run.sh installs them"
  # shellcheck disable=SC2016  # expanded in the root
  in_root "$clone_dir" bash -c 'source tools/debian-packages.sh &&
    vd_install_missing_packages "${vd_test_packages[@]}" &&
    { dpkg-query -W -f="\${Package} \${Version}\n" python3-torch || true; }' \
    debian13.sh \
    || exit
  finish
}

if [ $build_only -eq 1 ]; then
  install_test_packages
  begin build "meson setup build && ninja -C build"
  in_root "$clone_dir" sh -c 'meson setup build && ninja -C build' || exit
  finish
  exit 0
fi

begin annotate "pipelines/annotate.sh (the main job)"
in_root "$clone_dir" pipelines/annotate.sh || exit
note="$(vdr_check_annotated)" || exit
finish "$note"

install_test_packages

# The main job's own build writes GstAnalytics entries (see the top). First, that
# gstreamer-analytics-1.0 comes from the main job's packages: the package that has
# its pkg-config file is in vd_main_packages, or removing it would remove one of
# them. Prints which, or why not and fails.
main_package_check="$(cat <<'CHECK'
source tools/debian-packages.sh
pc="$(pkg-config --variable=pcfiledir gstreamer-analytics-1.0)" \
  || { echo "no gstreamer-analytics-1.0 installed"; exit 1; }
owner="$(dpkg-query -S "$pc/gstreamer-analytics-1.0.pc")" \
  || { echo "no package has $pc/gstreamer-analytics-1.0.pc"; exit 1; }
owner="${owner%%:*}"
for p in "${vd_main_packages[@]}"; do
  if [ "$p" = "$owner" ]; then echo "$owner, in vd_main_packages"; exit 0; fi
done
removed=" $(apt-get -s remove "$owner" | sed -n 's/^Remv \([^ :]*\).*/\1/p' | tr '\n' ' ')"
for p in "${vd_main_packages[@]}"; do
  case "$removed" in *" $p "*) echo "$owner, needed by $p of vd_main_packages"; exit 0 ;; esac
done
echo "gstreamer-analytics-1.0 is in $owner, which vd_main_packages neither lists nor needs"
exit 1
CHECK
)"
begin analytics "GstAnalytics entries from the main job's build (build/ as pipelines/annotate.sh left it)"
package_note="$(in_root "$clone_dir" bash -c "$main_package_check" 2>&1)" \
  || die "the main job's packages (vd_main_packages, tools/debian-packages.sh) do not provide GStreamer's analytics library: $package_note"
entries_out="$(in_root "$clone_dir" /usr/bin/python3 tests/gst/test_analytics.py main-build build 2>&1)" || {
  printf '%s\n' "$entries_out" >&2
  die "the main job's build (build/) writes no or wrong GstAnalytics entries: GStreamer's readers of them (objectdetectionoverlay) see nothing behind visiondetect"
}
finish "the library from $package_note; $(printf '%s\n' "$entries_out" | sed -n 's|^[^ ]*: \([0-9]* frames, .*\)|\1|p' | tail -n 1)"

begin tests "VISIONDETECT_SANITIZERS=0 tests/run.sh ${suites[*]}${no_suites[*]:+ (without ${no_suites[*]})}"
in_root "$clone_dir" env VISIONDETECT_SANITIZERS=0 VISIONDETECT_DEBIAN13=0 \
  VISIONDETECT_NO_SUITES="${no_suites[*]}" tests/run.sh "${suites[@]}" || exit
finish "${suites[*]}${no_suites[*]:+ without ${no_suites[*]}}, no sanitizers"
