// Out-of-line definitions of pgqueue/queue_status.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/queue_status.hpp"

namespace pgqueue {

PGQUEUE_DECL asio::awaitable<std::vector<queue_status>> read_queue_status(database& db) {
  auto r = co_await db.query(
      "SELECT queue, paused, ready, scheduled, claimed, dead, cancelled, done, "
      "oldest_ready_age_s, lag_s, enqueued_total, done_total, failed_total, waiting "
      "FROM pgqueue.queue_summary()");
  std::vector<queue_status> out(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    auto& q = out[static_cast<std::size_t>(i)];
    q.queue = r.get<std::string>(i, 0);
    q.paused = r.get<bool>(i, 1);
    q.ready = r.get<std::int64_t>(i, 2);
    q.scheduled = r.get<std::int64_t>(i, 3);
    q.claimed = r.get<std::int64_t>(i, 4);
    q.dead = r.get<std::int64_t>(i, 5);
    q.cancelled = r.get<std::int64_t>(i, 6);
    q.done = r.get<std::int64_t>(i, 7);
    q.oldest_ready_age_s = r.get<std::optional<double>>(i, 8);
    q.lag_s = r.get<std::optional<double>>(i, 9);
    q.enqueued_total = r.get<std::int64_t>(i, 10);
    q.done_total = r.get<std::int64_t>(i, 11);
    q.failed_total = r.get<std::int64_t>(i, 12);
    q.waiting = r.get<std::int64_t>(i, 13);
  }
  co_return out;
}

}  // namespace pgqueue
