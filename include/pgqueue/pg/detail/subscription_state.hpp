// Per-subscription buffer and waiters; lives on the connection's strand.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/notification.hpp"

namespace pgqueue::pg::detail {

/// Queue between the reader loop and `subscription::next()`. Notifications that arrive while
/// nobody waits are buffered (newest `capacity` kept) so none are lost between two waits.
class subscription_state {
 public:
  explicit subscription_state(std::string channel, std::size_t capacity = 1024)
      : channel_(std::move(channel)), capacity_(capacity == 0 ? 1 : capacity) {}

  const std::string& channel() const noexcept { return channel_; }
  /// Notifications discarded because the buffer was full (any thread).
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  /// Notifications delivered so far, buffered or handed to a waiter (any thread).
  std::uint64_t received() const noexcept { return received_.load(std::memory_order_acquire); }

  void deliver(notification n);

  /// Completes `op` with the oldest buffered notification, or when the next one arrives;
  /// buffered ones among the first `after` received are discarded first (the waiter has
  /// accounted for them).
  void wait(operation_ptr<notification> op, std::uint64_t after = 0);

  /// Ends the subscription: current waiters fail now, later waits once the buffer is drained.
  void fail(std::exception_ptr e) {
    if (!failure_) failure_ = std::move(e);
    auto waiters = std::exchange(waiters_, {});
    for (auto& w : waiters) w->complete(failure_);
  }

 private:
  std::string channel_;
  std::size_t capacity_;
  std::deque<std::pair<std::uint64_t, notification>> buffer_;  // with their sequence numbers
  std::deque<operation_ptr<notification>> waiters_;
  std::exception_ptr failure_;
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> received_{0};
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/subscription_state.ipp"
#endif
