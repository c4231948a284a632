// Out-of-line definitions of pgqueue/pg/detail/connector.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/connector.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL void connector::start() {
  // expand_dbname=1: the "dbname" value may be any conninfo string or URI. Keywords before it
  // are defaults the conninfo overrides. TCP keepalives and tcp_user_timeout notice a silently
  // dead network within about a minute (the OS default is two hours), so an idle connection
  // learns it must reconnect; unix sockets ignore them.
  const char* keywords[] = {"fallback_application_name",
                            "keepalives_idle",
                            "keepalives_interval",
                            "keepalives_count",
                            "tcp_user_timeout",
                            "dbname",
                            nullptr};
  const char* values[] = {"pgqueue", "30", "10", "3", "60000", conninfo_.c_str(), nullptr};
  conn_.reset(PQconnectStartParams(keywords, values, 1));
  if (!conn_) return fail(errc::connect_failed, "could not allocate a libpq connection");
  // libpq's default prints notices to stderr; a library must stay quiet.
  PQsetNoticeProcessor(
      conn_.get(), [](void*, const char*) {}, nullptr);
  if (PQstatus(conn_.get()) == CONNECTION_BAD) return fail_with_libpq_message();

  timer_.expires_after(timeout_);
  timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->on_deadline();
  });
  // libpq's protocol: behave as if PQconnectPoll had asked for write-readiness first.
  status_ = PGRES_POLLING_WRITING;
  watch();
}

PGQUEUE_DECL void connector::watch() {
  const int fd = PQsocket(conn_.get());
  if (fd < 0) return fail_with_libpq_message();
  // Re-assigned on every step: libpq may have closed the socket and opened another (next host,
  // SSL retry), possibly under the same number.
  try {
    socket_.assign(fd);
  } catch (const std::system_error& e) {
    return fail(errc::connect_failed, std::string("cannot watch connection socket: ") + e.what());
  }
  const auto gen = ++generation_;
  const bool want_write = status_ == PGRES_POLLING_WRITING;
  socket_.async_wait(want_write ? asio::posix::descriptor_base::wait_write
                                : asio::posix::descriptor_base::wait_read,
                     [self = shared_from_this(), gen](std::error_code) { self->step(gen); });
  const short wanted = static_cast<short>((want_write ? POLLOUT : POLLIN) | POLLERR | POLLHUP);
  if (socket_.ready_now(want_write) & wanted) {
    asio::post(strand_, [self = shared_from_this(), gen] { self->step(gen); });
  }
}

PGQUEUE_DECL void connector::step(unsigned gen) {
  // A stale wait (released descriptor) or the second of wait/ready_now for the same step.
  if (finished_ || gen != generation_) return;
  ++generation_;
  status_ = PQconnectPoll(conn_.get());
  switch (status_) {
    case PGRES_POLLING_OK:
      return finish(nullptr);
    case PGRES_POLLING_FAILED:
      return fail_with_libpq_message();
    default:
      return watch();
  }
}

PGQUEUE_DECL void connector::on_deadline() {
  if (finished_) return;
  std::string where;
  if (const char* host = PQhost(conn_.get()); host && *host) {
    where = std::string(" (last tried ") + host;
    if (const char* port = PQport(conn_.get()); port && *port) where += std::string(":") + port;
    where += ")";
  }
  fail(errc::connect_timeout, "timed out after " + std::to_string(timeout_.count()) +
                                  " ms connecting to PostgreSQL" + scrubber_.scrub(where));
}

PGQUEUE_DECL void connector::finish(std::exception_ptr e) {
  if (finished_) return;
  finished_ = true;
  timer_.cancel();
  // libpq owns the fd: stop watching it before PQfinish (or hand-over) can close it.
  socket_.release();
  auto done = std::exchange(done_, nullptr);
  auto conn = std::move(conn_);
  if (e) conn.reset();
  done(std::move(e), std::move(conn));
}

}  // namespace pgqueue::pg::detail
