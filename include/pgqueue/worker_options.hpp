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
  /// Sessions the worker claims and acks on. 1: the queue's connection. N > 1: run() also
  /// opens N - 1 sessions like it (pg::connection::connect_another), splits `concurrency`
  /// across the N (each with its own claim loop, acks and heartbeats) and closes them when it
  /// returns. One session commits its claims and acks one after another; several let a busy
  /// queue use more of the server. 1 to `concurrency`; the janitor uses the queue's connection.
  int connections = 1;
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
