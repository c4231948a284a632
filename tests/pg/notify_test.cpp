// LISTEN/NOTIFY through subscriptions: wake-ups, awkward channel names, buffering.
#include <cstdint>
#include <string>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_notify_test {

using namespace pgq_pg_test;

// Note: never co_await inside CHECK/REQUIRE: the macros repeat their argument in a
// short-circuited branch, and GCC 12's coroutines evaluate that co_await anyway.

namespace {

asio::awaitable<void> notify(const pg::connection& c, const std::string& channel,
                             const std::string& payload) {
  co_await c.query("SELECT pg_notify($1, $2)", pg::params{channel, payload});
}

}  // namespace

TEST_CASE("a NOTIFY from another connection wakes next()", "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto sub = co_await listener.subscribe("jobs");
    CHECK(sub.channel() == "jobs");

    // next() is already waiting when the notification arrives.
    auto waiting = sub.next();
    asio::co_spawn(co_await asio::this_coro::executor, notify(sender, "jobs", "hello"),
                   asio::detached);
    auto n = co_await std::move(waiting);
    CHECK(n.channel == "jobs");
    CHECK(n.payload == "hello");
    CHECK(n.backend_pid == sender.backend_pid());
  });
}

TEST_CASE("channels with quotes, spaces, unicode and 60 bytes work without injection",
          "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    co_await sender.query("CREATE TABLE x (id int)");

    const std::string evil = "a\"; DROP TABLE x; --";
    std::string long_name = "Ωmega \"quoted\" chännel ";
    long_name += std::string(60 - long_name.size(), 'z');
    REQUIRE(long_name.size() == 60);

    for (const std::string& channel : {evil, long_name, std::string("UPPER case")}) {
      INFO(channel);
      auto sub = co_await listener.subscribe(channel);
      co_await notify(sender, channel, "for " + channel);
      auto n = co_await sub.next();
      CHECK(n.channel == channel);
      CHECK(n.payload == "for " + channel);
    }
    auto still_there = co_await sender.query("SELECT to_regclass('x') IS NOT NULL");
    CHECK(still_there.get<bool>(0, 0));

    auto too_long = co_await expect_error(listener.subscribe(std::string(64, 'a')));
    CHECK(too_long.code() == pg::errc::invalid_argument);
    auto empty = co_await expect_error(listener.subscribe(""));
    CHECK(empty.code() == pg::errc::invalid_argument);
  });
}

TEST_CASE("notifications that arrive while nobody waits are buffered in order", "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto sub = co_await listener.subscribe("buffered");
    auto other = co_await listener.subscribe("other");

    for (int i = 0; i < 5; ++i) co_await notify(sender, "buffered", std::to_string(i));
    co_await notify(sender, "other", "x");
    for (int i = 0; i < 5; ++i) {
      auto n = co_await sub.next();
      CHECK(n.payload == std::to_string(i));
    }
    auto from_other = co_await other.next();
    CHECK(from_other.payload == "x");
    CHECK(sub.dropped() == 0);
  });
}

TEST_CASE("next_after(seen) skips what was received before `seen`, and only that", "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto sub = co_await listener.subscribe("news");
    CHECK(sub.received() == 0);
    for (int i = 1; i <= 3; ++i) co_await notify(sender, "news", std::to_string(i));
    co_await listener.query("SELECT 1");  // all three dispatched (as in the test below)
    const auto seen = sub.received();
    CHECK(seen == 3);
    co_await notify(sender, "news", "4");
    co_await listener.query("SELECT 1");
    CHECK(sub.received() == 4);
    auto n = co_await sub.next_after(seen);
    CHECK(n.payload == "4");
    // Nothing is buffered now: the next one waits for news, and a later next() gets it.
    co_await notify(sender, "news", "5");
    auto later = co_await sub.next_after(seen);
    CHECK(later.payload == "5");
    CHECK(sub.received() == 5);
    CHECK(sub.dropped() == 0);
  });
}

TEST_CASE("a full buffer keeps the newest 1024 and counts the dropped ones", "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto sub = co_await listener.subscribe("flood");
    co_await sender.query("SELECT pg_notify('flood', g::text) FROM generate_series(1, 1100) g");
    // The server sends pending notifications before answering the listener's next request,
    // so after this round trip all 1100 have been dispatched.
    co_await listener.query("SELECT 1");
    CHECK(sub.dropped() == 76);
    auto oldest_kept = co_await sub.next();
    CHECK(oldest_kept.payload == "77");
  });
}

TEST_CASE("several subscriptions on one channel all receive, and UNLISTEN follows the last",
          "[pg][notify]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto listening = [&]() -> asio::awaitable<std::int64_t> {
      auto r = co_await listener.query("SELECT count(*) FROM pg_listening_channels()");
      co_return r.get<std::int64_t>(0, 0);
    };
    auto a = co_await listener.subscribe("shared");
    auto b = co_await listener.subscribe("shared");
    co_await notify(sender, "shared", "1");
    auto to_a = co_await a.next();
    auto to_b = co_await b.next();
    CHECK(to_a.payload == "1");
    CHECK(to_b.payload == "1");

    a.unsubscribe();
    const auto while_b_lives = co_await listening();
    CHECK(while_b_lives == 1);
    co_await notify(sender, "shared", "2");
    auto second = co_await b.next();
    CHECK(second.payload == "2");
    auto gone = co_await expect_error(a.next());
    CHECK(gone.code() == pg::errc::closed);

    { auto dropped = std::move(b); }
    const auto after_last = co_await listening();  // UNLISTEN went out before this query
    CHECK(after_last == 0);
  });
}

}  // namespace pg_notify_test
