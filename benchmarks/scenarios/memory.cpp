// memory: peak RSS (getrusage ru_maxrss) of a client holding many jobs in flight, measured in
// a child process of its own (a fresh peak): once as leases claimed with try_claim_batch and
// held, once as a worker whose handlers are all running (each waiting on a timer).
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "../support/pgbench.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Prints the figures the parent reads, then ends the process without unwinding (the held
// leases simply expire with the database).
[[noreturn]] void report_and_exit(long baseline, long held) {
  std::printf("%ld %ld %ld\n", baseline, peak_rss_kib(), held);
  std::fflush(stdout);
  std::_Exit(0);
}

}  // namespace

int memory_child(const std::string& mode, const std::string& dsn, int jobs) {
  run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    auto db = co_await pgqueue::connect(ex, dsn);
    pgqueue::queue q(db, bench_queue);
    co_await db.query("SELECT count(*) FROM pgqueue.jobs");  // a first round trip in the baseline
    const long baseline = peak_rss_kib();
    if (mode == "leases") {
      std::vector<pgqueue::lease> held;
      while (static_cast<int>(held.size()) < jobs) {
        auto got = co_await q.try_claim_batch(std::min(1000, jobs - static_cast<int>(held.size())));
        if (got.empty()) break;
        for (auto& l : got) held.push_back(std::move(l));
      }
      report_and_exit(baseline, static_cast<long>(held.size()));
    }
    long running = 0;
    pgqueue::worker w(q,
                      [&](const pgqueue::job&) -> asio::awaitable<void> {
                        ++running;
                        co_await sleep_for(std::chrono::minutes(1));
                      },
                      {.concurrency = jobs});
    asio::co_spawn(ex, w.run(), asio::detached);
    const auto give_up = clock::now() + std::chrono::seconds(30);
    while (running < jobs && clock::now() < give_up) {
      co_await sleep_for(std::chrono::milliseconds(5));
    }
    report_and_exit(baseline, running);
  });
  return 1;  // not reached unless the child failed
}

void run_memory(context& ctx) {
  const std::string dbname = "pgqueue_bench_memory";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  const int n = ctx.opt.memory_jobs;
  for (std::string mode : {"leases", "worker"}) {
    run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
      auto db = co_await fresh_database(ctx.opt, dbname, true);
      co_await fill_ready(db, n);
    });
    say("memory", std::to_string(n) + " jobs in flight: " + mode);
    auto p = run_process(
        {ctx.opt.self, "--memory-child", mode, "--memory-jobs", std::to_string(n), dsn});
    long baseline = 0, peak = 0, held = 0;
    std::istringstream(p.output) >> baseline >> peak >> held;
    row r{"memory." + mode, "memory",
          mode == "leases"
              ? std::to_string(n) + " jobs claimed (try_claim_batch) and held as leases"
              : "worker, concurrency " + std::to_string(n) + ", all handlers running"};
    if (p.exit_code != 0 || peak == 0) {
      r.note = "child failed: " + p.output.substr(0, 200);
    } else {
      r.extra = {{"peak_rss_mb", peak / 1024.0},
                 {"baseline_mb", baseline / 1024.0},
                 {"bytes_per_job", held ? (peak - baseline) * 1024.0 / held : 0}};
      if (held != n) r.note = "only " + std::to_string(held) + " in flight";
    }
    ctx.rep.add(std::move(r));
  }
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
