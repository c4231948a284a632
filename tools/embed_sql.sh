#!/usr/bin/env bash
# Writes include/pgqueue/detail/schema_sql.hpp from sql/pgqueue.sql (to stdout with --stdout),
# so pgqueue::migrate applies exactly the file psql runs. The test suite fails when the two
# differ: rerun this after editing the SQL.
set -euo pipefail
cd "$(dirname "$0")/.."
src=sql/pgqueue.sql
if grep -q ')pgqueue_sql"' "$src"; then
  echo "embed_sql: $src contains the raw-string delimiter" >&2
  exit 1
fi
version=$(sed -n "s/.*INSERT INTO pgqueue.schema_version (singleton, version) VALUES (true, \([0-9]*\)).*/\1/p" "$src")
emit() {
  echo "// Generated from sql/pgqueue.sql by tools/embed_sql.sh: do not edit (a test compares them)."
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
  cat "$src"
  echo ')pgqueue_sql";'
  echo
  echo "}  // namespace pgqueue::detail"
}
if [ "${1:-}" = --stdout ]; then emit; else emit > include/pgqueue/detail/schema_sql.hpp; fi
