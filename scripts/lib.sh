# Shared by scripts/demo, scripts/test and benchmarks/run: installing what is missing, building,
# and a throwaway PostgreSQL cluster. Source it; do not run it.

# Debian 12 packages the project needs (build, tests, demo, benchmarks).
PGQUEUE_PACKAGES="g++ meson ninja-build pkg-config cmake git libpq-dev libasio-dev catch2 postgresql postgresql-contrib openssl"

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
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
  fi
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
# because initdb refuses root. Pass "durable" to keep fsync on (benchmarks).
pg_throwaway_start() {
  local bindir as_owner=""
  bindir=$(pg_bindir) || return 1
  PGQUEUE_PGDIR=$(mktemp -d /tmp/pgqueue-XXXXXX)
  chmod 755 "$PGQUEUE_PGDIR"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$PGQUEUE_PGDIR"
    as_owner="runuser -u postgres --"
  fi
  local opts="-k $PGQUEUE_PGDIR -c listen_addresses='' -c max_connections=200"
  [ "${1:-}" = durable ] || opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  $as_owner "$bindir/initdb" -D "$PGQUEUE_PGDIR/data" -A trust -U postgres -E UTF8 --locale=C \
    --no-sync >"$PGQUEUE_PGDIR/initdb.log" 2>&1 || { cat "$PGQUEUE_PGDIR/initdb.log" >&2; return 1; }
  $as_owner "$bindir/pg_ctl" -D "$PGQUEUE_PGDIR/data" -l "$PGQUEUE_PGDIR/server.log" -w \
    -o "$opts" start >/dev/null || { cat "$PGQUEUE_PGDIR/server.log" >&2; return 1; }
  PGQUEUE_PG_CTL="$as_owner $bindir/pg_ctl -D $PGQUEUE_PGDIR/data"
  export PGQUEUE_DSN="host=$PGQUEUE_PGDIR user=postgres dbname=postgres"
}

pg_throwaway_stop() {
  [ -n "${PGQUEUE_PGDIR:-}" ] || return 0
  $PGQUEUE_PG_CTL -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$PGQUEUE_PGDIR"
  PGQUEUE_PGDIR=""
}
