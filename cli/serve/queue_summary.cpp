// A stand-in until pgqueue.queue_summary() and pgqueue/metrics.hpp are on main: the same
// columns from the tables there are (the totals approximated from the rows retained).
#include "queue_summary.hpp"

namespace pgqueue_cli::dashboard {

asio::awaitable<std::vector<queue_status>> read_summary(pgqueue::database& db) {
  auto r = co_await db.query(R"(
    WITH names AS (SELECT queue FROM pgqueue.jobs UNION SELECT queue FROM pgqueue.paused_queues
                   UNION SELECT queue FROM pgqueue.done_counts)
    SELECT n.queue,
           EXISTS (SELECT FROM pgqueue.paused_queues p WHERE p.queue = n.queue) AS paused,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'ready'
               AND j.run_after <= now()) AS ready,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'ready'
               AND j.run_after > now()) AS scheduled,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'claimed')
             AS claimed,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'dead')
             AS dead,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'cancelled')
             AS cancelled,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue AND j.state = 'done')
             AS done,
           (SELECT extract(epoch FROM now() - min(j.created_at))::float8 FROM pgqueue.jobs j
             WHERE j.queue = n.queue AND j.state = 'ready') AS oldest_ready_age_s,
           (SELECT extract(epoch FROM now() - min(j.run_after))::float8 FROM pgqueue.jobs j
             WHERE j.queue = n.queue AND j.state = 'ready' AND j.run_after <= now())
             AS lag_s,
           (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = n.queue) AS enqueued_total,
           coalesce((SELECT sum(c.n) FROM pgqueue.done_counts c WHERE c.queue = n.queue), 0)::bigint
             AS done_total,
           coalesce((SELECT sum(jsonb_array_length(j.errors)) FROM pgqueue.jobs j
                      WHERE j.queue = n.queue), 0)::bigint AS failed_total
      FROM names n ORDER BY n.queue)");
  std::vector<queue_status> rows;
  for (int i = 0; i < r.rows(); ++i) {
    queue_status s;
    s.queue = r.get<std::string>(i, 0);
    s.paused = r.get<bool>(i, 1);
    s.ready = r.get<std::int64_t>(i, 2);
    s.scheduled = r.get<std::int64_t>(i, 3);
    s.claimed = r.get<std::int64_t>(i, 4);
    s.dead = r.get<std::int64_t>(i, 5);
    s.cancelled = r.get<std::int64_t>(i, 6);
    s.done = r.get<std::int64_t>(i, 7);
    if (!r.is_null(i, 8)) s.oldest_ready_age_s = r.get<double>(i, 8);
    if (!r.is_null(i, 9)) s.lag_s = r.get<double>(i, 9);
    s.enqueued_total = r.get<std::int64_t>(i, 10);
    s.done_total = r.get<std::int64_t>(i, 11);
    s.failed_total = r.get<std::int64_t>(i, 12);
    rows.push_back(std::move(s));
  }
  co_return rows;
}

void write_metrics(std::string& out, const std::vector<queue_status>& rows) {
  const auto label = [](const std::string& q) {
    std::string v;
    for (char c : q) {
      if (c == '\\' || c == '"') v += '\\';
      if (c == '\n') {
        v += "\\n";
        continue;
      }
      v += c;
    }
    return "queue=\"" + v + "\"";
  };
  out += "# TYPE pgqueue_queue_jobs gauge\n";
  for (const auto& s : rows) {
    const std::pair<const char*, std::int64_t> states[] = {
        {"ready", s.ready}, {"scheduled", s.scheduled}, {"claimed", s.claimed},
        {"dead", s.dead},   {"cancelled", s.cancelled}, {"done", s.done}};
    for (const auto& [state, n] : states) {
      out += "pgqueue_queue_jobs{" + label(s.queue) + ",state=\"" + state + "\"} " +
             std::to_string(n) + "\n";
    }
  }
  out += "# TYPE pgqueue_queue_paused gauge\n";
  for (const auto& s : rows) {
    out += "pgqueue_queue_paused{" + label(s.queue) + "} " + (s.paused ? "1" : "0") + "\n";
  }
  out += "# TYPE pgqueue_queue_enqueued_total counter\n";
  for (const auto& s : rows) {
    out += "pgqueue_queue_enqueued_total{" + label(s.queue) + "} " +
           std::to_string(s.enqueued_total) + "\n";
  }
}

}  // namespace pgqueue_cli::dashboard
