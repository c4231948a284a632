// observe (opt-in: building its database takes minutes): what `pgqueue queues`, `top`, the
// dashboard and the metrics read, with 10,000,000 retained done jobs over 1,000 queues (and per
// queue 20 ready, 5 scheduled, 2 claimed and 3 dead jobs; 7 failed attempts counted). Times
// `SELECT * FROM pgqueue.depth`, `SELECT * FROM pgqueue.queue_summary()`, read_queue_status +
// write_queue_metrics (the metrics text), and `pgqueue queues` end to end (a process: start,
// connect, query, print); 20 runs each after one warm-up. The target: each query under
// 50 ms. The rows go straight into the tables (a few INSERT ... SELECT generate_series), with
// the done counters set to match, then VACUUM ANALYZE. --observe-keep keeps the database and
// reuses it in the next run when it has the same size.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pgqueue/metrics.hpp>

#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "../support/tool.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

constexpr int observe_queues = 1000;
constexpr int observe_runs = 20;
constexpr long rows_per_statement = 1000000;

// The queue of row `g` (an SQL expression): q0000 .. q0999.
const std::string queue_of_g =
    "'q' || lpad((g % " + std::to_string(observe_queues) + ")::text, 4, '0')";

// Whether `db` holds what build() makes for `retained` (a kept database from an earlier run).
asio::awaitable<bool> built_already(const pgqueue::database& db, long retained) {
  auto r = co_await db.query(
      "SELECT coalesce(sum(n), 0)::bigint, count(DISTINCT queue) FROM pgqueue.done_counts");
  co_return r.get<std::int64_t>(0, 0) == retained&& r.get<std::int64_t>(0, 1) == observe_queues;
}

asio::awaitable<void> build(const pgqueue::database& db, long retained) {
  co_await db.execute_script("SET synchronous_commit = off");
  for (long from = 0; from < retained; from += rows_per_statement) {
    const long to = std::min(retained, from + rows_per_statement);
    say("observe",
        "inserting done jobs: " + std::to_string(to) + " of " + std::to_string(retained));
    co_await db.query(
        "INSERT INTO pgqueue.jobs (queue, payload, state, attempts, claimed_by, claimed_at, "
        "created_at, updated_at, finished_at) "
        "SELECT " +
            queue_of_g +
            ", $1::jsonb, 'done', 1, 'w', t, t, t, t "
            "FROM (SELECT g, now() - interval '7 days' + g * interval '50 ms' AS t "
            "FROM generate_series($2::bigint, $3::bigint - 1) g) s",
        {bench_payload, from, to});
  }
  // The counters as ack keeps them: done jobs per queue (slot 0), failed attempts.
  co_await db.query(
      "INSERT INTO pgqueue.done_counts (queue, slot, n) "
      "SELECT " +
          queue_of_g +
          ", 0, count(*) FROM generate_series(0, $1::bigint - 1) g "
          "GROUP BY 1",
      {retained});
  co_await db.query(
      "INSERT INTO pgqueue.queue_totals (queue, slot, failed) "
      "SELECT " +
          queue_of_g + ", 0, 7 FROM generate_series(0, $1::int - 1) g",
      {observe_queues});
  say("observe", "inserting ready, scheduled, claimed and dead jobs");
  const std::string per_queue = "FROM generate_series(0, $2::int - 1) g";
  co_await db.query(
      "INSERT INTO pgqueue.jobs (queue, payload, state, run_after, created_at) "
      "SELECT " +
          queue_of_g +
          ", $1::jsonb, 'ready', now() - (g % 60) * interval '1 s', "
          "now() - (g % 60) * interval '1 s' " +
          per_queue,
      {bench_payload, 20 * observe_queues});
  co_await db.query(
      "INSERT INTO pgqueue.jobs (queue, payload, state, run_after) "
      "SELECT " +
          queue_of_g + ", $1::jsonb, 'ready', now() + interval '1 day' " + per_queue,
      {bench_payload, 5 * observe_queues});
  co_await db.query(
      "INSERT INTO pgqueue.jobs (queue, payload, state, attempts, claimed_by, claimed_at, "
      "lease_until, lease_token) "
      "SELECT " +
          queue_of_g +
          ", $1::jsonb, 'claimed', 1, 'w', now(), "
          "now() + interval '1 day', 1 " +
          per_queue,
      {bench_payload, 2 * observe_queues});
  co_await db.query(
      "INSERT INTO pgqueue.jobs (queue, payload, state, attempts, max_attempts, last_error, "
      "finished_at) "
      "SELECT " +
          queue_of_g + ", $1::jsonb, 'dead', 5, 5, 'failed', now() " + per_queue,
      {bench_payload, 3 * observe_queues});
  say("observe", "VACUUM ANALYZE");
  co_await db.execute_script(
      "VACUUM ANALYZE pgqueue.jobs, pgqueue.done_counts, "
      "pgqueue.queue_totals");
  // Checks: the counters say what the table holds.
  auto r = co_await db.query(
      "SELECT (SELECT count(*) FROM pgqueue.jobs WHERE state = 'done'), "
      "(SELECT sum(done) FROM pgqueue.queue_summary()), "
      "(SELECT count(*) FROM pgqueue.queue_summary())");
  if (r.get<std::int64_t>(0, 0) != retained || r.get<std::int64_t>(0, 1) != retained ||
      r.get<std::int64_t>(0, 2) != observe_queues) {
    throw std::runtime_error("observe: the database does not hold what was built");
  }
}

// Milliseconds of each of `observe_runs` calls of `op`, after one call not counted.
asio::awaitable<latency> time_runs(std::function<asio::awaitable<void>()> op) {
  auto warm_up = op();
  co_await std::move(warm_up);
  std::vector<double> ms;
  for (int i = 0; i < observe_runs; ++i) {
    const auto t0 = clock::now();
    auto run = op();
    co_await std::move(run);
    ms.push_back(ms_between(t0, clock::now()));
  }
  co_return summarize(ms);
}

void add_row(context& ctx, const std::string& id, const std::string& label, latency l,
             std::string note = "") {
  row r{id, "observe", label};
  r.lat = l;
  r.note = std::move(note);
  ctx.rep.add(std::move(r));
}

}  // namespace

void run_observe(context& ctx) {
  const std::string dbname = "pgqueue_bench_observe";
  const long retained = ctx.opt.observe_retained;
  const std::string size = std::to_string(retained / 1000000) + "M done, " +
                           std::to_string(observe_queues) + " queues: ";
  run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    std::optional<pgqueue::database> db;
    if (ctx.opt.observe_keep) {
      try {
        auto kept = co_await pgqueue::connect(ex, with_dbname(ctx.opt.dsn, dbname));
        db.emplace(std::move(kept));
      } catch (const std::exception&) {  // none kept yet
      }
    }
    bool reuse = false;
    if (db) reuse = co_await built_already(*db, retained);
    if (reuse) {
      say("observe", "reusing the database of an earlier run (--observe-keep)");
    } else {
      if (db) db->close();
      auto fresh = co_await fresh_database(ctx.opt, dbname, true);
      db.emplace(std::move(fresh));
      const auto start = clock::now();
      co_await build(*db, retained);
      say("observe", "built in " + std::to_string(static_cast<long>(seconds_since(start))) + " s");
    }
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    auto depth = co_await time_runs(
        [&]() -> asio::awaitable<void> { co_await db->query("SELECT * FROM pgqueue.depth"); });
    add_row(ctx, "observe.depth", size + "SELECT * FROM pgqueue.depth", depth);
    auto summary = co_await time_runs([&]() -> asio::awaitable<void> {
      co_await db->query("SELECT * FROM pgqueue.queue_summary()");
    });
    add_row(ctx, "observe.summary", size + "SELECT * FROM pgqueue.queue_summary()", summary);
    std::size_t text_size = 0;
    auto metrics = co_await time_runs([&]() -> asio::awaitable<void> {
      auto status = co_await pgqueue::read_queue_status(*db);
      std::string text;
      pgqueue::write_queue_metrics(text, status);
      text_size = text.size();
    });
    add_row(ctx, "observe.metrics", size + "read_queue_status + write_queue_metrics", metrics,
            std::to_string(text_size / 1024) + " KiB of text");
    int failed_runs = 0;
    auto tool = co_await time_runs([&]() -> asio::awaitable<void> {
      if (run_tool({"--dsn", dsn, "queues"}).exit_code != 0) ++failed_runs;
      co_return;
    });
    add_row(ctx, "observe.tool_queues",
            size + "pgqueue queues, a process end to end (start, connect, query, print)", tool,
            failed_runs ? std::to_string(failed_runs) + " runs failed" : "");
    db->close();
    if (!ctx.opt.observe_keep) co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
