// Small helpers for coroutine tests: timers and bounded waits on the database's state.
// Never put a co_await with side effects inside CHECK/REQUIRE: with GCC 12, Catch2's macros
// evaluate it twice (the second time in their never-taken `false && (expr)` branch). Await into
// a variable, then check it; a repeated bounded wait (eventually) is harmless.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
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
inline asio::awaitable<bool> eventually(
    std::function<bool()> condition, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    co_await pause(std::chrono::milliseconds(10));
  }
  co_return true;
}

// Lets the executor run `n` other handlers' worth of steps: `n` round trips through its queue.
inline asio::awaitable<void> hops(int n) {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < n; ++i) co_await asio::post(ex, asio::use_awaitable);
}

// Awaits `op` and, once `op` has first suspended and then `trigger` completed, emits a cancellation
// of `type` on it unless `op` has returned by then. Returns once `op` has returned: what it threw,
// or null.
inline asio::awaitable<std::exception_ptr> cancelled_by(asio::awaitable<void> op,
                                                        asio::awaitable<void> trigger,
                                                        asio::cancellation_type type) {
  auto ex = co_await asio::this_coro::executor;
  struct state {
    asio::cancellation_signal signal;
    bool done = false;
  };
  auto s = std::make_shared<state>();
  auto fire = [](std::shared_ptr<state> s, asio::awaitable<void> trigger,
                 asio::cancellation_type type) -> asio::awaitable<void> {
    // co_spawn may run this at once: `op` is started (up to its first suspension) first, so
    // that the signal has a handler to reach.
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_await std::move(trigger);
    if (!s->done) s->signal.emit(type);
  };
  asio::co_spawn(ex, fire(s, std::move(trigger), type), asio::detached);
  std::exception_ptr failure;
  try {
    co_await asio::co_spawn(ex, std::move(op),
                            asio::bind_cancellation_slot(s->signal.slot(), asio::use_awaitable));
  } catch (...) {
    failure = std::current_exception();
  }
  s->done = true;
  co_return failure;
}

}  // namespace pgq_test
