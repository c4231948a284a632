#!/usr/bin/env bash
# Builds four outside projects against pgqueue the ways a user would, and runs each against a
# real server (enqueue, claim and ack one job; the pkgconfig one runs consumer_light.cpp):
#   plain     g++ consumer.cpp $(pkg-config --cflags --libs pgqueue), from an install
#   cmake     find_package(pgqueue CONFIG) and pgqueue::pgqueue, from an install
#   pkgconfig a Meson project with dependency('pgqueue') found by pkg-config, from an install:
#             the same pgqueue.pc as plain, so its program only checks what Meson makes of it
#   wrap      a Meson project with subprojects/pgqueue.wrap (wrap-git; this repository's HEAD),
#             using dependency('pgqueue-compiled'): the separately compiled form
# The install is `meson install` of this checkout into a temporary prefix (headers only: no
# compilation). Uses $PGQUEUE_TEST_DSN when set, else a throwaway server.
#   tests/consumers/check.sh
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
here="$src/tests/consumers"
. "$src/scripts/lib.sh"
work=$(mktemp -d /tmp/pgqueue-consumers-XXXXXX)
own_server=""
cleanup() {
  if [ -n "$own_server" ]; then pg_throwaway_stop; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${PGQUEUE_TEST_DSN:-}" ]; then
  dsn=$PGQUEUE_TEST_DSN
else
  own_server=1
  pg_throwaway_start scratch
  dsn=$PGQUEUE_DSN
fi

# quiet <log> <command...>: runs the command, shows its output only when it fails.
quiet() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { cat "$log"; echo "FAILED: $*"; return 1; }
}

prefix="$work/prefix"
quiet "$work/install.log" meson setup "$work/install-build" "$src" --prefix="$prefix" \
  -Dtests=false -Dexamples=false -Dbenchmarks=false -Dtool=false
quiet "$work/install.log" meson install -C "$work/install-build"
pcdir=$(dirname "$(cd "$prefix" && find lib* -name pgqueue.pc | head -n 1)")
export PKG_CONFIG_PATH="$prefix/$pcdir"
for f in "include/pgqueue/pgqueue.hpp" "include/pgqueue/src.hpp" "include/pgqueue/impl/queue.ipp" \
         "share/pgqueue/pgqueue.sql" "$pcdir/pgqueue.pc"; do
  [ -f "$prefix/$f" ] || { echo "FAILED: meson install did not install $f"; exit 1; }
done

# project <name> [<dir> [<program>]]: a copy of tests/consumers/<dir> with <program> (default
# consumer.cpp) as its consumer.cpp, in $work/<name>.
project() {
  mkdir -p "$work/$1"
  if [ -n "${2:-}" ]; then cp -r "$here/$2/." "$work/$1/"; fi
  cp "$here/${3:-consumer.cpp}" "$work/$1/consumer.cpp"
}

build_plain() {
  project plain
  # shellcheck disable=SC2046 # the flags are words
  quiet "$work/plain.log" g++ "$work/plain/consumer.cpp" -o "$work/plain/consumer" \
    $(pkg-config --cflags --libs pgqueue)
}
build_cmake() {
  project cmake cmake
  quiet "$work/cmake.log" cmake -S "$work/cmake" -B "$work/cmake/build" \
    -DCMAKE_PREFIX_PATH="$prefix"
  quiet "$work/cmake.log" cmake --build "$work/cmake/build"
  cp "$work/cmake/build/consumer" "$work/cmake/consumer"
}
build_pkgconfig() {
  project pkgconfig meson_pkgconfig consumer_light.cpp
  # buildtype plain (no -g, -O0), as the plain and CMake builds: debug information took a fifth
  # of this test's CPU.
  quiet "$work/pkgconfig.log" meson setup --buildtype=plain "$work/pkgconfig/build" "$work/pkgconfig"
  quiet "$work/pkgconfig.log" ninja -C "$work/pkgconfig/build"
  cp "$work/pkgconfig/build/consumer" "$work/pkgconfig/consumer"
}
build_wrap() {
  project wrap meson_wrap
  mkdir -p "$work/wrap/subprojects"
  cat >"$work/wrap/subprojects/pgqueue.wrap" <<WRAP
[wrap-git]
url = $src
revision = HEAD
depth = 1

[provide]
dependency_names = pgqueue, pgqueue-compiled
WRAP
  quiet "$work/wrap.log" env -u PKG_CONFIG_PATH meson setup --buildtype=plain "$work/wrap/build" \
    "$work/wrap"
  quiet "$work/wrap.log" ninja -C "$work/wrap/build"
  cp "$work/wrap/build/consumer" "$work/wrap/consumer"
}

# Two builds at a time (CI has two cores).
failed=0
build_plain & a=$!
build_cmake & b=$!
wait $a || failed=1
wait $b || failed=1
build_pkgconfig & a=$!
build_wrap & b=$!
wait $a || failed=1
wait $b || failed=1
[ "$failed" -eq 0 ] || exit 1

for name in plain cmake pkgconfig wrap; do
  echo "=== $name"
  "$work/$name/consumer" "$dsn"
done
echo "consumers: 4 built against pgqueue and ran"
