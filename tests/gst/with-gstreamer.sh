#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The element tests against another GStreamer than the system's: the
# GstAnalytics metadata (object-detection and tracking entries, GStreamer
# >= 1.24; instance-segmentation entries, >= 1.26) is only built and tested
# where the analytics library is found, and Debian 12 has GStreamer 1.22.
#
#   tests/gst/with-gstreamer.sh SRC [PREFIX [BUILDDIR]]
#
# SRC is a GStreamer source tree, the monorepo of a release (for example a
# checkout of tag 1.26.2 of https://gitlab.freedesktop.org/gstreamer/gstreamer):
# its subprojects gstreamer, gst-plugins-base and gst-plugins-bad are built
# with every optional feature off (the core with its check library and tools,
# the base libraries, of bad the analytics library and the analyticsoverlay
# plugin alone) and
# installed into PREFIX (default: /tmp/gstreamer-<version>), this project
# (without CUDA) into BUILDDIR (default: build-gst-<version>), and the gst
# suite runs against them. The plugins the tests use (videotestsrc,
# videoconvert, videoscale, ...) are the system's: a newer core and newer
# libraries load them (GStreamer keeps its ABI within 1.x).
#
# Needs: meson at least the tree's meson_version (1.26 asks for 1.4: set
# MESON to one from a virtual environment, pip install meson), ninja, flex,
# bison, the system's GStreamer plugins and this project's own build
# dependencies. Extra arguments for meson test: MESON_TEST_ARGS (for example
# "visiontrack visiondetect-masks" for two tests).
set -euo pipefail

fail() {
    echo "$*" >&2
    exit 1
}

if [ $# -lt 1 ] || [ ! -f "$1/subprojects/gstreamer/meson.build" ]; then
    echo "usage: $0 GSTREAMER-SOURCE-TREE [PREFIX [BUILDDIR]]" >&2
    echo "(a GStreamer monorepo tree: SRC/subprojects/gstreamer/meson.build)" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
meson=${MESON:-meson}
version=$(sed -n "s/^ *version *: *'\([0-9.]*\)'.*/\1/p" \
    "$src/subprojects/gstreamer/meson.build" | head -n 1)
prefix=$(realpath -m "${2:-/tmp/gstreamer-$version}")
builddir=$(realpath -m "${3:-$here/build-gst-$version}")
case $version in
1.2[4-9].* | 1.[3-9][0-9].* | [2-9].*) ;;
*)
    echo "GStreamer $version: the analytics metadata needs >= 1.24" >&2
    exit 2
    ;;
esac
# the system's plugins, asked before PKG_CONFIG_PATH points at the new tree
system_plugins=$(pkg-config --variable=pluginsdir gstreamer-1.0)

common=(--prefix="$prefix" --libdir=lib -Dauto_features=disabled
    -Dexamples=disabled -Dtests=disabled -Dintrospection=disabled
    -Dnls=disabled -Ddoc=disabled)
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
mkdir -p "$prefix/build"
for sub in gstreamer gst-plugins-base gst-plugins-bad; do
    case $sub in
    gstreamer) extra=(-Dcheck=enabled -Dtools=enabled -Dbenchmarks=disabled) ;;
    gst-plugins-base) extra=(-Dtools=disabled -Dgl=disabled) ;;
    gst-plugins-bad) extra=(-Dtools=disabled -Dgpl=disabled
        -Danalyticsoverlay=enabled) ;;
    esac
    echo "== GStreamer $version: $sub into $prefix"
    b=$prefix/build/$sub
    reconfigure=()
    [ -f "$b/build.ninja" ] && reconfigure=(--reconfigure)
    "$meson" setup "${reconfigure[@]}" "$b" "$src/subprojects/$sub" \
        "${common[@]}" "${extra[@]}" > "$b.setup.log" 2>&1 ||
        fail "configuring $sub failed: $b.setup.log"
    if [ "$sub" != gst-plugins-bad ]; then
        ninja -C "$b" install > "$b.install.log" 2>&1 ||
            fail "building $sub failed: $b.install.log"
        continue
    fi
    # of bad, only the analytics library and the analyticsoverlay plugin
    # (objectdetectionoverlay, which a test runs on visiondetect's entries):
    # its other libraries (codecs, ...) are unstable API that the system's
    # plugins of bad would load instead of their own version's, and fail to
    stage=$prefix/build/stage
    rm -rf "$stage"
    DESTDIR=$stage ninja -C "$b" install > "$b.install.log" 2>&1 ||
        fail "building $sub failed: $b.install.log"
    cp -a "$stage$prefix"/lib/libgstanalytics-1.0.so* "$prefix/lib/"
    cp -a "$stage$prefix/lib/pkgconfig/gstreamer-analytics-1.0.pc" \
        "$prefix/lib/pkgconfig/"
    mkdir -p "$prefix/include/gstreamer-1.0/gst"
    rm -rf "$prefix/include/gstreamer-1.0/gst/analytics"
    cp -a "$stage$prefix/include/gstreamer-1.0/gst/analytics" \
        "$prefix/include/gstreamer-1.0/gst/"
    mkdir -p "$prefix/lib/gstreamer-1.0"
    cp -a "$stage$prefix/lib/gstreamer-1.0/libgstanalyticsoverlay.so" \
        "$prefix/lib/gstreamer-1.0/"
done
pkg-config --exists 'gstreamer-analytics-1.0 >= 1.24' || {
    echo "gstreamer-analytics-1.0 not installed into $prefix" >&2
    exit 1
}

echo "== visiondetect against GStreamer $version in $builddir"
if [ ! -f "$builddir/build.ninja" ]; then
    "$meson" setup "$builddir" "$here" -Dcuda=disabled
fi
ninja -C "$builddir"
grep -q '^#define HAVE_GST_ANALYTICS 1' "$builddir/vd_config.h" || {
    echo "$builddir was configured without the analytics library" \
        "(configured before $prefix existed? remove it)" >&2
    exit 1
}

echo "== gst suite"
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GST_PLUGIN_SYSTEM_PATH_1_0=$prefix/lib/gstreamer-1.0:$system_plugins
# shellcheck disable=SC2086
exec "$meson" test -C "$builddir" --suite gst --print-errorlogs ${MESON_TEST_ARGS:-}
