// Out-of-line definitions of pgqueue/pg/subscription.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/subscription.hpp"

namespace pgqueue::pg {

PGQUEUE_DECL subscription& subscription::operator=(subscription&& other) noexcept {
  if (this != &other) {
    unsubscribe();
    impl_ = std::move(other.impl_);
    state_ = std::move(other.state_);
  }
  return *this;
}

PGQUEUE_DECL asio::awaitable<notification> subscription::next_after(std::uint64_t seen) const {
  if (!state_) {
    return detail::fail_awaitable<notification>(
        detail::make_error(errc::closed, "subscription is empty or unsubscribed"));
  }
  return detail::async_start<notification>(
      impl_->strand(),
      [impl = impl_, state = state_, seen](detail::operation_ptr<notification> op) {
        impl->wait_notification(state, std::move(op), seen);
      },
      asio::use_awaitable);
}

}  // namespace pgqueue::pg
