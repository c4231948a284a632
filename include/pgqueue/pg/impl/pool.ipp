// Out-of-line definitions of pgqueue/pg/pool.hpp: included at its end (header-only), or compiled
// once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/pool.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void check_pool_options(const pool_options& o) {
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

PGQUEUE_DECL void pool_impl::close_at_context_shutdown() {
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

PGQUEUE_DECL asio::awaitable<void> pool_impl::fill() {
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

PGQUEUE_DECL asio::awaitable<connection> pool_impl::acquire() {
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

PGQUEUE_DECL void pool_impl::give_back(connection c) noexcept {
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

PGQUEUE_DECL asio::awaitable<connection> pool_impl::shared() {
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

PGQUEUE_DECL std::vector<connection> pool_impl::close() {
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
  return idle;
}

PGQUEUE_DECL void pool_impl::hand(pool_state<connection>::handover h) {
  if (!h.waiter || context_gone_) return;
  auto it = waiters_.find(h.waiter);
  if (it == waiters_.end()) return;  // cannot happen: waiters leave the line and map together
  it->second->handed = true;
  it->second->session = std::move(h.session);
  it->second->signal.try_send(std::error_code{}, 0);
}

PGQUEUE_DECL asio::awaitable<connection> pool_impl::open_session() {
  try {
    co_return co_await connect(ex_, conninfo_, options_.connect);
  } catch (...) {
    discard();
    throw;
  }
}

PGQUEUE_DECL asio::awaitable<void> pool_impl::reset(std::shared_ptr<pool_impl> self, connection c) {
  try {
    co_await c.execute_script("ROLLBACK");
  } catch (...) {
    c.close();  // unusable or unknown: not handed out again
  }
  if (c.in_transaction() || c.outstanding() > 0) c.close();  // used again meanwhile
  self->give_back(std::move(c));
}

PGQUEUE_DECL void pool_impl::start_reaper() {
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

}  // namespace pgqueue::pg::detail

namespace pgqueue::pg {

PGQUEUE_DECL pooled_connection& pooled_connection::operator=(pooled_connection&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    conn_ = std::move(o.conn_);
  }
  return *this;
}

PGQUEUE_DECL asio::awaitable<pool> pool::open(asio::any_io_executor ex, std::string conninfo,
                                              pool_options options) {
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

PGQUEUE_DECL asio::awaitable<pooled_connection> pool::acquire() const {
  if (!impl_) throw error(errc::closed, "pool handle is empty");
  auto impl = impl_;  // the pool lives on while this waits, even if the handle does not
  auto c = co_await impl->acquire();
  co_return pooled_connection(std::move(impl), std::move(c));
}

PGQUEUE_DECL asio::awaitable<void> pool::close(asio::use_awaitable_t<>) const {
  if (!impl_) co_return;
  auto closed = impl_->close();
  for (auto& c : closed) co_await c.close(asio::use_awaitable);
}

PGQUEUE_DECL asio::awaitable<connection> pool::shared() const {
  if (!impl_) throw error(errc::closed, "pool handle is empty");
  auto impl = impl_;
  co_return co_await impl->shared();
}

}  // namespace pgqueue::pg
