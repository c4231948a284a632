// Out-of-line definitions of pgqueue/metrics.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include <algorithm>
#include <chrono>

#include "pgqueue/metrics.hpp"

namespace pgqueue {

PGQUEUE_DECL void write_queue_metrics(std::string& out, const std::vector<queue_status>& status) {
  namespace p = detail::prometheus;
  const auto labels = [](const queue_status& q) {
    std::string l;
    p::append_label(l, "queue", q.queue);
    return l;
  };
  p::append_family(out, "pgqueue_queue_jobs", "gauge",
                   "Jobs in a queue by state (ready: due now; scheduled: due later; waiting: "
                   "for other jobs to finish; done: retained until gc).");
  for (const auto& q : status) {
    const std::pair<const char*, std::int64_t> states[] = {
        {"ready", q.ready},    {"scheduled", q.scheduled}, {"claimed", q.claimed},
        {"dead", q.dead},      {"cancelled", q.cancelled}, {"done", q.done},
        {"waiting", q.waiting}};
    for (const auto& [state, n] : states) {
      std::string l = labels(q);
      l += ',';
      p::append_label(l, "state", state);
      p::append_sample(out, "pgqueue_queue_jobs", l, n);
    }
  }
  p::append_family(out, "pgqueue_queue_paused", "gauge",
                   "1 when the queue is paused (it accepts jobs but hands none out).");
  for (const auto& q : status) {
    p::append_sample(out, "pgqueue_queue_paused", labels(q), std::int64_t{q.paused ? 1 : 0});
  }
  p::append_family(out, "pgqueue_queue_oldest_ready_age_seconds", "gauge",
                   "Age of the queue's oldest ready job due now (0 when none is).");
  for (const auto& q : status) {
    p::append_sample(out, "pgqueue_queue_oldest_ready_age_seconds", labels(q),
                     q.oldest_ready_age_s.value_or(0.0));
  }
  p::append_family(out, "pgqueue_queue_lag_seconds", "gauge",
                   "How long the oldest due ready job has waited since it became due (0 when "
                   "none is due).");
  for (const auto& q : status) {
    p::append_sample(out, "pgqueue_queue_lag_seconds", labels(q), q.lag_s.value_or(0.0));
  }
  const std::pair<const char*, std::int64_t queue_status::*> totals[] = {
      {"enqueued", &queue_status::enqueued_total},
      {"done", &queue_status::done_total},
      {"failed", &queue_status::failed_total}};
  for (const auto& [what, member] : totals) {
    const std::string name = std::string("pgqueue_queue_") + what + "_total";
    p::append_family(
        out, name, "counter",
        std::string("Jobs ") + what +
            (member == &queue_status::failed_total ? " attempts (nacks and expired leases), ever."
                                                   : ", ever (gc'd jobs included)."));
    for (const auto& q : status) p::append_sample(out, name, labels(q), q.*member);
  }
}

namespace detail {
// Finite bounds only (+Inf is always the last bucket; NaN and -Inf bound nothing), sorted,
// once each.
inline std::vector<double> ascending(std::vector<double> b) {
  std::erase_if(b, [](double v) { return !std::isfinite(v); });
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}
}  // namespace detail

PGQUEUE_DECL worker_metrics::worker_metrics(std::vector<double> wait_buckets,
                                            std::vector<double> run_buckets)
    : s_(std::make_shared<state>()) {
  s_->wait_buckets = detail::ascending(std::move(wait_buckets));
  s_->run_buckets = detail::ascending(std::move(run_buckets));
}

PGQUEUE_DECL job_observer worker_metrics::observer() const {
  return [m = *this](const job_event& e) mutable { m.record(e); };
}

PGQUEUE_DECL void worker_metrics::record(const job_event& e) {
  using seconds = std::chrono::duration<double>;
  std::lock_guard lock(s_->mutex);
  auto it = s_->queues.find(e.job.queue);
  if (it == s_->queues.end()) {
    it = s_->queues.emplace(e.job.queue, per_queue(&s_->wait_buckets, &s_->run_buckets)).first;
  }
  auto& q = it->second;
  switch (e.kind) {
    case job_event_kind::claimed:
      ++q.claimed;
      // A job claimed before it was due cannot be; clocks are the server's, so only rounding.
      q.wait.observe(std::max(0.0, seconds(e.job.claimed_at - e.job.due_at).count()));
      break;
    case job_event_kind::started:
      break;
    case job_event_kind::finished:
      ++q.acked;
      q.run.observe(seconds(e.run_time).count());
      break;
    case job_event_kind::failed:
      ++q.failed;
      q.run.observe(seconds(e.run_time).count());
      break;
    case job_event_kind::lost:
      ++q.lost;
      break;
    case job_event_kind::released:
      ++q.released;
      break;
  }
}

PGQUEUE_DECL void worker_metrics::write(std::string& out) const {
  namespace p = detail::prometheus;
  std::lock_guard lock(s_->mutex);
  const auto labels = [](const std::string& queue) {
    std::string l;
    p::append_label(l, "queue", queue);
    return l;
  };
  const std::pair<const char*, std::uint64_t per_queue::*> counters[] = {
      {"claimed", &per_queue::claimed},
      {"acked", &per_queue::acked},
      {"failed", &per_queue::failed},
      {"lost", &per_queue::lost},
      {"released", &per_queue::released}};
  for (const auto& [what, member] : counters) {
    const std::string name = std::string("pgqueue_worker_jobs_") + what + "_total";
    p::append_family(out, name, "counter",
                     std::string("Jobs this process's workers ") + what + " (worker_stats).");
    for (const auto& [queue, q] : s_->queues) p::append_sample(out, name, labels(queue), q.*member);
  }
  p::append_family(out, "pgqueue_job_wait_seconds", "histogram",
                   "From when a job became due (enqueued, run_after, retry) to its claim.");
  for (const auto& [queue, q] : s_->queues)
    q.wait.append(out, "pgqueue_job_wait_seconds", labels(queue));
  p::append_family(out, "pgqueue_job_run_seconds", "histogram",
                   "Handler run time of jobs that finished or failed.");
  for (const auto& [queue, q] : s_->queues)
    q.run.append(out, "pgqueue_job_run_seconds", labels(queue));
}

}  // namespace pgqueue
