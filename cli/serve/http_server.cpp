#include "http_server.hpp"

#include <memory>
#include <set>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace pgqueue_cli::dashboard {

namespace {

using asio::ip::tcp;

// A connection's socket and its deadline. The watchdog closes the socket when the deadline
// passes, which ends whatever read or write is pending on it (the asio "watchdog" pattern).
struct connection {
  explicit connection(tcp::socket s) : socket(std::move(s)), deadline(socket.get_executor()) {}
  tcp::socket socket;
  asio::steady_timer deadline;
  bool done = false;
};

asio::awaitable<void> watchdog(std::shared_ptr<connection> c) {
  while (!c->done) {
    auto [ignored] =
        co_await c->deadline.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    (void)ignored;  // cancelled: a new deadline (or the end); the loop looks again
    if (!c->done && c->deadline.expiry() <= std::chrono::steady_clock::now()) {
      asio::error_code error;
      c->socket.close(error);
      co_return;
    }
  }
}

// Reads more bytes into `buffer`: false when the client closed, or the deadline passed.
asio::awaitable<bool> read_more(connection& c, std::string& buffer) {
  char chunk[4096];
  auto [error, n] = co_await c.socket.async_read_some(
      asio::buffer(chunk), asio::experimental::as_tuple(asio::use_awaitable));
  if (error) co_return false;
  buffer.append(chunk, n);
  co_return true;
}

asio::awaitable<void> send(tcp::socket& socket, const http_response& r, bool keep_alive) {
  const auto bytes = serialise(r, keep_alive);
  co_await asio::async_write(socket, asio::buffer(bytes), asio::use_awaitable);
}

// Serves one connection: requests in order until the client closes, asks to close, goes idle
// or breaks a limit. Exceptions from the socket (a reset, EOF) end the connection.
asio::awaitable<void> serve_connection(connection& c, const http_handler& handler,
                                       const http_server_options& options) {
  auto& socket = c.socket;
  std::string buffer;
  for (bool first = true;; first = false) {
    // Idle time until a request starts; then it must arrive whole within request_time.
    c.deadline.expires_after(first && buffer.empty() ? options.request_time : options.idle_time);
    std::optional<std::size_t> end;
    while (!(end = head_end(buffer))) {
      if (buffer.size() > options.limits.max_head) {
        auto r = http_response::text(431, "request head larger than " +
                                              std::to_string(options.limits.max_head) + " bytes\n");
        co_await send(socket, r, false);
        co_return;
      }
      const bool started = !buffer.empty();
      const bool more = co_await read_more(c, buffer);
      if (!more) co_return;  // closed by the client, or by the watchdog (too slow, idle)
      if (!started) c.deadline.expires_after(options.request_time);
    }
    if (*end > options.limits.max_head) {
      co_await send(socket, http_response::text(431, "request head too large\n"), false);
      co_return;
    }
    auto parsed = parse_head(std::string_view(buffer).substr(0, *end), options.limits);
    if (parsed.refusal) {
      co_await send(socket, *parsed.refusal, false);
      co_return;
    }
    buffer.erase(0, *end);
    while (buffer.size() < parsed.content_length) {
      const bool more = co_await read_more(c, buffer);
      if (!more) co_return;
    }
    auto& request = *parsed.request;
    request.body = buffer.substr(0, parsed.content_length);
    buffer.erase(0, parsed.content_length);

    // The handler's time is not the client's: no deadline while it runs (the database bounds
    // it); writing the answer has request_time.
    c.deadline.expires_at(std::chrono::steady_clock::time_point::max());
    http_response response;
    std::string failure;
    try {
      response = co_await handler(request);
    } catch (const std::exception& e) {
      failure = e.what();  // no co_await inside a catch block (GCC 12)
    }
    if (!failure.empty()) response = http_response::text(500, failure + "\n");
    const bool keep_alive = request.keep_alive() && !response.close;
    c.deadline.expires_after(options.request_time);
    co_await send(socket, response, keep_alive);
    if (!keep_alive) co_return;
  }
}

}  // namespace

struct http_server::shared {
  http_handler handler;
  http_server_options options;
  std::set<tcp::socket*> open;  // the connections being served, for stop()
  bool stopped = false;
};

http_server::http_server(tcp::acceptor& acceptor, http_handler handler, http_server_options options)
    : acceptor_(acceptor), shared_(std::make_shared<shared>()) {
  shared_->handler = std::move(handler);
  shared_->options = std::move(options);
}

void http_server::stop() {
  shared_->stopped = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  for (auto* s : shared_->open) s->close(ignored);
}

asio::awaitable<void> http_server::run() {
  while (!shared_->stopped) {
    auto [ec, socket] =
        co_await acceptor_.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) {
      if (shared_->stopped) break;
      continue;  // a failed accept (a reset before it was taken, no descriptors): go on
    }
    if (static_cast<int>(shared_->open.size()) >= shared_->options.max_connections) {
      auto r = http_response::text(503, "too many connections\n");
      asio::co_spawn(
          acceptor_.get_executor(),
          [](tcp::socket s, http_response r) -> asio::awaitable<void> {
            co_await send(s, r, false);
          }(std::move(socket), std::move(r)),
          asio::detached);
      continue;
    }
    asio::co_spawn(
        acceptor_.get_executor(),
        [](tcp::socket s, std::shared_ptr<shared> state) -> asio::awaitable<void> {
          auto c = std::make_shared<connection>(std::move(s));
          state->open.insert(&c->socket);
          struct forget {
            shared& state;
            connection& c;
            ~forget() {
              state.open.erase(&c.socket);
              c.done = true;
              c.deadline.cancel();  // ends the watchdog
            }
          } guard{*state, *c};
          asio::co_spawn(c->socket.get_executor(), watchdog(c), asio::detached);
          co_await serve_connection(*c, state->handler, state->options);
        }(std::move(socket), shared_),
        asio::detached);
  }
}

}  // namespace pgqueue_cli::dashboard
