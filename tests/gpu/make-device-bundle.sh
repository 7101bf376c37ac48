#!/usr/bin/env bash
# Packs what device-check.sh needs from this (GPU-less) build machine into
# .device/bundle.tar.gz: the GPU test and benchmark binaries of build/ and the
# shared libraries they load that a bare GPU machine lacks (GLib, json-glib,
# oneDNN, libgomp, ...). Not packed: the C runtime (glibc, libstdc++, libgcc),
# which the GPU machine has in newer versions, and the CUDA libraries (cudart,
# cuBLAS, cuDNN), which it has in python's nvidia-* packages.
#   tests/gpu/make-device-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
STAGE=.device/bundle
rm -rf "$STAGE" && mkdir -p "$STAGE/bin" "$STAGE/lib"
for b in test-gpu-kernels test-gpu-engine vd-gpu-bench; do
  cp "$BUILD/tests/gpu/$b" "$STAGE/bin/"
  strip --strip-debug "$STAGE/bin/$b"
done
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcudnn|libnvrtc|libnvJitLink)'
for b in "$STAGE"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then
    cp -L "$path" "$STAGE/lib/$name"
  fi
done
tar -C "$STAGE" -czf .device/bundle.tar.gz bin lib
rm -rf "$STAGE"
ls -la .device/bundle.tar.gz
tar -tzf .device/bundle.tar.gz
