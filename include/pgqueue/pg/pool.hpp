// pg::pool: sessions to one server, each held by one coroutine at a time (for transactions).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/concurrent_channel.hpp>
#include <asio/post.hpp>
#include <asio/query.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/detail/context_shutdown.hpp"
#include "pgqueue/pg/detail/pool_state.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/pool_options.hpp"

namespace pgqueue::pg {

namespace detail {

void check_pool_options(const pool_options& o);

// The pool shared by its handles and by the sessions handed out (which come back to it).
class pool_impl : public std::enable_shared_from_this<pool_impl> {
 public:
  using clock = std::chrono::steady_clock;

  pool_impl(asio::any_io_executor ex, std::string conninfo, pool_options o)
      : ex_(std::move(ex)),
        conninfo_(std::move(conninfo)),
        options_(o),
        state_(o.min_size, o.max_size),
        reaper_(asio::make_strand(ex_)) {}

  ~pool_impl() {
    if (shutdown_registry_) context_shutdown::remove(*shutdown_registry_, this);
  }

  const pool_options& options() const noexcept { return options_; }

  // Closes the pool when its execution context shuts down (an io_context destroyed while a
  // coroutine holds a session and another waits for one). From then on nobody is woken: the
  // context's shutdown destroys the waiting frames, and the holders' frames give their
  // sessions back as it does, after Asio's channel service may have freed the waits.
  void close_at_context_shutdown();

  // Opens min_size sessions (one after another: a failure fails the pool's open). They go
  // idle together at the end: given back one by one, the next acquire would take the last.
  asio::awaitable<void> fill();

  asio::awaitable<connection> acquire();

  // A session comes back (any thread). One left inside a transaction, or with statements
  // still unanswered, is rolled back first (after those, in pipeline order); a closed one
  // frees its slot.
  void give_back(connection c) noexcept;

  // The session lent to nobody: taken once (as an acquire) and kept until close().
  asio::awaitable<connection> shared();

  // Returns the sessions it closed (idle ones and the shared one).
  std::vector<connection> close();

  struct counts {
    std::size_t size, idle, waiting;
  };
  counts stats() {
    std::lock_guard lock(m_);
    return {state_.size(), state_.idle(), state_.waiting()};
  }

 private:
  struct waiter {
    explicit waiter(const asio::any_io_executor& ex) : signal(ex, 1) {}
    // A wake-up only: the int carries nothing (a lone error_code signature is ambiguous in Asio
    // 1.22's channel traits).
    asio::experimental::concurrent_channel<void(std::error_code, int)> signal;
    bool handed = false;                // set under the pool's mutex
    std::optional<connection> session;  // handed: a session, or none (open one instead)
  };

  bool gone() {
    std::lock_guard lock(m_);
    return context_gone_;
  }

  // With the mutex held: gives what a give_back or discard freed to the waiter it names.
  void hand(pool_state<connection>::handover h);

  void discard() noexcept {
    std::lock_guard lock(m_);
    hand(state_.discard());
  }

  // Opens a session for a reserved slot; a failure frees the slot (for the next in line).
  asio::awaitable<connection> open_session();

  static asio::awaitable<void> reset(std::shared_ptr<pool_impl> self, connection c);

  void start_reaper();

  void reaper_cancel() {
    asio::post(reaper_.get_executor(), [self = shared_from_this()] { self->reaper_.cancel(); });
  }

  asio::any_io_executor ex_;
  std::string conninfo_;
  pool_options options_;
  std::mutex m_;
  pool_state<connection> state_;
  std::unordered_map<std::uint64_t, std::shared_ptr<waiter>> waiters_;
  std::optional<connection> shared_;  // shared(): holds its slot until close()
  bool context_gone_ = false;         // ex_'s context shut down: wake nobody (guarded by m_)
  std::shared_ptr<context_shutdown::registry> shutdown_registry_;
  asio::steady_timer reaper_;  // on a strand of ex_: armed, fired and cancelled there
};

}  // namespace detail

/// A session taken from a `pool` for its holder alone; it goes back when this handle is
/// destroyed (or `release()`d). Move-only. A session that comes back inside a transaction, or
/// with statements still unanswered (e.g. a cancelled query), is rolled back before anyone gets
/// it again (one round trip, in the background); a closed or lost one is replaced by a new one
/// when needed. Session settings (`SET` without `LOCAL`), `LISTEN`s and temporary tables stay
/// with the session: use `SET LOCAL` inside transactions.
class pooled_connection {
 public:
  pooled_connection() = default;
  pooled_connection(pooled_connection&& o) noexcept
      : pool_(std::move(o.pool_)), conn_(std::move(o.conn_)) {}
  pooled_connection& operator=(pooled_connection&& o) noexcept;
  ~pooled_connection() { release(); }

  /// The session (a `connection`: query, query_prepared, execute_script ...). Do not keep
  /// copies of it beyond this handle's life: the pool hands the session to others.
  connection& operator*() noexcept { return conn_; }
  const connection& operator*() const noexcept { return conn_; }
  connection* operator->() noexcept { return &conn_; }
  const connection* operator->() const noexcept { return &conn_; }

  /// Whether this handle holds a session.
  explicit operator bool() const noexcept { return pool_ != nullptr; }

  /// Gives the session back now. No round trip (a reset, if needed, runs in the background).
  void release() noexcept {
    if (auto p = std::exchange(pool_, nullptr)) p->give_back(std::exchange(conn_, connection()));
  }

 private:
  friend class pool;
  pooled_connection(std::shared_ptr<detail::pool_impl> p, connection c)
      : pool_(std::move(p)), conn_(std::move(c)) {}

  std::shared_ptr<detail::pool_impl> pool_;
  connection conn_;
};

/// Sessions to one server, each lent to one holder at a time: what transactions need (a
/// shared, pipelined `connection` would sweep other coroutines' statements into them).
/// Copies share the pool. Thread-safe: acquire from any executor. Sessions connect and
/// reconnect as `connect` does (`pool_options::connect`); one dropped inside a transaction
/// is not replaced but discarded.
class pool {
 public:
  /// An empty handle: acquire fails with `errc::closed`.
  pool() = default;

  /// Opens `options.min_size` sessions (each as `connect`: several round trips) on `ex`, where
  /// the pool's sessions and its idle-timeout timer run. Throws as `connect`, and
  /// `errc::invalid_argument` naming an option outside its range (see pool_options).
  static asio::awaitable<pool> open(asio::any_io_executor ex, std::string conninfo,
                                    pool_options options = {});

  /// A session for the caller alone: an idle one (no round trip), else a new one while
  /// fewer than `max_size` are open (as `connect`), else the first to come back, in the
  /// order callers asked. Throws `errc::pool_timeout` after `acquire_timeout`, `errc::closed`
  /// once the pool is closed, connect errors for a new session, and `operation_aborted` when
  /// cancelled (a session handed over meanwhile goes back: nothing is lost).
  asio::awaitable<pooled_connection> acquire() const;

  /// The pool's shared session: one pipelined `connection` for statements that need no session
  /// of their own (autocommit statements, LISTEN, a queue's claims and acks), used by any number
  /// of callers at once, as a `connect`ed one is. Taken from the pool at the first call (as
  /// `acquire`, counting towards `max_size`) and kept until the pool is closed; later calls
  /// return it at once. Never use it for `BEGIN`: that is what `transaction` is for. Throws as
  /// `acquire`.
  asio::awaitable<connection> shared() const;

  /// Closes the idle sessions and the shared one, and fails waiting and later acquires with
  /// `errc::closed`; sessions in use close when they come back. Does not wait.
  void close() {
    if (impl_) impl_->close();
  }

  /// As `close()`, awaitable (`co_await pool.close(asio::use_awaitable)`): returns once the
  /// idle sessions and the shared one are closed (see `connection::close(use_awaitable)`).
  /// Sessions lent out close when they come back, not awaited here. No round trip.
  asio::awaitable<void> close(asio::use_awaitable_t<> token) const;

  /// Sessions open (in use and idle), idle, and acquirers waiting. Any thread.
  struct counts {
    std::size_t size = 0, idle = 0, waiting = 0;
  };
  counts stats() const {
    if (!impl_) return {};
    auto c = impl_->stats();
    return {c.size, c.idle, c.waiting};
  }

  /// Whether this handle refers to a pool (one `open` made, or a copy of it).
  explicit operator bool() const noexcept { return impl_ != nullptr; }

  /// The options the pool was opened with.
  const pool_options& options() const {
    static const pool_options none;
    return impl_ ? impl_->options() : none;
  }

 private:
  explicit pool(std::shared_ptr<detail::pool_impl> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<detail::pool_impl> impl_;
};

}  // namespace pgqueue::pg

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/impl/pool.ipp"
#endif
