// Out-of-line definitions of pgqueue/queue_limits.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include <algorithm>

#include "pgqueue/queue_limits.hpp"

namespace pgqueue {

PGQUEUE_DECL asio::awaitable<bool> set_queue_limits(database& db, const queue_limits& l) {
  // Clamped to just outside what the server takes (1 ms to 1 year), so that a period beyond
  // it is refused as such (22023) rather than overflowing the interval (22008).
  using days = std::chrono::days;
  const auto period = std::clamp<std::chrono::milliseconds>(
      l.rate_period, std::chrono::milliseconds(-1),
      std::chrono::duration_cast<std::chrono::milliseconds>(days(400)));
  pg::params p{l.queue, l.max_claimed, l.rate, static_cast<std::int64_t>(period.count()), l.burst};
  auto r = co_await db.query(
      "SELECT pgqueue.set_queue_limits($1, $2, $3, $4 * interval '1 millisecond', $5)",
      std::move(p));
  co_return r.get<bool>(0, 0);
}

PGQUEUE_DECL asio::awaitable<std::vector<queue_limit_status>> read_queue_limits(database& db) {
  auto r = co_await db.query(
      "SELECT queue, max_claimed, claimed, rate, "
      "round(extract(epoch FROM rate_period) * 1000)::bigint, burst, tokens "
      "FROM pgqueue.limits()");
  std::vector<queue_limit_status> out(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    auto& s = out[static_cast<std::size_t>(i)];
    s.limits.queue = r.get<std::string>(i, 0);
    s.limits.max_claimed = r.get<std::optional<int>>(i, 1);
    s.claimed = r.get<std::int64_t>(i, 2);
    s.limits.rate = r.get<std::optional<int>>(i, 3);
    if (auto ms = r.get<std::optional<std::int64_t>>(i, 4)) {
      s.limits.rate_period = std::chrono::milliseconds(*ms);
    }
    s.limits.burst = r.get<std::optional<int>>(i, 5);
    s.tokens = r.get<std::optional<double>>(i, 6);
  }
  co_return out;
}

}  // namespace pgqueue
