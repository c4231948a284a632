// The dashboard's rates: reads the queues' totals every interval and keeps, per queue, the
// rates between the last two readings (jobs enqueued, done and failed per second) and, for the
// throughput chart, the rates summed over all queues for the last `history` readings. The
// page draws its chart from these, so it has a history as soon as it opens.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

#include "queue_summary.hpp"

namespace pgqueue_cli::dashboard {

struct rates {
  double enqueued_per_s = 0, done_per_s = 0, failed_per_s = 0;
};

/// One point of the throughput chart: the rates between two readings, at the later one.
struct rate_sample {
  double unix_time_s = 0;  ///< the wall clock at the reading
  rates all;               ///< summed over the queues both readings had
};

class sampler {
 public:
  explicit sampler(std::chrono::milliseconds interval, std::size_t history = 300)
      : interval_(interval), history_(history) {}

  /// Reads every interval until stop(), or the connection closes for good. A failed reading
  /// (the server restarting) is said on stderr and skipped.
  asio::awaitable<void> run(pgqueue::database db);
  /// Ends run() (at once when it waits for the next reading, else after the reading).
  void stop();

  /// Records one reading taken at `at` (steady, for the rates) and `unix_time_s` (wall).
  void add(const std::vector<queue_status>& rows, std::chrono::steady_clock::time_point at,
           double unix_time_s);

  /// The rates of `queue` over the last interval; none before two readings had it.
  std::optional<rates> rates_of(const std::string& queue) const;
  const std::deque<rate_sample>& samples() const { return samples_; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  struct totals {
    std::int64_t enqueued = 0, done = 0, failed = 0;
  };
  std::chrono::milliseconds interval_;
  std::optional<asio::steady_timer> timer_;
  bool stopped_ = false;
  std::size_t history_;
  std::optional<std::chrono::steady_clock::time_point> last_at_;
  std::map<std::string, totals> last_;
  std::map<std::string, rates> rates_;
  std::deque<rate_sample> samples_;
};

}  // namespace pgqueue_cli::dashboard
