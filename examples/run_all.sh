#!/usr/bin/env bash
# Runs every numbered example (examples/0*.cpp, built in <build-dir>/examples) and the demo
# (for 1 s; it checks that every job ended done or dead as planned) against a throwaway
# PostgreSQL, or against $PGQUEUE_DSN when set. Also runs one example with the conninfo only in
# PGQUEUE_DSN, and stops example 02 with SIGINT. Exits non-zero if any run fails, or takes
# longer than 60 s. Does not build: run `ninja -C build` first.
#
#   examples/run_all.sh [build-dir]      (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
. "$root/scripts/lib.sh"

work=$(mktemp -d /tmp/pgqueue-examples-XXXXXX)
own_server=""
cleanup() {
  if [ -n "$own_server" ]; then pg_throwaway_stop; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${PGQUEUE_DSN:-}" ]; then
  own_server=1
  pg_throwaway_start scratch
fi

passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() {
  echo "--- FAILED: $*"
  failed=$((failed + 1))
}

# run <name> <args...>: runs one example, its output shown as it comes.
run() {
  local name=$1 rc=0
  shift
  echo "=== $name"
  timeout 60 "$build/examples/$name" "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then pass; else fail "$name exited with $rc"; fi
}

for src in "$root"/examples/0*.cpp; do
  name=$(basename "$src" .cpp)
  if [ ! -x "$build/examples/$name" ]; then
    fail "$name is not built in $build (ninja -C $build)"
    continue
  fi
  run "$name" "$PGQUEUE_DSN"
done

# The demo of scripts/demo, short: one second of load instead of eight.
if [ -x "$build/examples/demo" ]; then
  run demo "$PGQUEUE_DSN" 1
else
  fail "demo is not built in $build (ninja -C $build)"
fi

# The conninfo from the environment alone (PGQUEUE_DSN is exported).
echo "=== 04_batch_enqueue (conninfo from PGQUEUE_DSN)"
rc=0
timeout 60 "$build/examples/04_batch_enqueue" >"$work/env.out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then pass; else cat "$work/env.out"; fail "04_batch_enqueue without arguments exited with $rc"; fi

# Graceful shutdown on SIGINT: no job or time limit, so only the signal ends it.
echo "=== 02_worker_graceful_shutdown --jobs 0, then SIGINT"
"$build/examples/02_worker_graceful_shutdown" "$PGQUEUE_DSN" --jobs 0 >"$work/sigint.out" 2>&1 &
pid=$!
sleep 1
kill -INT "$pid" 2>/dev/null || true
for _ in $(seq 200); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  wait "$pid" || true
  cat "$work/sigint.out"
  fail "02_worker_graceful_shutdown did not stop within 20 s of SIGINT"
else
  rc=0
  wait "$pid" || rc=$?
  cat "$work/sigint.out"
  if [ "$rc" -eq 0 ] && grep -q "^SIGINT: stopping" "$work/sigint.out"; then
    pass
  else
    fail "02_worker_graceful_shutdown after SIGINT: exit $rc"
  fi
fi

echo "examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
