#!/usr/bin/env bash
# Claim rate with 0 and with N retained completed jobs, in one run on one server, driven by
# pgbench through the SQL functions. Shows that completed jobs do not slow claims.
#   benchmarks/claim_scale.sh [retained=1000000] [seconds=10] [clients=4]
# Uses PGQUEUE_DSN when set, else a throwaway durable (fsync on) cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
retained=${1:-1000000}
seconds=${2:-10}
clients=${3:-4}

if [ -z "${PGQUEUE_DSN:-}" ]; then
  pg_throwaway_start durable
  trap pg_throwaway_stop EXIT
fi
psql() { command psql "$PGQUEUE_DSN" -v ON_ERROR_STOP=1 -qAt "$@"; }
db="pgqueue_claim_scale"
psql -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
dsn="$PGQUEUE_DSN dbname=$db"
psql() { command psql "$dsn" -v ON_ERROR_STOP=1 -qAt "$@"; }
psql -f sql/pgqueue.sql

work=$(mktemp -d)
trap 'rm -rf "$work"; pg_throwaway_stop' EXIT
cat >"$work/one.sql" <<'SQL'
SELECT id, attempts FROM pgqueue.claim_next('bench', 'w') \gset
SELECT pgqueue.ack(:id, 'w', :attempts);
SQL
cat >"$work/batch.sql" <<'SQL'
SELECT pgqueue.ack_batch(array_agg(id), 'w', array_agg(attempts)) FROM pgqueue.claim_batch('bench', 'w', 100);
SQL

fill_ready() {  # $1 jobs, enqueued in batches of 10,000
  for _ in $(seq 1 $(( $1 / 10000 ))); do
    echo "SELECT pgqueue.enqueue_batch('bench', array_agg('{\"k\":1}'::jsonb)) FROM generate_series(1, 10000);"
  done | psql >/dev/null
  psql -c "VACUUM ANALYZE pgqueue.jobs" >/dev/null
}
rate() {  # $1 script: jobs acked per second (counted from the table, not from pgbench's tps)
  local before after
  before=$(psql -c "SELECT count(*) FROM pgqueue.jobs WHERE state = 'ready'")
  pgbench "$dsn" -n -c "$clients" -j 2 -T "$seconds" -f "$1" >/dev/null 2>&1 || true
  after=$(psql -c "SELECT count(*) FROM pgqueue.jobs WHERE state = 'ready'")
  [ "$after" -gt 0 ] || echo "warning: the queue ran dry; raise the fill" >&2
  awk -v n=$((before - after)) -v s="$seconds" 'BEGIN { printf "%.0f", n / s }'
}
measure() {  # $1 label
  psql -c "DELETE FROM pgqueue.jobs WHERE state <> 'done'" >/dev/null
  fill_ready 300000
  local one batch depth
  one=$(rate "$work/one.sql")
  fill_ready 1000000
  batch=$(rate "$work/batch.sql")
  psql -c "VACUUM ANALYZE pgqueue.jobs" >/dev/null
  depth=$(psql -c "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pgqueue.depth" |
          sed -n 's/.*"Execution Time": \([0-9.]*\).*/\1/p')
  printf "%-28s %14s %16s %12s\n" "$1" "$one" "$batch" "$depth"
}

printf "%-28s %14s %16s %12s\n" "retained completed jobs" "claim+ack/s" "batch100 jobs/s" "depth ms"
measure "0"
psql -c "INSERT INTO pgqueue.jobs (queue, payload, state, attempts, finished_at)
         SELECT 'bench', '{\"k\":1}', 'done', 1, now() FROM generate_series(1, $retained)" \
     -c "SELECT pgqueue.count_done(array_fill('bench'::text, ARRAY[$retained]))" \
     -c "VACUUM ANALYZE pgqueue.jobs" >/dev/null
measure "$retained"
echo "($clients pgbench clients, ${seconds}s each, $(nproc) cores, PostgreSQL $(psql -c 'SHOW server_version'))"
