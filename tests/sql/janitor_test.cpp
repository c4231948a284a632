// janitor_reset_stale_claims: expired leases come back, the last attempt ends dead.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_janitor_test {

using namespace pgq_test;

namespace {
// Claims with a lease that is already over, so the janitor sees it expired.
std::int64_t claim_expired(session& s, const std::string& queue) {
  auto c = claim(s, queue, "crashed", 1, "1 microsecond");
  REQUIRE(c.size() == 1);
  s.query("UPDATE pgqueue.jobs SET lease_until = now() - interval '1 second' WHERE id = $1",
          {std::to_string(c[0].id)});
  return c[0].id;
}
}  // namespace

TEST_CASE("an expired lease makes the job ready again, due at once", "[janitor]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  auto id = claim_expired(s, "q");
  auto live = enqueue(s, "q");
  claim(s, "q", "alive");  // a valid lease is left alone
  CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 1);
  auto j = read_job(s, id);
  CHECK(j.state == "ready");
  CHECK(j.due);
  CHECK_THAT(*j.last_error, Catch::StartsWith("lease expired on attempt 1 of 5"));
  CHECK(read_job(s, live).state == "claimed");
}

TEST_CASE("a job whose last attempt's lease expires ends dead", "[janitor]") {
  scratch_database db;
  session s(db.dsn());
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 2)");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    claim_expired(s, "q");
    CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 1);
  }
  auto j = read_job(s, id);
  CHECK(j.state == "dead");
  CHECK(j.attempts == 2);
  CHECK_THAT(*j.last_error, Catch::Contains("no attempts left"));
  CHECK(claim(s, "q", "w").empty());
}

TEST_CASE("repeated lease expiry keeps last_error bounded", "[janitor]") {
  scratch_database db;
  session s(db.dsn());
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 50)");
  for (int i = 0; i < 20; ++i) {
    claim_expired(s, "q");
    s.query("SELECT pgqueue.janitor_reset_stale_claims()");
  }
  auto j = read_job(s, id);
  CHECK(j.attempts == 20);
  CHECK(j.last_error->size() < 200);
  CHECK_THAT(*j.last_error, Catch::StartsWith("lease expired on attempt 20 of 50"));
}

TEST_CASE("the janitor respects its grace period", "[janitor]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  claim_expired(s, "q");
  CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims('1 hour')") == 0);
  CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims('0 seconds')") == 1);
}

TEST_CASE("claims take back expired leases with no janitor running, at most once per interval",
          "[janitor][maintenance]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  auto id = claim_expired(s, "q");  // its claim ran the maintenance that was due
  // Only claims from now on: nobody calls janitor_reset_stale_claims.
  CHECK(claim(s, "other", "w").empty());  // not due again yet: the lease stays expired
  CHECK(read_job(s, id).state == "claimed");
  s.query("UPDATE pgqueue.maintenance SET janitor_due_at = now()");
  // A claim of any queue does it (from another session: each session looks at the
  // maintenance row at most once a second).
  session other(db.dsn());
  CHECK(claim(other, "other", "w").empty());
  auto j = read_job(s, id);
  CHECK(j.state == "ready");
  CHECK_THAT(*j.last_error, Catch::StartsWith("lease expired on attempt 1 of 5"));
  // Due again later: janitor_every after that claim, or 50 times the run's own time where
  // that is longer (on a loaded machine a first run in a new backend can take over 20 ms, so
  // no upper bound here).
  CHECK(s.integer("SELECT count(*) FROM pgqueue.maintenance WHERE janitor_due_at > now()") == 1);
  auto again = claim(s, "q", "w2");
  REQUIRE(again.size() == 1);
  CHECK(again[0].id == id);
  CHECK(again[0].attempts == 2);
}

// A claim that is the first statement of a longer transaction looks like one of its own; the
// failed attempts its maintenance counts must not hold a counter row other sessions share.
TEST_CASE("a claim's maintenance counts expired leases in its session's own slot",
          "[janitor][maintenance]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  auto id = claim_expired(s, "q");
  s.query("UPDATE pgqueue.maintenance SET janitor_due_at = now()");
  session m(db.dsn());
  m.query("BEGIN");
  CHECK(claim(m, "other", "w").empty());  // runs the maintenance: the lease comes back
  m.query("COMMIT");
  CHECK(read_job(s, id).state == "ready");
  CHECK(s.integer("SELECT slot FROM pgqueue.queue_totals WHERE queue = 'q' AND failed = 1") ==
        32 + m.backend_pid());
}

}  // namespace sql_janitor_test
