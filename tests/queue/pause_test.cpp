// queue::pause / resume with a running worker: nothing is handed out while paused, and resume
// wakes the idle worker at once (its poll interval is a minute: only the wake-up can do it).
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_pause_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

TEST_CASE("a paused queue's worker runs nothing; resume wakes it and it runs every job",
          "[pause]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q{co_await f.connect(), "q", {.poll_interval = 60s}};
    pgqueue::queue control{co_await f.connect(), "q"};
    const bool paused = co_await control.pause();
    CHECK(paused);
    const bool again = co_await control.pause();
    CHECK_FALSE(again);
    std::vector<std::int64_t> ran;
    asio::steady_timer all_ran(ex, 10s);  // cancelled by the third handler
    pgqueue::worker w(q, [&](const pgqueue::job& j) -> asio::awaitable<void> {
      ran.push_back(j.id);
      if (ran.size() == 3) all_ran.cancel();
      co_return;
    });
    auto body = [&]() -> asio::awaitable<void> {
      for (int i = 0; i < 3; ++i) co_await control.enqueue("{}");
      co_await pause(300ms);  // the subject is time: a paused queue hands nothing out
      CHECK(ran.empty());
      CHECK(count_jobs(admin, "ready", "q") == 3);
      const bool resumed = co_await control.resume();
      CHECK(resumed);
      // (The last job may have run before this wait began: its cancel then had no wait.)
      std::error_code ec = asio::error::operation_aborted;
      if (ran.size() < 3)
        co_await all_ran.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      CHECK(ec == asio::error::operation_aborted);  // cancelled by the handler, not timed out
      w.stop();
    };
    co_await (w.run() && body());
    CHECK(ran.size() == 3);
  });
  CHECK(count_jobs(admin, "done", "q") == 3);
}

}  // namespace queue_pause_test
