// Where the dashboard's per-queue numbers come from, in one place: the library's reading of
// pgqueue.queue_summary() (states, ages, totals) and its Prometheus text for /metrics.
#pragma once

#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <pgqueue/metrics.hpp>
#include <pgqueue/pgqueue.hpp>
#include <pgqueue/queue_status.hpp>

namespace pgqueue_cli::dashboard {

using queue_status = pgqueue::queue_status;

/// Every queue, by name. One round trip.
inline asio::awaitable<std::vector<queue_status>> read_summary(pgqueue::database& db) {
  return pgqueue::read_queue_status(db);
}

/// Appends `rows` as Prometheus text (format 0.0.4) to `out`.
inline void write_metrics(std::string& out, const std::vector<queue_status>& rows) {
  pgqueue::write_queue_metrics(out, rows);
}

}  // namespace pgqueue_cli::dashboard
