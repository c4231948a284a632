// What every subcommand of the pgqueue tool gets: where to connect, how to print, and a way
// to run a coroutine to its end.
#pragma once

#include <chrono>
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
  interrupted = 4,  ///< a signal stopped it (what was done before is kept; the message says)
};

/// Whether the server refused the command's input, not failed: a data exception (class 22:
/// invalid JSON, a bad queue name, a bad time or interval) or a name that does not exist
/// (42704: no such role; 23503: an --after id that is not a job). Exit code `usage`, not
/// `failed`.
inline bool refused_input(const pgqueue::error& e) {
  return e.sqlstate().starts_with("22") || e.sqlstate() == "42704" || e.sqlstate() == "23503";
}

/// A refusal of the command's arguments found after parsing (exit code `usage`).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct context {
  std::string dsn;  ///< --dsn, else $PGQUEUE_DSN, else "" (libpq's PG* variables and defaults)
  bool json = false;
  /// How long a query waits for the session while it reconnects after a drop (a command that
  /// runs for long, such as `top` or `serve`, rides out a database restart).
  std::chrono::milliseconds reconnect_wait{10000};

  /// Connects, then runs `body` on one io_context until it returns; returns its exit code.
  /// Throws what the body or the connect throws.
  int run(std::function<asio::awaitable<int>(pgqueue::database&)> body) const;
};

}  // namespace pgqueue_cli
