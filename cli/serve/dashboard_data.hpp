// What the page shows, as the JSON of GET /api/dashboard: the queues with their states and
// rates, the throughput history, the newest dead jobs with their error histories, and each
// queue's next jobs. Read fresh on each request (the page polls), the rates from the sampler.
#pragma once

#include <nlohmann/json.hpp>
#include <pgqueue/pgqueue.hpp>

#include "sampler.hpp"

namespace pgqueue_cli::dashboard {

/// How much of each list the page gets (the page says when a list is cut).
struct data_limits {
  int dead_jobs = 50;       ///< newest first
  int next_per_queue = 5;   ///< in claim order
  int payload_chars = 300;  ///< payloads are cut to this many characters
};

/// `{"time", "interval_s", "actions", "queues": [...], "samples": [...], "dead": [...],
/// "next": [...]}`. Three round trips (summary, dead jobs, next jobs), pipelined.
asio::awaitable<nlohmann::json> read_dashboard(pgqueue::database& db, const sampler& rates,
                                               bool actions, const data_limits& limits = {});

}  // namespace pgqueue_cli::dashboard
