// Upgrading a database that runs the seed schema (tests/fixtures/seed_schema.sql) in place.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_upgrade_test {

using namespace pgq_test;

namespace {

std::string seed_file() { return PGQUEUE_SOURCE_ROOT "/tests/fixtures/seed_schema.sql"; }

// Jobs in every state the seed produces, through the seed's own functions.
void fill_seed(session& s) {
  // One statement at a time: the seed orders claims by created_at, which is equal within a
  // transaction.
  for (const char* sql : {
           "SELECT pgqueue.enqueue('mail', '{\"n\":1}')",
           "SELECT pgqueue.enqueue('mail', '{\"n\":2}', 'key-2', 7)",
           "SELECT pgqueue.enqueue('mail', '{\"n\":3}', NULL, 0, now() + interval '1 hour')",
           "SELECT pgqueue.enqueue('mail', '{\"n\":4}')",
           "SELECT pgqueue.enqueue('mail', '{\"n\":5}')",
           "SELECT pgqueue.enqueue('sms', '{\"n\":6}')",
           "SELECT * FROM pgqueue.claim_next('mail', 'w1')",  // id 2 (priority 7): will be done
           "SELECT pgqueue.ack(2, 'w1')",
           "SELECT * FROM pgqueue.claim_next('mail', 'w1')",  // id 1: stays claimed
           "SELECT * FROM pgqueue.claim_next('mail', 'w2')",  // id 4: nacked to dead
           "UPDATE pgqueue.jobs SET max_attempts = 1 WHERE id = 4",
           "SELECT pgqueue.nack(4, 'w2', 'boom')",
           // What the seed's janitor leaves behind: a ready job with no attempts left.
           "UPDATE pgqueue.jobs SET attempts = 5 WHERE id = 5",
       }) {
    s.query(sql);
  }
  REQUIRE(read_job(s, 1).state == "claimed");
  REQUIRE(read_job(s, 4).state == "dead");
}

const char* row_text =
    "SELECT string_agg(concat_ws(',', id, queue, payload::text, idempotency_key, state, priority,"
    " attempts, max_attempts, last_error, claimed_by), E'\\n' ORDER BY id) FROM pgqueue.jobs";

}  // namespace

TEST_CASE("the seed upgrades in place keeping every job", "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(seed_file()));
  fill_seed(s);
  auto before = *s.scalar(row_text);

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == 2);
  // The done job is counted by the new depth view.
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'mail' AND state = 'done'") == 1);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'mail' AND state = 'claimed'") == 1);
  // The seed's indexes are replaced.
  CHECK(s.integer("SELECT count(*) FROM pg_indexes WHERE schemaname = 'pgqueue' AND indexname IN "
                  "('jobs_claim_idx', 'jobs_lease_idx', 'jobs_state_idx')") == 0);
  // New sequence values continue after the old ids.
  CHECK(enqueue(s, "mail") == 7);
}

TEST_CASE("seed-style calls keep working after the upgrade", "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(seed_file()));
  fill_seed(s);
  s.script(read_file(schema_file()));

  // The seed's argument lists, positionally.
  CHECK(s.integer("SELECT pgqueue.enqueue('mail', '{}'::jsonb, 'key-2', 0, now())") == 2);
  auto rows = s.query("SELECT id, attempts FROM pgqueue.claim_next('sms', 'w3', '1 minute')");
  REQUIRE(rows.size() == 1);
  CHECK(*rows[0][0] == "6");
  CHECK(*s.scalar("SELECT pgqueue.heartbeat(6, 'w3', '2 minutes')") == "t");
  CHECK(*s.scalar("SELECT pgqueue.nack(6, 'w3', 'retry', '0 seconds')") == "requeued");
  s.query("SELECT * FROM pgqueue.claim_next('sms', 'w3')");
  CHECK(*s.scalar("SELECT pgqueue.ack(6, 'w3')") == "t");
  CHECK(s.integer("SELECT janitor_reset_stale_claims FROM pgqueue.janitor_reset_stale_claims()") == 1);
  // The exhausted ready job left by the seed's janitor is ended, not run a sixth time.
  CHECK(read_job(s, 5).state == "dead");
  CHECK(s.query("SELECT * FROM pgqueue.gc('7 days', '30 days')").size() == 1);
}

TEST_CASE("upgrading twice and re-running on the upgraded database changes nothing", "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(seed_file()));
  fill_seed(s);
  s.script(read_file(schema_file()));
  auto after_first = *s.scalar(row_text);
  auto done = s.integer("SELECT sum(n) FROM pgqueue.done_counts");
  s.script(read_file(schema_file()));
  CHECK(*s.scalar(row_text) == after_first);
  CHECK(s.integer("SELECT sum(n) FROM pgqueue.done_counts") == done);
}

TEST_CASE("the seed's flaws are real: its enqueue breaks on a long queue name", "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(seed_file()));
  std::string long_name(100, 'q');
  CHECK(s.error_of("SELECT pgqueue.enqueue($1, '{}')", {long_name}) == "22023");
  s.script(read_file(schema_file()));
  CHECK(s.error_of("SELECT pgqueue.enqueue($1, '{}')", {long_name}) == "");
}

}  // namespace sql_upgrade_test
