# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
# The Debian packages of the README's two commands, in one place. Sourced (not run)
# by pipelines/common.sh, tests/run.sh, tests/debian13.sh and tests/debian13-arm64.sh
# (inside their Debian roots, from the clone there).
#
#   vd_main_packages   the main job (pipelines/*.sh): build the project and run its
#                      pipelines (x264enc is in -ugly, most decoders in -libav;
#                      libmosquitto-dev builds visionmqtt)
#   vd_test_packages   the test command (tests/run.sh): build and every test suite
#   vd_engine_packages the engine alone, built without GStreamer, CUDA or torch, and
#                      its engine suite (tests/debian13-arm64.sh, where every package
#                      is installed under emulation: the shortest list that builds;
#                      python3 runs the suite's Python tests and makes its frames,
#                      python3-numpy reads the .npy dumps the parity with the x86
#                      engine compares)
#   vd_engine_run_packages
#                      an engine built elsewhere, run (the arm64 root of a cross
#                      build): the libraries the engine links, named per release;
#                      no compiler, no -dev package, no Python and no meson: meson
#                      runs the engine suite from the amd64 build root, whose
#                      multiarch arm64 libraries the test programs run on through
#                      binfmt_misc, and the run's Python checks run there too
#                      (under emulation apt's time went mostly to Python's
#                      byte-compilation in the packages' postinst scripts)
#   vd_engine_cross_packages
#                      the same build cross-compiled for arm64 on amd64 (Debian's
#                      cross toolchain and the arm64 -dev packages, multiarch: the
#                      arm64 run's build root, where dpkg has arm64 added)
#   vd_gst_dev_packages
#                      the plugin's -dev packages beyond the engine's, as
#                      vd_main_packages names them (GStreamer, Cairo and Pango,
#                      libmosquitto), without GStreamer's analytics library: the
#                      arm64 run builds the main job's plugin from the engine's
#                      list and these (in the arm64 root with --build native)
#   vd_gst_cross_packages
#                      the same, arm64, for the cross build beside
#                      vd_engine_cross_packages (the analytics library's arm64
#                      -dev package would pull in OpenCV's: 380 packages more,
#                      220 MB; the arm64 run builds with -Danalytics=disabled)
#   vd_gst_run_packages
#                      the main job run from a plugin built elsewhere (the arm64
#                      root, beside vd_engine_packages): gst-launch-1.0, the
#                      elements of pipelines/annotate.sh's pipeline on the
#                      generated ball (x264enc is in -ugly, mp4mux in -good; not
#                      its scenes, which need python3-pil) and the libraries the
#                      plugin links beyond the engine's (the three vd_gst lists
#                      installed in the Debian 12 and 13 arm64 roots, 2026-12-06)
#   vd_engine_reference_packages
#                      the same build native on amd64 beside the cross build, in
#                      the arm64 run's build root: the x86 engine its parity phase
#                      compares the arm64 one with (tests/arm64/parity.sh, which also
#                      installs oneDNN's library package and unpacks libdnnl-dev's
#                      amd64 files: libdnnl-dev is not Multi-Arch: same, so it
#                      cannot be installed beside the arm64 one), and the
#                      comparison's numpy; the libraries named :amd64, as dpkg
#                      counts the arm64 ones of a Multi-Arch: same package as
#                      installed otherwise
#   vd_install_missing_packages PKG...
#                      installs those of PKG that dpkg does not list as installed
#                      (apt-get, no recommends; sudo unless root; nothing where
#                      there is no dpkg)
#
# The same names serve Debian 12 (bookworm) and 13 (trixie): each was looked up with
# apt-cache policy in both (2026-12-05) and every one has a candidate in both. Where
# a release needs another name or another package, it is chosen here, by
# /etc/os-release, so that every command keeps taking its list from this file: today
# the analytics library, for both lists from Debian 13 on (see below). Notes from that check:
# pkgconf, not the transitional pkg-config (transitional in both releases, the
# package that provides pkg-config since bookworm); libgirepository1.0-dev is still
# the gobject-introspection-1.0 development package in trixie (1.84, with the GLib
# GIRs through gir1.2-glib-2.0-dev), glib's libgirepository-2.0-dev (trixie only)
# is not what the build uses; libclang-rt-dev is llvm-defaults' name in both (clang
# 14 in bookworm, 19 in trixie).

# shellcheck disable=SC2034  # used by the scripts that source this file
vd_main_packages=(
  meson ninja-build pkgconf gcc
  libglib2.0-dev libjson-glib-dev libdnnl-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libcairo2-dev libpango1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  python3-numpy python3-pil
  libmosquitto-dev
)

# shellcheck disable=SC2034
vd_test_packages=(
  meson ninja-build pkgconf gcc g++
  libglib2.0-dev libjson-glib-dev libdnnl-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-x
  libcairo2-dev libpango1.0-dev
  python3 python3-numpy python3-torchvision
  gstreamer1.0-libav valgrind
  gstreamer1.0-rtsp gir1.2-gst-rtsp-server-1.0 python3-gi gir1.2-gstreamer-1.0
  gobject-introspection libgirepository1.0-dev gir1.2-gst-plugins-base-1.0
  clang libclang-rt-dev libomp-dev
  libmosquitto-dev mosquitto mosquitto-clients openssl
)

# shellcheck disable=SC2034
vd_engine_packages=(
  meson ninja-build pkgconf gcc
  libglib2.0-dev libjson-glib-dev libdnnl-dev
  python3 python3-numpy
)

# shellcheck disable=SC2034
vd_engine_run_packages=(libjson-glib-1.0-0)

# shellcheck disable=SC2034
vd_engine_cross_packages=(
  meson ninja-build pkgconf python3 gcc-aarch64-linux-gnu
  libc6-dev:arm64 libglib2.0-dev:arm64 libjson-glib-dev:arm64 libdnnl-dev:arm64
)

# shellcheck disable=SC2034
vd_gst_dev_packages=(
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libcairo2-dev libpango1.0-dev
  libmosquitto-dev
)
# shellcheck disable=SC2034
vd_gst_cross_packages=("${vd_gst_dev_packages[@]/%/:arm64}")

# shellcheck disable=SC2034
vd_gst_run_packages=(
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-ugly
  libcairo2 libpangocairo-1.0-0 libmosquitto1
)

# shellcheck disable=SC2034
vd_engine_reference_packages=(
  meson ninja-build pkgconf gcc libc6-dev:amd64
  libglib2.0-dev:amd64 libjson-glib-dev:amd64
  python3 python3-numpy
)

# From Debian 13 on (GStreamer 1.24 and newer) the main job and the tests build the
# GstAnalytics parts (object-detection, tracking and segmentation entries, which
# GStreamer's own elements, such as objectdetectionoverlay, read; a build without
# them writes none, says so in meson's summary and visiondetect logs it):
# gstreamer-analytics-1.0 is in libgstreamer-plugins-bad1.0-dev, which pulls in
# libopencv-dev (in the Debian 13 root, 171 packages more, 116 MB to download). The
# tests also read the entries from Python (tests/gst/test_analytics.py, and
# tests/debian13.sh on the main job's build) through GstAnalytics-1.0's
# introspection data (gir1.2-gst-plugins-bad-1.0; that package's 1.22 in Debian 12
# has none). Debian 12's GStreamer 1.22 has no analytics library.
vd_debian_version="$(. /etc/os-release 2>/dev/null && [ "${ID:-}" = debian ] && echo "${VERSION_ID:-testing}")" \
  || vd_debian_version=""
# The format check (tests/check_format.sh) runs with Debian 12's clang-format 14 and
# GNU indent 2.2.12 (other releases format differently; it skips with them):
# installed there only.
case "$vd_debian_version" in
  ""|[0-9]|1[0-2]) vd_test_packages+=(clang-format indent)
     vd_engine_run_packages+=(libglib2.0-0 libdnnl2) ;;   # not Debian, or Debian 12 and older
  *) vd_main_packages+=(libgstreamer-plugins-bad1.0-dev)
     vd_engine_run_packages+=(libglib2.0-0t64 libdnnl3.6)
     vd_test_packages+=(libgstreamer-plugins-bad1.0-dev gir1.2-gst-plugins-bad-1.0) ;;
esac
# XNNPACK runs the CPU layers where oneDNN has only reference kernels (aarch64 with
# Advanced SIMD alone: Debian builds oneDNN without Arm Compute Library). The engine
# takes its reshape/setup operator API, which Debian 13's snapshot (2024-11) has and
# Debian 12's (2022) has not: from Debian 13 on, every list; the tests force it on
# x86 too (kernels-xnnpack, parity-*-xnnpack).
case "$vd_debian_version" in
  ""|[0-9]|1[0-2]) ;;
  *) vd_main_packages+=(libxnnpack-dev libpthreadpool-dev)
     vd_test_packages+=(libxnnpack-dev libpthreadpool-dev)
     vd_engine_packages+=(libxnnpack-dev libpthreadpool-dev)
     vd_engine_run_packages+=(libxnnpack0.20241108 libpthreadpool0)
     vd_engine_cross_packages+=(libxnnpack-dev:arm64 libpthreadpool-dev:arm64) ;;
esac
unset vd_debian_version

vd_install_missing_packages() {
  local missing=() p sudo=""
  command -v dpkg-query >/dev/null || return 0   # not Debian: trust the user
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "$(basename "$0"): installing ${missing[*]}" >&2
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}
