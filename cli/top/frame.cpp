#include "frame.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace pgqueue_cli::top_view {

namespace {

std::optional<std::int64_t> grown(std::int64_t now, std::int64_t before) {
  if (now < before) return std::nullopt;
  return now - before;
}

void add(std::optional<std::int64_t>& sum, std::optional<std::int64_t> x) {
  if (x) sum = sum.value_or(0) + *x;
}

std::optional<double> larger(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::max(*a, *b);
}

}  // namespace

frame make_frame(std::vector<pgqueue::queue_status> now,
                 const std::vector<pgqueue::queue_status>* before, std::optional<double> seconds,
                 std::string database) {
  frame f;
  f.at = std::chrono::system_clock::now();
  f.database = std::move(database);
  f.seconds = before ? seconds : std::nullopt;
  std::map<std::string_view, const pgqueue::queue_status*> earlier;
  if (before) {
    for (const auto& q : *before) earlier.emplace(q.queue, &q);
  }
  const pgqueue::queue_status zero{};
  for (auto& q : now) {
    queue_row row{std::move(q), {}};
    if (before) {
      const auto it = earlier.find(row.status.queue);
      const auto& b = it == earlier.end() ? zero : *it->second;
      row.delta = {grown(row.status.enqueued_total, b.enqueued_total),
                   grown(row.status.done_total, b.done_total),
                   grown(row.status.failed_total, b.failed_total)};
    }
    auto& t = f.totals;
    t.ready += row.status.ready;
    t.scheduled += row.status.scheduled;
    t.claimed += row.status.claimed;
    t.dead += row.status.dead;
    t.cancelled += row.status.cancelled;
    t.done += row.status.done;
    t.waiting += row.status.waiting;
    t.enqueued_total += row.status.enqueued_total;
    t.done_total += row.status.done_total;
    t.failed_total += row.status.failed_total;
    t.oldest_ready_age_s = larger(t.oldest_ready_age_s, row.status.oldest_ready_age_s);
    t.lag_s = larger(t.lag_s, row.status.lag_s);
    add(f.total_delta.enqueued, row.delta.enqueued);
    add(f.total_delta.done, row.delta.done);
    add(f.total_delta.failed, row.delta.failed);
    f.rows.push_back(std::move(row));
  }
  order_rows(f.rows);
  return f;
}

std::optional<double> per_second(std::optional<std::int64_t> delta, const frame& f) {
  if (!delta || !f.seconds || *f.seconds <= 0) return std::nullopt;
  return static_cast<double>(*delta) / *f.seconds;
}

void order_rows(std::vector<queue_row>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const queue_row& a, const queue_row& b) {
    const auto& x = a.status;
    const auto& y = b.status;
    // A queue with lag first, the longest first; then the most ready; then by name.
    return std::tuple(!x.lag_s.has_value(), -x.lag_s.value_or(0), -x.ready, x.queue) <
           std::tuple(!y.lag_s.has_value(), -y.lag_s.value_or(0), -y.ready, y.queue);
  });
}

}  // namespace pgqueue_cli::top_view
