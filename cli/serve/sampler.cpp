#include "sampler.hpp"

#include <algorithm>
#include <iostream>

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include "../output.hpp"

namespace pgqueue_cli::dashboard {

namespace {

// A counter's rate; a counter that went down (reset, or the row it came from was deleted)
// counts as no change rather than a negative rate.
double rate(std::int64_t before, std::int64_t after, double seconds) {
  return after > before ? static_cast<double>(after - before) / seconds : 0.0;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void sampler::add(const std::vector<queue_status>& rows, std::chrono::steady_clock::time_point at,
                  double unix_time_s) {
  std::map<std::string, totals> now;
  for (const auto& r : rows) now[r.queue] = {r.enqueued_total, r.done_total, r.failed_total};
  if (last_at_ && at > *last_at_) {
    const double seconds = std::chrono::duration<double>(at - *last_at_).count();
    rates_.clear();
    rate_sample sample{unix_time_s, {}};
    for (const auto& [queue, t] : now) {
      const auto before = last_.find(queue);
      if (before == last_.end()) continue;  // new since the last reading: no rate yet
      const rates r{rate(before->second.enqueued, t.enqueued, seconds),
                    rate(before->second.done, t.done, seconds),
                    rate(before->second.failed, t.failed, seconds)};
      rates_[queue] = r;
      sample.all.enqueued_per_s += r.enqueued_per_s;
      sample.all.done_per_s += r.done_per_s;
      sample.all.failed_per_s += r.failed_per_s;
    }
    samples_.push_back(sample);
    while (samples_.size() > history_) samples_.pop_front();
  }
  last_ = std::move(now);
  last_at_ = at;
}

std::optional<rates> sampler::rates_of(const std::string& queue) const {
  const auto r = rates_.find(queue);
  if (r == rates_.end()) return std::nullopt;
  return r->second;
}

void sampler::stop() {
  stopped_ = true;
  if (timer_) timer_->cancel();
}

asio::awaitable<void> sampler::run(pgqueue::database db) {
  timer_.emplace(co_await asio::this_coro::executor);
  auto next = std::chrono::steady_clock::now();
  while (!stopped_ && db.is_open()) {
    std::string failure;
    try {
      const auto rows = co_await read_summary(db);
      add(rows, std::chrono::steady_clock::now(), unix_now());
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (stopped_) break;
    if (!failure.empty()) {
      std::cerr << "pgqueue serve: reading the queues: " << printable(failure) << "\n";
    }
    next = std::max(next + interval_, std::chrono::steady_clock::now());
    timer_->expires_at(next);
    // Cancelled by stop(): the loop's condition ends it.
    const auto [cancelled] =
        co_await timer_->async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    if (cancelled) continue;
  }
}

}  // namespace pgqueue_cli::dashboard
