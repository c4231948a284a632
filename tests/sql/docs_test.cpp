// The SQL blocks of docs/ run against a real server. Each is copied here verbatim (the
// docs_code_blocks test fails when a block of those pages is in no test). Where a line of a
// block ends with a comment, the comment up to " (" is the result the line must give: the
// first column of each row, joined by ", ", or "(a, b)" for a row of several columns.
#include <sstream>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"

namespace sql_docs_test {

using namespace pgq_test;

namespace {

// ---- docs/sql-api.md ----
const char* sql_api_example = R"sql(
SELECT pgqueue.enqueue('emails', '{"to":"a@example.com"}');                    -- 1
SELECT pgqueue.enqueue('emails', '{"to":"b@example.com"}', 'welcome-42', 5);   -- 2
SELECT pgqueue.enqueue('emails', '{}', 'welcome-42');                          -- 2 (same key)
SELECT pgqueue.enqueue_batch('emails', ARRAY['{"n":1}', '{"n":2}']::jsonb[]); -- {4,5} (ids have gaps)
SELECT * FROM pgqueue.claim_batch('emails', 'worker-1', 10, '30 seconds');   -- 2, 1, 4, 5
SELECT pgqueue.heartbeat(2, 'worker-1', '30 seconds', 1);  -- t (1: the claim's lease_token)
SELECT pgqueue.ack(2, 'worker-1', 1);                                          -- t
SELECT pgqueue.ack_batch(ARRAY[4, 5], 'worker-1', ARRAY[1, 1]);                -- {4,5}
SELECT pgqueue.nack(1, 'worker-1', 'smtp timeout', NULL, 1);                   -- requeued
SELECT pgqueue.release(5, 'worker-1', 1);                                      -- f (acked already)
SELECT pgqueue.janitor_reset_stale_claims();                                   -- 0
SELECT pgqueue.cancel(1);                                                      -- t
SELECT pgqueue.retry_dead('emails');                                           -- 0
SELECT * FROM pgqueue.gc('7 days', '30 days', 10000);                          -- (0, 0)
SELECT pgqueue.set_retry_backoff('emails', '5 seconds', '10 minutes');
SELECT * FROM pgqueue.depth;
)sql";

// docs/sql-api.md: a job's failures, after the example above.
const char* error_history_example = R"sql(
SELECT e->>'attempt' AS attempt, e->>'at' AS at, e->>'holder' AS holder, e->>'error' AS error
  FROM pgqueue.jobs j, jsonb_array_elements(j.errors) e
 WHERE j.id = 1;
)sql";

// docs/sql-api.md: periodic jobs.
const char* schedules_example = R"sql(
SELECT pgqueue.schedule('nightly', 'reports', '30 2 * * *', '{"n":1}', 'Europe/Berlin');  -- t
SELECT pgqueue.schedule('nightly', 'reports', '30 2 * * *', '{"n":1}', 'Europe/Berlin');  -- f (unchanged)
SELECT pgqueue.schedule('ping', 'health', '@every 30 seconds', '{}', 'UTC', 'skip');      -- t
SELECT pgqueue.cron_next('30 2 * * *', 'Europe/Berlin', '2026-10-24 12:00+00') = '2026-10-25 00:30+00';  -- t
SELECT count(*) FROM pgqueue.schedules;                                                   -- 2
SELECT pgqueue.unschedule('ping');                                                         -- t
)sql";

// docs/sql-api.md and README.md: limits per queue.
const char* limits_example = R"sql(
SELECT pgqueue.set_queue_limits('render', 3);                        -- t
SELECT pgqueue.set_queue_limits('render', 3);                        -- f (unchanged)
SELECT pgqueue.set_queue_limits('mail', NULL, 50, '1 second');       -- t
SELECT pgqueue.set_queue_limits('api', 10, 600, '1 minute', 20);     -- t
SELECT queue FROM pgqueue.limits();                                  -- api, mail, render
SELECT pgqueue.set_queue_limits('api');                              -- t (removed)
)sql";

// docs/sql-api.md: jobs that wait for other jobs (README.md shows its first three lines).
const char* dependencies_example = R"sql(
SELECT pgqueue.enqueue('images', '{"step":"check"}');                                          -- 1
SELECT pgqueue.enqueue_batch('images', ARRAY['{"n":1}', '{"n":2}']::jsonb[], p_depends_on => ARRAY[1]::bigint[]);  -- {2,3}
SELECT pgqueue.enqueue('images', '{"step":"zip"}', p_depends_on => ARRAY[2, 3]::bigint[]);    -- 4
SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs;                                   -- ready,waiting,waiting,waiting
SELECT id FROM pgqueue.claim_batch('images', 'worker-1', 10);                                  -- 1 (2 and 3 wait)
SELECT pgqueue.ack(1, 'worker-1');                                                              -- t
SELECT id FROM pgqueue.claim_batch('images', 'worker-1', 10);                                  -- 2, 3
SELECT pgqueue.ack_batch(ARRAY[2, 3], 'worker-1');                                              -- {2,3}
SELECT id FROM pgqueue.claim_batch('images', 'worker-1', 10);                                  -- 4
)sql";

// ---- docs/security.md ----
const char* roles_example = R"sql(
CREATE ROLE app_producer LOGIN PASSWORD '...';
CREATE ROLE app_worker LOGIN PASSWORD '...';
SELECT pgqueue.grant_producer('app_producer');  -- enqueue, enqueue_batch, wake
SELECT pgqueue.grant_worker('app_worker');      -- those, plus claim, heartbeat, ack, nack,
                                                -- release, the janitor and SELECT on depth
SELECT pgqueue.revoke_access('app_worker');     -- e.g. before DROP ROLE
)sql";

// A result as the comments write it.
std::string rendered(const std::vector<row>& rows) {
  std::ostringstream out;
  if (rows.size() == 1 && rows[0].size() > 1) {
    out << "(";
    for (std::size_t i = 0; i < rows[0].size(); ++i) out << (i ? ", " : "") << *rows[0][i];
    out << ")";
    return out.str();
  }
  for (std::size_t i = 0; i < rows.size(); ++i) out << (i ? ", " : "") << *rows[i][0];
  return out.str();
}

// Runs each line of `block` that holds a statement, and checks the result its comment names.
void run_checked(session& s, const std::string& block) {
  std::istringstream in(block);
  std::string line;
  while (std::getline(in, line)) {
    const auto comment = line.find("-- ");
    const std::string sql = line.substr(0, comment);
    if (sql.find_first_not_of(' ') == std::string::npos) continue;
    INFO(sql);
    const auto rows = s.query(sql);
    if (comment == std::string::npos || !sql.starts_with("SELECT")) continue;
    std::string expected = line.substr(comment + 3);
    expected = expected.substr(0, expected.find(" ("));
    CHECK(rendered(rows) == expected);
  }
}

}  // namespace

TEST_CASE("the SQL API example gives the results its comments say", "[docs]") {
  scratch_database db;
  session s(db.dsn());
  run_checked(s, sql_api_example);
  CHECK(*s.scalar("SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs") ==
        "cancelled,done,done,done");
  const auto failures = s.query(error_history_example);
  REQUIRE(failures.size() == 1);
  CHECK(*failures[0][0] == "1");
  CHECK(*failures[0][2] == "worker-1");
  CHECK(*failures[0][3] == "smtp timeout");
}

TEST_CASE("the periodic jobs example gives the results its comments say", "[docs]") {
  scratch_database db;
  session s(db.dsn());
  run_checked(s, schedules_example);
  CHECK(*s.scalar("SELECT name || ' ' || payload::text FROM pgqueue.schedules") ==
        "nightly {\"n\": 1}");
}

TEST_CASE("the limits example gives the results its comments say", "[docs]") {
  scratch_database db;
  session s(db.dsn());
  run_checked(s, limits_example);
  CHECK(*s.scalar("SELECT string_agg(queue || ' ' || coalesce(max_claimed::text, '-') || ' ' || "
                  "coalesce(rate::text, '-'), ', ' ORDER BY queue) FROM pgqueue.queue_limits") ==
        "mail - 50, render 3 -");
}

TEST_CASE("the dependencies example gives the results its comments say", "[docs]") {
  scratch_database db;
  session s(db.dsn());
  run_checked(s, dependencies_example);
  CHECK(*s.scalar("SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs") ==
        "done,done,done,claimed");
}

TEST_CASE("the roles example grants what it says", "[docs]") {
  scratch_database db;
  session s(db.dsn());
  // Roles are cluster-wide: one left by an interrupted run (on a server of PGQUEUE_TEST_DSN)
  // would make CREATE ROLE fail.
  s.script("DROP ROLE IF EXISTS app_producer; DROP ROLE IF EXISTS app_worker");
  s.script(roles_example);
  s.script("SET ROLE app_producer");
  CHECK(s.integer("SELECT pgqueue.enqueue('q', '{}')") == 1);
  try {
    s.query("SELECT * FROM pgqueue.claim_batch('q', 'w')");
    FAIL("a producer claimed");
  } catch (const sql_error& e) {
    CHECK(e.sqlstate == "42501");
  }
  s.script("RESET ROLE; SET ROLE app_worker");
  try {
    s.query("SELECT pgqueue.enqueue('q', '{}')");
    FAIL("a worker whose access was revoked enqueued");
  } catch (const sql_error& e) {
    CHECK(e.sqlstate == "42501");
  }
  s.script(
      "RESET ROLE; DROP OWNED BY app_producer, app_worker; DROP ROLE app_producer, app_worker");
}

}  // namespace sql_docs_test
