// Out-of-line definitions of pgqueue/pg/connection.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include <asio/post.hpp>
#include <asio/this_coro.hpp>

#include "pgqueue/pg/connection.hpp"

namespace pgqueue::pg {

PGQUEUE_DECL asio::awaitable<void> connection::close(asio::use_awaitable_t<>) const {
  if (!impl_) co_return;
  auto impl = impl_;
  impl->close();
  // A cancel does not stop this wait: the close is under way anyway, and short.
  co_await asio::this_coro::throw_if_cancelled(false);
  // The strand runs handlers in order: once this one has run, close's own (which ends the
  // session) has too.
  co_await asio::post(impl->strand(), asio::use_awaitable);
}

PGQUEUE_DECL asio::awaitable<void> connection::execute_script(std::string_view sql) const {
  if (auto e = check(sql, 0)) return detail::fail_awaitable<void>(e);
  return discard(detail::async_start<result>(
      impl_->strand(),
      [impl = impl_, sql = std::string(sql)](detail::operation_ptr<result> op) mutable {
        auto r = detail::connection_impl::make_statement(std::move(sql), std::move(op));
        r->type = detail::request::kind::script;
        impl->submit(std::move(r));
      },
      asio::use_awaitable));
}

PGQUEUE_DECL std::exception_ptr connection::check(std::string_view sql,
                                                  std::size_t param_count) const {
  if (!impl_) return detail::make_error(errc::closed, "connection handle is empty");
  try {
    detail::reject_nul(sql, "SQL text");
  } catch (...) {
    return std::current_exception();
  }
  if (param_count > 65535) {
    return detail::make_error(errc::invalid_argument,
                              "at most 65535 parameters fit in one statement");
  }
  return nullptr;
}

PGQUEUE_DECL asio::awaitable<result> connection::statement(std::string_view sql, params args,
                                                           bool prepared,
                                                           bool keep_once_sent) const {
  if (auto e = check(sql, args.size())) return detail::fail_awaitable<result>(e);
  return detail::async_start<result>(
      impl_->strand(),
      [impl = impl_, sql = std::string(sql), args = std::move(args),
       prepared](detail::operation_ptr<result> op) mutable {
        auto r =
            detail::connection_impl::make_statement(std::move(sql), std::move(op), std::move(args));
        r->prepared = prepared;
        impl->submit(std::move(r));
      },
      asio::use_awaitable, keep_once_sent);
}

PGQUEUE_DECL asio::awaitable<subscription> connection::do_subscribe(
    std::shared_ptr<detail::connection_impl> impl, std::string channel) {
  if (!impl) throw error(errc::closed, "connection handle is empty");
  detail::validate_channel(channel);
  auto state = std::make_shared<detail::subscription_state>(std::move(channel));
  auto listening = detail::async_start<result>(
      impl->strand(),
      [impl, state](detail::operation_ptr<result> op) { impl->listen(state, std::move(op)); },
      asio::use_awaitable);
  co_await std::move(listening);
  co_return subscription(impl, state);
}

}  // namespace pgqueue::pg

namespace pgqueue::pg::detail {

PGQUEUE_DECL void check_connect_options(const connect_options& o) {
  using ms = std::chrono::milliseconds;
  const std::error_code bad = errc::invalid_argument;
  const ms max = connect_options::max_duration;
  check_between(bad, "connect_options.connect_timeout", o.connect_timeout, ms(1), max);
  check_between(bad, "connect_options.reconnect_max_backoff", o.reconnect_max_backoff, ms(0), max);
  // Checked against the maximum rather than clamped: a swapped pair is more likely a mistake.
  check_between(bad, "connect_options.reconnect_initial_backoff (up to reconnect_max_backoff)",
                o.reconnect_initial_backoff, ms(0), o.reconnect_max_backoff);
  check_between(bad, "connect_options.reconnect_wait", o.reconnect_wait, ms(0), max);
  check_between(bad, "connect_options.statement_timeout", o.statement_timeout, ms(0), max);
}

}  // namespace pgqueue::pg::detail

namespace pgqueue::pg {

PGQUEUE_DECL asio::awaitable<connection> connect(asio::any_io_executor ex, std::string conninfo,
                                                 connect_options options) {
  // libpq reads a C string: whatever followed a NUL byte would be silently ignored.
  detail::reject_nul(conninfo, "conninfo");
  detail::check_connect_options(options);
  auto impl = std::make_shared<detail::connection_impl>(ex, options);
  // Named rather than a temporary inside co_await: GCC 12 destroys such temporaries twice.
  auto start = [impl, conninfo = std::move(conninfo)](
                   detail::operation_ptr<std::shared_ptr<detail::connection_impl>> op) mutable {
    impl->start_connect(std::move(conninfo), std::move(op));
  };
  auto connecting = detail::async_start<std::shared_ptr<detail::connection_impl>>(
      impl->strand(), std::move(start), asio::use_awaitable);
  co_return connection(co_await std::move(connecting));
}

PGQUEUE_DECL asio::awaitable<connection> connection::connect_another() const {
  if (!impl_) throw error(errc::closed, "connection handle is empty");
  co_return co_await connect(impl_->strand().get_inner_executor(), impl_->conninfo(),
                             impl_->options());
}

}  // namespace pgqueue::pg
