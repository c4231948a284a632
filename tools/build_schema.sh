#!/usr/bin/env bash
# Builds the schema's two generated files from their sources:
#   sql/pgqueue.sql (the one file users run) from sql/parts/begin.sql, every numbered step in
#     sql/migrations/ (each wrapped so that it runs once, in order, in databases whose version is
#     below its number, and records that number), every file in sql/definitions/ (the current
#     functions, trigger, view and privileges, applied on every run) and sql/parts/end.sql;
#   include/pgqueue/detail/schema_sql.hpp, the same text for pgqueue::migrate (in include/
#     because the library is header-only: a user's build finds it with the other headers).
# The schema's version is the last step's number. With --check, writes nothing and fails when
# either checked-in file differs from what it would write (the test suite runs that).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-write}

case "$mode" in
  write | --check) ;;
  *) echo "build_schema: unknown option $mode" >&2; sed -n '2,10p' "$0" >&2; exit 2 ;;
esac

# Every file there is a step: one that the pattern would skip is a mistake, not a note.
for f in sql/migrations/*; do
  if ! [[ $(basename "$f") =~ ^[0-9]{4}_[a-z0-9_]+\.sql$ ]]; then
    echo "build_schema: $f: a migration is named NNNN_what_it_does.sql (four digits, lower case)" >&2
    exit 1
  fi
done
steps=(sql/migrations/[0-9][0-9][0-9][0-9]_*.sql)
expected=1
for f in "${steps[@]}"; do
  n=$((10#$(basename "$f" | cut -c1-4)))
  if [ "$n" -lt "$expected" ]; then
    echo "build_schema: $f: step $(printf %04d "$n") is there twice" >&2
    exit 1
  elif [ "$n" -ne "$expected" ]; then
    echo "build_schema: $f: expected step $(printf %04d "$expected") (steps are numbered 1, 2, 3 ... without gaps)" >&2
    exit 1
  fi
  expected=$((n + 1))
done
version=$((expected - 1))

schema() {
  sed "s/@VERSION@/$version/g" sql/parts/begin.sql
  for f in "${steps[@]}"; do
    local n name
    n=$((10#$(basename "$f" | cut -c1-4)))
    name=$(basename "$f")
    if grep -q '\$migration\$' "$f"; then
      echo "build_schema: $f contains the wrapper's delimiter \$migration\$" >&2
      return 1
    fi
    printf '\n-- ── migration %s: runs once, in databases below version %d\n' "$name" "$n"
    printf 'DO $migration$\nBEGIN\n'
    printf "IF current_setting('pgqueue.migrating_from')::int >= %d THEN\n  RETURN;\nEND IF;\n" "$n"
    # Recorded first, so that a step which ends early (RETURN) is recorded too: the whole file
    # is one transaction, so a step that fails records nothing.
    printf 'INSERT INTO pgqueue.schema_version (singleton, version) VALUES (true, %d)\n' "$n"
    printf 'ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version, installed_at = now();\n\n'
    cat "$f"
    printf 'END\n$migration$;\n'
  done
  for f in sql/definitions/*.sql; do
    echo
    cat "$f"
  done
  echo
  cat sql/parts/end.sql
}

header() {
  local sql=$1
  if grep -q ')pgqueue_sql"' <<<"$sql"; then
    echo "build_schema: the schema contains the raw-string delimiter" >&2
    return 1
  fi
  echo "// Generated from sql/pgqueue.sql by tools/build_schema.sh: do not edit (a test compares them)."
  echo "#pragma once"
  echo
  echo "#include <string_view>"
  echo
  echo "namespace pgqueue::detail {"
  echo
  echo "// The schema version sql/pgqueue.sql installs."
  echo "inline constexpr int schema_version = $version;"
  echo
  echo "// The text of sql/pgqueue.sql."
  printf 'inline constexpr std::string_view schema_sql = R"pgqueue_sql('
  printf '%s\n' "$sql"
  echo ')pgqueue_sql";'
  echo
  echo "}  // namespace pgqueue::detail"
}

sql=$(schema)
hpp=$(header "$sql")
case "$mode" in
  write)
    printf '%s\n' "$sql" > sql/pgqueue.sql
    printf '%s\n' "$hpp" > include/pgqueue/detail/schema_sql.hpp
    ;;
  --check)
    status=0
    diff -q <(printf '%s\n' "$sql") sql/pgqueue.sql >/dev/null ||
      { echo "build_schema: sql/pgqueue.sql is not what its sources build: run tools/build_schema.sh" >&2; status=1; }
    diff -q <(printf '%s\n' "$hpp") include/pgqueue/detail/schema_sql.hpp >/dev/null ||
      { echo "build_schema: include/pgqueue/detail/schema_sql.hpp is stale: run tools/build_schema.sh" >&2; status=1; }
    exit $status
    ;;
esac
