#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The soak test (tests/gst/test_soak.c) long: FRAMES frames (default 1 000 000,
# about an hour and a half on two cores) through visiondetect alone and through
# visiondetect ! visionoverlay ! visionjson, heap and resident set compared
# between the first and the last 2000 frames. Builds into build/ first.
#   tests/gst/soak.sh [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/../.."
frames=${1:-1000000}
if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build; fi
ninja -C build
VD_SOAK_FRAMES=$frames meson test -C build --print-errorlogs --verbose --timeout-multiplier 0 soak
