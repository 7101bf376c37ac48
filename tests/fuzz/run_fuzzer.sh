#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs one libFuzzer harness over the repository's seeds for a fixed time (or a
# number of executions), with a work corpus of its own in the build folder (new
# inputs go there, never into the repository), crashes written as
# WORKDIR/crash-*. Every seed runs first: a crash found once and copied into the
# seed folder is a regression test from then on.
#   run_fuzzer.sh FUZZER SEEDS WORKDIR (-max_total_time=S | -runs=N) [libFuzzer options]
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3
shift 3
mkdir -p "$work/corpus"
exec "$fuzzer" -artifact_prefix="$work/" -print_final_stats=1 "$@" "$work/corpus" "$seeds"
