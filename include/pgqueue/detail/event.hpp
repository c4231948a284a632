// A wake-up for coroutines on one executor: wait() returns when notify() is called after the
// wait began, when `limit` passes, or when the wait is cancelled. Built on a timer that never
// expires: notify() cancels its waits.
#pragma once

#include <chrono>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

namespace pgqueue::detail {

class event {
 public:
  explicit event(const asio::any_io_executor& ex) : timer_(ex) {
    timer_.expires_at(asio::steady_timer::time_point::max());
  }

  // Wakes every current waiter.
  void notify() { timer_.expires_at(asio::steady_timer::time_point::max()); }

  asio::awaitable<void> wait(std::chrono::milliseconds limit) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer deadline(timer_.get_executor(), limit);
    std::error_code a, b;
    co_await (timer_.async_wait(asio::redirect_error(asio::use_awaitable, a)) ||
              deadline.async_wait(asio::redirect_error(asio::use_awaitable, b)));
  }

 private:
  asio::steady_timer timer_;
};

}  // namespace pgqueue::detail
