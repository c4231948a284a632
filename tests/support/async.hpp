// Small helpers for coroutine tests: timers and bounded waits on the database's state.
#pragma once

#include <chrono>
#include <functional>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace pgq_test {

// Suspends the calling coroutine for `d` (lets other coroutines run).
inline asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Re-checks `condition` every 10 ms until it holds or `limit` passes; returns whether it held.
// For outcomes that happen in the background with no event to await (a destructor's nack).
inline asio::awaitable<bool> eventually(std::function<bool()> condition,
                                        std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    co_await pause(std::chrono::milliseconds(10));
  }
  co_return true;
}

}  // namespace pgq_test
