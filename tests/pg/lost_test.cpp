// With reconnect off, a dropped connection fails every pending request and subscription wait
// with connection_lost, and stays closed (reconnect_test.cpp covers the default).
#include <asio/experimental/awaitable_operators.hpp>
#include <string>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_lost_test {

using namespace pgq_pg_test;

namespace {
constexpr pg::connect_options no_reconnect{.reconnect = false};
}  // namespace

TEST_CASE("pg_terminate_backend fails pending requests and waiters with connection_lost",
          "[pg][lost]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [victim, admin] = co_await connect_pair(db.dsn(), no_reconnect);
    auto sub = co_await victim.subscribe("c");

    std::vector<asio::awaitable<pg::result>> pending;
    pending.push_back(victim.query("SELECT pg_sleep(30)"));
    pending.push_back(victim.query("SELECT 1"));  // queued behind the sleep
    pending.push_back([](pg::subscription& s) -> asio::awaitable<pg::result> {
      co_await s.next();
      co_return pg::result{};
    }(sub));
    pending.push_back([](pg::connection a, int pid) -> asio::awaitable<pg::result> {
      co_return co_await a.query("SELECT pg_terminate_backend($1)", pg::params{pid});
    }(admin, victim.backend_pid()));

    const auto start = std::chrono::steady_clock::now();
    auto outcomes = co_await gather(std::move(pending));
    CHECK(since(start) < 10s);
    REQUIRE(outcomes[3].value);
    CHECK(outcomes[3].value->get<bool>(0, 0));
    for (int i = 0; i < 3; ++i) {
      INFO("pending " << i);
      REQUIRE(outcomes[i].failure);
      CHECK(outcomes[i].failure->code() == pg::errc::connection_lost);
      CHECK_THAT(outcomes[i].failure->what(), Catch::Contains("connection to server lost: "));
    }
    CHECK_THAT(outcomes[0].failure->what(), Catch::Contains("server closed the connection"));
    CHECK_FALSE(victim.is_open());

    // Later use fails the same way, immediately.
    auto later = co_await expect_error(victim.query("SELECT 1"));
    CHECK(later.code() == pg::errc::connection_lost);
    auto later_wait = co_await expect_error(sub.next());
    CHECK(later_wait.code() == pg::errc::connection_lost);
  });
}

TEST_CASE("an idle connection notices the server going away", "[pg][lost]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [victim, admin] = co_await connect_pair(db.dsn(), no_reconnect);
    auto sub = co_await victim.subscribe("idle");
    // Nothing in flight on `victim`: only the subscription wait learns about it.
    auto waiting = sub.next();
    co_await admin.query("SELECT pg_terminate_backend($1)", pg::params{victim.backend_pid()});
    auto e = co_await expect_error(std::move(waiting));
    CHECK(e.code() == pg::errc::connection_lost);
    CHECK_THAT(e.what(), Catch::Contains("terminating connection due to administrator command"));
    CHECK_FALSE(victim.is_open());
  });
}

}  // namespace pg_lost_test
