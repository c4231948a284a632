// pgqueue::queue_status: what the server holds for each queue (pgqueue.queue_summary).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"

namespace pgqueue {

/// One queue's jobs by state, its age and lag, and totals that only grow (for rates: take two
/// readings and divide the difference by the time between them).
struct queue_status {
  std::string queue;
  bool paused = false;
  std::int64_t ready = 0;      ///< ready and due now
  std::int64_t scheduled = 0;  ///< ready but due later (run_after, or a retry's backoff)
  std::int64_t claimed = 0;
  std::int64_t dead = 0;
  std::int64_t cancelled = 0;
  std::int64_t done = 0;  ///< done jobs still retained (gc deletes them)
  /// Seconds since the oldest ready job that is due now was enqueued; none when none is.
  std::optional<double> oldest_ready_age_s;
  /// Seconds the oldest due ready job has waited since it became due (the queue's lag); none
  /// when no ready job is due.
  std::optional<double> lag_s;
  std::int64_t enqueued_total = 0;  ///< jobs ever enqueued (as far as the counters go back)
  std::int64_t done_total = 0;      ///< jobs ever done, gc'd ones included
  std::int64_t failed_total = 0;    ///< failed attempts: nacks and expired leases
  /// Waiting for other jobs to finish (enqueue_options::depends_on); not claimable yet.
  std::int64_t waiting = 0;
};

/// Every queue the database knows (it has jobs, counters or a pause), by name. One round trip
/// (`SELECT * FROM pgqueue.queue_summary()`): each state is read through its own index and
/// done jobs from their counters, so it stays fast with millions of retained jobs. Throws the
/// server's error (e.g. 42501 for a role not granted it: grant_worker grants it).
asio::awaitable<std::vector<queue_status>> read_queue_status(database& db);

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/queue_status.ipp"
#endif
