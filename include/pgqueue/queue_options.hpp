// Options of a queue handle: who claims, for how long, and how an idle claim waits.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace pgqueue {

/// Settings of a `queue` handle. The defaults suit jobs that finish within minutes. Trivially
/// destructible on purpose (see enqueue_options). Constructing a queue refuses values outside
/// the ranges given below with `errc::invalid_argument`: a negative or enormous duration would
/// make a loop spin or overflow clock arithmetic.
struct queue_options {
  /// Shortest `lease`: 3 ms, so that its default heartbeat interval, a third of it, is at
  /// least 1 ms (a zero one would make the heartbeat loop spin).
  static constexpr std::chrono::milliseconds min_lease{3};
  /// Longest `lease`: 7 days. A lease only bounds how long a crashed holder keeps its jobs
  /// (a live one heartbeats), so a longer one only delays recovery.
  static constexpr std::chrono::milliseconds max_lease{std::chrono::hours(24 * 7)};
  /// Longest `poll_interval`: 24 hours.
  static constexpr std::chrono::milliseconds max_poll_interval{std::chrono::hours(24)};
  /// Longest `wake_interval`: 1 minute (beyond that, idle workers find jobs by polling).
  static constexpr std::chrono::microseconds max_wake_interval{std::chrono::minutes(1)};
  /// Longest `worker_id` in bytes (as a queue name).
  static constexpr std::size_t max_worker_id_bytes = 255;

  /// Identifies this process in `claimed_by` (default: host:pid:random). Copied by the queue.
  /// At most `max_worker_id_bytes` of valid UTF-8 without NUL bytes.
  std::string_view worker_id{};
  /// How long a claim is valid without a heartbeat. `min_lease` to `max_lease`.
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  /// How often a live lease heartbeats: 0 (the default) for a third of `lease`, else 1 ms to
  /// less than `lease` (a longer one lets every lease lapse before its first heartbeat, so a
  /// job outliving its lease would be handed to another worker while it still runs).
  std::chrono::milliseconds heartbeat_interval{0};
  /// An idle claim() re-checks the queue at least this often, since notifications can be lost.
  /// 1 ms to `max_poll_interval`.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(2)};
  /// Wake-ups of one queue are folded across the process: at most one on its way and at most
  /// one per this interval, so a flood of enqueues does not send a wake-up per job. An idle
  /// worker may hear of a job up to 1.5 times this much later during a flood; zero disables
  /// the gap. Each wake-up is a NOTIFY (a cluster-wide lock at commit): at 1 ms, 8 producers
  /// on 2 cores enqueued about 12% fewer jobs than at 2 ms; beyond 2 ms little changes.
  /// 0 to `max_wake_interval`.
  std::chrono::microseconds wake_interval{2000};
};

}  // namespace pgqueue
