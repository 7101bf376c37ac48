#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The C and CUDA sources of engine/, tracker/ and kernels/ are formatted as
# .clang-format says (clang-format --dry-run): lists each file that is not and fails.
# Formatting differs between clang-format releases, so the check runs with the
# release the project formats with, 14 (Debian 12's), and skips (77) with another or
# none. Format a file: clang-format -i FILE.
# Usage: tests/check_format.sh [SOURCE_ROOT]; skips (77) outside a git checkout.
root="${1:-$(dirname "$0")/..}"
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $root is not a git checkout"
  exit 77
fi
cf="${CLANG_FORMAT:-clang-format}"
version="$("$cf" --version 2>/dev/null)"
case "$version" in
  *"clang-format version 14."*) ;;
  "") echo "SKIP: no $cf (Debian: clang-format)"; exit 77 ;;
  *) echo "SKIP: $version; the project formats with clang-format 14"; exit 77 ;;
esac
bad=0
n=0
for f in $(git ls-files -- 'engine/*.c' 'engine/*.h' 'tracker/*.c' 'tracker/*.h' \
             'kernels/*.cu' 'kernels/*.h' 'kernels/*.c'); do
  [ -f "$f" ] || continue
  n=$((n + 1))
  if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted (clang-format -i $f):"
    "$cf" "$f" | diff -u "$f" - | head -n 20
    bad=$((bad + 1))
  fi
done
echo "$n files checked, $bad not formatted"
[ "$bad" -eq 0 ]
