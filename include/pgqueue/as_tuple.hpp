// pgqueue::as_tuple: an operation's failure as a value, for failures that are routine.
#pragma once

#include <optional>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include <asio/awaitable.hpp>

namespace pgqueue {

/// What `as_tuple` gives back beside the error code: the operation's result, or a
/// `std::optional` of it when the type has no empty state of its own (a `lease`).
template <class T>
using as_tuple_value_t =
    std::conditional_t<std::is_default_constructible_v<T>, T, std::optional<T>>;

/// Awaits `op` and hands its failure back as a value instead of throwing, as
/// `asio::experimental::as_tuple` does for Asio's own operations, for failures a program expects (a lost lease, a dropped
/// session, a refused argument, a cancel):
///
///     auto [ec] = co_await pgqueue::as_tuple(lease.ack());
///     if (ec == pgqueue::errc::lease_lost) { /* someone else holds the job now */ }
///
/// The tuple is `(std::error_code)` for an `awaitable<void>` and `(std::error_code, value)`
/// otherwise, the value empty (default or `std::nullopt`) on failure. Every pgqueue failure
/// (`pgqueue::error`) and Asio's (`operation_aborted` on a cancel) is a `std::system_error`
/// and becomes the code; the server's message and SQLSTATE stay with the exception form
/// (`e.what()`, `e.sqlstate()`), so use that where they matter. Anything else (a handler's own
/// exception, `std::bad_alloc`) still propagates. Costs no round trip and changes nothing
/// about `op`: its cancellation, its effects, and what a cancel leaves behind are as documented
/// for it.
template <class T>
asio::awaitable<std::tuple<std::error_code, as_tuple_value_t<T>>> as_tuple(asio::awaitable<T> op) {
  std::error_code ec;
  try {
    co_return std::tuple<std::error_code, as_tuple_value_t<T>>{std::error_code{},
                                                               co_await std::move(op)};
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  co_return std::tuple<std::error_code, as_tuple_value_t<T>>{ec, as_tuple_value_t<T>{}};
}

/// As above, for an operation without a result (`ack`, `release`, `watch`, ...).
inline asio::awaitable<std::tuple<std::error_code>> as_tuple(asio::awaitable<void> op) {
  std::error_code ec;
  try {
    co_await std::move(op);
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  co_return std::tuple<std::error_code>{ec};
}

}  // namespace pgqueue
