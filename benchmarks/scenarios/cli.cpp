// cli: `pgqueue enqueue QUEUE < file` (newline-delimited JSON, batches of 1000) end to end,
// process start and connect included, against the library's enqueue_batch of 1000 sending the
// same jobs from memory on a connection of its own (connect included). The target:
// the command reaches 0.8x the library. Three runs each, taking turns; the best of each.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "../support/tool.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

constexpr long cli_jobs = 200000;
constexpr int cli_batch = 1000;
constexpr int cli_runs = 3;

// Jobs per second of enqueue_batch(cli_batch) over `jobs` payloads, connect included.
asio::awaitable<double> library_rate(const std::string& dsn, const std::vector<std::string>& jobs) {
  const auto start = clock::now();
  pgqueue::queue q(co_await pgqueue::connect(co_await asio::this_coro::executor, dsn), bench_queue);
  for (std::size_t at = 0; at < jobs.size(); at += cli_batch) {
    const auto end = std::min(jobs.size(), at + cli_batch);
    std::vector<std::string> batch(jobs.begin() + static_cast<std::ptrdiff_t>(at),
                                   jobs.begin() + static_cast<std::ptrdiff_t>(end));
    auto ids = co_await q.enqueue_batch(std::move(batch));
    (void)ids;
  }
  const double seconds = seconds_since(start);
  q.db().close();
  co_return static_cast<double>(jobs.size()) / seconds;
}

}  // namespace

void run_cli(context& ctx) {
  const std::string dbname = "pgqueue_bench_cli";
  const std::string file = "/tmp/pgqueue-bench-cli-" + std::to_string(::getpid()) + ".ndjson";
  std::vector<std::string> jobs(cli_jobs, bench_payload);
  {
    std::ofstream out(file);
    for (const auto& j : jobs) out << j << "\n";
  }
  double best_tool = 0, best_library = 0;
  std::string note;
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    for (int run = 0; run < cli_runs; ++run) {
      co_await reset_jobs(db);
      co_await settle(db);
      say("cli", "pgqueue enqueue < " + std::to_string(cli_jobs) + " lines, run " +
                     std::to_string(run + 1) + " of " + std::to_string(cli_runs));
      const auto t = run_tool(
          {"--dsn", dsn, "enqueue", bench_queue, "--batch-size", std::to_string(cli_batch)}, file);
      const auto in_table = co_await count_jobs(db, "ready");
      if (t.exit_code != 0 || in_table != cli_jobs) {
        note = "run " + std::to_string(run + 1) + ": exit " + std::to_string(t.exit_code) + ", " +
               std::to_string(in_table) + " jobs in the table";
      }
      best_tool = std::max(best_tool, static_cast<double>(in_table) / t.seconds);

      co_await reset_jobs(db);
      co_await settle(db);
      say("cli", "enqueue_batch(" + std::to_string(cli_batch) + ") of the same jobs, run " +
                     std::to_string(run + 1));
      const double rate = co_await library_rate(dsn, jobs);
      best_library = std::max(best_library, rate);
    }
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
  std::remove(file.c_str());
  row lib{"cli.library.batch1000", "cli",
          "enqueue_batch(1000), 200,000 jobs from memory, connect included (best of 3)"};
  lib.rate = best_library;
  ctx.rep.add(std::move(lib));
  row tool{"cli.enqueue.stdin", "cli",
           "pgqueue enqueue bench < 200,000 lines (batches of 1000), process start to exit "
           "(best of 3)"};
  tool.rate = best_tool;
  tool.refs = {"cli.library.batch1000"};
  tool.note = note;
  ctx.rep.add(std::move(tool));
}

}  // namespace bench
