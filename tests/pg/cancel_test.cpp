// Per-operation cancellation: prompt operation_aborted, connection and subscription stay usable.
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <cstdint>
#include <string>
#include <variant>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_cancel_test {

using namespace pgq_pg_test;
using namespace asio::experimental::awaitable_operators;

TEST_CASE("next() raced against a timer returns promptly and loses nothing", "[pg][cancel]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto [listener, sender] = co_await connect_pair(db.dsn());
    auto sub = co_await listener.subscribe("c");

    const auto start = std::chrono::steady_clock::now();
    auto raced = co_await (sub.next() || after(50ms));
    CHECK(raced.index() == 1);  // the timer won
    CHECK(since(start) < 1s);

    // The connection answers and the subscription still receives.
    auto r = co_await listener.query("SELECT $1::int4", pg::params{7});
    CHECK(r.get<int>(0, 0) == 7);
    co_await sender.query("SELECT pg_notify('c', 'later')");
    auto n = co_await sub.next();
    CHECK(n.payload == "later");
  });
}

TEST_CASE("a cancelled next() fails with operation_aborted", "[pg][cancel]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto listener = co_await pg::connect(ex, db.dsn());
    auto sub = co_await listener.subscribe("c");

    asio::cancellation_signal cancel;
    std::optional<pg::error> failure;
    asio::steady_timer finished(ex, asio::steady_timer::time_point::max());
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          failure = co_await expect_error(sub.next());
          finished.cancel();
        },
        asio::bind_cancellation_slot(cancel.slot(), asio::detached));
    co_await asio::post(ex, asio::use_awaitable);  // let it start waiting
    cancel.emit(asio::cancellation_type::terminal);
    std::error_code ec;
    co_await finished.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    REQUIRE(failure);
    CHECK(failure->code() == asio::error::operation_aborted);
    CHECK(listener.is_open());
  });
}

TEST_CASE("a cancelled slow query returns promptly; the next query gets its own answer",
          "[pg][cancel]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const auto start = std::chrono::steady_clock::now();
    auto raced = co_await (conn.query("SELECT pg_sleep(0.3), 'slow'") || after(50ms));
    CHECK(raced.index() == 1);
    CHECK(since(start) < 250ms);

    // Its answer arrives later and is discarded; this one is not confused with it.
    auto r = co_await conn.query("SELECT $1::text", pg::params{"fast"});
    CHECK(r.get<std::string>(0, 0) == "fast");
    CHECK(since(start) >= 300ms);
  });
}

TEST_CASE("a query cancelled before it is sent is not run", "[pg][cancel]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    co_await conn.query("CREATE TABLE t (x int)");
    // Queued behind a script that holds the pipeline, so still unsent when cancelled.
    auto script = [](pg::connection c) -> asio::awaitable<void> {
      co_await c.execute_script("SELECT pg_sleep(0.2);");
    };
    auto raced = co_await ((script(conn) && conn.query("INSERT INTO t VALUES (1)")) || after(50ms));
    CHECK(raced.index() == 1);
    co_await conn.execute_script("SELECT 1;");  // waits for the cancelled script to drain
    auto n = co_await conn.query("SELECT count(*) FROM t");
    CHECK(n.get<std::int64_t>(0, 0) == 0);
  });
}

}  // namespace pg_cancel_test
