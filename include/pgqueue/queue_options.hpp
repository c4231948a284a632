// Options of a queue handle: who claims, for how long, and how an idle claim waits.
#pragma once

#include <chrono>
#include <string_view>

namespace pgqueue {

/// Settings of a `queue` handle. The defaults suit jobs that finish within minutes. Trivially
/// destructible on purpose (see enqueue_options).
struct queue_options {
  /// Identifies this process in `claimed_by` (default: host:pid:random). Copied by the queue.
  std::string_view worker_id{};
  /// How long a claim is valid without a heartbeat.
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  /// How often a live lease heartbeats (default: a third of `lease`).
  std::chrono::milliseconds heartbeat_interval{0};
  /// An idle claim() re-checks the queue at least this often, since notifications can be lost.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(2)};
  /// Wake-ups of one queue are folded across the process: at most one on its way and at most
  /// one per this interval, so a flood of enqueues does not send a wake-up per job. An idle
  /// worker may hear of a job up to 1.5 times this much later during a flood; zero disables
  /// the gap. Each wake-up is a NOTIFY (a cluster-wide lock at commit): at 1 ms, 8 producers
  /// on 2 cores enqueued about 12% fewer jobs than at 2 ms; beyond 2 ms little changes.
  std::chrono::microseconds wake_interval{2000};
};

}  // namespace pgqueue
