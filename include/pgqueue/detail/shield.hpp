// Cancellation helpers. shielded() runs an awaitable to completion even if the awaiting
// coroutine is cancelled meanwhile: for requests whose answer must not be dropped (a claim
// that took jobs on the server, an ack), so that cancellation only ever interrupts waits.
#pragma once

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/error.hpp"

namespace pgqueue::detail {

template <class T>
asio::awaitable<T> shielded(asio::awaitable<T> op) {
  auto ex = co_await asio::this_coro::executor;
  // An unconnected slot: the caller's cancellation is not forwarded to `op`.
  co_return co_await asio::co_spawn(
      ex, std::move(op),
      asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

// GCC 12 miscompiles `co_return co_await e;` for a void `e` (the coroutine ends in an illegal
// instruction), hence the separate form.
asio::awaitable<void> shielded(asio::awaitable<void> op);

/// Whether the calling coroutine has been cancelled (its next async wait would throw).
asio::awaitable<bool> cancelled();

/// The error a cancelled pgqueue operation throws, as a cancelled wait of the connection does.
inline pg::error cancelled_error(const char* what) {
  return pg::error(asio::error::operation_aborted, what);
}

/// Throws cancelled_error(what) when `state` (the calling coroutine's, from
/// `co_await asio::this_coro::cancellation_state`) says it was cancelled: for operations that
/// must refuse before they change anything.
inline void throw_if_cancelled(const asio::cancellation_state& state, const char* what) {
  if (state.cancelled() != asio::cancellation_type::none) throw cancelled_error(what);
}

}  // namespace pgqueue::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/detail/impl/shield.ipp"
#endif
