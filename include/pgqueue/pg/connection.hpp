// An asynchronous PostgreSQL connection: pipelined statements, scripts and LISTEN.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/connect_options.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/detail/connection_impl.hpp"
#include "pgqueue/pg/detail/identifier.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/subscription_state.hpp"
#include "pgqueue/pg/detail/to_text.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/params.hpp"
#include "pgqueue/pg/result.hpp"
#include "pgqueue/pg/subscription.hpp"

namespace pgqueue::pg {

/// Tag for a statement that a cancellation may stop only before it is sent: see
/// `connection::query_prepared(sql, args, cancel_until_sent)`.
struct cancel_until_sent_t {
  explicit cancel_until_sent_t() = default;
};
inline constexpr cancel_until_sent_t cancel_until_sent{};

/// A shared handle to one server session; copies refer to the same session, and the session
/// closes when the last copy (and last subscription) is gone. Any number of coroutines may use
/// it at once: statements are pipelined and each gets its own answer. All work runs on a strand
/// of the executor given to `connect`, so a multi-threaded io_context is fine. Every wait
/// honours Asio per-operation cancellation (e.g. `||` with a timer) and then fails with
/// `asio::error::operation_aborted`. Failures are thrown as `pg::error`. When the server drops
/// the session, a new one replaces it (see `connect_options` for what that means for requests,
/// subscriptions and session state); `close()` or the last copy going away ends it for good.
class connection {
 public:
  /// An empty handle: not open; operations fail with `errc::closed`.
  connection() = default;

  /// Runs one parameterised statement (`$1`, `$2`, ... bound from `args`, never spliced into
  /// the SQL). One round trip, pipelined with other requests on this connection. Throws a
  /// server error (`errc::server_error`, with SQLSTATE) if the statement fails — other requests
  /// are unaffected; `errc::connection_lost`/`closed` if the session ends first (or while
  /// reconnecting, if no new session comes within `reconnect_wait`); `errc::statement_timeout`
  /// when the client-side statement deadline passes;
  /// `errc::invalid_argument` for SQL text with a NUL byte or more than 65535 parameters;
  /// `errc::protocol_error` for a statement this layer cannot follow (COPY): its session is
  /// then replaced as if dropped (other requests sent on it fail with `connection_lost`).
  /// If cancelled after sending, the statement still runs on the server; its answer is
  /// discarded and the connection stays usable.
  asio::awaitable<result> query(std::string_view sql, params args = {}) const {
    return statement(sql, std::move(args), false);
  }

  /// As `query`, for a statement run many times: it becomes a prepared statement of the
  /// session, so the server parses and plans it once per session rather than on every call
  /// (the first call sends the Parse in the same round trip). Each distinct text keeps a
  /// prepared statement for the session's life: for fixed SQL text, not text built per call.
  /// A `DEALLOCATE` of it by the application fails the next call with SQLSTATE 26000; the call
  /// after that prepares it again.
  asio::awaitable<result> query_prepared(std::string_view sql, params args = {}) const {
    return statement(sql, std::move(args), true);
  }

  /// As `query_prepared`, for a statement whose answer must not be lost (one that takes or
  /// commits something the caller must record): a cancellation of the awaiting coroutine stops
  /// it only while it has not been sent (waiting behind a script, or for a new session while
  /// reconnecting); it then fails with operation_aborted and never runs. Once sent, the call
  /// ignores the cancellation and returns the answer; the caller sees the cancellation in
  /// `asio::this_coro::cancellation_state` afterwards.
  asio::awaitable<result> query_prepared(std::string_view sql, params args,
                                         cancel_until_sent_t) const {
    return statement(sql, std::move(args), true, true);
  }

  /// Runs multi-statement SQL text (transactions, DO blocks, function bodies) with the simple
  /// query protocol. One round trip, but it waits for earlier requests to be answered and
  /// holds later ones back until it is done. Throws the first statement's error (the server
  /// skips the rest of the text after an error), or the connection errors as for `query`.
  asio::awaitable<void> execute_script(std::string_view sql) const;

  /// LISTENs on `channel` (any text up to 63 bytes without NUL; quoted as an identifier, so
  /// quotes, spaces and non-ASCII are fine) and returns once the server confirmed it: one round
  /// trip. Throws `errc::invalid_argument` for an unusable name. Survives reconnects (see
  /// `notification::reconnected`).
  asio::awaitable<subscription> subscribe(std::string channel) const {
    return do_subscribe(impl_, std::move(channel));
  }

  /// Opens another, independent session like this one: the same conninfo (server, user,
  /// settings) and connect_options, on the same executor. As `connect`: several round trips,
  /// and its errors. Throws `errc::closed` for an empty handle.
  asio::awaitable<connection> connect_another() const;

  /// Whether the connection is usable: open, or reconnecting after a drop (requests then wait
  /// for the new session). False once closed, or lost for good. Any thread.
  bool is_open() const noexcept { return impl_ && impl_->is_open(); }

  /// Closes the session for every copy of this handle: pending and later operations fail
  /// with `errc::closed`. Does not wait.
  void close() {
    if (impl_) impl_->close();
  }

  /// As `close()`, awaitable (`co_await db.close(asio::use_awaitable)`): returns once the
  /// session is closed, its socket shut (the server told with libpq's Terminate message) and
  /// every pending operation failed with `errc::closed`. No round trip: nothing waits for the
  /// server. At once for an empty handle. Cancellation: ignored (the close is under way, and
  /// the wait is a handler's turn on the connection's strand).
  asio::awaitable<void> close(asio::use_awaitable_t<> token) const;

  /// Whether two handles are copies of one connection. No round trip.
  friend bool operator==(const connection& a, const connection& b) noexcept {
    return a.impl_ == b.impl_;
  }

  /// The strand all of this connection's work runs on.
  asio::any_io_executor get_executor() const {
    return impl_ ? asio::any_io_executor(impl_->strand()) : asio::any_io_executor();
  }

  /// The server process ID of the current session: a new one after each reconnect; 0 while
  /// reconnecting, when closed, or for an empty handle. Any thread.
  int backend_pid() const noexcept { return impl_ ? impl_->backend_pid() : 0; }

  /// Whether the session was inside a transaction block (`BEGIN` ... not yet ended) when its
  /// last answer came. Any thread; no round trip.
  bool in_transaction() const noexcept { return impl_ && impl_->in_transaction(); }

  /// Statements and scripts sent or queued on this connection and not answered yet (by any
  /// copy of the handle). Any thread; no round trip.
  std::uint32_t outstanding() const noexcept { return impl_ ? impl_->outstanding() : 0; }

  /// How many times a dropped session was replaced by a new one. Any thread.
  std::uint64_t reconnects() const noexcept { return impl_ ? impl_->reconnects() : 0; }

  /// Reconnect attempts made so far, failed ones included (to watch the back-off). Any thread.
  std::uint64_t reconnect_attempts() const noexcept {
    return impl_ ? impl_->reconnect_attempts() : 0;
  }

 private:
  friend asio::awaitable<connection> connect(asio::any_io_executor, std::string, connect_options);

  explicit connection(std::shared_ptr<detail::connection_impl> impl) : impl_(std::move(impl)) {}

  std::exception_ptr check(std::string_view sql, std::size_t param_count) const;

  asio::awaitable<result> statement(std::string_view sql, params args, bool prepared,
                                    bool keep_once_sent = false) const;

  static asio::awaitable<void> discard(asio::awaitable<result> a) { co_await std::move(a); }

  static asio::awaitable<subscription> do_subscribe(std::shared_ptr<detail::connection_impl> impl,
                                                    std::string channel);

  std::shared_ptr<detail::connection_impl> impl_;  // application handle (closes on last copy)
};

namespace detail {

/// Throws `errc::invalid_argument` naming the first option outside its documented range (see
/// connect_options): a negative or enormous duration would make the reconnect loop spin or
/// overflow clock arithmetic. No allocation unless it throws.
void check_connect_options(const connect_options& o);

}  // namespace detail

/// Opens a session without blocking the executor: libpq's non-blocking connect driven by socket
/// readiness. `conninfo` is any libpq connection string or URI (unix socket, TCP, TLS options,
/// several hosts). Several round trips (startup, authentication). Throws `errc::connect_failed`
/// with libpq's explanation (a password in `conninfo` is masked), `errc::connect_timeout`
/// after `options.connect_timeout`, `errc::invalid_argument` for a NUL byte in `conninfo` or an
/// option outside its range (see connect_options; before connecting), or operation_aborted when
/// cancelled. The first connect is not retried (a wrong conninfo should fail fast); only an
/// established session is replaced. With several hosts (`host=a,b`) libpq tries them in order
/// and honours `target_session_attrs` (e.g. `read-write`), on the first connect and on every
/// reconnect.
asio::awaitable<connection> connect(asio::any_io_executor ex, std::string conninfo,
                                    connect_options options = {});

}  // namespace pgqueue::pg

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/impl/connection.ipp"
#endif
