#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every file the repository tracks (git ls-files) carries the SPDX licence line
# "SPDX-License-Identifier: LGPL-2.1-or-later" among its first three lines (the
# project is LGPL-2.1-or-later, COPYING), in its own comment syntax, unless it is
# one of the exempt files listed below. Every type is checked, so a new kind of
# source file is checked from its first commit (a list of types to check missed
# kernels/*.cuh). Prints each file without the line, and each exemption that
# matches no tracked file any more (the list stays the files it names), and fails.
# Usage: tests/check_licence.sh [SOURCE_ROOT]; skips (77) outside a git checkout.

# The exemptions: a shell case pattern on the path from the top of the tree ("*"
# also matches "/"), then why; one a line. Only files that cannot carry a comment
# (binary), whose every byte or line is data under test, or that are the licence
# or documentation.
exempt='
COPYING                     the licence text itself
*.md                        documentation: Markdown carries no licence line (docs/HACKING.md)
*.safetensors               model files, binary: the bundled model, the fuzzers seed models
tests/fuzz/corpus/*         the fuzzers seed inputs: their bytes are the input
tests/gst/meta_symbols.txt  data: compared line by line with the exported symbols
'
root="${1:-$(dirname "$0")/..}"
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $root is not a git checkout"
  exit 77
fi
[ -f COPYING ] || { echo "FAIL: no COPYING file"; exit 1; }
patterns="$(printf '%s\n' "$exempt" | awk 'NF { print $1 }')"
set -f   # the patterns are matched by case, never expanded as file names
missing=0 checked=0 exempted=0 used=" "
while IFS= read -r f; do
  # tracked but deleted in the working tree, or a symbolic link: nothing to read
  if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
  hit=""
  for p in $patterns; do
    # shellcheck disable=SC2254  # $p is a pattern
    case "$f" in $p) hit="$p"; break ;; esac
  done
  if [ -n "$hit" ]; then
    exempted=$((exempted + 1))
    case "$used" in *" $hit "*) ;; *) used="$used$hit " ;; esac
    continue
  fi
  checked=$((checked + 1))
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: LGPL-2.1-or-later'; then
    echo "no SPDX licence line: $f"
    missing=$((missing + 1))
  fi
done <<FILES
$(git -c core.quotepath=off ls-files)
FILES
stale=0
for p in $patterns; do
  case "$used" in
    *" $p "*) ;;
    *) echo "exemption that matches no tracked file (remove it from tests/check_licence.sh): $p"
       stale=$((stale + 1)) ;;
  esac
done
echo "$checked files checked, $missing without an SPDX licence line; $exempted exempt"
[ "$missing" -eq 0 ] && [ "$stale" -eq 0 ]
