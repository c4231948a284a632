// Options of a pgqueue::worker.
#pragma once

#include <chrono>

namespace pgqueue {

/// How a worker schedules jobs.
struct worker_options {
  /// Jobs handled at once.
  int concurrency = 16;
  /// Most jobs taken per claim round trip (0: up to `concurrency`). 1 disables batching.
  int claim_batch = 0;
  /// Ack finished jobs together: while one ack_batch is on its way, finished jobs gather for the
  /// next. Off: one ack round trip per job.
  bool coalesce_acks = true;
  /// How often the fleet's janitor runs (janitor_reset_stale_claims); one worker per database
  /// does it, chosen by an advisory lock. Zero: this worker never runs it.
  std::chrono::milliseconds janitor_interval{std::chrono::seconds(5)};
  /// How long stop() lets running handlers finish before cancelling them and releasing their
  /// jobs (ready again at once, the attempt not counted).
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
};

}  // namespace pgqueue
