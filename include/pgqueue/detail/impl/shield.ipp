// Out-of-line definitions of pgqueue/detail/shield.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/detail/shield.hpp"

namespace pgqueue::detail {

PGQUEUE_DECL asio::awaitable<void> shielded(asio::awaitable<void> op) {
  auto ex = co_await asio::this_coro::executor;
  co_await asio::co_spawn(
      ex, std::move(op),
      asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

PGQUEUE_DECL asio::awaitable<bool> cancelled() {
  auto state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() != asio::cancellation_type::none;
}

}  // namespace pgqueue::detail
