// Runs an awaitable to completion even if the awaiting coroutine is cancelled meanwhile. For
// requests whose answer must not be dropped (a claim that took jobs on the server), so that
// cancellation only ever interrupts waits.
#pragma once

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace pgqueue::detail {

template <class T>
asio::awaitable<T> shielded(asio::awaitable<T> op) {
  auto ex = co_await asio::this_coro::executor;
  // An unconnected slot: the caller's cancellation is not forwarded to `op`.
  co_return co_await asio::co_spawn(
      ex, std::move(op), asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
}

}  // namespace pgqueue::detail
