// Small coroutine helpers shared by the pg layer's tests.
#pragma once

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pgqueue/pg/connection.hpp"
#include "support/expect_error.hpp"
#include "support/server.hpp"

namespace pgq_pg_test {

namespace pg = pgqueue::pg;
using namespace std::chrono_literals;

/// Outcome of one awaited operation: its value or the pg::error it threw.
template <class T>
struct outcome {
  std::optional<T> value;
  std::optional<pg::error> failure;
};

/// Runs all `ops` concurrently on the current executor and returns their outcomes in order.
template <class T>
asio::awaitable<std::vector<outcome<T>>> gather(std::vector<asio::awaitable<T>> ops) {
  auto ex = co_await asio::this_coro::executor;
  struct shared {
    explicit shared(asio::any_io_executor ex, std::size_t n) : all_done(ex), results(n), left(n) {}
    asio::steady_timer all_done;  // cancelled when the last one finishes: an event, not a sleep
    std::vector<outcome<T>> results;
    std::size_t left;
  };
  auto s = std::make_shared<shared>(ex, ops.size());
  s->all_done.expires_at(asio::steady_timer::time_point::max());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    asio::co_spawn(
        ex,
        [](std::shared_ptr<shared> s, asio::awaitable<T> op,
           std::size_t i) -> asio::awaitable<void> {
          try {
            s->results[i].value.emplace(co_await std::move(op));
          } catch (const pg::error& e) {
            s->results[i].failure.emplace(e);
          }
          if (--s->left == 0) s->all_done.cancel();
        }(s, std::move(ops[i]), i),
        asio::detached);
  }
  if (s->left > 0) {
    std::error_code ec;
    co_await s->all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return std::move(s->results);
}

using pgq_test::expect_error;

/// The pg::error a connect to `conninfo` fails with (fails the test if it connects).
inline pg::error connect_error(const std::string& conninfo, pg::connect_options options = {}) {
  // co_spawn needs a default-constructible result, hence the optional.
  return *pgq_test::run_async([&]() -> asio::awaitable<std::optional<pg::error>> {
    auto ex = co_await asio::this_coro::executor;
    co_return co_await expect_error(pg::connect(ex, conninfo, options));
  });
}

/// Two connections to `dsn` on the current executor (e.g. a listener and a sender).
/// `options` apply to the first one.
inline asio::awaitable<std::pair<pg::connection, pg::connection>> connect_pair(
    std::string dsn, pg::connect_options options = {}) {
  auto ex = co_await asio::this_coro::executor;
  auto first = co_await pg::connect(ex, dsn, options);
  auto second = co_await pg::connect(ex, dsn);
  co_return std::pair{std::move(first), std::move(second)};
}

/// A timer wait, for racing against an operation with `||`.
inline asio::awaitable<void> after(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

inline std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace pgq_pg_test
