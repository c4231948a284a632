// Options of a queue handle: who claims, for how long, and how an idle claim waits.
#pragma once

#include <chrono>
#include <string>

namespace pgqueue {

/// Settings of a `queue` handle. The defaults suit jobs that finish within minutes.
struct queue_options {
  /// Identifies this process in `claimed_by` (default: host:pid:random).
  std::string worker_id{};
  /// How long a claim is valid without a heartbeat.
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  /// How often a live lease heartbeats (default: a third of `lease`).
  std::chrono::milliseconds heartbeat_interval{0};
  /// An idle claim() re-checks the queue at least this often, since notifications can be lost.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(2)};
};

}  // namespace pgqueue
