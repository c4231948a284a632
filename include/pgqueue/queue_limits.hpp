// pgqueue::queue_limits: fleet-wide concurrency and rate limits per queue
// (pgqueue.set_queue_limits and pgqueue.limits in SQL).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"

namespace pgqueue {

/// Limits on how a queue's jobs are handed out, across every worker and process: at most
/// `max_claimed` of them claimed at once, and at most `rate` started per `rate_period` (a
/// token bucket of `burst` tokens, refilled continuously). A claim beyond a limit returns
/// nothing; idle workers wait for a job to end or for the next token, they do not poll. An
/// empty member sets no such limit; both empty removes the queue's limits.
struct queue_limits {
  std::string queue{};
  std::optional<int> max_claimed{};  ///< >= 1: jobs of the queue claimed at once, fleet-wide
  std::optional<int> rate{};         ///< >= 1: jobs started per `rate_period`
  /// The period of `rate`: 1 ms to 1 year. (Read back for a queue without a rate: 1 s.)
  std::chrono::milliseconds rate_period = std::chrono::seconds(1);
  /// >= 1: jobs that may start at once after a quiet spell (default: `rate`). Needs a rate.
  std::optional<int> burst{};
};

/// Sets `l.queue`'s limits (replacing the ones it had). True when something changed; setting
/// the limits a queue has already changes nothing, so every process may set them at start-up.
/// One round trip; runs `pgqueue.set_queue_limits`, which only the schema's owner may call
/// unless granted. Replaces every limit the queue had: a member left empty removes that
/// limit. Throws the server's 22023 for a limit below 1, a period outside 1 ms to 1 year, a
/// burst without a rate or a bad queue name (nothing stored), and on a session whose default
/// isolation is REPEATABLE READ or SERIALIZABLE (the function runs in READ COMMITTED only).
asio::awaitable<bool> set_queue_limits(database& db, const queue_limits& l);

/// Where a limited queue stands (`pgqueue.limits()`).
struct queue_limit_status {
  queue_limits limits;
  std::int64_t claimed = 0;        ///< its jobs claimed now
  std::optional<double> tokens{};  ///< tokens in its bucket now (a fraction while refilling)
};

/// Every queue with limits, by name. One round trip; counts each concurrency-limited queue's
/// claimed jobs.
asio::awaitable<std::vector<queue_limit_status>> read_queue_limits(database& db);

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/queue_limits.ipp"
#endif
