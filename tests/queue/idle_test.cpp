// An idle claim waits for events (a notification, a due time, its poll interval), never in a
// tight loop; expired leases come back without a worker. Counted on the server with
// track_functions (pg_stat_user_functions), so what is measured is what the server ran.
#include <asio/experimental/awaitable_operators.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/function_calls.hpp"
#include "support/idle.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_idle_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// A queue fixture whose sessions count their calls of pgqueue functions.
struct counted_fixture : queue_fixture {
  session admin{db.dsn()};
  counted_fixture() { admin.query("ALTER DATABASE " + db.name() + " SET track_functions = 'all'"); }
  std::int64_t calls(const std::string& function) { return function_calls(admin, function); }
};

// Runs q.claim() for `window` on a connection of its own and closes it, so its backend exits
// and reports its function calls. Returns whether the claim got a job.
asio::awaitable<bool> claim_for(counted_fixture& f, std::chrono::milliseconds window,
                                pgqueue::queue_options o = {}) {
  using namespace asio::experimental::awaitable_operators;
  auto db = co_await pgqueue::connect(co_await asio::this_coro::executor,
                                      f.db.dsn() + " application_name=counted");
  bool got = false;
  {
    pgqueue::queue q(db, "q", o);
    asio::steady_timer t(co_await asio::this_coro::executor, window);
    auto r = co_await (q.claim() || t.async_wait(asio::use_awaitable));
    if (r.index() == 0) {
      got = true;
      co_await std::get<0>(r).ack();
    }
  }
  db.close();
  co_return got;
}

// Whether claim_for's session has ended (its backend has then reported its counters).
bool counted_session_gone(counted_fixture& f) {
  return sessions_gone(f.admin, "counted");
}

}  // namespace

TEST_CASE("an idle claim on an empty queue checks once per poll interval", "[idle]") {
  counted_fixture f;
  const auto before = f.calls("claim_batch");
  const bool got = run_async([&] { return claim_for(f, 1500ms, {.poll_interval = 1s}); });
  CHECK_FALSE(got);
  REQUIRE(run_async([&]() -> asio::awaitable<bool> {
    co_return co_await eventually([&] { return counted_session_gone(f); });
  }));
  // The first check, one right after subscribing (a job committed in between is found), and
  // one after the poll interval.
  CHECK(f.calls("claim_batch") - before == 3);
}

TEST_CASE("an idle claim does not spin on a due job another transaction holds locked", "[idle]") {
  counted_fixture f;
  auto id = f.admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  session locker(f.db.dsn());
  lock_job_row(locker, id);  // due, but not claimable
  const auto before = f.calls("claim_batch");
  const bool got = run_async([&] { return claim_for(f, 1500ms, {.poll_interval = 5s}); });
  CHECK_FALSE(got);
  locker.query("COMMIT");
  REQUIRE(run_async([&]() -> asio::awaitable<bool> {
    co_return co_await eventually([&] { return counted_session_gone(f); });
  }));
  // Checks back off from 10 ms, doubling: 0, 10, 30, 70, 150, 310, 630, 1270 ms. (Before,
  // "due but not claimable" became a 1 ms poll: hundreds of claims in this window.)
  const auto claims = f.calls("claim_batch") - before;
  CHECK(claims >= 2);
  CHECK(claims <= 10);
}

TEST_CASE("the job is claimed once the lock is released, within the back-off", "[idle]") {
  counted_fixture f;
  auto id = f.admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  session locker(f.db.dsn());
  lock_job_row(locker, id);  // due, but not claimable
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q(co_await f.connect(), "q", {.poll_interval = 400ms});
    asio::steady_timer t(co_await asio::this_coro::executor, 200ms);
    co_await t.async_wait(asio::use_awaitable);
    locker.query("ROLLBACK");  // no notification: only the back-off finds it
    const auto released = std::chrono::steady_clock::now();
    auto l = co_await q.claim();
    CHECK(l.job().id == id);
    CHECK(std::chrono::steady_clock::now() - released < 450ms);
    co_await l.ack();
  });
}

TEST_CASE("a job scheduled while a claim waits starts at its due time, not at the next poll",
          "[idle]") {
  counted_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q(co_await f.connect(), "q", {.poll_interval = 5s});
    std::optional<std::chrono::steady_clock::time_point> started;
    std::int64_t claimed_id = 0;
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          auto l = co_await q.claim();
          started = std::chrono::steady_clock::now();
          claimed_id = l.job().id;
          co_await l.ack();
        },
        asio::detached);
    // The claim is idle once it has asked what to wait for: now waiting up to its 5 s poll.
    REQUIRE(co_await waiting_for_event(f.admin, q.db().backend_pid()));
    const auto due = std::chrono::steady_clock::now() + 300ms;
    const auto id = f.admin.integer(
        "SELECT pgqueue.enqueue('q', '{}', NULL, 0, clock_timestamp() + interval '300 ms')");
    CHECK(co_await eventually([&] { return started.has_value(); }, 3s));
    CHECK(claimed_id == id);
    REQUIRE(started);
    CHECK(*started >= due - 50ms);  // not before it is due (server and client clocks agree)
    CHECK(*started < due + 500ms);  // and not at the next poll, 4.5 s later
  });
}

TEST_CASE("an idle worker's wake-up costs a claim and a wait_hint per job, not a LISTEN",
          "[idle][worker]") {
  counted_fixture f;
  constexpr int jobs = 20;
  const auto claims_before = f.calls("claim_batch");
  const auto hints_before = f.calls("wait_hint");
  int handled = 0;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto db = co_await pgqueue::connect(ex, f.db.dsn() + " application_name=counted");
    {
      // No poll within the test: only notifications wake the worker.
      pgqueue::queue q(db, "q", {.poll_interval = 30s});
      pgqueue::worker w(q, [&](const pgqueue::job&) -> asio::awaitable<void> {
        ++handled;
        co_return;
      });
      const auto pid = std::to_string(db.backend_pid());
      // Idle: the worker's session has asked what to wait for, or acked after it did; its
      // last claim found nothing. (An ack riding on a claim names claim_batch too.)
      auto idle = [&] {
        return f.admin.integer(
                   "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'idle' "
                   "AND (query LIKE '%wait_hint%' OR (query LIKE '%ack_batch%' AND "
                   "query NOT LIKE '%claim_batch%'))",
                   {pid}) == 1;
      };
      auto feed = [&]() -> asio::awaitable<void> {
        for (int i = 1; i <= jobs; ++i) {
          REQUIRE(co_await eventually(idle));
          f.admin.query("SELECT pgqueue.enqueue('q', '{}')");
          REQUIRE(co_await eventually([&] { return handled == i; }));
        }
        REQUIRE(co_await eventually(idle));
        w.stop();
      };
      using namespace asio::experimental::awaitable_operators;
      co_await (w.run() && feed());
      CHECK(w.stats().acked == jobs);
    }
    db.close();
  });
  REQUIRE(run_async([&]() -> asio::awaitable<bool> {
    co_return co_await eventually([&] { return counted_session_gone(f); });
  }));
  // The first claim, then per job the claim its notification starts and the one that finds
  // the queue empty again. Subscribing per idle period cost a third claim per job (the check
  // right after each LISTEN).
  CHECK(f.calls("claim_batch") - claims_before == 1 + 2 * jobs);
  CHECK(f.calls("wait_hint") - hints_before == 1 + jobs);
}

TEST_CASE("with only claim() loops, a crashed holder's job comes back after its lease",
          "[idle][maintenance]") {
  counted_fixture f;
  auto id = f.admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  // The holder claims with a short lease and dies (its connection ends, nothing more is sent).
  f.admin.query("SELECT * FROM pgqueue.claim_batch('q', 'crashed', 1, '200 ms')");
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q(co_await f.connect(), "q", {.poll_interval = 300ms});
    const auto start = std::chrono::steady_clock::now();
    auto l = co_await q.claim();  // no worker, no janitor call: the claims' maintenance
    CHECK(l.job().id == id);
    CHECK(l.job().attempts == 2);
    // Lease 200 ms, poll 300 ms, this session's maintenance check once a second; the fleet's
    // janitor pace stretches to 50 times its last run (a slow one under load), so the first
    // check can find it not due and the next one does it: 2.3 s, then room for a loaded
    // machine under the sanitizers (2.58 s seen). A job that never came back is the failure.
    CHECK(std::chrono::steady_clock::now() - start < 4s);
    co_await l.ack();
  });
  auto j = read_job(f.admin, id);
  CHECK(j.state == "done");
  CHECK_THAT(*j.last_error, Catch::StartsWith("lease expired on attempt 1 of 5"));
}

}  // namespace queue_idle_test
