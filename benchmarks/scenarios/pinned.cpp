// pinned (opt-in: --only pinned): jobs in and out at a steady rate while one REPEATABLE READ
// transaction holds the xmin horizon the whole time, as a report, a pg_dump or an application
// that forgot to commit does. Vacuum can then remove nothing that claims and acks leave behind.
// A producer enqueues batches of 100 at --pinned-rate jobs/s on its own connection and thread;
// a pgqueue::worker (concurrency 100, batched claims and acks) drains on another. Every 20 s:
// jobs in and out per second, the server's mean time per claim_batch, ack_batch and janitor call
// (pg_stat_user_functions; track_functions is on in this database) and the ready backlog. At the
// end: table and index sizes and dead tuples.
#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../support/load.hpp"
#include "../support/peers.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

constexpr auto window = std::chrono::seconds(20);
constexpr int batch = 100;

struct function_time {
  double calls = 0, ms = 0;
};

struct totals {
  long in = 0, out = 0;
  function_time claim, ack, janitor;
};

asio::awaitable<function_time> time_of(pgqueue::database& db, const char* function) {
  auto r = co_await db.query(
      "SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(total_time), 0)::float8 "
      "FROM pg_stat_user_functions WHERE schemaname = 'pgqueue' AND funcname = $1",
      pgqueue::pg::params{std::string(function)});
  co_return function_time{r.get<double>(0, 0), r.get<double>(0, 1)};
}

double per_call(const function_time& now, const function_time& then) {
  return now.calls > then.calls ? (now.ms - then.ms) / (now.calls - then.calls) : 0;
}

}  // namespace

void run_pinned(context& ctx) {
  const std::string dbname = "pgqueue_bench_pinned";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    co_await db.execute_script("ALTER DATABASE " + dbname + " SET track_functions = 'pl'");
    db.close();
  });
  const int minutes = ctx.opt.pinned_minutes, rate = ctx.opt.pinned_rate;
  say("pinned", std::to_string(minutes) + " min at " + std::to_string(rate) +
                    " jobs/s in and out, the horizon held by a REPEATABLE READ transaction");

  std::atomic<bool> stop{false};
  std::atomic<long> enqueued{0}, handled{0};
  std::exception_ptr producer_failure, worker_failure;
  std::thread producer = on_thread(
      [&](asio::any_io_executor ex) { return paced_batches(ex, dsn, rate, batch, stop, enqueued); },
      producer_failure, stop);
  std::thread consumer = on_thread(
      [&](asio::any_io_executor ex) {
        return worker_until(
            ex, dsn, {.concurrency = batch, .claim_batch = batch},
            [&](const pgqueue::job&) { ++handled; }, stop);
      },
      worker_failure, stop);

  std::vector<row> windows;
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto pin = co_await pgqueue::connect(ex, dsn);
      co_await pin.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      co_await pin.query("SELECT count(*) FROM pg_class");  // takes the snapshot, kept open
      auto db = co_await pgqueue::connect(ex, dsn);
      totals then{0, 0, co_await time_of(db, "claim_batch"), co_await time_of(db, "ack_batch"),
                  co_await time_of(db, "janitor_reset_stale_claims")};
      const auto start = clock::now();
      const auto end = start + std::chrono::minutes(minutes);
      auto previous = start;
      for (int n = 1; clock::now() < end && !stop; ++n) {
        co_await sleep_for(std::min<clock::duration>(window, end - clock::now()));
        const auto sampled = clock::now();
        totals now{enqueued.load(), handled.load(), co_await time_of(db, "claim_batch"),
                   co_await time_of(db, "ack_batch"),
                   co_await time_of(db, "janitor_reset_stale_claims")};
        const auto ready =
            (co_await db.query(
                 "SELECT coalesce(sum(count), 0)::int8 FROM pgqueue.depth WHERE state = 'ready'"))
                .get<std::int64_t>(0, 0);
        const double secs = std::chrono::duration<double>(sampled - previous).count();
        char label[160];
        std::snprintf(label, sizeof label, "pinned horizon, window %d (%.0f-%.0f s)", n,
                      std::chrono::duration<double>(previous - start).count(),
                      std::chrono::duration<double>(sampled - start).count());
        previous = sampled;
        row r{"pinned.w" + std::to_string(n), "pinned", label};
        r.rate = static_cast<double>(now.out - then.out) / secs;
        r.extra = {{"in_per_s", static_cast<double>(now.in - then.in) / secs},
                   {"claim_ms", per_call(now.claim, then.claim)},
                   {"ack_ms", per_call(now.ack, then.ack)},
                   {"janitor_ms", per_call(now.janitor, then.janitor)},
                   {"ready", static_cast<double>(ready)}};
        char line[512];
        std::snprintf(line, sizeof line,
                      "%s: out %.0f/s, in %.0f/s, claim %.2f ms, ack %.2f ms, "
                      "janitor %.1f ms, ready %lld",
                      label, *r.rate, r.extra[0].second, r.extra[1].second, r.extra[2].second,
                      r.extra[3].second, static_cast<long long>(ready));
        say("pinned", line);
        windows.push_back(r);
        then = now;
      }
      stop = true;
      auto sizes = co_await db.query(
          "SELECT pg_total_relation_size('pgqueue.jobs') / 1048576.0, "
          "pg_relation_size('pgqueue.jobs') / 1048576.0, "
          "pg_relation_size('pgqueue.jobs_ready_idx') / 1048576.0, "
          "pg_relation_size('pgqueue.jobs_claimed_idx') / 1048576.0, "
          "(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'pgqueue.jobs'::regclass)"
          "::float8, (SELECT count(*) FROM pgqueue.jobs)::float8");
      row s{"pinned.sizes", "pinned", "pinned horizon, at the end: sizes (MB) and dead tuples"};
      s.extra = {
          {"total_mb", sizes.get<double>(0, 0)},     {"table_mb", sizes.get<double>(0, 1)},
          {"ready_idx_mb", sizes.get<double>(0, 2)}, {"claimed_idx_mb", sizes.get<double>(0, 3)},
          {"dead_tuples", sizes.get<double>(0, 4)},  {"rows", sizes.get<double>(0, 5)}};
      ctx.rep.add(std::move(s));
      co_await pin.query("ROLLBACK");
    });
  } catch (...) {
    stop = true;
    producer.join();
    consumer.join();
    throw;
  }
  producer.join();
  consumer.join();
  if (producer_failure) std::rethrow_exception(producer_failure);
  if (worker_failure) std::rethrow_exception(worker_failure);
  if (!windows.empty()) {
    // The first and the last window side by side, for the targets.
    row first = windows.front(), last = windows.back();
    first.id = "pinned.start";
    last.id = "pinned.end";
    const double start_claim = first.extra[1].second;
    last.extra.push_back(
        {"claim_vs_start", start_claim > 0 ? last.extra[1].second / start_claim : 0});
    for (auto& w : windows) ctx.rep.add(std::move(w));
    ctx.rep.add(std::move(first));
    ctx.rep.add(std::move(last));
  }
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await drop_database(ctx.opt, dbname);
  });
  add_peer_rows(ctx, "pinned", "pinned");
}

}  // namespace bench
