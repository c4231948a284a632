// Options of a pgqueue::worker.
#pragma once

#include <chrono>

#include "pgqueue/job_event.hpp"
#include "pgqueue/pg/transaction_options.hpp"

namespace pgqueue {

/// How a worker schedules jobs. Constructing a worker refuses values outside the ranges given
/// below with `errc::invalid_argument`.
struct worker_options {
  /// Most `concurrency`: 10000 (as many as one claim takes).
  static constexpr int max_concurrency = 10000;
  /// Longest `janitor_interval` and `stop_timeout`: 24 hours.
  static constexpr std::chrono::milliseconds max_interval{std::chrono::hours(24)};

  /// Jobs handled at once. 1 to `max_concurrency`.
  int concurrency = 16;
  /// Most jobs taken per claim round trip (0: up to `concurrency`). 1 disables batching. Not
  /// negative; more than `concurrency` counts as `concurrency`.
  int claim_batch = 0;
  /// Sessions the worker claims and acks on. 1: the queue's connection. N > 1: run() also
  /// opens N - 1 sessions like it (pg::connection::connect_another; for a queue opened on a
  /// pool, takes them from the pool for the run instead), splits `concurrency`
  /// across the N (each with its own claim loop, acks and heartbeats) and closes them when it
  /// returns. One session commits its claims and acks one after another; several let a busy
  /// queue use more of the server. 1 to `concurrency`; the janitor uses the queue's connection.
  int connections = 1;
  /// Ack finished jobs together: while one ack_batch is on its way, finished jobs gather for the
  /// next. Off: one ack round trip per job.
  bool coalesce_acks = true;
  /// How often the fleet's janitor runs (janitor_reset_stale_claims); one worker per database
  /// does it, chosen by an advisory lock. Zero: this worker never runs it. 0 to `max_interval`.
  std::chrono::milliseconds janitor_interval{std::chrono::seconds(5)};
  /// How long stop() lets running handlers finish before cancelling them and releasing their
  /// jobs (ready again at once, the attempt not counted); also how long it sends again the
  /// acks, nacks and releases the server refuses this once (say, past a lock_timeout) or a
  /// reconnect holds up: after it, those are counted lost, and their jobs run again when their
  /// leases expire. A statement already sent is waited for. 0 to `max_interval`.
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
  /// For a handler taking `(const job&, pgqueue::transaction&)`: how its transactions begin
  /// (isolation level), and how many times a job's handler runs when its transaction fails
  /// with 40001 or 40P01 (`max_attempts`, 1 to 100).
  pg::transaction_options transaction{};
  /// Told of each job's claim, start and ending, with the handler's run time (see job_event):
  /// for logging with the application's own logger, or for metrics (worker_metrics). None by
  /// default. Costs a call per event, on the worker's strand.
  job_observer observer{};
};

}  // namespace pgqueue
