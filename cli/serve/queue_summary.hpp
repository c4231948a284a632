// Where the dashboard's per-queue numbers come from, in one place: the queues' states, ages
// and totals (read_summary), and the same as Prometheus text (write_metrics) for /metrics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <pgqueue/pgqueue.hpp>

namespace pgqueue_cli::dashboard {

/// One queue as pgqueue.queue_summary() reports it (the library's pgqueue::queue_status).
struct queue_status {
  std::string queue;
  bool paused = false;
  std::int64_t ready = 0, scheduled = 0, claimed = 0, dead = 0, cancelled = 0, done = 0;
  std::optional<double> oldest_ready_age_s, lag_s;
  std::int64_t enqueued_total = 0, done_total = 0, failed_total = 0;
};

/// Every queue, by name. One round trip.
asio::awaitable<std::vector<queue_status>> read_summary(pgqueue::database& db);

/// Appends `rows` as Prometheus text (format 0.0.4) to `out`.
void write_metrics(std::string& out, const std::vector<queue_status>& rows);

}  // namespace pgqueue_cli::dashboard
