// Non-blocking connection establishment: PQconnectStartParams + PQconnectPoll driven by
// socket readiness, bounded by a deadline.
#pragma once

#include <libpq-fe.h>
#include <poll.h>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/libpq_handles.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/secrets.hpp"
#include "pgqueue/pg/detail/server_error.hpp"
#include "pgqueue/pg/detail/socket_watch.hpp"

namespace pgqueue::pg::detail {

/// One connection attempt (libpq itself walks through several hosts if the conninfo lists
/// them). Runs on the strand; reports exactly once through `done`.
class connector : public std::enable_shared_from_this<connector> {
 public:
  using done_handler = std::function<void(std::exception_ptr, conn_ptr)>;

  connector(const strand_type& strand, std::string conninfo, std::chrono::milliseconds timeout,
            secret_scrubber scrubber, done_handler done)
      : strand_(strand),
        socket_(strand),
        timer_(strand),
        conninfo_(std::move(conninfo)),
        timeout_(timeout),
        scrubber_(std::move(scrubber)),
        done_(std::move(done)) {}

  void start();

  /// Abandons the attempt (the caller has already been told).
  void cancel() { finish(make_error(asio::error::operation_aborted, "connect cancelled")); }

 private:
  void watch();

  void step(unsigned gen);

  void on_deadline();

  void fail_with_libpq_message() {
    std::string msg = conn_ ? trim_trailing_newlines(PQerrorMessage(conn_.get())) : "";
    if (msg.empty()) msg = "unknown libpq error";
    fail(errc::connect_failed, "could not connect to PostgreSQL: " + scrubber_.scrub(msg));
  }

  void fail(errc code, std::string message) { finish(make_error(code, std::move(message))); }

  void finish(std::exception_ptr e);

  strand_type strand_;
  socket_watch socket_;
  asio::steady_timer timer_;
  std::string conninfo_;
  std::chrono::milliseconds timeout_;
  secret_scrubber scrubber_;
  done_handler done_;
  conn_ptr conn_;
  PostgresPollingStatusType status_ = PGRES_POLLING_WRITING;
  unsigned generation_ = 0;
  bool finished_ = false;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/connector.ipp"
#endif
