#include "serve.hpp"

#include <csignal>
#include <iostream>
#include <memory>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/signal_set.hpp>

#include "http_server.hpp"
#include "listen_address.hpp"
#include "routes.hpp"
#include "token.hpp"

namespace pgqueue_cli {

using namespace dashboard;

namespace {

// The listening socket, or a message that says which address could not be had.
asio::ip::tcp::acceptor listen_on(const asio::any_io_executor& ex,
                                  const asio::ip::tcp::endpoint& endpoint) {
  asio::ip::tcp::acceptor acceptor(ex);
  asio::error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    throw std::runtime_error("cannot listen on " + url_of(endpoint) + ": " + error.message());
  }
  return acceptor;
}

}  // namespace

int serve(const context& ctx, const serve_options& options) {
  const auto endpoint = parse_listen_address(options.listen);
  check_reachability(endpoint, options.allow_remote);
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    const auto ex = co_await asio::this_coro::executor;
    auto acceptor = listen_on(ex, endpoint);

    // Shared: connections and the sampler may still be unwinding when this body returns.
    auto rates = std::make_shared<sampler>(
        std::chrono::milliseconds(static_cast<std::int64_t>(options.interval_s * 1000)));
    asio::co_spawn(
        ex,
        [](std::shared_ptr<sampler> s, pgqueue::database db) -> asio::awaitable<void> {
          co_await s->run(db);
        }(rates, db),
        asio::detached);

    route_options routing{options.allow_actions, !options.allow_remote,
                          options.allow_actions ? make_token() : ""};
    auto app = std::make_shared<routes>(db, rates, std::move(routing));
    http_server server(acceptor, [app](const http_request& r) { return app->handle(r); });

    asio::signal_set signals(ex, SIGINT, SIGTERM);
    signals.async_wait([&](const asio::error_code& error, int) {
      if (error) return;  // this body ended first
      server.stop();
      rates->stop();
    });

    std::cout << "listening on " << url_of(acceptor.local_endpoint()) << std::endl;
    std::cerr << "pgqueue serve: "
              << (options.allow_actions
                      ? "actions allowed: the page has retry, cancel, pause and resume buttons"
                      : "read-only (--allow-actions for retry, cancel, pause and resume buttons)")
              << "; Ctrl-C stops\n";
    co_await server.run();
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
