# Shared by scripts/demo, scripts/test and benchmarks/run: installing what is missing, building,
# and a throwaway PostgreSQL cluster. Source it; do not run it.

# Debian 12 packages the project needs (build, demo, benchmarks); scripts/test and
# scripts/dashboard-screenshot add what only they need (PGQUEUE_TEST_PACKAGES).
PGQUEUE_PACKAGES="g++ meson ninja-build pkg-config cmake git libpq-dev libasio-dev nlohmann-json3-dev libcli11-dev catch2 postgresql postgresql-contrib openssl"
# chromium: the dashboard's browser test (tests/dashboard/browser_test.cpp) and its screenshot;
# prometheus: promtool, which checks the metrics text and the example alerting rules.
PGQUEUE_TEST_PACKAGES="chromium prometheus"

# Installs whichever of the packages is missing (apt-get; as root or through sudo).
ensure_packages() {
  local missing=()
  for p in $PGQUEUE_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "pgqueue: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# How build/ is configured. scripts/test builds everything in it, scripts/demo only the demo;
# sharing the options lets the two share the directory. Debug information is line tables only
# (-g1): enough for file:line in sanitizer reports and backtraces, and GCC 12 compiles this
# coroutine code about twice as fast as with full -g at -O2. (Debug information does not change
# the generated code.)
# shellcheck disable=SC2034 # used by the scripts that source this file
PGQUEUE_BUILD_OPTIONS=(-Ddebug=false -Dcpp_args=-g1)

# Configures (once) and builds build directory $1 with extra meson options $2...
build() {
  local dir="$1"; shift
  configure "$dir" "$@" || return 1
  local log
  log=$(mktemp)
  if ! ninja -C "$dir" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "pgqueue: build in $dir failed" >&2
    return 1
  fi
  rm -f "$log"
}

# Configures build directory $1 with meson options $2... unless it is configured already (as
# build() does); meson's output only when it fails.
configure() {
  local dir="$1"; shift
  [ -f "$dir/build.ninja" ] && return 0
  local log
  log=$(mktemp)
  if ! meson setup "$dir" "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "pgqueue: configuring $dir failed" >&2
    return 1
  fi
  rm -f "$log"
}

# Builds targets $3... of the configured directory $1, showing on stderr what is being built
# and how far along: ninja's [n/m], the step under way and the seconds so far. On a terminal
# one line updated in place; otherwise a line per step, and one every 15 s while a step runs.
# $2 is said first when there is anything to build (e.g. how long it takes). On failure: ninja's
# full output (the compiler's errors). (ninja names a step when it has finished unless it
# writes to a terminal, so the step under way is the first of ninja's plan, `ninja -n`, that
# has not finished.)
build_with_progress() {
  local dir="$1" about="$2"
  shift 2
  local plan
  plan=$(ninja -C "$dir" -n "$@" | sed -n 's/^\[[0-9]*\/[0-9]*\] //p') || return 1
  if [ -z "$plan" ]; then
    echo "pgqueue: $* up to date" >&2
    return 0
  fi
  [ -n "$about" ] && echo "pgqueue: $about" >&2
  local total log finished_list tty="" cols=80
  total=$(printf '%s\n' "$plan" | wc -l)
  log=$(mktemp)
  finished_list=$(mktemp)
  if [ -t 2 ]; then
    tty=1
    cols=$(tput cols 2>/dev/null || echo 80)
  fi
  ninja -C "$dir" "$@" >"$log" 2>&1 &
  local pid=$! start=$SECONDS step_start=$SECONDS said_at=$SECONDS done_n=0 current="" last="" line
  while :; do
    sed -n 's/^\[[0-9]*\/[0-9]*\] //p' "$log" >"$finished_list"
    done_n=$(wc -l <"$finished_list")
    current=$(printf '%s\n' "$plan" | grep -vxF -f "$finished_list" | head -n 1 || true)
    kill -0 "$pid" 2>/dev/null || break
    [ -n "$current" ] || current=$(tail -n 1 "$finished_list")
    if [ "$current" != "$last" ]; then
      step_start=$SECONDS
      said_at=-1000
      last=$current
    fi
    line="[$((done_n < total ? done_n + 1 : total))/$total] $current ... $((SECONDS - step_start)) s"
    if [ -n "$tty" ]; then
      line="pgqueue: $line"
      printf '\r\033[K%s' "${line:0:cols-1}" >&2
    elif [ $((SECONDS - said_at)) -ge 15 ]; then
      echo "pgqueue: $line" >&2
      said_at=$SECONDS
    fi
    sleep 0.5
  done
  local rc=0
  wait "$pid" || rc=$?
  [ -n "$tty" ] && printf '\r\033[K' >&2
  if [ "$rc" -ne 0 ]; then
    cat "$log" >&2
    echo "pgqueue: build in $dir failed" >&2
  else
    echo "pgqueue: built $* in $((SECONDS - start)) s ($done_n steps)" >&2
  fi
  rm -f "$log" "$finished_list"
  return "$rc"
}

# The directory with initdb/pg_ctl.
pg_bindir() {
  local d
  d=$(pg_config --bindir 2>/dev/null)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  echo "pgqueue: no PostgreSQL server binaries found" >&2
  return 1
}

# Starts a throwaway cluster in a temp directory (unix socket only, no TCP port) and exports
# PGQUEUE_DSN for it; pg_throwaway_stop removes it. As root the server runs as 'postgres'
# because initdb refuses root. Pass "durable" to keep fsync on (benchmarks), "scratch" for a
# test's cluster: fsync off and, where there is room, in memory (see pg_scratch_parent).
# What runs a server command as the cluster's owner: as root, 'postgres' (initdb refuses root).
pg_as_owner() {
  [ "$(id -u)" -eq 0 ] && echo "runuser -u postgres --"
  return 0
}

# Where a test's cluster goes: /dev/shm when it is a tmpfs with 1 GiB free (initdb took 0.6
# CPU-s there against 1.5, each CREATE DATABASE 0.08 against 0.33, on an ext4 disk mounted
# with discard: most of it the kernel's), else /tmp, as in a container's 64 MB /dev/shm;
# PGQUEUE_TEST_CLUSTER_DIR names it outright. The C++ tests' clusters ask this function too
# (tests/support/cluster.cpp).
pg_scratch_parent() {
  if [ -n "${PGQUEUE_TEST_CLUSTER_DIR:-}" ]; then echo "$PGQUEUE_TEST_CLUSTER_DIR"; return; fi
  if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] &&
     [ "$(df -k --output=avail /dev/shm 2>/dev/null | tail -n 1)" -ge 1048576 ]; then
    echo /dev/shm
  else
    echo /tmp
  fi
}

pg_throwaway_start() {
  local bindir as_owner parent=/tmp
  bindir=$(pg_bindir) || return 1
  as_owner=$(pg_as_owner)
  [ "${1:-}" != scratch ] || parent=$(pg_scratch_parent)
  PGQUEUE_PGDIR=$(mktemp -d "$parent/pgqueue-XXXXXX")
  chmod 755 "$PGQUEUE_PGDIR"
  [ -z "$as_owner" ] || chown postgres "$PGQUEUE_PGDIR"
  local opts="-k $PGQUEUE_PGDIR -c listen_addresses='' -c max_connections=200"
  [ "${1:-}" = durable ] || opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  $as_owner "$bindir/initdb" -D "$PGQUEUE_PGDIR/data" -A trust -U postgres -E UTF8 --locale=C \
    --no-sync >"$PGQUEUE_PGDIR/initdb.log" 2>&1 || { cat "$PGQUEUE_PGDIR/initdb.log" >&2; return 1; }
  $as_owner "$bindir/pg_ctl" -D "$PGQUEUE_PGDIR/data" -l "$PGQUEUE_PGDIR/server.log" -w \
    -o "$opts" start >/dev/null || { cat "$PGQUEUE_PGDIR/server.log" >&2; return 1; }
  PGQUEUE_PG_CTL="$as_owner $bindir/pg_ctl -D $PGQUEUE_PGDIR/data"
  export PGQUEUE_DSN="host=$PGQUEUE_PGDIR user=postgres dbname=postgres"
}

# Stops and removes the cluster in $PGQUEUE_PGDIR (also from another shell than the one that
# started it: then pg_ctl is found again). A server that does not stop keeps its directory.
pg_throwaway_stop() {
  [ -n "${PGQUEUE_PGDIR:-}" ] || return 0
  local pg_ctl="${PGQUEUE_PG_CTL:-}"
  [ -n "$pg_ctl" ] || pg_ctl="$(pg_as_owner) $(pg_bindir)/pg_ctl -D $PGQUEUE_PGDIR/data"
  $pg_ctl -m immediate stop >/dev/null 2>&1 || true
  if [ -f "$PGQUEUE_PGDIR/data/postmaster.pid" ]; then
    echo "pgqueue: the server in $PGQUEUE_PGDIR did not stop; its directory is kept" >&2
    return 1
  fi
  rm -rf "$PGQUEUE_PGDIR"
  PGQUEUE_PGDIR=""
}
