#include "context.hpp"

#include <exception>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

namespace pgqueue_cli {

int context::run(std::function<asio::awaitable<int>(pgqueue::database&)> body) const {
  asio::io_context io;
  int code = exit_code::failed;
  std::exception_ptr failure;
  auto main =
      [](std::string dsn, std::chrono::milliseconds reconnect_wait,
         std::function<asio::awaitable<int>(pgqueue::database&)> body) -> asio::awaitable<int> {
    pgqueue::pg::connect_options options;
    options.reconnect_wait = reconnect_wait;
    auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn, options);
    const int result = co_await body(db);
    co_await db.close(asio::use_awaitable);
    co_return result;
  };
  asio::co_spawn(io, main(dsn, reconnect_wait, std::move(body)),
                 [&](std::exception_ptr e, int result) {
                   failure = e;
                   code = result;
                 });
  io.run();
  if (failure) std::rethrow_exception(failure);
  return code;
}

}  // namespace pgqueue_cli
