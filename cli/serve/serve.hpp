// pgqueue serve: the live web dashboard and /metrics (README, "Dashboard"). One database
// connection and one HTTP server on one io_context; runs until SIGINT or SIGTERM.
#pragma once

#include <string>

#include "../context.hpp"

namespace pgqueue_cli {

struct serve_options {
  std::string listen = "127.0.0.1:8080";  ///< HOST:PORT; port 0: one the system picks
  bool allow_actions = false;             ///< the buttons (and POST endpoints) work
  bool allow_remote = false;              ///< a --listen address that is not loopback
  double interval_s = 2;                  ///< seconds between readings for the rates
};

/// Listens, prints "listening on http://HOST:PORT/" on stdout (the port the system picked,
/// for port 0), and serves until a signal: then exit code 0. A --listen refused or not
/// parsed: usage_error before anything else happens.
int serve(const context& ctx, const serve_options& options);

}  // namespace pgqueue_cli
