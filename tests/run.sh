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

# shellcheck source=tools/debian-packages.sh
source tools/debian-packages.sh
vd_install_missing_packages "${vd_test_packages[@]}"

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
