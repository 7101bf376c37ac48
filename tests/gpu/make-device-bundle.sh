#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Packs what device-check.sh needs from this (GPU-less) build machine into
# .device/bundle.tar.gz:
#   bin/          the GPU test and benchmark binaries of build/, and
#                 gst-launch-1.0 / gst-inspect-1.0 for element-check.sh;
#   gst-plugins/  our plugin (build/gst/libgstvisiondetect.so) and the few
#                 GStreamer plugins of this machine that element-check.sh's
#                 pipelines use (coreelements: capsfilter, queue, fakesink;
#                 videotestsrc);
#   lib/          the shared libraries all of these load that a bare GPU
#                 machine lacks (GLib, GStreamer, json-glib, oneDNN, Cairo,
#                 Pango, libgomp, our engine's libvisiondetect.so.0, ...).
# Not packed: the C runtime (glibc, libstdc++, libgcc), which the GPU machine
# has in newer versions, and the CUDA libraries (cudart, cuBLAS, cuDNN), which
# it has in python's nvidia-* packages.
#   tests/gpu/make-device-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
GST_SYSTEM_PLUGINS=${GST_SYSTEM_PLUGINS:-/usr/lib/x86_64-linux-gnu/gstreamer-1.0}
STAGE=.device/bundle
rm -rf "$STAGE" && mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/gst-plugins"

# a bundle of stale binaries wastes the device run: test-gpu-engine takes an
# option it does not know for a frame, vd-gpu-bench ignores it
targets="tests/gpu/test-gpu-kernels tests/gpu/test-gpu-engine tests/gpu/vd-gpu-bench gst/libgstvisiondetect.so"
# shellcheck disable=SC2086
if ! ninja -C "$BUILD" -n $targets 2>&1 | grep -q "no work to do"; then
  echo "$BUILD is not up to date: meson compile -C $BUILD first"; exit 1
fi
# what it was built from, for device-check.sh's env.txt
src=$(grep -o '"source": *"[^"]*"' "$BUILD/meson-info/meson-info.json" | sed 's/.*: *"//; s/"$//')
{ echo "source $src, commit $(git -C "$src" rev-parse -q --verify HEAD || echo unknown)"
  git -C "$src" status --short -uno 2>/dev/null | head -20
  echo "built $(date -u -r "$BUILD/tests/gpu/test-gpu-engine")"; } > "$STAGE/BUILD-INFO"

# what goes in, and where
sources=()
for b in test-gpu-kernels test-gpu-engine vd-gpu-bench; do
  cp "$BUILD/tests/gpu/$b" "$STAGE/bin/"
  sources+=("$BUILD/tests/gpu/$b")
done
for b in gst-launch-1.0 gst-inspect-1.0; do
  cp -L "$(command -v "$b")" "$STAGE/bin/"
  sources+=("$(command -v "$b")")
done
cp -L "$BUILD/gst/libgstvisiondetect.so" "$STAGE/gst-plugins/"
sources+=("$BUILD/gst/libgstvisiondetect.so")
for p in coreelements videotestsrc; do
  cp -L "$GST_SYSTEM_PLUGINS/libgst$p.so" "$STAGE/gst-plugins/"
  sources+=("$GST_SYSTEM_PLUGINS/libgst$p.so")
done

# their libraries, resolved here (our plugin finds the engine library through
# its build-tree RUNPATH), minus the C runtime and CUDA
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcudnn|libnvrtc|libnvJitLink)'
missing=$(for f in "${sources[@]}"; do ldd "$f" | grep -F "not found" || true; done)
if [ -n "$missing" ]; then
  echo "unresolved libraries:"; echo "$missing"; exit 1
fi
for f in "${sources[@]}"; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then
    cp -L "$path" "$STAGE/lib/$name"
  fi
done
chmod u+w "$STAGE"/bin/* "$STAGE"/lib/* "$STAGE"/gst-plugins/*
strip --strip-debug "$STAGE"/bin/* "$STAGE"/lib/* "$STAGE"/gst-plugins/*

tar -C "$STAGE" -czf .device/bundle.tar.gz BUILD-INFO bin lib gst-plugins
rm -rf "$STAGE"
ls -la .device/bundle.tar.gz
tar -tzvf .device/bundle.tar.gz
