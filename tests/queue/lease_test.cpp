// pgqueue::lease: heartbeats, loss of the lease, fencing, and the destructor's nack.
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace queue_lease_test {

using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("a job running 5x its lease length completes thanks to heartbeats", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t id = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 600ms, .heartbeat_interval = 200ms}};
    id = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    // 3 s of work (5 leases) while the janitor runs all the time: it never takes the job back.
    for (int i = 0; i < 30; ++i) {
      co_await pause(100ms);
      CHECK(admin.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 0);
    }
    CHECK_FALSE(l.lost());
    co_await l.ack();
  });
  auto j = read_job(admin, id);
  CHECK(j.state == "done");
  CHECK(j.attempts == 1);
}

TEST_CASE("a lost lease: ack fails with lease_lost and the new holder is untouched", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    // No heartbeat within the test: the lease is as if it had run out unnoticed (a stalled
    // process) when the janitor takes the job back.
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 120s, .heartbeat_interval = 60s}};
    pgqueue::queue rival{co_await f.connect(), "q", {.worker_id = "rival"}};
    auto id = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    CHECK(take_back(admin, id) == 1);
    auto taken = co_await rival.claim();
    CHECK(taken.job().id == id);
    CHECK(taken.job().attempts == 2);
    try {
      co_await l.ack();
      FAIL("ack of a lost lease succeeded");
    } catch (const pgqueue::error& e) {
      CHECK(e.code() == pgqueue::errc::lease_lost);
      CHECK_THAT(e.what(), Catch::Contains("lease lost"));
    }
    auto j = read_job(admin, id);
    CHECK(j.state == "claimed");
    CHECK(*j.claimed_by == "rival");
    CHECK(j.attempts == 2);
    co_await taken.ack();
  });
}

TEST_CASE("a refused heartbeat marks the lease lost and fires its signal", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 10s, .heartbeat_interval = 50ms}};
    auto id = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    CHECK(take_back(admin, id) == 1);
    // A handler's long wait bound to the lost signal ends when the heartbeat is refused.
    asio::steady_timer work(ex, 30s);
    std::error_code ec;
    co_await work.async_wait(
        asio::bind_cancellation_slot(l.lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
    CHECK(ec == asio::error::operation_aborted);
    CHECK(l.lost());
    try {
      co_await l.nack("too late");
      FAIL("nack of a lost lease succeeded");
    } catch (const pgqueue::error& e) {
      CHECK(e.code() == pgqueue::errc::lease_lost);
    }
  });
}

TEST_CASE("destroying a lease without ack nacks the job", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    auto id = co_await q.enqueue("{}");
    { auto l = co_await q.claim(); }
    bool nacked = co_await eventually([&] { return read_job(admin, id).state == "ready"; });
    CHECK(nacked);
    auto j = read_job(admin, id);
    CHECK(*j.last_error == "abandoned");
    CHECK(j.attempts == 1);

    admin.query("UPDATE pgqueue.jobs SET run_after = now() WHERE id = $1", {std::to_string(id)});
    try {
      auto l = co_await q.claim();
      throw std::runtime_error("handler failed");
    } catch (const std::runtime_error&) {
    }
    nacked = co_await eventually(
        [&] { return read_job(admin, id).attempts == 2 && read_job(admin, id).state == "ready"; });
    CHECK(nacked);
    CHECK(*read_job(admin, id).last_error == "abandoned: exception during handler");
  });
}

TEST_CASE("an ack or a nack or a release the server refuses leaves the lease held", "[lease]") {
  // (The refused call finished the lease: a second try said lease_finished, and the job stayed
  // claimed, heartbeats stopped, until its lease expired.)
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    co_await db.query("SET lock_timeout = '100ms'");
    pgqueue::queue q{db, "q", {.lease = 2s, .heartbeat_interval = 200ms}};
    for (const char* op : {"ack", "nack", "release"}) {
      INFO(op);
      const auto id = co_await q.enqueue("{}");
      auto l = co_await q.claim();
      lock_job_row(admin, id);
      auto call = [&]() -> asio::awaitable<void> {
        if (op == std::string("ack")) co_await l.ack();
        if (op == std::string("nack")) co_await l.nack("failed");
        if (op == std::string("release")) co_await l.release();
      };
      std::string state;
      try {
        co_await call();
      } catch (const pgqueue::error& e) {
        state = e.sqlstate();
      }
      CHECK(state == "55P03");
      CHECK_FALSE(l.finished());
      CHECK_FALSE(l.lost());
      admin.query("COMMIT");
      // Heartbeats go on: the lease is extended (a heartbeat every 200 ms).
      const auto until = [&] {
        return admin.integer(
            "SELECT (extract(epoch FROM lease_until) * 1000)::bigint "
            "FROM pgqueue.jobs WHERE id = $1",
            {std::to_string(id)});
      };
      const auto before = until();
      co_await pause(600ms);  // the subject is time: three heartbeats
      CHECK(until() > before);
      CHECK_FALSE(l.lost());
      co_await call();  // sent again, now it goes through
      CHECK(l.finished());
      const auto j = read_job(admin, id);
      CHECK(j.state == (op == std::string("ack") ? "done" : "ready"));
    }
  });
}

TEST_CASE("a lease destroyed after a refused ack is nacked as abandoned", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    co_await db.query("SET lock_timeout = '100ms'");
    pgqueue::queue q{db, "q"};
    const auto id = co_await q.enqueue("{}");
    {
      auto l = co_await q.claim();
      lock_job_row(admin, id);
      std::string refused;
      try {
        co_await l.ack();
      } catch (const pgqueue::error& e) {
        refused = e.sqlstate();
      }
      CHECK(refused == "55P03");
      admin.query("COMMIT");
    }
    CHECK(co_await eventually([&] { return read_job(admin, id).state == "ready"; }));
    CHECK(*read_job(admin, id).last_error == "abandoned");
  });
}

TEST_CASE("a finished lease refuses a second ack", "[lease]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    co_await q.enqueue("{}");
    auto l = co_await q.claim();
    co_await l.ack();
    try {
      co_await l.ack();
      FAIL("second ack succeeded");
    } catch (const pgqueue::error& e) {
      CHECK(e.code() == pgqueue::errc::lease_finished);
    }
  });
}

TEST_CASE("nack with a delay requeues the job for then", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t id = 0;
  pgqueue::nack_result outcome{};
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await q.enqueue("{}", {.max_attempts = 2});
    auto l = co_await q.claim();
    outcome = co_await l.nack("later", std::chrono::minutes(10));
  });
  CHECK(outcome == pgqueue::nack_result::requeued);
  auto j = read_job(admin, id);
  CHECK(j.state == "ready");
  CHECK(*j.last_error == "later");
  CHECK(j.run_after_in > 590);
  CHECK(j.run_after_in < 610);
}

TEST_CASE("ack_batch acks many leases in one round trip", "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::size_t acked = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    std::vector<std::string> payloads(5, "{}");
    co_await q.enqueue_batch(payloads);
    auto leases = co_await q.claim_batch(5);
    acked = co_await pgqueue::ack_batch(leases);
    CHECK(std::all_of(leases.begin(), leases.end(), [](auto& l) { return l.finished(); }));
  });
  CHECK(acked == 5);
  CHECK(count_jobs(admin, "done") == 5);
}

TEST_CASE("ack_batch: leases keep their job after it, and mixed worker ids are refused",
          "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query("SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '{}', '{}']::jsonb[])");
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    pgqueue::queue a(db, "q"), b(db, "q");  // two handles: two default worker ids
    auto mine = co_await a.try_claim_batch(2);
    auto other = co_await b.try_claim();
    REQUIRE(mine.size() == 2);
    REQUIRE(other);
    std::vector<pgqueue::lease> mixed;
    mixed.push_back(std::move(mine[1]));
    mixed.push_back(std::move(*other));
    std::error_code refused;
    try {
      co_await pgqueue::ack_batch(mixed);
    } catch (const pgqueue::error& e) {
      refused = e.code();
    }
    CHECK(refused == pgqueue::errc::invalid_argument);
    CHECK_FALSE(mixed[0].finished());
    CHECK_FALSE(mixed[1].finished());
    std::vector<pgqueue::lease> one;
    one.push_back(std::move(mine[0]));
    one.push_back(std::move(mixed[0]));
    const auto acked = co_await pgqueue::ack_batch(one);
    CHECK(acked == 2);
    CHECK(one[0].finished());
    CHECK(one[0].job().id > 0);                      // the job is still readable
    CHECK_THROWS_AS(mine[0].job(), pgqueue::error);  // moved from: a clear error, not a crash
    co_await mixed[1].ack();
  });
  CHECK(count_jobs(admin, "done") == 3);
}

TEST_CASE("ack_batch refuses leases of one worker id claimed on two connections", "[lease]") {
  queue_fixture f;
  scratch_database other_db{true};
  session admin(f.db.dsn()), other_admin(other_db.dsn());
  admin.query("SELECT pgqueue.enqueue('q', '{}')");
  other_admin.query("SELECT pgqueue.enqueue('q', '{}')");
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    // One explicit worker id on two databases: the id check alone would let this through.
    pgqueue::queue a(co_await f.connect(), "q", {.worker_id = "w"});
    pgqueue::queue b(co_await pgqueue::connect(ex, other_db.dsn()), "q", {.worker_id = "w"});
    std::vector<pgqueue::lease> two;
    two.push_back(co_await a.claim());
    two.push_back(co_await b.claim());
    std::error_code refused;
    try {
      co_await pgqueue::ack_batch(two);
    } catch (const pgqueue::error& e) {
      refused = e.code();
    }
    CHECK(refused == pgqueue::errc::invalid_argument);
    CHECK_FALSE(two[0].finished());
    CHECK_FALSE(two[1].finished());
    for (auto& l : two) co_await l.ack();
  });
  CHECK(count_jobs(admin, "done") == 1);
  CHECK(count_jobs(other_admin, "done") == 1);
}

TEST_CASE("a lease that ran out before a heartbeat got through is acked if nobody took it back",
          "[lease]") {
  queue_fixture f;
  session admin(f.db.dsn()), locker(f.db.dsn());
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto db = co_await f.connect();
    pgqueue::queue q(db, "q", {.lease = 300ms});
    auto l = co_await q.claim();
    // A statement blocked on a lock holds up the session's pipeline, heartbeats included.
    locker.query("SELECT pg_advisory_lock(42)");
    asio::co_spawn(ex, db.query("SELECT pg_advisory_lock(42), pg_advisory_unlock(42)"),
                   asio::detached);
    // The lease's own lost signal ends this wait (bounded, should it never come).
    asio::steady_timer until_lost(ex, 5s);
    std::error_code ec;
    co_await until_lost.async_wait(
        asio::bind_cancellation_slot(l.lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
    CHECK(l.lost());
    locker.query("SELECT pg_advisory_unlock(42)");
    // Nobody ran the janitor: the job is still this claim's, and the server takes the ack.
    co_await l.ack();
  });
  CHECK(read_job(admin, id).state == "done");
}

}  // namespace queue_lease_test
