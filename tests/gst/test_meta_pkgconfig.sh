#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The meta library as an application sees it once installed: `meson install`
# into a temporary DESTDIR (runtime and devel files), then meta_example.c
# compiled with nothing but `pkg-config --cflags --libs
# gstreamer-visiondetect-meta-1.0` and run against the installed library;
# the library exports exactly the public API (GST_VISION_DETECT_META_API).
# Usage: test_meta_pkgconfig.sh MESON BUILDDIR EXAMPLE.c EXPECTED-SYMBOLS
set -euo pipefail
meson=$1 builddir=$2 example=$3 expected=$4
cc=${CC:-cc}

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
"$meson" install -C "$builddir" --no-rebuild --quiet --destdir "$dest" \
  --tags runtime,devel >/dev/null

pcdir=$(dirname "$(find "$dest" -name gstreamer-visiondetect-meta-1.0.pc | head -1)")
libdir=$(dirname "$(find "$dest" -name 'libgstvisiondetectmeta-1.0.so' | head -1)")
test -d "$pcdir" -a -d "$libdir"
test -f "$(find "$dest" -path '*/include/gstreamer-1.0/gst/visiondetect/gstvisiondetectmeta.h' | head -1)"

# the .pc's -I and -L under the DESTDIR; gstreamer-1.0's own from the system
# (and the caller's PKG_CONFIG_PATH: gstreamer-analytics-1.0, which the
# library requires privately when built with it, may be elsewhere)
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  PKG_CONFIG_SYSROOT_DIR="$dest"
flags=$(pkg-config --cflags --libs gstreamer-visiondetect-meta-1.0)
sysflags=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --cflags --libs gstreamer-video-1.0)
# shellcheck disable=SC2086
"$cc" -Wall -Werror -o "$dest/meta-example" "$example" $flags $sysflags
# the installed library first; the caller's path for its dependencies
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$dest/meta-example"

nm -D --defined-only "$libdir/libgstvisiondetectmeta-1.0.so" \
  | awk '$2 == "T" { print $3 }' | sort > "$dest/exported"
if ! diff -u <(sort "$expected") "$dest/exported"; then
  echo "the library's exported functions differ from the public API" >&2
  exit 1
fi
echo "exported: $(wc -l < "$dest/exported") functions, as expected"
