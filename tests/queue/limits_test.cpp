// set_queue_limits / read_queue_limits from C++: limits set, read back and removed; bad ones
// refused with the server's SQLSTATE and nothing stored; a raised limit wakes an idle worker
// at once (its poll interval is a minute: only the wake-up can do it); a cancelled call either
// took effect or did not, and the connection goes on.
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <pgqueue/pgqueue.hpp>

#include <functional>
#include <thread>

#include "support/async.hpp"
#include "support/expect_error.hpp"
#include "support/function_calls.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_limits_test {

using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("limits are set, read back, refused when bad, and removed", "[limits]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    const pgqueue::queue_limits mail{
        .queue = "mail", .max_claimed = 3, .rate = 100, .rate_period = 1min, .burst = 10};
    const bool set = co_await pgqueue::set_queue_limits(db, mail);
    CHECK(set);
    const bool again = co_await pgqueue::set_queue_limits(db, mail);
    CHECK_FALSE(again);  // unchanged: nothing written
    const pgqueue::queue_limits api{.queue = "api", .max_claimed = 1};
    co_await pgqueue::set_queue_limits(db, api);

    auto all = co_await pgqueue::read_queue_limits(db);
    REQUIRE(all.size() == 2);
    CHECK(all[0].limits.queue == "api");
    CHECK(all[0].limits.max_claimed == 1);
    CHECK_FALSE(all[0].limits.rate);
    CHECK_FALSE(all[0].tokens);
    CHECK(all[1].limits.queue == "mail");
    CHECK(all[1].limits.max_claimed == 3);
    CHECK(all[1].limits.rate == 100);
    CHECK(all[1].limits.rate_period == 1min);
    CHECK(all[1].limits.burst == 10);
    CHECK(all[1].claimed == 0);
    REQUIRE(all[1].tokens);
    CHECK(*all[1].tokens == Approx(10));  // a new bucket starts full

    const pgqueue::queue_limits zero{.queue = "mail", .max_claimed = 0};
    auto e = co_await expect_error(pgqueue::set_queue_limits(db, zero));
    CHECK(e.sqlstate() == "22023");
    const pgqueue::queue_limits no_period{.queue = "mail", .rate = 5, .rate_period = 0ms};
    e = co_await expect_error(pgqueue::set_queue_limits(db, no_period));
    CHECK(e.sqlstate() == "22023");
    const pgqueue::queue_limits forever{
        .queue = "mail", .rate = 1, .rate_period = std::chrono::milliseconds::max()};
    e = co_await expect_error(pgqueue::set_queue_limits(db, forever));
    CHECK(e.sqlstate() == "22023");
    const pgqueue::queue_limits burst_alone{.queue = "mail", .burst = 5};
    e = co_await expect_error(pgqueue::set_queue_limits(db, burst_alone));
    CHECK(e.sqlstate() == "22023");
    auto unchanged = co_await pgqueue::read_queue_limits(db);
    CHECK(unchanged[1].limits.max_claimed == 3);

    const pgqueue::queue_limits none{.queue = "mail"};
    const bool removed = co_await pgqueue::set_queue_limits(db, none);
    CHECK(removed);
    auto left = co_await pgqueue::read_queue_limits(db);
    REQUIRE(left.size() == 1);
    CHECK(left[0].limits.queue == "api");
  });
}

TEST_CASE("a worker at its queue's limit waits; raising the limit wakes it at once", "[limits]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto control = co_await f.connect();
    const pgqueue::queue_limits one{.queue = "q", .max_claimed = 1};
    co_await pgqueue::set_queue_limits(control, one);
    pgqueue::queue q{co_await f.connect(), "q", {.poll_interval = 60s}};
    pgqueue::queue producer{control, "q"};
    for (int i = 0; i < 2; ++i) co_await producer.enqueue("{}");
    int running = 0, most = 0, ran = 0;
    asio::steady_timer release(ex, 30s);  // the first handler holds its place until cancelled
    asio::steady_timer both_ran(ex, 30s);
    pgqueue::worker w(q, [&](const pgqueue::job&) -> asio::awaitable<void> {
      most = std::max(most, ++running);
      if (++ran == 2) both_ran.cancel();
      std::error_code ec;
      co_await release.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      --running;
    });
    auto body = [&]() -> asio::awaitable<void> {
      const bool one_running = co_await eventually([&] { return ran == 1; });
      CHECK(one_running);
      co_await pause(300ms);  // the subject is time: the second job waits for a place
      CHECK(ran == 1);
      const pgqueue::queue_limits two{.queue = "q", .max_claimed = 2};
      co_await pgqueue::set_queue_limits(control, two);
      // (The second job may have started before this wait began: its cancel had no wait.)
      std::error_code ec = asio::error::operation_aborted;
      if (ran < 2) co_await both_ran.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      CHECK(ec == asio::error::operation_aborted);  // woken, not the 30 s timer
      release.cancel();
      w.stop();
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (w.run() && body());
    CHECK(most == 2);
  });
  CHECK(count_jobs(admin, "done", "q") == 2);
}

TEST_CASE("a claim held by a limit is not woken by enqueues, only by a freed place",
          "[limits][idle]") {
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query("ALTER DATABASE " + f.db.name() + " SET track_functions = 'all'");
  admin.scalar("SELECT pgqueue.set_queue_limits('q', 1)");
  const auto held_id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  const auto token = admin.integer("SELECT lease_token FROM pgqueue.claim_batch('q', 'h', 1)");
  std::int64_t claimed_id = 0;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto db = co_await pgqueue::connect(ex, f.db.dsn() + " application_name=counted");
    {
      pgqueue::queue q(db, "q", {.poll_interval = 60s});
      pgqueue::queue producer(co_await f.connect(), "q");
      auto produce = [&]() -> asio::awaitable<void> {
        // Fifty enqueues, each its own transaction and notification, while the claim waits.
        for (int i = 0; i < 50; ++i) {
          co_await producer.enqueue("{}");
          co_await pause(10ms);
        }
        admin.scalar("SELECT pgqueue.ack($1, 'h', $2)",
                     {std::to_string(held_id), std::to_string(token)});
      };
      using namespace asio::experimental::awaitable_operators;
      auto l = co_await (q.claim() && produce());
      claimed_id = l.job().id;
      co_await l.ack();
    }
    db.close();
  });
  CHECK(claimed_id != held_id);
  REQUIRE(wait_for_sessions_gone(admin, "counted"));
  const auto claims = function_calls(admin, "claim_batch");
  // The first claim, the one after subscribing, and the one the ack's notification woke (the
  // producer's fifty enqueues woke nothing); the holder's and the ack's own calls are not
  // claims. Before, each enqueue woke it: about fifty.
  CHECK(claims - 1 <= 4);  // (minus the holder's claim)
}

TEST_CASE("a cancelled set_queue_limits took effect or did not; the connection goes on",
          "[limits][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  for (int steps = 0; steps < 4; ++steps) {
    INFO("cancelled after " << steps << " hops");
    run_async([&]() -> asio::awaitable<void> {
      auto db = co_await f.connect();
      const pgqueue::queue_limits l{.queue = "q" + std::to_string(steps), .max_claimed = 2};
      auto setting = [&]() -> asio::awaitable<void> { co_await pgqueue::set_queue_limits(db, l); };
      auto failure =
          co_await cancelled_by(setting(), hops(steps), asio::cancellation_type::terminal);
      // Returned: it took effect, and setting it again changes nothing. Cancelled: it took
      // effect or not (a cancel once the statement is sent comes too late to stop it); the
      // next call on the connection is answered after it, and the limits are whole.
      const bool changed = co_await pgqueue::set_queue_limits(db, l);
      if (!failure) CHECK_FALSE(changed);
      CHECK(*admin.scalar("SELECT max_claimed FROM pgqueue.queue_limits WHERE queue = $1",
                          {l.queue}) == "2");
    });  // the connection is destroyed right after its last await
  }
}

TEST_CASE("the other management calls cancelled at each hop: the connection goes on",
          "[limits][cancel]") {
  queue_fixture f;
  using call = std::function<asio::awaitable<void>(pgqueue::database&)>;
  const std::vector<std::pair<std::string, call>> calls = {
      {"read_queue_limits",
       [](pgqueue::database& db) -> asio::awaitable<void> {
         co_await pgqueue::read_queue_limits(db);
       }},
      {"read_queue_status",
       [](pgqueue::database& db) -> asio::awaitable<void> {
         co_await pgqueue::read_queue_status(db);
       }},
      {"declare_schedule",
       [](pgqueue::database& db) -> asio::awaitable<void> {
         const pgqueue::schedule s{.name = "tick", .queue = "q", .cron = "@hourly"};
         co_await pgqueue::declare_schedule(db, s);
       }},
      {"remove_schedule",
       [](pgqueue::database& db) -> asio::awaitable<void> {
         co_await pgqueue::remove_schedule(db, "tick");
       }},
  };
  for (const auto& [name, op] : calls) {
    for (int steps = 0; steps < 4; ++steps) {
      INFO(name << " cancelled after " << steps << " hops");
      run_async([&]() -> asio::awaitable<void> {
        auto db = co_await f.connect();
        co_await cancelled_by(op(db), hops(steps), asio::cancellation_type::terminal);
        // Whatever the cancel did, the next call on the connection is answered.
        auto status = co_await pgqueue::read_queue_limits(db);
        CHECK(status.empty());
      });  // and the connection is destroyed right after it
    }
  }
}

}  // namespace queue_limits_test
