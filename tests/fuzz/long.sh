#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The libFuzzer harnesses run long (tests/run.sh runs each for 20 s):
#   tests/fuzz/long.sh [RUNS]     the model loader for RUNS executions (1000000)
# Builds build-fuzz as tests/run.sh does (clang, ASan + UBSan). New inputs go to
# build-fuzz/tests/fuzz/model-long/corpus, crashes to build-fuzz/tests/fuzz/model-long/crash-*:
# copy a crash into tests/fuzz/corpus/model once fixed, and it is a regression test.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-1000000}
if [ ! -d build-fuzz ]; then
  bash tests/run.sh libfuzzer
fi
ninja -C build-fuzz
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1
exec tests/fuzz/run_fuzzer.sh build-fuzz/tests/fuzz/fuzz-model-load tests/fuzz/corpus/model \
  build-fuzz/tests/fuzz/model-long -runs="$runs" -max_len=262144 -timeout=20 -rss_limit_mb=4096
