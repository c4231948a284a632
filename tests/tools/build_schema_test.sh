#!/usr/bin/env bash
# tools/build_schema.sh on a copy of the schema's sources: refuses migration files it would
# otherwise skip or misorder, records a step's version even when the step ends early, and
# rejects an unknown option. Works from whichever migration is the last one.
# Usage: build_schema_test.sh SOURCE_ROOT
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

# The numbers around the last migration there is: the next one, and the one after it.
last=$(find "$root/sql/migrations" -name '[0-9][0-9][0-9][0-9]_*.sql' -printf '%f\n' | sort | tail -n 1)
last=$((10#${last:0:4}))
next=$(printf '%04d' $((last + 1)))
after_next=$(printf '%04d' $((last + 2)))

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/${next}-job-tags.sql"
expect_failure "a migration named with a dash" "is named NNNN_what_it_does.sql"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/$((last + 1))_job_tags.sql"
expect_failure "a migration without four digits" "is named NNNN_what_it_does.sql"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/$(printf '%04d' "$last")_again.sql"
expect_failure "two migrations with one number" "is there twice"

fresh_copy
echo 'SELECT 1;' > "$work/repo/sql/migrations/${after_next}_gap.sql"
expect_failure "a gap in the numbers" "expected step $next"

fresh_copy
if "$work/repo/tools/build_schema.sh" --chek >/dev/null 2>&1; then
  echo "FAIL: an unknown option was accepted"; failures=$((failures + 1))
else
  echo "ok: an unknown option is refused"
fi

# A step that ends early (RETURN) still records its version: the record comes first.
fresh_copy
printf -- '-- body of %s\nIF true THEN\n  RETURN;\nEND IF;\n' "$next" \
  > "$work/repo/sql/migrations/${next}_early_return.sql"
"$work/repo/tools/build_schema.sh"
record=$(grep -n "VALUES (true, $((last + 1)))" "$work/repo/sql/pgqueue.sql" | cut -d: -f1)
body=$(grep -n -- "-- body of $next" "$work/repo/sql/pgqueue.sql" | cut -d: -f1)
if [ -n "$record" ] && [ -n "$body" ] && [ "$record" -lt "$body" ] &&
   grep -q "schema_version = $((last + 1));" "$work/repo/include/pgqueue/detail/schema_sql.hpp"; then
  echo "ok: a step that returns early is recorded, and the file is version $((last + 1))"
else
  echo "FAIL: version $((last + 1)) is not recorded before the step's body"; failures=$((failures + 1))
fi

echo "$failures failed"
[ "$failures" -eq 0 ]
