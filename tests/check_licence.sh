#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every source, build and script file the repository tracks carries an SPDX licence
# line among its first three lines (the project is LGPL-2.1-or-later, COPYING): C,
# CUDA, headers, Python, shell, meson files. Prints each file without one and fails.
# Usage: tests/check_licence.sh [SOURCE_ROOT]; skips (77) outside a git checkout.
root="${1:-$(dirname "$0")/..}"
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $root is not a git checkout"
  exit 77
fi
[ -f COPYING ] || { echo "FAIL: no COPYING file"; exit 1; }
missing=0
checked=0
for f in $(git ls-files -- '*.c' '*.h' '*.cu' '*.py' '*.sh' 'meson.build' '*/meson.build' \
             'meson_options.txt' '.ci/run'); do
  [ -f "$f" ] || continue
  checked=$((checked + 1))
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: LGPL-2.1-or-later'; then
    echo "no SPDX licence line: $f"
    missing=$((missing + 1))
  fi
done
echo "$checked files checked, $missing without an SPDX licence line"
[ "$missing" -eq 0 ]
