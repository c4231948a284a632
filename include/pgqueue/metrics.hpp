// Prometheus metrics: the queues as the server holds them (write_queue_metrics) and what this
// process's workers did (worker_metrics), as text an application serves from its own HTTP
// endpoint (`pgqueue serve` serves the first at /metrics).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/detail/prometheus_text.hpp"
#include "pgqueue/job_event.hpp"
#include "pgqueue/queue_status.hpp"

namespace pgqueue {

/// Appends the queues' metrics in Prometheus' text format (0.0.4) to `out`, one series per
/// queue (label `queue`):
/// - `pgqueue_queue_jobs{queue,state}` (gauge): jobs by state: ready (due now), scheduled,
///   claimed, dead, cancelled, done (retained);
/// - `pgqueue_queue_paused` (gauge, 0 or 1);
/// - `pgqueue_queue_oldest_ready_age_seconds`, `pgqueue_queue_lag_seconds` (gauges: since the
///   oldest due job's enqueue, and since it became due; 0 when none is due): alert on lag;
/// - `pgqueue_queue_enqueued_total`, `pgqueue_queue_done_total`, `pgqueue_queue_failed_total`
///   (counters: use rate()).
/// No I/O: read `status` with read_queue_status() (one round trip).
void write_queue_metrics(std::string& out, const std::vector<queue_status>& status);

/// Collects what workers did, per queue, for Prometheus: give `observer()` to each worker's
/// `worker_options::observer` (any number of workers, on any threads), and call write() from
/// the application's metrics endpoint. Series (label `queue`):
/// - `pgqueue_worker_jobs_claimed_total`, `..._acked_total`, `..._failed_total`,
///   `..._lost_total`, `..._released_total` (counters, as worker_stats counts them);
/// - `pgqueue_job_wait_seconds` (histogram): enqueue to start, i.e. from when a job became due
///   (its enqueue, run_after, or retry time) to its claim, by the server's clock;
/// - `pgqueue_job_run_seconds` (histogram): the handler's run time, for jobs that finished or
///   failed.
/// Each event costs a mutex and a map lookup by queue name.
class worker_metrics {
 public:
  /// Upper bounds (seconds) of both histograms' buckets: 0.5 ms to 5 minutes.
  static std::vector<double> default_buckets() {
    return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            0.5,    1,     2.5,    5,     10,   30,    60,   300};
  }

  /// `wait_buckets` and `run_buckets`: upper bounds in seconds (sorted and deduplicated here;
  /// NaN and infinities are dropped: the +Inf bucket is always there).
  explicit worker_metrics(std::vector<double> wait_buckets = default_buckets(),
                          std::vector<double> run_buckets = default_buckets());

  /// An observer that records into this object (it shares the state: it may outlive it).
  job_observer observer() const;

  /// Records one event (what observer() does).
  void record(const job_event& e);

  /// Appends the series above, in the text format, to `out`. Thread-safe.
  void write(std::string& out) const;

 private:
  struct per_queue {
    explicit per_queue(const std::vector<double>* wait, const std::vector<double>* run)
        : wait(wait), run(run) {}
    std::uint64_t claimed = 0, acked = 0, failed = 0, lost = 0, released = 0;
    detail::prometheus::histogram wait;
    detail::prometheus::histogram run;
  };
  struct state {
    std::vector<double> wait_buckets, run_buckets;
    mutable std::mutex mutex;
    std::map<std::string, per_queue, std::less<>> queues;
  };
  std::shared_ptr<state> s_;
};

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/metrics.ipp"
#endif
