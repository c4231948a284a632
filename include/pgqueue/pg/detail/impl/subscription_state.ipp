// Out-of-line definitions of pgqueue/pg/detail/subscription_state.hpp: included at its end
// (header-only), or compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/subscription_state.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void subscription_state::deliver(notification n) {
  const auto seq = received_.fetch_add(1, std::memory_order_acq_rel) + 1;
  while (!waiters_.empty() && waiters_.front()->done()) waiters_.pop_front();
  if (!waiters_.empty()) {
    auto op = std::move(waiters_.front());
    waiters_.pop_front();
    op->complete(nullptr, std::move(n));
    return;
  }
  buffer_.push_back({seq, std::move(n)});
  if (buffer_.size() > capacity_) {
    buffer_.pop_front();
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

PGQUEUE_DECL void subscription_state::wait(operation_ptr<notification> op, std::uint64_t after) {
  while (!buffer_.empty() && buffer_.front().first <= after) buffer_.pop_front();
  if (!buffer_.empty()) {
    auto n = std::move(buffer_.front().second);
    buffer_.pop_front();
    op->complete(nullptr, std::move(n));
  } else if (failure_) {
    op->complete(failure_);
  } else {
    std::erase_if(waiters_, [](const auto& w) { return w->done(); });
    waiters_.push_back(std::move(op));
  }
}

}  // namespace pgqueue::pg::detail
