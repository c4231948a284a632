// A LISTEN on one channel, owned by the application.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/connection_impl.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/subscription_state.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/notification.hpp"

namespace pgqueue::pg {

class connection;

/// Receives the notifications of one channel; created by `connection::subscribe`. Move-only.
/// Notifications arriving while nobody awaits `next()` are buffered (the newest 1024 are kept;
/// `dropped()` counts the rest). Destroying it (or `unsubscribe()`) stops delivery; the channel
/// is UNLISTENed, without waiting, once no subscription on this connection wants it. Keeps the
/// connection open while it exists. Destroy it before its io_context.
class subscription {
 public:
  /// An empty subscription; `next()` fails with `errc::closed`.
  subscription() = default;
  subscription(subscription&&) noexcept = default;
  subscription& operator=(subscription&& other) noexcept;
  ~subscription() { unsubscribe(); }

  /// Waits for the next notification (buffered ones first; no round trip). Fails with
  /// `errc::connection_lost`/`errc::closed` when the connection ends (after the buffer is
  /// drained), and with `asio::error::operation_aborted` when cancelled — the subscription stays
  /// usable and no notification is lost by a cancelled wait.
  asio::awaitable<notification> next() const { return next_after(0); }

  /// As `next()`, but buffered notifications among the first `seen` this subscription
  /// received are discarded first. For a caller that read `received()`, then checked what the
  /// notifications announce (a query sent after that reading sees what they announced): it
  /// then waits only for news. No round trip.
  asio::awaitable<notification> next_after(std::uint64_t seen) const;

  /// How many notifications this subscription has received so far, including `reconnected`
  /// markers and any discarded (any thread; 0 for an empty subscription).
  std::uint64_t received() const noexcept { return state_ ? state_->received() : 0; }

  /// Whether this subscription is subscribed (not empty, moved from or unsubscribed).
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// The channel name as given to `subscribe` (empty for an empty subscription).
  const std::string& channel() const noexcept {
    static const std::string none;
    return state_ ? state_->channel() : none;
  }

  /// Notifications discarded because the buffer was full.
  std::uint64_t dropped() const noexcept { return state_ ? state_->dropped() : 0; }

  /// Stops delivery now; pending `next()` calls fail with `errc::closed`. Idempotent.
  void unsubscribe() noexcept {
    if (!state_) return;
    auto impl = std::move(impl_);
    asio::post(impl->strand(), [impl, state = std::move(state_)] { impl->unsubscribe(state); });
  }

 private:
  friend class connection;
  subscription(std::shared_ptr<detail::connection_impl> impl,
               std::shared_ptr<detail::subscription_state> state)
      : impl_(std::move(impl)), state_(std::move(state)) {}

  std::shared_ptr<detail::connection_impl> impl_;  // application handle: keeps it open
  std::shared_ptr<detail::subscription_state> state_;
};

}  // namespace pgqueue::pg

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/impl/subscription.ipp"
#endif
