#include "dashboard_data.hpp"

namespace pgqueue_cli::dashboard {

namespace {

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json queue_json(const queue_status& s, const sampler& rates) {
  nlohmann::json q{{"queue", s.queue},
                   {"paused", s.paused},
                   {"ready", s.ready},
                   {"scheduled", s.scheduled},
                   {"claimed", s.claimed},
                   {"dead", s.dead},
                   {"cancelled", s.cancelled},
                   {"done", s.done},
                   {"waiting", s.waiting},
                   {"oldest_ready_age_s", optional_number(s.oldest_ready_age_s)},
                   {"lag_s", optional_number(s.lag_s)},
                   {"enqueued_per_s", nullptr},
                   {"done_per_s", nullptr},
                   {"failed_per_s", nullptr}};
  if (const auto r = rates.rates_of(s.queue)) {
    q["enqueued_per_s"] = r->enqueued_per_s;
    q["done_per_s"] = r->done_per_s;
    q["failed_per_s"] = r->failed_per_s;
  }
  return q;
}

// A jsonb or json column's text as JSON (null for SQL NULL).
nlohmann::json json_column(const pgqueue::pg::result& r, int row, const char* name) {
  const int c = r.column(name);
  return r.is_null(row, c) ? nlohmann::json(nullptr)
                           : nlohmann::json::parse(r.get<std::string>(row, c));
}

nlohmann::json text_column(const pgqueue::pg::result& r, int row, const char* name) {
  const int c = r.column(name);
  return r.is_null(row, c) ? nlohmann::json(nullptr) : nlohmann::json(r.get<std::string>(row, c));
}

}  // namespace

asio::awaitable<nlohmann::json> read_dashboard(pgqueue::database& db, const sampler& rates,
                                               bool actions, const data_limits& limits) {
  const auto summary = co_await read_summary(db);
  nlohmann::json out{
      {"time",
       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"interval_s", std::chrono::duration<double>(rates.interval()).count()},
      {"actions", actions},
      {"queues", nlohmann::json::array()},
      {"samples", nlohmann::json::array()},
      {"dead", nlohmann::json::array()},
      {"next", nlohmann::json::array()}};
  std::vector<std::string> names;
  for (const auto& s : summary) {
    out["queues"].push_back(queue_json(s, rates));
    names.push_back(s.queue);
  }
  for (const auto& s : rates.samples()) {
    out["samples"].push_back({{"t", s.unix_time_s},
                              {"enqueued_per_s", s.all.enqueued_per_s},
                              {"done_per_s", s.all.done_per_s},
                              {"failed_per_s", s.all.failed_per_s}});
  }

  // The newest dead jobs (through the index on (state, finished_at)).
  pgqueue::pg::params dead_params{limits.dead_jobs, limits.payload_chars};
  auto dead = co_await db.query_prepared(R"(
    SELECT id, queue, attempts, max_attempts,
           extract(epoch FROM finished_at)::float8 AS finished_at, last_error,
           errors::text AS errors, left(payload::text, $2) AS payload
      FROM pgqueue.jobs
     WHERE state = 'dead'
     ORDER BY finished_at DESC NULLS LAST, id DESC
     LIMIT $1)",
                                         std::move(dead_params));
  for (int i = 0; i < dead.rows(); ++i) {
    out["dead"].push_back(
        {{"id", dead.get<std::int64_t>(i, 0)},
         {"queue", dead.get<std::string>(i, 1)},
         {"attempts", dead.get<int>(i, 2)},
         {"max_attempts", dead.get<int>(i, 3)},
         {"finished_at",
          dead.is_null(i, 4) ? nlohmann::json(nullptr) : nlohmann::json(dead.get<double>(i, 4))},
         {"last_error", text_column(dead, i, "last_error")},
         {"errors", json_column(dead, i, "errors")},
         {"payload", text_column(dead, i, "payload")}});
  }

  // Each queue's next ready jobs in claim order (through the ready index, per queue).
  pgqueue::pg::params next_params{names, limits.next_per_queue, limits.payload_chars};
  auto next = co_await db.query_prepared(R"(
    SELECT j.id, j.queue, j.priority, j.attempts, j.run_after > now() AS scheduled,
           extract(epoch FROM j.run_after - now())::float8 AS due_in_s,
           left(j.payload::text, $3) AS payload
      FROM unnest($1::text[]) AS q(name)
     CROSS JOIN LATERAL (
       SELECT * FROM pgqueue.jobs j
        WHERE j.queue = q.name AND j.state = 'ready'
        ORDER BY j.priority DESC, j.run_after, j.id
        LIMIT $2) j
     ORDER BY j.queue, j.priority DESC, j.run_after, j.id)",
                                         std::move(next_params));
  for (int i = 0; i < next.rows(); ++i) {
    out["next"].push_back({{"id", next.get<std::int64_t>(i, 0)},
                           {"queue", next.get<std::string>(i, 1)},
                           {"priority", next.get<int>(i, 2)},
                           {"attempts", next.get<int>(i, 3)},
                           {"scheduled", next.get<bool>(i, 4)},
                           {"due_in_s", next.get<double>(i, 5)},
                           {"payload", text_column(next, i, "payload")}});
  }
  co_return out;
}

}  // namespace pgqueue_cli::dashboard
