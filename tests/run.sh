#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages by name), configures,
# builds and runs every meson test suite, then the engine suite again under
# AddressSanitizer and UBSan.
#   tests/run.sh            all suites
#   tests/run.sh SUITE...   only these suites (engine, parity, gst, model, gpu)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  meson ninja-build pkg-config gcc g++
  libglib2.0-dev libjson-glib-dev libdnnl-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly
  libcairo2-dev libpango1.0-dev
  python3 python3-numpy python3-torchvision
  gstreamer1.0-libav valgrind
  gstreamer1.0-rtsp gir1.2-gst-rtsp-server-1.0 python3-gi gir1.2-gstreamer-1.0
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tests/run.sh: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

suites=("$@")
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done

if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build; fi
ninja -C build
meson test -C build --print-errorlogs --num-processes 2 "${suite_args[@]}"

# The engine under AddressSanitizer + UBSan (no CUDA, no plugin: the engine only).
if [ ${#suites[@]} -eq 0 ] || printf '%s\n' "${suites[@]}" | grep -qx engine; then
  if [ ! -d build-asan ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=disabled -Dgstreamer=disabled -Dparity_tests=disabled
  fi
  ninja -C build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-asan --print-errorlogs --suite engine
fi
