// heartbeat, ack, nack, release: fenced to the current holder of the current claim (lease token).
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_lease_test {

using namespace pgq_test;

namespace {
std::string s_(std::int64_t v) {
  return std::to_string(v);
}
}  // namespace

TEST_CASE("only the holder may heartbeat, ack or nack", "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  auto c = claim(s, "q", "owner");
  REQUIRE(c.size() == 1);
  auto before = jobs_digest(s);
  CHECK(*s.scalar("SELECT pgqueue.heartbeat($1, 'intruder')", {s_(id)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'intruder')", {s_(id)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'intruder', 'x')", {s_(id)}) == "lost");
  CHECK(*s.scalar("SELECT pgqueue.release($1, 'intruder')", {s_(id)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'owner', 2)", {s_(id)}) == "f");  // wrong token
  CHECK(jobs_digest(s) == before);
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'owner', 1)", {s_(id)}) == "t");
  CHECK(read_job(s, id).state == "done");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'owner', 1)", {s_(id)}) == "f");  // only once
}

TEST_CASE("a stale attempt cannot touch the same worker's new attempt", "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  claim(s, "q", "w", 1, "1 millisecond");
  s.query("SELECT pg_sleep(0.01)");
  CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 1);
  auto again = claim(s, "q", "w");
  REQUIRE(again.size() == 1);
  CHECK(again[0].attempts == 2);
  auto before = jobs_digest(s);
  CHECK(*s.scalar("SELECT pgqueue.heartbeat($1, 'w', '1 minute', 1)", {s_(id)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', 1)", {s_(id)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'old', NULL, 1)", {s_(id)}) == "lost");
  CHECK(jobs_digest(s) == before);
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', 2)", {s_(id)}) == "t");
}

TEST_CASE("the lease token only grows: after a release or retry_dead an old token is refused",
          "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
  auto first = claim(s, "q", "w");
  REQUIRE(first.size() == 1);
  CHECK(first[0].attempts == 1);
  // release gives the attempt back, so the same worker's next claim has attempts 1 again:
  // version 2 fenced with the attempt, and the first claim's ack could act on this claim.
  CHECK(*s.scalar("SELECT pgqueue.release($1, 'w', $2)", {s_(id), s_(first[0].lease_token)}) ==
        "t");
  auto second = claim(s, "q", "w");
  REQUIRE(second.size() == 1);
  CHECK(second[0].attempts == 1);
  CHECK(second[0].lease_token > first[0].lease_token);
  auto before = jobs_digest(s);
  const auto old = s_(first[0].lease_token);
  CHECK(*s.scalar("SELECT pgqueue.heartbeat($1, 'w', '1 minute', $2)", {s_(id), old}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)", {s_(id), old}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'old', NULL, $2)", {s_(id), old}) == "lost");
  CHECK(*s.scalar("SELECT pgqueue.release($1, 'w', $2)", {s_(id), old}) == "f");
  CHECK(
      s.integer("SELECT cardinality(pgqueue.ack_batch(ARRAY[$1::bigint], 'w', ARRAY[$2::bigint]))",
                {s_(id), old}) == 0);
  CHECK(jobs_digest(s) == before);
  // retry_dead resets attempts to 0; the token still grows.
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'boom', NULL, $2)",
                  {s_(id), s_(second[0].lease_token)}) == "dead");
  CHECK(s.integer("SELECT pgqueue.retry_dead('q')") == 1);
  auto third = claim(s, "q", "w");
  REQUIRE(third.size() == 1);
  CHECK(third[0].attempts == 1);
  CHECK(third[0].lease_token > second[0].lease_token);
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)", {s_(id), s_(second[0].lease_token)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)", {s_(id), s_(third[0].lease_token)}) == "t");
}

TEST_CASE("lease_outcome and count_acked tell what became of one claim", "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto a = enqueue(s, "q");
  auto b = enqueue(s, "q");
  auto c = claim(s, "q", "w", 2);
  REQUIRE(c.size() == 2);
  const auto ta = s_(c[0].lease_token), tb = s_(c[1].lease_token);
  CHECK(*s.scalar("SELECT pgqueue.lease_outcome($1, 'w', $2)", {s_(a), ta}) == "claimed");
  CHECK(*s.scalar("SELECT pgqueue.lease_outcome($1, 'other', $2)", {s_(a), ta}) == "lost");
  s.query("SELECT pgqueue.ack($1, 'w', $2)", {s_(a), ta});
  s.query("SELECT pgqueue.release($1, 'w', $2)", {s_(b), tb});
  CHECK(*s.scalar("SELECT pgqueue.lease_outcome($1, 'w', $2)", {s_(a), ta}) == "done");
  CHECK(*s.scalar("SELECT pgqueue.lease_outcome($1, 'w', $2)", {s_(b), tb}) == "ready");
  CHECK(
      s.integer("SELECT pgqueue.count_acked(ARRAY[$1, $2]::bigint[], 'w', ARRAY[$3, $4]::bigint[])",
                {s_(a), s_(b), ta, tb}) == 1);
  CHECK(s.integer("SELECT pgqueue.count_acked(ARRAY[$1]::bigint[], 'other', ARRAY[$2]::bigint[])",
                  {s_(a), ta}) == 0);
  claim(s, "q", "w");  // b again: a later claim
  CHECK(*s.scalar("SELECT pgqueue.lease_outcome($1, 'w', $2)", {s_(b), tb}) == "lost");
}

TEST_CASE("ack_batch fences each job by its own token; a NULL token skips that job's check",
          "[lease]") {
  scratch_database db;
  session s(db.dsn());
  const auto a = enqueue(s, "q"), b = enqueue(s, "q"), c = enqueue(s, "q");
  auto first = claim(s, "q", "w", 3);
  REQUIRE(first.size() == 3);
  // a and b claimed again: their tokens now differ from c's.
  for (int i = 0; i < 2; ++i) {
    s.query("SELECT pgqueue.release($1, 'w', $2)", {s_(first[i].id), s_(first[i].lease_token)});
  }
  auto again = claim(s, "q", "w", 2);
  REQUIRE(again.size() == 2);
  const auto ta = s_(again[0].lease_token), tc = s_(first[2].lease_token);
  const auto wrong_c = s_(first[2].lease_token + 100);
  REQUIRE(ta != tc);
  const std::string ack = "SELECT pgqueue.ack_batch($1::bigint[], 'w', $2::bigint[])";
  auto ids = [&](std::initializer_list<std::int64_t> v) {
    std::string out = "{";
    for (auto id : v) out += (out.size() > 1 ? "," : "") + s_(id);
    return out + "}";
  };
  // Each job is checked against its own token, not any token of the call.
  CHECK(*s.scalar(ack, {ids({a, c}), "{" + tc + "," + ta + "}"}) == "{}");
  CHECK(*s.scalar(ack, {ids({a, b, c}), "{" + ta + ",NULL," + wrong_c + "}"}) == ids({a, b}));
  CHECK(read_job(s, c).state == "claimed");
  CHECK(*s.scalar("SELECT pgqueue.ack_batch($1::bigint[], 'w')", {ids({c})}) == ids({c}));
}

TEST_CASE(
    "ack_batch and count_acked read only their own jobs, also with plans made while the "
    "queue was empty",
    "[lease][plan]") {
  scratch_database db;
  session s(db.dsn());
  // As after autovacuum found a drained queue: the statistics say the table is empty. No
  // analyze from here on, so nothing replaces the plans this session makes meanwhile.
  s.query("ALTER TABLE pgqueue.jobs SET (autovacuum_enabled = off)");
  s.query("VACUUM ANALYZE pgqueue.jobs");
  const std::string ack =
      "SELECT cardinality(pgqueue.ack_batch(ARRAY[$1::bigint], 'w', ARRAY[$2::bigint]))";
  const std::string acked = "SELECT pgqueue.count_acked(ARRAY[$1::bigint], 'w', ARRAY[$2::bigint])";
  for (int i = 0; i < 6; ++i) {  // past plpgsql's five custom plans
    enqueue(s, "q");
    auto c = claim(s, "q", "w");
    REQUIRE(c.size() == 1);
    const std::vector<value> args{s_(c[0].id), s_(c[0].lease_token)};
    REQUIRE(s.integer(ack, args) == 1);
    REQUIRE(s.integer(acked, args) == 1);
  }
  s.query("SELECT pgqueue.enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[2000]))");
  auto c = claim(s, "q", "w");
  REQUIRE(c.size() == 1);
  const std::vector<value> args{s_(c[0].id), s_(c[0].lease_token)};
  // Index entries read: the job's own (its versions: two or three) rather than the table's.
  // The statistics functions count what this session has not reported yet, so take deltas.
  const std::string read = "SELECT pg_stat_get_xact_tuples_returned('pgqueue.jobs_pkey'::regclass)";
  s.query("BEGIN");
  const auto before = s.integer(read);
  CHECK(s.integer(ack, args) == 1);
  const auto after_ack = s.integer(read);
  CHECK(s.integer(acked, args) == 1);
  const auto after_count = s.integer(read);
  s.query("COMMIT");
  CHECK(after_ack - before < 10);
  CHECK(after_count - after_ack < 10);
}

TEST_CASE("a heartbeat extends the lease as a HOT update", "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  claim(s, "q", "w", 1, "1 second");
  s.query("BEGIN");
  CHECK(*s.scalar("SELECT pgqueue.heartbeat($1, 'w', '1 hour', 1)", {s_(id)}) == "t");
  // The lease column is in no index, so the update never touches an index.
  CHECK(s.integer("SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables "
                  "WHERE relid = 'pgqueue.jobs'::regclass") == 1);
  s.query("COMMIT");
  CHECK(*s.scalar("SELECT lease_until > now() + interval '59 minutes' FROM pgqueue.jobs "
                  "WHERE id = $1",
                  {s_(id)}) == "t");
}

TEST_CASE("nack retries with capped exponential back-off and jitter", "[lease][retry]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.set_retry_backoff('q', '10 seconds', '25 seconds')");
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 10)");
  // Expected delay after attempt n: 10 s * 2^(n-1) capped at 25 s, within +-25% (cap holds).
  const double lo[] = {7.5, 15, 25, 25}, hi[] = {12.5, 25, 25, 25};
  for (int attempt = 1; attempt <= 4; ++attempt) {
    s.query("UPDATE pgqueue.jobs SET run_after = now() WHERE id = $1", {s_(id)});
    auto c = claim(s, "q", "w");
    REQUIRE(c.size() == 1);
    CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'fail', NULL, $2)", {s_(id), s_(attempt)}) ==
          "requeued");
    auto j = read_job(s, id);
    CHECK(j.state == "ready");
    CHECK(*j.last_error == "fail");
    CHECK(j.run_after_in >= lo[attempt - 1] - 0.5);
    CHECK(j.run_after_in <= hi[attempt - 1] + 0.5);
  }
  // An explicit delay wins over the back-off.
  s.query("UPDATE pgqueue.jobs SET run_after = now() WHERE id = $1", {s_(id)});
  claim(s, "q", "w");
  s.query("SELECT pgqueue.nack($1, 'w', 'x', '0 seconds')", {s_(id)});
  CHECK(read_job(s, id).due);
}

TEST_CASE("the last attempt's nack ends the job dead", "[lease][retry]") {
  scratch_database db;
  session s(db.dsn());
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 2)");
  claim(s, "q", "w");
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'one', '0 s')", {s_(id)}) == "requeued");
  claim(s, "q", "w");
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'two', '0 s')", {s_(id)}) == "dead");
  auto j = read_job(s, id);
  CHECK(j.state == "dead");
  CHECK(j.attempts == 2);
  CHECK(*j.last_error == "two");
  CHECK(claim(s, "q", "w").empty());
}

TEST_CASE("last_error stays bounded however long the error", "[lease][retry]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  claim(s, "q", "w");
  s.query("SELECT pgqueue.nack($1, 'w', repeat('e', 100000))", {s_(id)});
  CHECK(read_job(s, id).last_error->size() == 2000);
}

TEST_CASE("release gives a job back without using up an attempt", "[lease]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  claim(s, "q", "w");
  CHECK(*s.scalar("SELECT pgqueue.release($1, 'w', 1)", {s_(id)}) == "t");
  auto j = read_job(s, id);
  CHECK(j.state == "ready");
  CHECK(j.attempts == 0);
  CHECK(j.due);
}

}  // namespace sql_lease_test
