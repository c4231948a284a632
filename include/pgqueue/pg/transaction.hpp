// pg::transaction: a transaction on a pooled session, manual (begin ... commit) or scoped
// (in_transaction: commit when the body returns, roll back when it throws, run it again after a
// serialization failure or deadlock).
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/error.hpp>
#include <asio/this_coro.hpp>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/params.hpp"
#include "pgqueue/pg/pool.hpp"
#include "pgqueue/pg/result.hpp"
#include "pgqueue/pg/transaction_options.hpp"

namespace pgqueue::pg {

/// Whether `e` is a failure that running the transaction again may cure (40001, 40P01).
inline bool retryable(const error& e) noexcept {
  return e.sqlstate() == "40001" || e.sqlstate() == "40P01";
}

/// A transaction on a session of its own, taken from a pool. Move-only. It ends with `commit()`
/// or `rollback()`; destroyed while still open, it is rolled back (the session goes back to
/// the pool, which rolls it back before lending it again). Statements run one after another
/// (each awaited); only this transaction's statements run on its session.
///
/// Failures: a statement's server error leaves the transaction failed (PostgreSQL ignores
/// later statements until the rollback): roll back, or let it be destroyed. A dropped session
/// fails the statement with `connection_lost` and ends the transaction (rolled back by the
/// server; nothing is replayed on a new session). A drop while COMMIT is in flight fails
/// `commit()` with `errc::commit_unknown`: the transaction may or may not have committed; find
/// out from the data (e.g. a row it wrote), and make what it does idempotent where that
/// matters.
class transaction {
 public:
  /// A handle without a transaction (`active()` is false).
  transaction() = default;
  transaction(transaction&& o) noexcept
      : conn_(std::move(o.conn_)),
        active_(std::exchange(o.active_, false)),
        cancelled_(std::exchange(o.cancelled_, false)),
        on_end_(std::move(o.on_end_)) {}
  transaction& operator=(transaction&& o) noexcept;
  ~transaction() { abandon(); }

  /// Takes a session from `p` (see pool::acquire) and begins a transaction on it: one round
  /// trip after the acquire. Throws as pool::acquire, and the server's error for BEGIN.
  static asio::awaitable<transaction> begin(const pool& p, transaction_options options = {});

  /// Runs one statement in the transaction (as connection::query: one round trip). Throws
  /// `errc::closed` once the transaction has ended.
  asio::awaitable<result> query(std::string_view sql, params args = {}) const {
    if (!active_) return detail::fail_awaitable<result>(ended());
    auto op = conn_->query(sql, std::move(args));
    return cancel_fails_transaction(std::move(op));
  }

  /// As query, as a prepared statement of the session (for statements run many times).
  asio::awaitable<result> query_prepared(std::string_view sql, params args = {}) const {
    if (!active_) return detail::fail_awaitable<result>(ended());
    auto op = conn_->query_prepared(sql, std::move(args));
    return cancel_fails_transaction(std::move(op));
  }

  /// As query_prepared, for a statement whose answer must not be lost: a cancellation stops it
  /// only before it is sent (see connection::query_prepared with cancel_until_sent).
  asio::awaitable<result> query_prepared(std::string_view sql, params args,
                                         cancel_until_sent_t) const {
    if (!active_) return detail::fail_awaitable<result>(ended());
    return conn_->query_prepared(sql, std::move(args), cancel_until_sent);
  }

  /// Commits: one round trip; the session goes back to the pool. After a statement of the
  /// transaction was cancelled (it may have run), rolls back instead and throws 25P02. Throws
  /// `errc::commit_unknown` when the session drops while COMMIT is in flight;
  /// `errc::connection_lost` when it was lost before (rolled back); the server's error when the
  /// commit fails (e.g. 40001 under `serializable`, a deferred constraint): then it was rolled
  /// back; `errc::server_error` with SQLSTATE 25P02 when an earlier statement had failed
  /// (PostgreSQL then rolls back instead). Not cancellable once sent (its outcome must be known).
  asio::awaitable<void> commit();

  /// Rolls back: one round trip; the session goes back to the pool. A dropped session counts as
  /// rolled back (the server rolls back what it did not commit).
  asio::awaitable<void> rollback();

  /// Whether the transaction is open (begun, not committed or rolled back).
  bool active() const noexcept { return active_; }

  /// The session (for what `query` does not cover; do not keep it beyond the transaction).
  const connection& session() const noexcept {
    static const connection none;
    return conn_ ? *conn_ : none;
  }

  /// Calls `f(committed)` when the transaction ends (after COMMIT's answer, or the rollback;
  /// `committed` false also when the outcome is unknown). For work whose fate follows the
  /// transaction's (a lease acked inside it).
  void on_end(std::function<void(bool committed)> f) { on_end_.push_back(std::move(f)); }

 private:
  static std::string begin_sql(const transaction_options& o);

  // A statement cancelled after it may have been sent may still run: the caller cannot know
  // what the transaction did, so it can no longer commit (commit() rolls back instead).
  asio::awaitable<result> cancel_fails_transaction(asio::awaitable<result> op) const;

  static std::exception_ptr ended() {
    return std::make_exception_ptr(
        error(errc::closed, "the transaction has ended (or never began)"));
  }

  void check_active() const {
    if (!active_) std::rethrow_exception(ended());
  }

  void end(bool committed) noexcept {
    auto hooks = std::move(on_end_);
    on_end_.clear();
    conn_.release();
    for (auto& f : hooks) f(committed);
  }

  // Destroyed or moved over while open: the pool rolls the session back.
  void abandon() noexcept {
    if (std::exchange(active_, false)) end(false);
  }

  pooled_connection conn_;
  bool active_ = false;
  mutable bool cancelled_ = false;  // a statement was cancelled: commit() rolls back
  std::vector<std::function<void(bool)>> on_end_;
};

namespace detail {

// in_transaction's loop, over a type-erased body: a coroutine frame holding the caller's
// lambda type would have no linkage (GCC warns about that in headers and unity builds).
template <class T>
asio::awaitable<T> run_in_transaction(pool p, std::function<asio::awaitable<T>(transaction&)> body,
                                      transaction_options options) {
  for (int attempt = 1;; ++attempt) {
    auto tx = co_await transaction::begin(p, options);
    std::exception_ptr failure;
    try {
      if constexpr (std::is_void_v<T>) {
        co_await body(tx);
        co_await tx.commit();
        co_return;
      } else {
        auto value = co_await body(tx);
        co_await tx.commit();
        co_return value;
      }
    } catch (const error& e) {
      if (!retryable(e) || attempt >= options.max_attempts) failure = std::current_exception();
    } catch (...) {
      failure = std::current_exception();
    }
    // Rolled back before the failure goes on (or the body runs again), so what the caller does
    // next (e.g. nack the job the body was writing for) does not wait on this transaction's
    // locks. A cancelled caller leaves that to the pool (a ROLLBACK sent now would be cancelled).
    const auto state = co_await asio::this_coro::cancellation_state;
    if (tx.active() && state.cancelled() == asio::cancellation_type::none) co_await tx.rollback();
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace detail

/// Runs `body(transaction&)` in a transaction on a session of `p`: commits when it returns,
/// rolls back when it throws (and rethrows), and runs it again in a new transaction when it or
/// the commit fails with 40001 or 40P01, up to `options.max_attempts` runs in all (the last
/// failure is thrown). Returns what the body returns. The body must be safe to run again:
/// only its database work is undone. `errc::commit_unknown` is thrown, not retried. `body` is
/// kept (copied or moved) until the call completes.
template <class Body>
auto in_transaction(const pool& p, Body body, transaction_options options = {})
    -> std::invoke_result_t<Body&, transaction&> {
  using value_type = typename std::invoke_result_t<Body&, transaction&>::value_type;
  return detail::run_in_transaction<value_type>(
      p, std::function<asio::awaitable<value_type>(transaction&)>(std::move(body)), options);
}

}  // namespace pgqueue::pg

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/impl/transaction.ipp"
#endif
