// Opening a database handle for queues.
#pragma once

#include <string>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "pgqueue/pg/connection.hpp"

namespace pgqueue {

/// A shared handle to one PostgreSQL session. Copies share the session; any number of
/// coroutines and queues may use it at once (requests are pipelined).
using database = pg::connection;

/// Connects without blocking the executor. `conninfo` is any libpq connection string or URI.
/// Several round trips (startup, authentication). Throws pgqueue::error: `connect_failed` with
/// libpq's reason (passwords masked), `connect_timeout` after `options.connect_timeout`,
/// `pg::errc::invalid_argument` for an option outside its range (see pg::connect_options).
inline asio::awaitable<database> connect(asio::any_io_executor ex, std::string conninfo,
                                         pg::connect_options options = {}) {
  return pg::connect(std::move(ex), std::move(conninfo), options);
}

}  // namespace pgqueue
