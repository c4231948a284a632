// What every subcommand of the pgqueue tool gets: where to connect, how to print, and a way
// to run a coroutine to its end.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include <asio/awaitable.hpp>
#include <pgqueue/pgqueue.hpp>

namespace pgqueue_cli {

/// The tool's exit codes (README, "The pgqueue command").
enum exit_code : int {
  ok = 0,
  answer_no = 1,  ///< the command ran, and its answer is "no" (an upgrade is pending, no such job)
  usage = 2,      ///< bad arguments: nothing was done
  failed = 3,     ///< the server or the connection failed (the message says which)
};

/// A refusal of the command's arguments found after parsing (exit code `usage`).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct context {
  std::string dsn;  ///< --dsn, else $PGQUEUE_DSN, else "" (libpq's PG* variables and defaults)
  bool json = false;

  /// Connects, then runs `body` on one io_context until it returns; returns its exit code.
  /// Throws what the body or the connect throws.
  int run(std::function<asio::awaitable<int>(pgqueue::database&)> body) const;
};

}  // namespace pgqueue_cli
