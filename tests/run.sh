#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages by name), configures,
# builds and runs every meson test suite, then the engine suite again under
# AddressSanitizer and UBSan.
#   tests/run.sh            all suites
#   tests/run.sh SUITE...   only these suites (engine, tracker, parity, gst, model, gpu,
#                           libfuzzer, extended); the engine suite includes the tracker's
#                           tests
# extended: the parity comparisons that repeat others' code paths at a further size or
# oneDNN ISA cap (tests/parity/meson.build); not part of the default run, which has to
# stay well under 20 minutes on a 2-core machine.
# libfuzzer: the libFuzzer harnesses in a clang build of their own (build-fuzz, ASan and
# UBSan), each for a short fixed time; tests/fuzz/long.sh runs them long.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  meson ninja-build pkg-config gcc g++
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
wants() { [ ${#suites[@]} -eq 0 ] || printf '%s\n' "${suites[@]}" | grep -qx "$1"; }
suite_args=()
[ ${#suites[@]} -gt 0 ] || suite_args+=(--no-suite extended)
main_suites=0
for s in "${suites[@]}"; do
  if [ "$s" != libfuzzer ]; then suite_args+=(--suite "$s"); main_suites=$((main_suites + 1)); fi
done

if [ ${#suites[@]} -eq 0 ] || [ $main_suites -gt 0 ]; then
  if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build; fi
  ninja -C build
  meson test -C build --print-errorlogs --num-processes 2 "${suite_args[@]}"
fi

# The engine under AddressSanitizer + UBSan (no CUDA, no plugin: the engine only).
if wants engine; then
  if [ ! -d build-asan ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=disabled -Dgstreamer=disabled -Dparity_tests=disabled
  fi
  ninja -C build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-asan --print-errorlogs --suite engine
fi

# The libFuzzer harnesses (clang, ASan + UBSan, coverage instrumentation).
if wants libfuzzer; then
  if [ ! -d build-fuzz ]; then
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
      -Db_lundef=false -Dcuda=disabled -Dgstreamer=disabled -Dparity_tests=disabled
  fi
  ninja -C build-fuzz
  meson test -C build-fuzz --print-errorlogs --suite libfuzzer
fi
