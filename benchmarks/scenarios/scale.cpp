// scale: drain rate and the time of `SELECT * FROM pgqueue.depth` with no completed jobs
// retained and with many (1,000,000 by default; 10,000,000 with --scale-10m). Retained jobs are
// inserted as done rows in bulk, their counter set as ack would, then VACUUM ANALYZE. At each
// size the raw SQL is measured too (reference (a): pgbench, claim_batch(100) + ack_batch), to
// tell the schema's share of a slowdown from the client's.
#include <algorithm>
#include <string>
#include <vector>

#include "../support/pgbench.hpp"
#include "../support/progress.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

// Ready jobs at each size: what depth counts besides the retained ones, and what the worker drains.
const long scale_jobs = 20000;

const drain_setup scale_worker{.worker = {.concurrency = 64}};  // as drain.c64.batched

std::string count_text(long n) {
  if (n >= 1000000 && n % 1000000 == 0) return std::to_string(n / 1000000) + "M";
  if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + "k";
  return std::to_string(n);
}

// Inserts `n` completed jobs (500,000 per transaction) and adds them to the done counter.
asio::awaitable<void> retain_done(const pgqueue::database& db, long n) {
  for (long done = 0; done < n; done += 500000) {
    const long k = std::min(500000L, n - done);
    say("scale",
        "retaining completed jobs: " + std::to_string(done + k) + " of " + std::to_string(n));
    co_await db.query(
        "INSERT INTO pgqueue.jobs (queue, payload, state, attempts, claimed_by, claimed_at, "
        "created_at, updated_at, finished_at) "
        "SELECT $1, $2::jsonb, 'done', 1, 'w', t, t, t, t "
        "FROM (SELECT now() - interval '1 day' + g * interval '1 ms' AS t "
        "FROM generate_series(1, $3::int) g) s",
        {bench_queue, bench_payload, k});
  }
  co_await db.query(
      "INSERT INTO pgqueue.done_counts (queue, slot, n) VALUES ($1, 0, $2) "
      "ON CONFLICT (queue, slot) DO UPDATE SET n = pgqueue.done_counts.n + EXCLUDED.n",
      {bench_queue, n});
}

// Median and maximum client-side time of `SELECT * FROM pgqueue.depth` over 21 runs.
asio::awaitable<std::pair<double, double>> time_depth(const pgqueue::database& db) {
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = clock::now();
    co_await db.query("SELECT * FROM pgqueue.depth");
    ms.push_back(ms_between(t0, clock::now()));
  }
  std::sort(ms.begin(), ms.end());
  co_return std::pair{ms[ms.size() / 2], ms.back()};
}

// Deletes the jobs that are not done, so the next fill starts from the retained ones alone.
asio::awaitable<void> reset_ready(const pgqueue::database& db) {
  co_await db.query("DELETE FROM pgqueue.jobs WHERE state <> 'done'");
}

const std::string raw_script =
    "SELECT pgqueue.ack_batch(array_agg(id), 'w', array_agg(attempts)) "
    "FROM pgqueue.claim_batch('bench', 'w', 100);\n";

}  // namespace

void run_scale(context& ctx) {
  const std::string dbname = "pgqueue_bench_scale";
  std::vector<long> sizes{0, ctx.opt.retained};
  if (ctx.opt.scale_10m) sizes.push_back(10000000);
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    for (long retained : sizes) {
      co_await reset_jobs(db);
      co_await retain_done(db, retained);
      say("scale", count_text(retained) + " retained: filling " + std::to_string(scale_jobs) +
                       " jobs, VACUUM ANALYZE, depth, drain");
      co_await fill_ready(db, scale_jobs);
      auto [depth_ms, depth_max] = co_await time_depth(db);
      auto d = co_await drain(dsn, scale_worker, scale_jobs, ctx.opt.seconds);
      const std::string id = retained == 0                  ? "scale.0"
                             : retained == ctx.opt.retained ? "scale.retained"
                                                            : "scale.10M";
      row r{id, "scale",
            count_text(retained) + " completed jobs retained: drain (c64 batched), depth"};
      r.rate = d.rate;
      r.extra = {{"depth_ms", depth_ms},
                 {"depth_max_ms", depth_max},
                 {"client_us/job", d.client_us_per_job}};
      r.refs = {retained == 0 ? "ref.batch" : "scale.0"};
      if (!d.finished) {
        r.note = std::to_string(d.acked) + " of " + std::to_string(scale_jobs) + " jobs in " +
                 std::to_string(ctx.opt.seconds) + " s";
      }
      ctx.rep.add(std::move(r));

      const long fill = std::max(100000L, 70000L * ctx.opt.seconds);
      say("scale", count_text(retained) + " retained: filling " + std::to_string(fill) +
                       " jobs, raw SQL (a) with pgbench (" + std::to_string(ctx.opt.seconds) +
                       " s)");
      co_await reset_ready(db);
      co_await fill_ready(db, fill);
      const auto before = co_await count_jobs(db, "done");
      auto p = run_pgbench(ctx.opt, dsn, raw_script, 4, ctx.opt.seconds);
      const auto after = co_await count_jobs(db, "done");
      row raw{id + ".raw", "scale", count_text(retained) + " retained: raw SQL (a), pgbench -c 4"};
      raw.rate = static_cast<double>(after - before) / ctx.opt.seconds;
      raw.refs = {retained == 0 ? "ref.batch" : "scale.0.raw"};
      if (p.exit_code != 0) raw.note = "pgbench exited with " + std::to_string(p.exit_code);
      if (co_await count_jobs(db, "ready") == 0) {
        raw.note += std::string(raw.note.empty() ? "" : "; ") + "queue ran dry: a lower bound";
      }
      ctx.rep.add(std::move(raw));
    }
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
