// What every numbered example needs and none of them is about: where the conninfo comes from,
// a queue name of its own, and running one coroutine to completion. The examples themselves
// (01_... to 05_...) are where pgqueue is shown.
#pragma once

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

namespace example {

/// The conninfo: argv[1] when given (and not an option such as --seconds), else $PGQUEUE_DSN.
inline std::string conninfo(int argc, char** argv) {
  if (argc > 1 && !std::string_view(argv[1]).starts_with("--")) return argv[1];
  if (const char* env = std::getenv("PGQUEUE_DSN"); env && *env) return env;
  throw std::runtime_error("no database: pass a conninfo as the first argument or set PGQUEUE_DSN");
}

/// `base` plus the current time: each run gets a queue of its own, so running an example twice
/// against the same database prints the same story.
inline std::string fresh_queue_name(std::string_view base) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return std::string(base) + "-" + std::to_string(ms.count());
}

/// Seconds since `start`, for printing when things happen.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs `body(conninfo)` (a coroutine returning asio::awaitable<void>) on a single-threaded
/// io_context until it and everything it started have finished. Returns main's exit code: 0,
/// or 1 after printing the exception that ended it.
template <class Body>
int run(int argc, char** argv, Body body) {
  try {
    std::string dsn = conninfo(argc, argv);
    asio::io_context io;
    std::exception_ptr failure;
    // An xvalue, not a temporary: GCC 12 destroys a coroutine parameter twice when it is
    // initialised straight from a temporary.
    asio::co_spawn(io, body(std::move(dsn)), [&](std::exception_ptr e) { failure = e; });
    io.run();
    if (failure) std::rethrow_exception(failure);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace example
