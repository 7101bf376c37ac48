#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Formats C files of gst/ and gst-libs/ in GStreamer's own style (its gst-indent's
# GNU indent options: 2-space indents, 80 columns, braces on the if line, no
# tabs), in place.
# GNU indent reaches a fixed point only on its second pass, so it runs twice.
# Usage: tools/gst-indent.sh FILE.c...  (tests/check_format.sh checks gst/ and
# gst-libs/ with it)
set -e
command -v indent >/dev/null || { echo "gst-indent.sh: needs GNU indent (Debian: indent)" >&2; exit 1; }
for f in "$@"; do
  for pass in 1 2; do
    indent --braces-on-if-line --case-brace-indentation0 --case-indentation2 \
      --braces-after-struct-decl-line --line-length80 --no-tabs --cuddle-else \
      --dont-line-up-parentheses --continuation-indentation4 --honour-newlines \
      --tab-size8 --indent-level2 --leave-preprocessor-space "$f" -o "$f.indent"
    mv "$f.indent" "$f"
  done
done
