#!/usr/bin/env bash
# tools/build_schema.sh on a copy of the schema's sources: refuses migration files it would
# otherwise skip or misorder, records a step's version even when the step ends early, and
# rejects an unknown option. Usage: build_schema_test.sh SOURCE_ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fresh_copy() {
  rm -rf "$work/repo"
  mkdir -p "$work/repo/include/pgqueue/detail"
  cp -r "$root/tools" "$root/sql" "$work/repo/"
}

# expect_failure WHAT MESSAGE: the build fails and says MESSAGE.
expect_failure() {
  local out
  if out=$("$work/repo/tools/build_schema.sh" 2>&1); then
    echo "FAIL: $1: the build succeeded"; failures=$((failures + 1))
  elif ! grep -q -- "$2" <<<"$out"; then
    echo "FAIL: $1: expected '$2' in: $out"; failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/0005-job-tags.sql"
expect_failure "a migration named with a dash" "is named NNNN_what_it_does.sql"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/5_job_tags.sql"
expect_failure "a migration without four digits" "is named NNNN_what_it_does.sql"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/0004_again.sql"
expect_failure "two migrations with one number" "is there twice"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/0006_gap.sql"
expect_failure "a gap in the numbers" "expected step 0005"

fresh_copy
if "$work/repo/tools/build_schema.sh" --chek >/dev/null 2>&1; then
  echo "FAIL: an unknown option was accepted"; failures=$((failures + 1))
else
  echo "ok: an unknown option is refused"
fi

# A step that ends early (RETURN) still records its version: the record comes first.
fresh_copy
printf -- '-- body of 0005\nIF true THEN\n  RETURN;\nEND IF;\n' > "$work/repo/sql/migrations/0005_early_return.sql"
"$work/repo/tools/build_schema.sh"
record=$(grep -n 'VALUES (true, 5)' "$work/repo/sql/pgqueue.sql" | cut -d: -f1)
body=$(grep -n -- '-- body of 0005' "$work/repo/sql/pgqueue.sql" | cut -d: -f1)
if [ -n "$record" ] && [ -n "$body" ] && [ "$record" -lt "$body" ] &&
   grep -q 'schema_version = 5;' "$work/repo/include/pgqueue/detail/schema_sql.hpp"; then
  echo "ok: a step that returns early is recorded, and the file is version 5"
else
  echo "FAIL: version 5 is not recorded before the step's body"; failures=$((failures + 1))
fi

echo "$failures failed"
[ "$failures" -eq 0 ]
