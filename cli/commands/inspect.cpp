// pgqueue queues, jobs QUEUE --state S, job ID: what is in the queues, read-only.
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../commands.hpp"
#include "../output.hpp"

namespace pgqueue_cli {

int queues(const context& ctx) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    // pgqueue.queue_summary reads each state through its own index, done jobs from counters.
    auto r = co_await db.query(R"(
      SELECT queue, paused, ready, scheduled, claimed, dead, cancelled, done, waiting,
             round(oldest_ready_age_s::numeric, 3) AS oldest_age_s, round(lag_s::numeric, 3) AS lag_s
        FROM pgqueue.queue_summary())");
    print(std::cout, r, ctx.json,
          "ready,scheduled,claimed,dead,cancelled,done,waiting,oldest_age_s,lag_s", "paused");
    co_return exit_code::ok;
  });
}

int jobs(const context& ctx, const std::string& queue, const std::string& state, int limit) {
  static const std::set<std::string> states{"ready", "claimed",   "done",
                                            "dead",  "cancelled", "waiting"};
  if (!states.contains(state)) {
    throw usage_error("--state must be ready, claimed, done, dead, cancelled or waiting, not '" +
                      state + "'");
  }
  if (limit < 1) throw usage_error("--limit must be at least 1");
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    pgqueue::pg::params p{queue, state, limit};
    auto r = co_await db.query(R"(
      SELECT id, priority, attempts, max_attempts, run_after, updated_at, claimed_by,
             lease_until, last_error
        FROM pgqueue.jobs
       WHERE queue = $1 AND state = $2
       ORDER BY id
       LIMIT $3)",
                               std::move(p));
    print(std::cout, r, ctx.json, "id,priority,attempts,max_attempts");
    co_return exit_code::ok;
  });
}

int job(const context& ctx, std::int64_t id) {
  return ctx.run([&](pgqueue::database& db) -> asio::awaitable<int> {
    pgqueue::pg::params p{id};
    auto r = co_await db.query(R"(
      SELECT id, queue, state, payload::text AS payload, idempotency_key, priority, attempts,
             max_attempts, run_after, claimed_by, claimed_at, lease_until, last_error,
             created_at, updated_at, finished_at, errors::text AS errors,
             -- the jobs it waits for (a dead or cancelled job keeps them), NULL for none
             (SELECT jsonb_agg(jsonb_build_object('id', d.depends_on, 'state', p.state)
                               ORDER BY d.depends_on)
                FROM pgqueue.job_dependencies d LEFT JOIN pgqueue.jobs p ON p.id = d.depends_on
               WHERE d.job_id = j.id)::text AS waits_for
        FROM pgqueue.jobs j WHERE id = $1)",
                               std::move(p));
    if (r.rows() == 0) {
      if (ctx.json) {
        std::cout << "null\n";
      } else {
        std::cerr << "pgqueue job: no job " << id << "\n";
      }
      co_return exit_code::answer_no;
    }
    if (ctx.json) {  // one object (not an array of one): the payload and errors as JSON
      std::ostringstream rows;
      print(rows, r, true, "id,priority,attempts,max_attempts,payload,errors,waits_for");
      std::cout << nlohmann::json::parse(rows.str()).at(0).dump(2) << "\n";
      co_return exit_code::ok;
    }
    const int errors = r.column("errors");
    const int waits_for = r.column("waits_for");
    for (int c = 0; c < r.columns(); ++c) {  // one field per line: payloads and errors are long
      if (c == errors) continue;
      std::string name(r.column_name(c));
      std::string text = r.is_null(0, c) ? "-" : printable(r.get<std::string>(0, c));
      if (c == waits_for && !r.is_null(0, c)) {  // "12 (claimed), 13 (gone)"
        text.clear();
        for (const auto& d : nlohmann::json::parse(r.get<std::string>(0, c))) {
          text += (text.empty() ? "" : ", ") + std::to_string(d.value("id", std::int64_t{0})) +
                  " (" + (d["state"].is_string() ? d["state"].get<std::string>() : "gone") + ")";
        }
      }
      std::cout << name << ":" << std::string(17 - name.size(), ' ') << text << "\n";
    }
    // The failure history, oldest first: why the job keeps failing.
    if (!r.is_null(0, errors)) {
      std::cout << "errors:\n";
      for (const auto& e : nlohmann::json::parse(r.get<std::string>(0, errors))) {
        std::cout << "  attempt " << e.value("attempt", 0) << " at "
                  << printable(e.value("at", std::string("?"))) << " by "
                  << (e["holder"].is_string() ? printable(e["holder"].get<std::string>()) : "-")
                  << ": "
                  << (e["error"].is_string() ? printable(e["error"].get<std::string>()) : "-")
                  << "\n";
      }
    }
    co_return exit_code::ok;
  });
}

}  // namespace pgqueue_cli
