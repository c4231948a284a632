#!/usr/bin/env bash
# Builds tests/subproject/parent with this checkout as its subprojects/pgqueue, as a user's
# project would, and runs it.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/tests/subproject/parent" "$work/parent"
mkdir -p "$work/parent/subprojects"
ln -s "$src" "$work/parent/subprojects/pgqueue"
meson setup "$work/build" "$work/parent" >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
ninja -C "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/build/parent"
echo "pgqueue builds as a subproject"
