#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The arm64 run's parity with the x86 engine (tests/debian13-arm64.sh, phase
# "parity"), in three steps, each run from the clone's top folder, which has the same
# path in the arm64 root and in its amd64 build root:
#
#   tests/arm64/parity.sh x86 TOP      in the amd64 build root: the x86 engine built
#                                      natively (build-x86/: oneDNN, its default layers),
#                                      the models (tests/engine/make_parity_models.c and
#                                      the bundled model) into TOP/models, the frames
#                                      (build/arm64-frame.ppm, which the detect phase
#                                      made, and parity.py's second) into TOP/frames, the
#                                      x86 engine on them into TOP/x86, and the
#                                      comparison's self-check (below)
#   tests/arm64/parity.sh arm64 TOP    in the arm64 root, under QEMU_CPU: the arm64
#                                      build (build/) on the same files into TOP/arm64
#   python3 tests/arm64/parity.py compare TOP
#                                      in the build root: every stage compared
#
# Each engine run is `vd-detect --model M --dump TOP/SIDE/MODEL/dump -p fp32 -t 2
# --json --info FRAME...` (both frames; Mask R-CNN the first: run_engine says why):
# TOP/SIDE/MODEL/detections.json, dump/I/*.npy, info.txt.
#
# The self-check: the bundled model with one convolution's weights 1 % off (parity.py
# perturb), run by the x86 engine, compared with the x86 run of the real one: the
# comparison must fail, else the step does.
#
# The x86 build needs oneDNN's amd64 headers and link name, which Debian's
# libdnnl-dev ships in a package that is not Multi-Arch: same (it cannot be installed
# beside the arm64 one the cross build needs): its library package is installed
# (apt), the -dev package's files are unpacked into $onednn (apt-get download,
# dpkg-deb -x), kept in the build root while its version is the candidate.
set -euo pipefail

onednn=/opt/visiondetect-onednn-amd64
threads=2
perturbed_tensor=backbone.body.layer3.0.conv1.weight

die() { echo "parity.sh: $*" >&2; exit 1; }

# run_engine BUILD MODELS FRAMES OUT: every model of MODELS on every frame of FRAMES,
# into OUT/MODEL; Mask R-CNN on the first frame only: its mask branch runs 16 RoIs
# (the CPU backend's batch) through four 3x3 convolutions of 256 channels at 14x14,
# 8.5 GMAC a frame whatever the frame (one to three minutes emulated); the resize to
# the second frame's size is the other models'
run_engine() {
  local build=$1 models=$2 frames_dir=$3 top=$4 model name out t0 all=() frames
  for f in "$frames_dir"/*.ppm; do all+=("$f"); done
  [ ${#all[@]} -gt 0 ] || die "no frames in $frames_dir"
  rm -rf "${top:?}"
  for model in "$models"/*.safetensors; do
    name="$(basename "$model" .safetensors)"
    frames=("${all[@]}")
    case "$name" in maskrcnn-*) frames=("${all[0]}") ;; esac
    out="$top/$name"
    mkdir -p "$out"
    t0=${EPOCHREALTIME/./}
    "$build/tools/vd-detect" --model "$model" --dump "$out/dump" -p fp32 -t "$threads" --json \
      --info "${frames[@]}" > "$out/detections.json" 2> "$out/info.txt" \
      || { cat "$out/info.txt" >&2; die "$build/tools/vd-detect failed on $name"; }
    t0=$(( (${EPOCHREALTIME/./} - t0) / 100000 ))
    echo "parity.sh: $name on ${#frames[@]} frame(s): $((t0 / 10)).$((t0 % 10)) s," \
      "$(sed -n 's/^engine: cpu: //p' "$out/info.txt" | sed 's/, 2 threads//; s/ (oneDNN has only.*//')" >&2
  done
}

# oneDNN's amd64 development files in $onednn (see the header)
onednn_amd64() {
  local version lib have=""
  version="$(apt-cache policy libdnnl-dev:amd64 | sed -n 's/^ *Candidate: //p')"
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then die "no candidate for libdnnl-dev:amd64"; fi
  lib="$(apt-cache depends "libdnnl-dev:amd64=$version" | sed -n 's/^ *Depends: \(libdnnl[0-9][0-9.]*\)$/\1/p' | head -n 1)"
  [ -n "$lib" ] || die "libdnnl-dev:amd64 $version names no libdnnl library package"
  vd_install_missing_packages "$lib:amd64"
  [ ! -f "$onednn/version" ] || have="$(cat "$onednn/version")"
  if [ "$have" != "$version" ]; then
    echo "parity.sh: unpacking libdnnl-dev:amd64 $version into $onednn" >&2
    rm -rf "$onednn" "$onednn.tmp"
    mkdir -p "$onednn.tmp/deb"
    (cd "$onednn.tmp/deb" && apt-get download -q -o APT::Sandbox::User=root "libdnnl-dev:amd64=$version")
    dpkg-deb -x "$onednn.tmp"/deb/*.deb "$onednn.tmp/files"
    mkdir -p "$onednn.tmp/lib"
    # the link name, to the library package's file (the .deb's link is relative)
    ln -s "/usr/lib/x86_64-linux-gnu/$(readlink "$onednn.tmp/files/usr/lib/x86_64-linux-gnu/libdnnl.so")" \
      "$onednn.tmp/lib/libdnnl.so"
    [ -e "$onednn.tmp/lib/libdnnl.so" ] || die "$onednn.tmp/lib/libdnnl.so: no such library (is $lib installed?)"
    mv "$onednn.tmp/files/usr/include" "$onednn.tmp/include"
    rm -rf "$onednn.tmp/deb" "$onednn.tmp/files"
    echo "$version" > "$onednn.tmp/version"
    mv -T "$onednn.tmp" "$onednn"
  fi
}

step_x86() {
  local top=$1 t0 check rc
  # shellcheck source=tools/debian-packages.sh
  source tools/debian-packages.sh
  vd_install_missing_packages "${vd_engine_reference_packages[@]}"
  onednn_amd64
  t0=$SECONDS
  if [ ! -f build-x86/build.ninja ]; then
    rm -rf build-x86
    meson setup build-x86 --buildtype=release -Dgstreamer=disabled -Dcuda=disabled \
      -Dparity_tests=disabled -Dxnnpack=disabled -Dc_args="-I$onednn/include" \
      -Dc_link_args="-L$onednn/lib" > /tmp/parity-x86-setup.log 2>&1 \
      || { cat /tmp/parity-x86-setup.log >&2; die "meson setup build-x86 failed"; }
  fi
  ninja -C build-x86 tools/vd-detect tests/engine/make-parity-models > /tmp/parity-x86-build.log 2>&1 \
    || { tail -n 40 /tmp/parity-x86-build.log >&2; die "the x86 build failed"; }
  echo "parity.sh: x86 build $((SECONDS - t0)) s" >&2

  [ -f build/arm64-frame.ppm ] || die "no build/arm64-frame.ppm (the detect phase makes it)"
  rm -rf "${top:?}/models" "$top/frames"
  mkdir -p "$top/frames"
  cp build/arm64-frame.ppm "$top/frames/0.ppm"
  python3 tests/arm64/parity.py frame "$top/frames/1.ppm"
  build-x86/tests/engine/make-parity-models "$top/models" >&2
  cp models/visiondetect-shapes.safetensors "$top/models/"
  run_engine build-x86 "$top/models" "$top/frames" "$top/x86"

  # the self-check: the bundled model with one convolution 1 % off, as if it were the
  # arm64 run's, must fail the comparison with the x86 run of the real one
  check="$top/selfcheck"
  rm -rf "$check"
  mkdir -p "$check/models" "$check/broken" "$check/x86"
  cp models/visiondetect-shapes.safetensors "$check/models/"
  cp -a "$top/x86/visiondetect-shapes" "$check/x86/"
  python3 tests/arm64/parity.py perturb models/visiondetect-shapes.safetensors \
    "$check/broken/visiondetect-shapes.safetensors" "$perturbed_tensor"
  run_engine build-x86 "$check/broken" "$top/frames" "$check/arm64"
  rc=0
  python3 tests/arm64/parity.py compare "$check" > "$check/compare.log" || rc=$?
  [ $rc -eq 1 ] || { cat "$check/compare.log" >&2
    die "self-check: the comparison passed a model with $perturbed_tensor 1 % off (exit $rc, not 1)"; }
  echo "parity.sh: self-check: the comparison fails the bundled model with $perturbed_tensor" \
    "1 % off: $(grep -c FAIL "$check/compare.log") checks fail, the first:" \
    "$(grep -m1 FAIL "$check/compare.log" | sed 's/^ *FAIL //')" >&2
}

[ $# -eq 2 ] || die "usage: tests/arm64/parity.sh x86|arm64 TOP"
case "$1" in
  x86) step_x86 "$2" ;;
  arm64) run_engine build "$2/models" "$2/frames" "$2/arm64" ;;
  *) die "usage: tests/arm64/parity.sh x86|arm64 TOP" ;;
esac
