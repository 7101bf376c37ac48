#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The test command: installs what is missing (Debian packages by name), configures,
# builds and runs every meson test suite, then the engine suite again under
# AddressSanitizer and UBSan, then the libFuzzer harnesses, then the Debian 13 run and
# the arm64 run.
#   tests/run.sh            all of it
#   tests/run.sh SUITE...   only these suites (engine, tracker, parity, gst, model, gpu,
#                           libfuzzer, extended, debian13, arm64); the engine suite includes the
#                           tracker's tests
# extended: the parity comparisons that repeat others' code paths at a further size or
# oneDNN ISA cap (tests/parity/meson.build); not part of the default run, which has to
# stay well under 20 minutes on a 2-core machine.
# libfuzzer: the libFuzzer harnesses in a clang build of their own (build-fuzz, ASan and
# UBSan), each for a short fixed time; tests/fuzz/long.sh runs them long.
# debian13: tests/debian13.sh, the README's two commands in a Debian 13 root made with
# debootstrap (root needed; the host's packages are not checked for it).
# arm64: tests/debian13-arm64.sh, the engine on arm64 in a Debian 13 arm64 root under
# qemu-user (root needed; its default checks and tests: that script says which).
# Environment:
#   VISIONDETECT_SANITIZERS=0  skip the ASan + UBSan engine run and the libFuzzer
#                              harnesses, even when their suites are named (the Debian
#                              13 run sets it: the host run covers the same code)
#   VISIONDETECT_DEBIAN13=0    the run without arguments leaves out the Debian 13 run
#   VISIONDETECT_ARM64=0       the run without arguments leaves out the arm64 run
#   VISIONDETECT_NO_SUITES     meson suites (space-separated) left out of the meson run
#                              (tests/debian13.sh says which and why)
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/debian-packages.sh
source tools/debian-packages.sh

# no arguments: every suite but extended, then the Debian 13 run and the arm64 run
all=0 debian13=0 arm64=0 suites=()
if [ $# -eq 0 ]; then
  all=1
  [ "${VISIONDETECT_DEBIAN13:-1}" = 0 ] || debian13=1
  [ "${VISIONDETECT_ARM64:-1}" = 0 ] || arm64=1
fi
for s in "$@"; do
  case "$s" in
    debian13) debian13=1 ;;
    arm64) arm64=1 ;;
    *) suites+=("$s") ;;
  esac
done
sanitizers=1
[ "${VISIONDETECT_SANITIZERS:-1}" != 0 ] || sanitizers=0
wants() { [ $all -eq 1 ] || printf '%s\n' "${suites[@]}" | grep -qx "$1"; }
# each part's wall time, printed as it ends (docs/testing.md keeps the figures)
part_start=$SECONDS
part_done() {
  echo "tests/run.sh: $1 took $((SECONDS - part_start)) s (all so far $SECONDS s)"
  part_start=$SECONDS
}

# the host's packages (not for the Debian 13 run alone)
if [ $all -eq 1 ] || [ ${#suites[@]} -gt 0 ]; then
  vd_install_missing_packages "${vd_test_packages[@]}"
fi

suite_args=()
[ $all -eq 0 ] || suite_args+=(--no-suite extended)
# the loader's fuzzing and malformed files (suite sanitized) run once, in the ASan +
# UBSan build, where that run follows: the same seeds and files with the memory checks
if [ $sanitizers -eq 1 ] && wants engine; then suite_args+=(--no-suite sanitized); fi
# the element's C under valgrind (suite valgrind) runs once, in the Debian 13 root,
# where it follows (Debian 13's valgrind takes a third of Debian 12's time there; the
# heap-growth leak tests without valgrind run in both)
if [ $debian13 -eq 1 ]; then suite_args+=(--no-suite valgrind); fi
for s in ${VISIONDETECT_NO_SUITES:-}; do suite_args+=(--no-suite "$s"); done
main_suites=0
for s in "${suites[@]}"; do
  if [ "$s" != libfuzzer ]; then suite_args+=(--suite "$s"); main_suites=$((main_suites + 1)); fi
done

if [ $all -eq 1 ] || [ $main_suites -gt 0 ]; then
  if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build; fi
  ninja -C build
  meson test -C build --print-errorlogs --num-processes 2 "${suite_args[@]}"
  part_done "the build and the meson suites"
fi

if [ $sanitizers -eq 0 ] && { wants engine || wants libfuzzer; }; then
  echo "tests/run.sh: VISIONDETECT_SANITIZERS=0: no ASan + UBSan engine run, no libFuzzer harnesses"
fi

# The engine under AddressSanitizer + UBSan (no CUDA, no plugin: the engine only).
if wants engine && [ $sanitizers -eq 1 ]; then
  if [ ! -d build-asan ]; then
    # the kernels test's torchvision exports: the main build's, where it made them (the
    # same tree and torchvision), not made again
    exports=()
    if compgen -G "$PWD/build/tests/engine/*-512.safetensors" > /dev/null; then
      exports=(-Dtest_exports="$PWD/build/tests/engine")
    fi
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=disabled -Dgstreamer=disabled -Dparity_tests=disabled "${exports[@]}"
  fi
  ninja -C build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-asan --print-errorlogs --suite engine
  part_done "the ASan + UBSan engine suite"
fi

# The libFuzzer harnesses (clang, ASan + UBSan, coverage instrumentation).
if wants libfuzzer && [ $sanitizers -eq 1 ]; then
  if [ ! -d build-fuzz ]; then
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
      -Db_lundef=false -Dcuda=disabled -Dgstreamer=disabled -Dparity_tests=disabled
  fi
  # the harnesses alone (the build's other targets are the ASan + UBSan run's)
  mapfile -t harnesses < <(ninja -C build-fuzz -t targets all |
    sed -n 's|^\(tests/fuzz/fuzz-[a-z0-9-]*\): c_LINKER$|\1|p')
  [ ${#harnesses[@]} -gt 0 ] || { echo "tests/run.sh: build-fuzz has no fuzz harness" >&2; exit 1; }
  ninja -C build-fuzz "${harnesses[@]}"
  meson test -C build-fuzz --no-rebuild --print-errorlogs --suite libfuzzer
  part_done "the libFuzzer harnesses"
fi

# The README's two commands in a Debian 13 root (tests/debian13.sh).
if [ $debian13 -eq 1 ]; then
  bash tests/debian13.sh
  part_done "the Debian 13 run"
fi

# The engine on arm64, emulated (tests/debian13-arm64.sh).
if [ $arm64 -eq 1 ]; then
  # the kernels test's torchvision exports, where the host build made them
  VISIONDETECT_ARM64_EXPORTS="$PWD/build/tests/engine" bash tests/debian13-arm64.sh
  part_done "the arm64 run"
fi
