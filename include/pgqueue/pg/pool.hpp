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

#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/detail/context_shutdown.hpp"
#include "pgqueue/pg/detail/pool_state.hpp"
#include "pgqueue/pg/error.hpp"
#include "pgqueue/pg/pool_options.hpp"

namespace pgqueue::pg {

namespace detail {

inline void check_pool_options(const pool_options& o) {
  using namespace std::chrono_literals;
  const auto bad = errc::invalid_argument;
  check_between(bad, "pool_options::max_size", static_cast<std::int64_t>(o.max_size), 1, 1000);
  check_between(bad, "pool_options::min_size", static_cast<std::int64_t>(o.min_size), 0,
                static_cast<std::int64_t>(o.max_size));
  check_between(bad, "pool_options::idle_timeout", o.idle_timeout, std::chrono::milliseconds(1),
                std::chrono::milliseconds(24h));
  check_between(bad, "pool_options::acquire_timeout", o.acquire_timeout,
                std::chrono::milliseconds(0), std::chrono::milliseconds(24h));
  check_connect_options(o.connect);
}

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
  void close_at_context_shutdown() {
    auto& ctx = asio::query(ex_, asio::execution::context);
    shutdown_registry_ = asio::use_service<context_shutdown>(ctx).shared_registry();
    context_shutdown::add(*shutdown_registry_, this, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        {
          std::lock_guard lock(self->m_);
          self->context_gone_ = true;
        }
        self->close();
      }
    });
  }

  // Opens min_size sessions (one after another: a failure fails the pool's open). They go
  // idle together at the end: given back one by one, the next acquire would take the last.
  asio::awaitable<void> fill() {
    std::vector<connection> opened;
    for (std::size_t i = 0; i < options_.min_size; ++i) {
      {
        std::lock_guard lock(m_);
        if (state_.acquire().what != pool_state<connection>::acquire_step::kind::open) break;
      }
      opened.push_back(co_await open_session());
    }
    for (auto& c : opened) give_back(std::move(c));
    asio::post(reaper_.get_executor(), [self = shared_from_this()] { self->start_reaper(); });
  }

  asio::awaitable<connection> acquire() {
    using step = pool_state<connection>::acquire_step::kind;
    auto ex = co_await asio::this_coro::executor;
    std::shared_ptr<waiter> w;
    std::uint64_t id = 0;
    {
      std::lock_guard lock(m_);
      auto s = state_.acquire();
      if (s.what == step::take) co_return std::move(*s.session);
      if (s.what == step::closed) throw error(errc::closed, "the pool is closed");
      if (s.what == step::wait) {
        id = s.waiter;
        w = std::make_shared<waiter>(ex);
        waiters_.emplace(id, w);
      }
    }
    if (!w) co_return co_await open_session();

    // Wait for a handover, the deadline, or the caller's cancellation.
    {
      using namespace asio::experimental::awaitable_operators;
      asio::steady_timer deadline(ex, options_.acquire_timeout);
      std::error_code a, b;
      co_await (w->signal.async_receive(asio::redirect_error(asio::use_awaitable, a)) ||
                deadline.async_wait(asio::redirect_error(asio::use_awaitable, b)));
    }
    const auto state = co_await asio::this_coro::cancellation_state;
    const bool cancelled = state.cancelled() != asio::cancellation_type::none;
    {
      std::lock_guard lock(m_);
      waiters_.erase(id);
      if (!w->handed) {
        state_.leave(id);
        if (cancelled) throw error(asio::error::operation_aborted, "pool acquire cancelled");
        if (state_.closed()) throw error(errc::closed, "the pool is closed");
        throw error(errc::pool_timeout, "no pooled session came free within " +
                                            duration_text(options_.acquire_timeout) + " (all " +
                                            std::to_string(state_.size()) + " in use; max_size " +
                                            std::to_string(options_.max_size) + ")");
      }
    }
    if (w->session) {
      if (!cancelled) co_return std::move(*w->session);
      give_back(std::move(*w->session));
    } else {
      if (!cancelled) co_return co_await open_session();
      discard();
    }
    throw error(asio::error::operation_aborted, "pool acquire cancelled");
  }

  // A session comes back (any thread). One left inside a transaction, or with statements
  // still unanswered, is rolled back first (after those, in pipeline order); a closed one
  // frees its slot.
  void give_back(connection c) noexcept {
    if (!c.is_open()) return discard();
    if (gone()) {
      c.close();  // the context is shutting down: nothing runs a reset any more
      return discard();
    }
    if (c.in_transaction() || c.outstanding() > 0) {
      asio::co_spawn(ex_, reset(shared_from_this(), std::move(c)), asio::detached);
      return;
    }
    std::optional<connection> to_close;
    {
      std::lock_guard lock(m_);
      hand(state_.give_back(std::move(c), clock::now(), to_close));
    }
    if (to_close) to_close->close();
  }

  // The session lent to nobody: taken once (as an acquire) and kept until close().
  asio::awaitable<connection> shared() {
    {
      std::lock_guard lock(m_);
      if (shared_) co_return *shared_;
    }
    auto c = co_await acquire();
    std::optional<connection> spare;
    connection kept;
    {
      std::lock_guard lock(m_);
      if (!shared_) {
        shared_ = std::move(c);
      } else {
        spare = std::move(c);  // another first caller won
      }
      kept = *shared_;
    }
    if (spare) give_back(std::move(*spare));
    co_return kept;
  }

  void close() {
    std::vector<connection> idle;
    bool gone = false;
    {
      std::lock_guard lock(m_);
      auto [sessions, line] = state_.close();
      idle = std::move(sessions);
      if (shared_) {
        idle.push_back(std::exchange(shared_, std::nullopt).value());
        hand(state_.discard());  // its slot (no waiter is left to take it)
      }
      gone = context_gone_;
      for (auto id : line) {
        if (gone) break;
        if (auto it = waiters_.find(id); it != waiters_.end())
          it->second->signal.try_send(std::error_code{}, 0);
      }
    }
    for (auto& c : idle) c.close();
    if (!gone) reaper_cancel();  // else the context destroys the timer's wait itself
  }

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
  void hand(pool_state<connection>::handover h) {
    if (!h.waiter || context_gone_) return;
    auto it = waiters_.find(h.waiter);
    if (it == waiters_.end()) return;  // cannot happen: waiters leave the line and map together
    it->second->handed = true;
    it->second->session = std::move(h.session);
    it->second->signal.try_send(std::error_code{}, 0);
  }

  void discard() noexcept {
    std::lock_guard lock(m_);
    hand(state_.discard());
  }

  // Opens a session for a reserved slot; a failure frees the slot (for the next in line).
  asio::awaitable<connection> open_session() {
    try {
      co_return co_await connect(ex_, conninfo_, options_.connect);
    } catch (...) {
      discard();
      throw;
    }
  }

  static asio::awaitable<void> reset(std::shared_ptr<pool_impl> self, connection c) {
    try {
      co_await c.execute_script("ROLLBACK");
    } catch (...) {
      c.close();  // unusable or unknown: not handed out again
    }
    if (c.in_transaction() || c.outstanding() > 0) c.close();  // used again meanwhile
    self->give_back(std::move(c));
  }

  void start_reaper() {
    reaper_.expires_after(options_.idle_timeout / 2 + std::chrono::milliseconds(1));
    reaper_.async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      std::vector<connection> expired;
      {
        std::lock_guard lock(self->m_);
        if (self->state_.closed()) return;
        expired = self->state_.expire(clock::now(), self->options_.idle_timeout);
      }
      for (auto& c : expired) c.close();
      self->start_reaper();
    });
  }

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
  pooled_connection& operator=(pooled_connection&& o) noexcept {
    if (this != &o) {
      release();
      pool_ = std::move(o.pool_);
      conn_ = std::move(o.conn_);
    }
    return *this;
  }
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
                                    pool_options options = {}) {
    detail::reject_nul(conninfo, "conninfo");
    detail::check_pool_options(options);
    auto impl = std::make_shared<detail::pool_impl>(std::move(ex), std::move(conninfo), options);
    impl->close_at_context_shutdown();
    try {
      co_await impl->fill();
    } catch (...) {
      impl->close();
      throw;
    }
    co_return pool(std::move(impl));
  }

  /// A session for the caller alone: an idle one (no round trip), else a new one while
  /// fewer than `max_size` are open (as `connect`), else the first to come back, in the
  /// order callers asked. Throws `errc::pool_timeout` after `acquire_timeout`, `errc::closed`
  /// once the pool is closed, connect errors for a new session, and `operation_aborted` when
  /// cancelled (a session handed over meanwhile goes back: nothing is lost).
  asio::awaitable<pooled_connection> acquire() const {
    if (!impl_) throw error(errc::closed, "pool handle is empty");
    auto impl = impl_;  // the pool lives on while this waits, even if the handle does not
    auto c = co_await impl->acquire();
    co_return pooled_connection(std::move(impl), std::move(c));
  }

  /// The pool's shared session: one pipelined `connection` for statements that need no session
  /// of their own (autocommit statements, LISTEN, a queue's claims and acks), used by any number
  /// of callers at once, as a `connect`ed one is. Taken from the pool at the first call (as
  /// `acquire`, counting towards `max_size`) and kept until the pool is closed; later calls
  /// return it at once. Never use it for `BEGIN`: that is what `transaction` is for. Throws as
  /// `acquire`.
  asio::awaitable<connection> shared() const {
    if (!impl_) throw error(errc::closed, "pool handle is empty");
    auto impl = impl_;
    co_return co_await impl->shared();
  }

  /// Closes the idle sessions and the shared one, and fails waiting and later acquires with
  /// `errc::closed`; sessions in use close when they come back. Does not wait.
  void close() {
    if (impl_) impl_->close();
  }

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
