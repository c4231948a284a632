// Upgrading in place a database that runs the seed schema (tests/fixtures/seed_schema.sql), the
// first release, version 2 (tests/fixtures/pgqueue_v2.sql), version 3
// (tests/fixtures/pgqueue_v3.sql), version 4 (tests/fixtures/pgqueue_v4.sql), version 6
// (tests/fixtures/pgqueue_v6.sql), version 8, 9, 10, 11 or 12 (tests/fixtures/pgqueue_v8.sql,
// _v9.sql, _v10.sql, _v11.sql, _v12.sql).
#include <initializer_list>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/role.hpp"
#include "support/schema.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_upgrade_test {

using namespace pgq_test;

namespace {

std::string seed_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/seed_schema.sql";
}
std::string v2_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v2.sql";
}
std::string v3_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v3.sql";
}
std::string v4_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v4.sql";
}
std::string v6_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v6.sql";
}
std::string v8_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v8.sql";
}
std::string v9_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v9.sql";
}
std::string v10_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v10.sql";
}
std::string v11_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v11.sql";
}
std::string v12_file() {
  return PGQUEUE_SOURCE_ROOT "/tests/fixtures/pgqueue_v12.sql";
}

// Runs the statements one at a time, in order.
void run_each(session& s, std::initializer_list<const char*> statements) {
  for (const char* sql : statements) s.query(sql);
}

// Jobs in every state the seed produces, through the seed's own functions.
void fill_seed(session& s) {
  // One statement at a time: the seed orders claims by created_at, which is equal within a
  // transaction.
  run_each(s,
           {
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
           });
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
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  // The done job is counted by the new depth view.
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'mail' AND state = 'done'") == 1);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'mail' AND state = 'claimed'") ==
        1);
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
  // The exhausted ready job left by the seed's janitor is ended, not run a sixth time (by the
  // maintenance the first claim ran), so the janitor finds nothing left to do.
  CHECK(read_job(s, 5).state == "dead");
  CHECK(s.integer("SELECT janitor_reset_stale_claims FROM pgqueue.janitor_reset_stale_claims()") ==
        0);
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

namespace {

// Jobs in every state version 2 produces, through its own functions (fenced by attempt):
// ready (1), scheduled (2), claimed and held (3), done (4), dead (5), cancelled (6), released
// with its attempt given back (7), retried after dead (8).
void fill_v2(session& s) {
  run_each(s, {
                  "SELECT pgqueue.enqueue('q', '{\"n\":1}')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":2}', NULL, 0, now() + interval '1 hour')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":3}', 'k3', 9)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":4}', NULL, 8)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":5}', NULL, 7, now(), 1)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":6}')",
                  "SELECT pgqueue.enqueue('r', '{\"n\":7}')",
                  "SELECT pgqueue.enqueue('d', '{\"n\":8}', NULL, 0, now(), 1)",
                  "SELECT * FROM pgqueue.claim_batch('q', 'w', 3)",  // 3, 4, 5 by priority
                  "SELECT pgqueue.ack(4, 'w', 1)",
                  "SELECT pgqueue.nack(5, 'w', 'boom', NULL, 1)",
                  "SELECT pgqueue.cancel(6)",
                  "SELECT * FROM pgqueue.claim_batch('r', 'w')",
                  "SELECT pgqueue.release(7, 'w', 1)",
                  "SELECT * FROM pgqueue.claim_batch('d', 'w')",
                  "SELECT pgqueue.nack(8, 'w', 'boom', NULL, 1)",
                  "SELECT pgqueue.retry_dead('d')",
              });
  REQUIRE(read_job(s, 3).state == "claimed");
  REQUIRE(read_job(s, 5).state == "dead");
  REQUIRE(read_job(s, 7).attempts == 0);
}

}  // namespace

TEST_CASE("version 2 upgrades in place keeping every job, its holders and its grants",
          "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(v2_file()));
  scoped_role worker(db.dsn(), "upgrade_worker");
  scoped_role producer(db.dsn(), "upgrade_producer");
  s.query("SELECT pgqueue.grant_worker($1::regrole), pgqueue.grant_producer($2::regrole)",
          {worker.name(), producer.name()});
  fill_v2(s);
  const auto before = *s.scalar(row_text);
  const auto done =
      s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'done'");

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'done'") == done);
  // The job a version-2 client holds stays its own: its attempt is the token it fences with.
  CHECK(*s.scalar("SELECT pgqueue.heartbeat(3, 'w', '1 minute', 1)") == "t");
  // Grants survive the functions that were dropped and created again, and the worker role
  // gets the functions this version added to its set.
  session w(worker.dsn());
  auto c = w.query("SELECT id, attempts, lease_token FROM pgqueue.claim_batch('q', 'w2')");
  REQUIRE(c.size() == 1);
  CHECK(*c[0][0] == "1");
  CHECK(w.integer("SELECT pgqueue.count_acked(ARRAY[1]::bigint[], 'w2', ARRAY[$1]::bigint[])",
                  {*c[0][2]}) == 0);
  CHECK(*w.scalar("SELECT pgqueue.lease_outcome(1, 'w2', $1)", {*c[0][2]}) == "claimed");
  CHECK(*w.scalar("SELECT pgqueue.ack(1, 'w2', $1)", {*c[0][2]}) == "t");
  CHECK(w.error_of("SELECT count(*) FROM pgqueue.jobs") == "42501");
  session p(producer.dsn());
  CHECK(p.error_of("SELECT pgqueue.enqueue('q', '{}')") == "");
  CHECK(p.error_of("SELECT * FROM pgqueue.claim_batch('q', 'p')") == "42501");
  // The released and the retried jobs take tokens above any attempt number used before.
  auto r = w.query("SELECT id, attempts, lease_token FROM pgqueue.claim_batch('r', 'w')");
  REQUIRE(r.size() == 1);
  CHECK(*r[0][1] == "1");
  CHECK(*s.scalar("SELECT pgqueue.ack(7, 'w', 1)") == "f");  // version 2's stale fence
  CHECK(*s.scalar("SELECT pgqueue.ack(7, 'w', $1)", {*r[0][2]}) == "t");
  // Running the file again changes nothing.
  const auto after = *s.scalar(row_text);
  s.script(read_file(schema_file()));
  CHECK(*s.scalar(row_text) == after);
}

TEST_CASE("version 3 upgrades in place: every job kept, claims start at floors below them all",
          "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(v3_file()));
  // Every state, through version 3's own functions: ready at two priorities (1, 2), scheduled
  // (3), held (4), done (5), dead (6), released (7), overdue (8).
  run_each(s, {
                  "SELECT pgqueue.enqueue('q', '{\"n\":1}')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":2}', NULL, 5)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":3}', NULL, 0, now() + interval '1 hour')",
                  "SELECT pgqueue.enqueue('h', '{\"n\":4}')",
                  "SELECT pgqueue.enqueue('h', '{\"n\":5}')",
                  "SELECT pgqueue.enqueue('h', '{\"n\":6}', NULL, 0, now(), 1)",
                  "SELECT pgqueue.enqueue('r', '{\"n\":7}')",
                  "SELECT * FROM pgqueue.claim_batch('h', 'w', 3)",
                  "SELECT pgqueue.ack(5, 'w', 1)",
                  "SELECT pgqueue.nack(6, 'w', 'boom', NULL, 1)",
                  "SELECT * FROM pgqueue.claim_batch('r', 'w')",
                  "SELECT pgqueue.release(7, 'w', 1)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":8}', NULL, 0, now() - interval '1 day')",
              });
  REQUIRE(read_job(s, 4).state == "claimed");
  REQUIRE(read_job(s, 6).state == "dead");
  const auto before = *s.scalar(row_text);

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  // One floor per queue and priority with jobs ready, held or dead, at the bottom for a
  // minute: version 3's code, still running in its sessions, does not note the jobs it makes
  // ready below a floor.
  CHECK(*s.scalar("SELECT string_agg(queue || ':' || priority || ':' || run_after || ':' || id, "
                  "' ' ORDER BY queue, priority) FROM pgqueue.ready_floor") ==
        "h:0:-infinity:0 q:0:-infinity:0 q:5:-infinity:0 r:0:-infinity:0");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.ready_floor WHERE moved_at > now() + interval "
                  "'59 seconds'") == 4);
  // The held job is still its holder's, and the rest is claimed in order.
  CHECK(*s.scalar("SELECT pgqueue.heartbeat(4, 'w', '1 minute', 1)") == "t");
  std::vector<std::int64_t> order;
  for (auto got = claim(s, "q", "w2"); !got.empty(); got = claim(s, "q", "w2")) {
    order.push_back(got[0].id);
  }
  CHECK(order == std::vector<std::int64_t>{2, 8, 1});
  CHECK(claim(s, "r", "w2").size() == 1);
  // A version-3 release that waited behind the upgrade: its old code makes the held job ready
  // without noting it below the floor. Claims still find it.
  s.query(
      "UPDATE pgqueue.jobs SET state = 'ready', claimed_by = NULL, claimed_at = NULL, "
      "lease_until = NULL, attempts = attempts - 1 WHERE id = 4");
  const auto straggler = claim(s, "h", "w2");
  REQUIRE(straggler.size() == 1);
  CHECK(straggler[0].id == 4);
  // Running the file again changes nothing.
  const auto after = *s.scalar(row_text);
  s.script(read_file(schema_file()));
  CHECK(*s.scalar(row_text) == after);
}

TEST_CASE("version 4 upgrades in place: every job kept, failures from then on kept in errors",
          "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(v4_file()));
  // A dead job (1), a held one (2), a retried one (3), through version 4's own functions.
  run_each(s, {
                  "SELECT pgqueue.enqueue('q', '{\"n\":1}', NULL, 0, now(), 1)",
                  "SELECT pgqueue.enqueue('q', '{\"n\":2}')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":3}')",
                  "SELECT * FROM pgqueue.claim_batch('q', 'w', 3)",
                  "SELECT pgqueue.nack(1, 'w', 'boom', NULL, 1)",
                  "SELECT pgqueue.nack(3, 'w', 'first', '0 seconds', 1)",
              });
  REQUIRE(read_job(s, 1).state == "dead");
  const auto before = *s.scalar(row_text);

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs WHERE errors IS NOT NULL") == 0);
  // The held job's holder fails it, and the retried one fails again: both recorded from now.
  CHECK(*s.scalar("SELECT pgqueue.nack(2, 'w', 'second', '0 seconds', 1)") == "requeued");
  const auto again = claim(s, "q", "w2", 2);
  REQUIRE(again.size() == 2);
  CHECK(*s.scalar("SELECT pgqueue.nack(3, 'w2', 'third', '0 seconds', $1)",
                  {std::to_string(again[0].id == 3 ? again[0].lease_token
                                                   : again[1].lease_token)}) == "requeued");
  CHECK(*s.scalar("SELECT errors->0->>'error' || ' ' || (errors->0->>'attempt') || ' ' || "
                  "(errors->0->>'holder') FROM pgqueue.jobs WHERE id = 2") == "second 1 w");
  CHECK(*s.scalar("SELECT errors->0->>'error' || ' ' || (errors->0->>'attempt') || ' ' || "
                  "(errors->0->>'holder') || ' ' || jsonb_array_length(errors) "
                  "FROM pgqueue.jobs WHERE id = 3") == "third 2 w2 1");
}

TEST_CASE(
    "version 6 upgrades in place: totals count from the jobs kept, a worker role may "
    "read them and its claims say when jobs were due",
    "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(v6_file()));
  scoped_role worker(db.dsn(), "v6_worker");
  s.query("SELECT pgqueue.grant_worker($1::regrole)", {worker.name()});
  // Done (1), dead (2), held (3), ready (4), scheduled (5), through version 6's functions.
  run_each(s, {
                  "SELECT pgqueue.enqueue('q', '{\"n\":1}')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":2}', NULL, 0, now(), 1)",
                  "SELECT * FROM pgqueue.claim_batch('q', 'w', 2)",
                  "SELECT pgqueue.ack(1, 'w')",
                  "SELECT pgqueue.nack(2, 'w', 'boom')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":3}')",
                  "SELECT pgqueue.enqueue('q', '{\"n\":4}')",
                  "SELECT * FROM pgqueue.claim_batch('q', 'w', 1)",
                  "SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')",
              });
  const auto before = *s.scalar(row_text);

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  session w(worker.dsn());
  CHECK(*w.scalar("SELECT concat_ws(' ', ready, scheduled, claimed, dead, done, enqueued_total, "
                  "done_total, failed_total) FROM pgqueue.queue_summary() WHERE queue = 'q'") ==
        "1 1 1 1 1 5 1 0");
  // The worker role's claim (the function was dropped and made again) returns the due time.
  CHECK(*w.scalar("SELECT count(*) FROM pgqueue.claim_batch('q', 'w2', 5) "
                  "WHERE run_after <= claimed_at") == "1");
  CHECK(*w.scalar("SELECT pgqueue.nack(3, 'w', 'late')") == "requeued");
  CHECK(w.integer("SELECT failed_total FROM pgqueue.queue_summary()") == 1);
}

// Version 10 had no holds; version 12's claims read them in a subquery of their own (version 13
// takes them from floor_starts, whose result changed).
TEST_CASE("versions 10 and 12 upgrade in place: the floors of paused and limited queues are held",
          "[upgrade]") {
  const auto [from, file] = GENERATE(table<const char*, std::string>(
      {{"version 10", v10_file()}, {"version 12", v12_file()}}));
  INFO("upgraded from " << from);
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(file));
  run_each(s,
           {
               "SELECT pgqueue.enqueue(q, '{}') FROM unnest(ARRAY['run', 'paused', 'limited']) q",
               "SELECT pgqueue.pause('paused')",
               "SELECT pgqueue.set_queue_limits('limited', p_max_claimed => 1)",
           });
  const auto before = *s.scalar(row_text);

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  CHECK(*s.scalar("SELECT string_agg(queue || ' ' || held, ', ' ORDER BY queue) "
                  "FROM pgqueue.ready_floor") == "limited true, paused true, run false");
  CHECK(claim(s, "paused", "w").empty());
  CHECK(claim(s, "limited", "w").size() == 1);
  CHECK(claim(s, "run", "w").size() == 1);
}

TEST_CASE("version 11 upgrades in place: the jobs table's rules refuse what they refused",
          "[upgrade]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(v11_file()));
  s.query("SELECT pgqueue.enqueue('q', '{}')");
  const auto before = *s.scalar(row_text);
  const auto rules = [&s] {
    return *s.scalar(
        "SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), E'\\n' "
        "ORDER BY conname) FROM pg_constraint WHERE conrelid = 'pgqueue.jobs'::regclass "
        "AND contype = 'c'");
  };
  const auto old_rules = rules();

  s.script(read_file(schema_file()));

  CHECK(*s.scalar(row_text) == before);
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  CHECK(old_rules != rules());
  CHECK(rules() ==
        "jobs_queue_name_check CHECK (((octet_length(queue) <@ '[1,256)'::int4range) AND "
        "(queue !~ '[[:cntrl:]]'::text))) NOT VALID\n"
        "jobs_state_check CHECK ((state = ANY "
        "('{ready,claimed,done,dead,cancelled,waiting}'::text[]))) NOT VALID");
  // Each rule by name, for rows written directly: a state, a queue name too long, empty, or
  // with a control character; the bounds and every state still pass.
  const std::string state_rule =
      "23514: new row for relation \"jobs\" violates check constraint \"jobs_state_check\"";
  const std::string name_rule =
      "23514: new row for relation \"jobs\" violates check constraint \"jobs_queue_name_check\"";
  CHECK(s.failure_of("UPDATE pgqueue.jobs SET state = 'Ready'") == state_rule);
  CHECK(
      s.failure_of("INSERT INTO pgqueue.jobs (queue, payload, state) VALUES ('q', '{}', 'gone')") ==
      state_rule);
  CHECK(s.failure_of("INSERT INTO pgqueue.jobs (queue, payload) VALUES ('', '{}')") == name_rule);
  CHECK(s.failure_of("INSERT INTO pgqueue.jobs (queue, payload) VALUES (repeat('q', 256), '{}')") ==
        name_rule);
  CHECK(s.failure_of("INSERT INTO pgqueue.jobs (queue, payload) VALUES (E'a\\tb', '{}')") ==
        name_rule);
  CHECK(s.failure_of("INSERT INTO pgqueue.jobs (queue, payload) VALUES (repeat('q', 255), '{}')")
            .empty());
  CHECK(s.failure_of("INSERT INTO pgqueue.jobs (queue, payload, state) SELECT 'q', '{}', s FROM "
                     "unnest(ARRAY['ready', 'claimed', 'done', 'dead', 'cancelled', 'waiting']) s")
            .empty());
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 8);
}

}  // namespace sql_upgrade_test

namespace sql_upgrade_test {

// The migrations are numbered steps, each applied once: whichever version a database starts
// from, it must end with what a fresh install makes, function for function and index for index.
TEST_CASE("every upgrade path ends in the schema a fresh install makes", "[upgrade][migrations]") {
  scratch_database fresh(false);
  session f(fresh.dsn());
  f.script(read_file(schema_file()));
  const std::string expected = schema_structure(f);
  REQUIRE_THAT(expected, Catch::Contains("index CREATE INDEX jobs_ready_idx") &&
                             Catch::Contains("function pgqueue.claim_batch(text,text,integer,"
                                             "interval) definer"));
  const std::vector<std::pair<std::string, std::string>> starts = {
      {"the seed", seed_file()}, {"version 2", v2_file()},   {"version 3", v3_file()},
      {"version 4", v4_file()},  {"version 6", v6_file()},   {"version 8", v8_file()},
      {"version 9", v9_file()},  {"version 10", v10_file()}, {"version 11", v11_file()},
      {"version 12", v12_file()}};
  for (const auto& [from, file] : starts) {
    INFO("upgraded from " << from);
    scratch_database db(false);
    session s(db.dsn());
    s.script(read_file(file));
    s.script(read_file(schema_file()));
    CHECK(schema_structure(s) == expected);
  }
}

}  // namespace sql_upgrade_test
