// Limits per queue (pgqueue.set_queue_limits): at most N claimed at once across every
// session, at most R started per period from a token bucket; claims beyond them return
// nothing; idle claimers learn when the next token is due, and a job that stops being claimed
// in a concurrency-limited queue wakes its listeners.
#include <atomic>
#include <latch>
#include <thread>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/role.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/wait.hpp"

namespace sql_limits_test {

using namespace pgq_test;

namespace {

std::string hint(session& s, const std::string& queue) {
  return *s.scalar(
      "SELECT due_now::text || ' ' || coalesce(next_due::text, '-') "
      "FROM pgqueue.wait_hint($1)",
      {queue});
}

void enqueue_n(session& s, const std::string& queue, int n, int max_attempts = 5) {
  s.query(
      "SELECT pgqueue.enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[$2::int]), NULL, 0, "
      "now(), $3)",
      {queue, std::to_string(n), std::to_string(max_attempts)});
}

// Drains notifications already delivered, so the next wait sees only new ones.
void drain(session& listener) {
  while (listener.wait_notification(20)) {
  }
}

}  // namespace

TEST_CASE("a concurrency limit hands out at most N jobs; each job that ends wakes the queue",
          "[limits]") {
  scratch_database db;
  session s(db.dsn());
  session listener(db.dsn());
  listener.query("LISTEN \"" + *s.scalar("SELECT pgqueue.channel('q')") + "\"");
  enqueue_n(s, "q", 3, 1);  // one attempt each: a nack ends them dead
  enqueue_n(s, "q", 3);
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q', 2)") == "t");
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q', 2)") == "f");  // unchanged
  auto first = claim(s, "q", "w", 10);
  REQUIRE(first.size() == 2);
  CHECK(claim(s, "q", "w2", 10).empty());
  CHECK(s.query("SELECT * FROM pgqueue.claim_next('q', 'w2')").empty());
  // Due jobs, but none claimable until one ends: not "due now" (no back-off polling).
  CHECK(hint(s, "q") == "false -");
  // Held: only a freed place changes that (enqueues' notifications need not wake claimers).
  CHECK(*s.scalar("SELECT held FROM pgqueue.wait_hint('q')") == "t");
  CHECK(*s.scalar("SELECT claimed || ' ' || max_claimed FROM pgqueue.limits()") == "2 2");
  drain(listener);

  // An ack frees a place: the queue's listeners hear of it, and the next claim takes one.
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)",
                  {std::to_string(first[0].id), std::to_string(first[0].lease_token)}) == "t");
  auto woken = listener.wait_notification(5000);
  REQUIRE(woken);
  CHECK(woken->second == "q\nfreed");
  CHECK(hint(s, "q").starts_with("true"));
  CHECK(*s.scalar("SELECT held FROM pgqueue.wait_hint('q')") == "f");
  auto second = claim(s, "q", "w", 10);
  REQUIRE(second.size() == 1);
  drain(listener);

  // A nack that ends the job dead frees a place too (a requeue wakes the queue anyway).
  CHECK(*s.scalar("SELECT pgqueue.nack($1, 'w', 'boom', NULL, $2)",
                  {std::to_string(first[1].id), std::to_string(first[1].lease_token)}) == "dead");
  REQUIRE(listener.wait_notification(5000));
  drain(listener);
  // So does an expired lease the janitor takes back, and ack_batch.
  CHECK(take_back(s, second[0].id) == 1);
  REQUIRE(listener.wait_notification(5000));
  auto third = claim(s, "q", "w", 10);
  REQUIRE(third.size() == 2);
  drain(listener);
  CHECK(*s.scalar("SELECT cardinality(pgqueue.ack_batch(ARRAY[$1, $2]::bigint[], 'w'))",
                  {std::to_string(third[0].id), std::to_string(third[1].id)}) == "2");
  REQUIRE(listener.wait_notification(5000));

  // Raising the limit wakes the queue; removing it lifts it.
  drain(listener);
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q', 3)") == "t");
  REQUIRE(listener.wait_notification(5000));
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q')") == "t");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.queue_limits") == 0);
  // The one job left of the six (three done, two dead).
  CHECK(claim(s, "q", "w", 10).size() == 1);
}

TEST_CASE("a concurrency limit holds when many sessions claim at the same moment", "[limits]") {
  scratch_database db;
  session s(db.dsn());
  enqueue_n(s, "q", 100);
  s.scalar("SELECT pgqueue.set_queue_limits('q', 3)");
  constexpr int claimers = 16;
  std::vector<std::unique_ptr<session>> sessions;
  for (int i = 0; i < claimers; ++i) sessions.push_back(std::make_unique<session>(db.dsn()));
  std::atomic<int> total{0};
  std::latch start(claimers);
  std::vector<std::thread> threads;
  for (int i = 0; i < claimers; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      total += static_cast<int>(claim(*sessions[i], "q", "w" + std::to_string(i), 2).size());
    });
  }
  for (auto& t : threads) t.join();
  CHECK(total == 3);
  CHECK(count_jobs(s, "claimed", "q") == 3);
}

TEST_CASE(
    "a claim whose snapshot predates another limited claim or the limit fails instead of "
    "exceeding",
    "[limits]") {
  scratch_database db;
  session s(db.dsn());
  session old(db.dsn());
  enqueue_n(s, "q", 5);
  s.scalar("SELECT pgqueue.set_queue_limits('q', 1)");
  old.script("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1");  // snapshot taken now
  REQUIRE(claim(s, "q", "w").size() == 1);
  CHECK(old.error_of("SELECT * FROM pgqueue.claim_batch('q', 'old', 5)") == "40001");
  old.script("ROLLBACK");
  CHECK(count_jobs(s, "claimed", "q") == 1);

  // A snapshot that predates the limit itself (its row invisible to it) fails as well.
  enqueue_n(s, "fresh", 5);
  old.script("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1");
  s.scalar("SELECT pgqueue.set_queue_limits('fresh', 1)");
  CHECK(old.error_of("SELECT * FROM pgqueue.claim_batch('fresh', 'old', 5)") == "40001");
  old.script("ROLLBACK");
  CHECK(count_jobs(s, "claimed", "fresh") == 0);
  // A snapshot taken after it claims within it.
  old.script("BEGIN ISOLATION LEVEL REPEATABLE READ");
  CHECK(claim(old, "fresh", "old", 5).size() == 1);
  old.script("COMMIT");
}

TEST_CASE("a claim in REPEATABLE READ or SERIALIZABLE of a queue without limits claims",
          "[limits]") {
  // Such a claim's first pass hands nothing out (its snapshot may predate a limit); the second
  // pass, after the look at the limits, claims as READ COMMITTED would.
  scratch_database db;
  session s(db.dsn());
  enqueue_n(s, "q", 3);
  for (const char* level : {"REPEATABLE READ", "SERIALIZABLE"}) {
    INFO(level);
    s.script(std::string("BEGIN ISOLATION LEVEL ") + level);
    CHECK(claim(s, "q", "w", 1).size() == 1);
    s.script("COMMIT");
  }
  CHECK(count_jobs(s, "claimed", "q") == 2);
  CHECK(count_jobs(s, "ready", "q") == 1);
}

TEST_CASE("a claim that waited for the queue's turn gets a whole lease", "[limits]") {
  scratch_database db;
  session holder(db.dsn());
  session s(db.dsn());
  enqueue_n(s, "q", 2);
  s.scalar("SELECT pgqueue.set_queue_limits('q', 5)");
  holder.script("BEGIN; SELECT * FROM pgqueue.claim_batch('q', 'holder', 1)");  // holds the turn
  std::string lease_left;
  std::thread waiter([&] {
    session w(db.dsn());
    lease_left = *w.scalar(
        "SELECT extract(epoch FROM lease_until - clock_timestamp()) > 1.5 "
        "FROM pgqueue.claim_batch('q', 'waiter', 1, '2 seconds')");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the subject is time
  holder.script("COMMIT");
  waiter.join();
  // The lease counts from the claim, not from the transaction's start 1.5 s before.
  CHECK(lease_left == "t");
}

TEST_CASE("a rate limit starts at most a burst at once, then one job per token", "[limits]") {
  scratch_database db;
  session s(db.dsn());
  enqueue_n(s, "q", 10);
  // 5 jobs a second, bursts of 2: a token every 200 ms.
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q', NULL, 5, '1 second', 2)") == "t");
  CHECK(claim(s, "q", "w", 10).size() == 2);
  CHECK(claim(s, "q", "w", 10).empty());
  // Not due now; the next token's time instead, about 200 ms away.
  const auto wait_ms = s.integer(
      "SELECT CASE WHEN due_now THEN -1 ELSE "
      "ceil(extract(epoch FROM next_due - clock_timestamp()) * 1000) END "
      "FROM pgqueue.wait_hint('q')");
  CHECK(wait_ms > 150);
  CHECK(wait_ms <= 202);
  // Time is the subject: wait until the token is due, then exactly one job starts.
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  CHECK(claim(s, "q", "w", 10).size() == 1);
  CHECK(claim(s, "q", "w", 10).empty());
  const auto tokens = std::stod(*s.scalar("SELECT tokens FROM pgqueue.limits()"));
  CHECK(tokens >= 0);
  CHECK(tokens < 1);
  // A changed rate refills from now: the time since the last claim counted at the old rate.
  s.scalar("SELECT pgqueue.set_queue_limits('q', NULL, 1, '1 hour', 1)");
  CHECK(claim(s, "q", "w", 10).empty());  // (the bucket kept its fraction of a token)
  // Ten seconds pass (moved back rather than waited for): 1/360 of a token at the old rate.
  s.query("UPDATE pgqueue.queue_limits SET refilled_at = refilled_at - interval '10 seconds'");
  s.scalar("SELECT pgqueue.set_queue_limits('q', NULL, 5, '1 second', 20)");
  CHECK(claim(s, "q", "w", 10).empty());  // not 10 s at 5 a second

  // With no due job, the token time only postpones a job due later.
  session other(db.dsn());
  other.scalar("SELECT pgqueue.set_queue_limits('later', NULL, 1, '1 hour')");
  other.scalar("SELECT pgqueue.enqueue('later', '{}', NULL, 0, now() + interval '10 minutes')");
  CHECK(hint(other, "later").starts_with("false"));
  CHECK(claim(other, "later", "w").empty());
  CHECK(*other.scalar("SELECT next_due > now() + interval '9 minutes' "
                      "FROM pgqueue.wait_hint('later')") == "t");
}

TEST_CASE("both limits at once: the tighter one holds", "[limits]") {
  scratch_database db;
  session s(db.dsn());
  enqueue_n(s, "q", 10);
  s.scalar("SELECT pgqueue.set_queue_limits('q', 2, 100, '1 hour', 5)");
  CHECK(claim(s, "q", "w", 10).size() == 2);  // the concurrency limit
  CHECK(claim(s, "q", "w", 10).empty());
  // Two tokens taken of five (refilled at one every 36 s).
  CHECK(*s.scalar("SELECT claimed || ' ' || floor(tokens)::int FROM pgqueue.limits()") == "2 3");
}

TEST_CASE("bad limits are refused with 22023 and store nothing; only the owner sets them",
          "[limits]") {
  scratch_database db;
  session s(db.dsn());
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', 0)") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 0)") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 5, '0 seconds')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 5, '-1 seconds')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 5, '0.5 ms')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 1, '1000000 years')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', 3, NULL, '-5 seconds')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 5, NULL)") == "22004");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', 3, NULL, '1 second', 4)") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('q', NULL, 5, '1 second', 0)") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits('', 3)") == "22023");
  CHECK(s.error_of("SELECT pgqueue.set_queue_limits(NULL, 3)") == "22004");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.queue_limits") == 0);
  CHECK(*s.scalar("SELECT pgqueue.set_queue_limits('q')") == "f");  // nothing to remove

  scoped_role worker(db.dsn(), "limits_worker");
  s.scalar("SELECT pgqueue.grant_worker($1)", {worker.name()});
  session as_worker(worker.dsn());
  CHECK(as_worker.error_of("SELECT pgqueue.set_queue_limits('q', 3)") == "42501");
  // A worker role's claims and hints work on a limited queue (it may not read the table).
  s.scalar("SELECT pgqueue.set_queue_limits('q', 1, 10)");
  enqueue_n(s, "q", 2);
  CHECK(claim(as_worker, "q", "w", 2).size() == 1);
  CHECK(hint(as_worker, "q") == "false -");
  CHECK(as_worker.integer("SELECT count(*) FROM pgqueue.limits()") == 1);
}

// set_queue_limits takes the floor locks before it writes the queue's row: written the other
// way round, it held the row while waiting for the floor lock of a claim that had just moved
// the floors and was waiting for that row (40P01 after a second, found from outside).
TEST_CASE("set_queue_limits and claims of the limited queue do not deadlock", "[limits]") {
  scratch_database db;
  session s(db.dsn());
  session claimer(db.dsn());
  session setter(db.dsn());
  s.query("SELECT pgqueue.set_queue_limits('lq', 5)");
  enqueue_n(s, "lq", 10);
  // As a claim that has just moved the queue's floors: the floor lock held exclusively.
  claimer.query("BEGIN");
  claimer.query("SELECT pgqueue.floor_advance('lq')");
  std::string set_error;
  std::thread set([&] {
    try {
      setter.query("SELECT pgqueue.set_queue_limits('lq', 4)");
    } catch (const sql_error& e) {
      set_error = e.sqlstate;
    }
  });
  CHECK(
      wait_until([&] { return waits_on_lock(s, setter.backend_pid()); }, std::chrono::seconds(10)));
  // The claim then takes the queue's row, which the setter must not be holding.
  std::string claim_error;
  try {
    CHECK(claim(claimer, "lq", "w").size() == 1);
  } catch (const sql_error& e) {
    claim_error = e.sqlstate;
  }
  claimer.query(claim_error.empty() ? "COMMIT" : "ROLLBACK");
  set.join();
  CHECK(claim_error == "");
  CHECK(set_error == "");
  CHECK(s.integer("SELECT max_claimed FROM pgqueue.queue_limits WHERE queue = 'lq'") == 4);
}

}  // namespace sql_limits_test
