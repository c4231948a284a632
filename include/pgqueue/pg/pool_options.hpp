// Options of a connection pool.
#pragma once

#include <chrono>
#include <cstddef>

#include "pgqueue/pg/connect_options.hpp"

namespace pgqueue::pg {

/// How a `pool` sizes and times its sessions.
struct pool_options {
  /// Sessions opened by `pool::open` and kept however idle (0 to 1000, at most `max_size`).
  std::size_t min_size = 1;
  /// Sessions open at most, in use and idle together (1 to 1000); an acquire beyond waits.
  std::size_t max_size = 10;
  /// An idle session above `min_size` unused this long is closed (1 ms to 24 h).
  std::chrono::milliseconds idle_timeout{60'000};
  /// How long an acquire waits for a session to come free before failing with
  /// `errc::pool_timeout` (0 to 24 h; 0 fails at once when every session is in use).
  std::chrono::milliseconds acquire_timeout{5'000};
  /// How each session connects, and reconnects after a drop outside a transaction.
  connect_options connect{};
};

}  // namespace pgqueue::pg
