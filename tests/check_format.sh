#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The C and CUDA sources of engine/, tracker/, kernels/ and common/ are formatted
# as .clang-format says (clang-format --dry-run), the C files of gst/ and gst-libs/
# in GStreamer's own style (tools/gst-indent.sh: GNU indent with gst-indent's
# options): lists each file that is not, with the difference, and fails. Formatting
# differs between releases of both tools, so each part runs with the release the
# project formats with, Debian 12's (clang-format 14, GNU indent 2.2.12), and is
# skipped with another or none (the whole check exits 77 when both are). Format:
# clang-format -i FILE; tools/gst-indent.sh FILE.c.
# Usage: tests/check_format.sh [SOURCE_ROOT]; skips (77) outside a git checkout.
root="${1:-$(dirname "$0")/..}"
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $root is not a git checkout"
  exit 77
fi
bad=0
n=0
parts=0
cf="${CLANG_FORMAT:-clang-format}"
version="$("$cf" --version 2>/dev/null)"
case "$version" in
  *"clang-format version 14."*)
    parts=$((parts + 1))
    for f in $(git ls-files -- 'engine/*.c' 'engine/*.h' 'tracker/*.c' 'tracker/*.h' \
                 'kernels/*.cu' 'kernels/*.cuh' 'kernels/*.h' 'kernels/*.c' 'common/*.h'); do
      [ -f "$f" ] || continue
      n=$((n + 1))
      if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted (clang-format -i $f):"
        "$cf" "$f" | diff -u "$f" - | head -n 20
        bad=$((bad + 1))
      fi
    done ;;
  "") echo "engine/, tracker/, kernels/, common/ not checked: no $cf (Debian: clang-format)" ;;
  *) echo "engine/, tracker/, kernels/, common/ not checked: $version (the project formats with 14)" ;;
esac
version="$(indent --version 2>/dev/null)"
case "$version" in
  "GNU indent 2.2.12")
    parts=$((parts + 1))
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    for f in $(git ls-files -- 'gst/*.c' 'gst-libs/*.c'); do
      [ -f "$f" ] || continue
      n=$((n + 1))
      cp "$f" "$tmp/file.c"
      sh tools/gst-indent.sh "$tmp/file.c"
      if ! cmp -s "$f" "$tmp/file.c"; then
        echo "not formatted (tools/gst-indent.sh $f):"
        diff -u "$f" "$tmp/file.c" | head -n 20
        bad=$((bad + 1))
      fi
    done ;;
  "") echo "gst/, gst-libs/ not checked: no GNU indent (Debian: indent)" ;;
  *) echo "gst/, gst-libs/ not checked: $version (the project formats with GNU indent 2.2.12)" ;;
esac
if [ "$parts" -eq 0 ]; then
  echo "SKIP: neither formatter in the project's release"
  exit 77
fi
echo "$n files checked, $bad not formatted"
[ "$bad" -eq 0 ]
