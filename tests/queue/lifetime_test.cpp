// Objects whose io_context goes away first: destroying the context while coroutines are
// suspended in the library frees them (the sanitized build checks for leaks at exit) and ends
// their sessions on the server.
#include <pgqueue/pgqueue.hpp>

#include "support/idle.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"
#include "support/wait.hpp"

namespace queue_lifetime_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

bool session_gone(session& admin, int pid) {
  return admin.integer("SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                       {std::to_string(pid)}) == 0;
}

}  // namespace

TEST_CASE("an io_context destroyed while a claim and a notification wait ends their session",
          "[lifetime]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int pid = 0;
  {
    asio::io_context io;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto db = co_await f.connect();
          pid = db.backend_pid();
          pgqueue::queue q(db, "q", {.poll_interval = 1h});
          auto watcher = [](pgqueue::queue q) -> asio::awaitable<void> {
            co_await q.next_notification();
          };
          asio::co_spawn(co_await asio::this_coro::executor, watcher(q), asio::detached);
          co_await q.claim();  // waits for good: nothing is ever enqueued
          FAIL("claimed from an empty queue");
        },
        asio::detached);
    // Until the claim idles: its last statement before waiting asks what to wait for.
    REQUIRE(wait_until(
        [&] {
          io.run_for(10ms);
          return pid != 0 && idle_after(admin, pid, "wait_hint");
        },
        10s));
  }  // the context goes with both coroutines suspended inside the library
  CHECK(wait_until([&] { return session_gone(admin, pid); }, 10s));
}

TEST_CASE("an io_context destroyed while a lease heartbeats and a worker runs ends both",
          "[lifetime]") {
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query("SELECT pgqueue.enqueue('q', '{}')");
  int pid = 0;
  bool handling = false;
  {
    asio::io_context io;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto db = co_await f.connect();
          pid = db.backend_pid();
          pgqueue::queue q(db, "q", {.lease = 2s});
          pgqueue::worker w(q, [&](const pgqueue::job&) -> asio::awaitable<void> {
            handling = true;
            asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
            co_await forever.async_wait(asio::use_awaitable);
          });
          co_await w.run();
        },
        asio::detached);
    // Until a heartbeat has gone out for the job being handled.
    REQUIRE(wait_until(
        [&] {
          io.run_for(10ms);
          return handling && pid != 0 && idle_after(admin, pid, "heartbeat");
        },
        10s));
  }
  CHECK(wait_until([&] { return session_gone(admin, pid); }, 10s));
  // Still claimed by the vanished holder: its lease runs out and the janitor takes it back.
  CHECK(count_jobs(admin, "claimed") == 1);
}

}  // namespace queue_lifetime_test
