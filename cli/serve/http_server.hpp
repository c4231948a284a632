// The HTTP/1.1 server of `pgqueue serve`, on the io_context that also runs the database
// connection (no second event loop, no HTTP library): accepts connections, reads requests
// within the limits (http.hpp) and time bounds, hands each to one handler and writes its
// response. Requests of one connection are answered in order; connections run side by side.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>

#include "http.hpp"

namespace pgqueue_cli::dashboard {

using http_handler = std::function<asio::awaitable<http_response>(const http_request&)>;

struct http_server_options {
  http_limits limits;
  /// A request must arrive whole, and an answer be taken, within this (a slower client is cut
  /// off: its connection closed).
  std::chrono::seconds request_time{10};
  /// An idle kept-alive connection is closed after this.
  std::chrono::seconds idle_time{30};
  /// Connections at once; one more is answered 503 and closed.
  int max_connections = 64;
};

class http_server {
 public:
  /// Serves connections accepted on `acceptor` (listening already) with `handler`. A
  /// handler's exception becomes a 500 with its message.
  http_server(asio::ip::tcp::acceptor& acceptor, http_handler handler,
              http_server_options options = {});

  /// Accepts until `stop()`; returns then (connections still open end as `stop` closes them).
  asio::awaitable<void> run();

  /// Closes the acceptor and every open connection, so that nothing of the server keeps the
  /// io_context busy (a kept-alive connection would for its idle time).
  void stop();

 private:
  struct shared;
  asio::ip::tcp::acceptor& acceptor_;
  std::shared_ptr<shared> shared_;
};

}  // namespace pgqueue_cli::dashboard
