// Options for adding jobs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace pgqueue {

/// How a job is added. Designated initialisers read well:
/// `q.enqueue(payload, {.idempotency_key = "welcome-42", .priority = 5})`.
/// Every member is trivially destructible on purpose: GCC 12 destroys an aggregate temporary
/// twice when it is built inside a co_await expression, which the call above is.
struct enqueue_options {
  /// Longest idempotency key in bytes (as a queue name). The server's index on the key would
  /// refuse an incompressible key of about 2.7 kB with SQLSTATE 54000 but take a longer
  /// compressible one, so the client sets a plain limit well below that.
  static constexpr std::size_t max_idempotency_key_bytes = 255;

  /// Dedupe key: while a job with this key exists in the queue, enqueueing it again returns
  /// that job's id instead of adding another. Copied when enqueue() is called. At most
  /// `max_idempotency_key_bytes`; enqueue refuses a longer one with `errc::invalid_argument`.
  std::optional<std::string_view> idempotency_key{};
  /// Higher runs sooner. Each priority a queue has ever used costs each of its claims about
  /// 1.4 us: use a fixed set of tens, not a timestamp or deadline (docs/operations.md).
  int priority = 0;
  /// Not claimable before this time (default: now).
  std::optional<std::chrono::system_clock::time_point> run_after{};
  /// Runs at most this many times (>= 1); after that the job ends `dead`.
  int max_attempts = 5;
  /// Ids of jobs (of any queue) this job waits for: it is `waiting`, not claimable, until
  /// every one of them is done, then ready (due at the later of `run_after` and that moment).
  /// If one of them ends `dead` the job ends dead too ("dependency N is dead"), if one is
  /// cancelled it is cancelled; jobs already done count as done. Copied when enqueue() is
  /// called; empty (the default) for none. In a batch, every job waits for the same ids
  /// (fan-out: many jobs after one; fan-in: one job after many). The enqueue refuses an id that
  /// is not a job (SQLSTATE 23503, nothing added) and holds a share lock on the parents' rows
  /// until its transaction ends (their ack waits meanwhile). README, "Jobs that wait for other
  /// jobs", has the rules.
  std::span<const std::int64_t> depends_on{};
};

}  // namespace pgqueue
