// limits: queues with fleet-wide limits (pgqueue.set_queue_limits), four workers on four
// connections each time. What the limit machinery costs a claim (a drain of a queue whose
// limits never bind, against the same drain unlimited: the row lock, the count of claimed jobs
// and the token update per claim), and that the limits hold while jobs flow: a concurrency
// limit of 3 with 20 ms handlers (3 / 20 ms = 150 jobs/s at best), a rate limit of 200 jobs a
// second. Claims are timed on the server (track_functions, mean time per claim_batch call);
// a session samples the queue's claimed jobs every 5 ms.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "../support/progress.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

struct limited_run {
  std::uint64_t acked = 0;
  double seconds = 0;
  double rate = 0;
  std::int64_t max_claimed = 0;  // the sampler's highest count of claimed jobs
  int widest_second = 0;         // most handler starts in any one-second window
  double claim_ms = 0;           // server time per claim_batch call
  double claims_per_job = 0;
};

// Four workers (concurrency 16 each, a connection each; handlers sleep `work`) run on the
// bench queue for `seconds` or until `jobs` are acked; then their sessions end, so the server
// has their function counters.
asio::awaitable<limited_run> run_limited(const std::string& dsn, pgqueue::database& admin,
                                         std::chrono::milliseconds work, long jobs, double seconds,
                                         int concurrency = 16) {
  auto ex = co_await asio::this_coro::executor;
  co_await admin.execute_script("SELECT pg_stat_reset()");
  std::vector<pgqueue::database> conns;
  std::vector<std::unique_ptr<pgqueue::worker>> workers;
  std::vector<clock::time_point> starts;
  for (int i = 0; i < 4; ++i) {
    conns.push_back(co_await pgqueue::connect(ex, dsn + " application_name=pgqueue_bench_limits"));
    workers.push_back(std::make_unique<pgqueue::worker>(
        pgqueue::queue(conns.back(), bench_queue),
        [&starts, work](const pgqueue::job&) -> asio::awaitable<void> {
          starts.push_back(clock::now());
          if (work.count() > 0) co_await sleep_for(work);
        },
        pgqueue::worker_options{.concurrency = concurrency}));
  }
  limited_run r;
  bool sampling = true;
  asio::co_spawn(
      ex,
      [&]() -> asio::awaitable<void> {
        while (sampling) {
          auto n = co_await admin.query(
              "SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND state = 'claimed'",
              {std::string(bench_queue)});
          r.max_claimed = std::max(r.max_claimed, n.get<std::int64_t>(0, 0));
          co_await sleep_for(std::chrono::milliseconds(5));
        }
      },
      asio::detached);
  int running = 0;
  const auto start = clock::now();
  for (auto& w : workers) {
    ++running;
    asio::co_spawn(ex, w->run(), [&](std::exception_ptr) { --running; });
  }
  auto acked = [&] {
    std::uint64_t n = 0;
    for (auto& w : workers) n += w->stats().acked;
    return n;
  };
  while (acked() < static_cast<std::uint64_t>(jobs) && seconds_since(start) < seconds) {
    co_await sleep_for(std::chrono::milliseconds(1));
  }
  r.seconds = seconds_since(start);
  r.acked = acked();
  r.rate = static_cast<double>(r.acked) / r.seconds;
  for (auto& w : workers) w->stop();
  while (running > 0) co_await sleep_for(std::chrono::milliseconds(1));
  sampling = false;
  workers.clear();
  for (auto& c : conns) c.close();
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 0, j = 0; j < starts.size(); ++j) {
    while (starts[j] - starts[i] >= std::chrono::seconds(1)) ++i;
    r.widest_second = std::max(r.widest_second, static_cast<int>(j - i + 1));
  }
  // The workers' backends report their counters as they exit.
  for (int i = 0; i < 500; ++i) {
    auto left = co_await admin.query(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgqueue_bench_limits'");
    if (left.get<std::int64_t>(0, 0) == 0) break;
    co_await sleep_for(std::chrono::milliseconds(10));
  }
  co_await admin.execute_script("SELECT pg_stat_clear_snapshot()");
  auto f = co_await admin.query(
      "SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(total_time), 0)::float8 "
      "FROM pg_stat_user_functions WHERE schemaname = 'pgqueue' AND funcname = 'claim_batch'");
  const double calls = f.get<double>(0, 0);
  if (calls > 0) r.claim_ms = f.get<double>(0, 1) / calls;
  if (r.acked > 0) r.claims_per_job = calls / static_cast<double>(r.acked);
  co_await sleep_for(std::chrono::milliseconds(20));  // the sampler's last query returns
  co_return r;
}

}  // namespace

void run_limits(context& ctx) {
  const std::string dbname = "pgqueue_bench_limits";
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    co_await db.execute_script("ALTER DATABASE " + dbname + " SET track_functions = 'all'");
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    const std::string q = bench_queue;

    // The claim's cost with limits that never bind, against none.
    double unlimited_ms = 0;
    for (bool limited : {false, true}) {
      co_await reset_jobs(db);
      co_await db.query("SELECT pgqueue.set_queue_limits($1)", {q});
      if (limited) {
        co_await db.query("SELECT pgqueue.set_queue_limits($1, 1000000, 1000000000, '1 second')",
                          {q});
      }
      say("limits", std::string("drain, 4 workers x 64, ") +
                        (limited ? "limits that never bind" : "no limits"));
      co_await fill_ready(db, ctx.opt.drain_jobs);
      auto r = co_await run_limited(dsn, db, std::chrono::milliseconds(0), ctx.opt.drain_jobs,
                                    ctx.opt.seconds, 64);
      if (!limited) unlimited_ms = r.claim_ms;
      row out{limited ? "limits.drain.high_limits" : "limits.drain.none", "limits",
              limited ? "4 workers x 64, limits set but never reached (machinery only)"
                      : "4 workers x 64, no limits (the same drain)"};
      out.rate = r.rate;
      out.extra = {{"claim_ms", r.claim_ms}, {"claims/job", r.claims_per_job}};
      if (limited && unlimited_ms > 0) out.extra.push_back({"claim_x", r.claim_ms / unlimited_ms});
      if (limited) out.refs = {"limits.drain.none"};
      ctx.rep.add(std::move(out));
    }

    // A concurrency limit of 3 with 20 ms handlers.
    co_await reset_jobs(db);
    co_await db.query("SELECT pgqueue.set_queue_limits($1, 3)", {q});
    say("limits", "concurrency limit 3, 4 workers x 16, handlers of 20 ms");
    co_await fill_ready(db, 100000);
    auto c = co_await run_limited(dsn, db, std::chrono::milliseconds(20), 100000, ctx.opt.seconds);
    row conc{"limits.concurrency3", "limits",
             "concurrency limit 3, 4 workers x 16, 20 ms handlers (at best 150 jobs/s)"};
    conc.rate = c.rate;
    conc.extra = {{"of_best", c.rate / 150.0},
                  {"max_claimed_seen", static_cast<double>(c.max_claimed)},
                  {"claim_ms", c.claim_ms},
                  {"claims/job", c.claims_per_job}};
    if (c.max_claimed > 3) conc.note = "LIMIT EXCEEDED";
    ctx.rep.add(std::move(conc));

    // A rate limit of 200 a second (bursts of 200).
    co_await reset_jobs(db);
    co_await db.query("SELECT pgqueue.set_queue_limits($1, NULL, 200, '1 second')", {q});
    say("limits", "rate limit 200/s, 4 workers x 16");
    co_await fill_ready(db, 100000);
    auto rl = co_await run_limited(dsn, db, std::chrono::milliseconds(0), 100000, ctx.opt.seconds);
    row rate{"limits.rate200", "limits",
             "rate limit 200/s (bursts of 200), 4 workers x 16, no-op handlers"};
    rate.rate = rl.rate;
    rate.extra = {{"most_in_1s", static_cast<double>(rl.widest_second)},
                  {"claim_ms", rl.claim_ms},
                  {"claims/job", rl.claims_per_job}};
    // The bucket's bound over the run: its burst plus 200 a second.
    if (static_cast<double>(rl.acked) > 200 + 200 * rl.seconds + 1 || rl.widest_second > 400) {
      rate.note = "LIMIT EXCEEDED";
    }
    ctx.rep.add(std::move(rate));

    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
