// enqueue: jobs added per second through pgqueue::queue, one job per call from 1 and from 8
// producers (one connection each), and enqueue_batch with 100 and 1000 jobs per call.
#include <string>
#include <vector>

#include "../support/peers.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

struct tally {
  long jobs = 0;
  std::vector<double> call_ms;
};

// Adds jobs through `q` until `deadline`, `batch` per call (0: one per enqueue call).
asio::awaitable<void> produce(pgqueue::queue q, int batch, clock::time_point deadline, tally& out) {
  const std::string payload = bench_payload;
  const std::vector<std::string> payloads(static_cast<std::size_t>(std::max(batch, 1)), payload);
  while (clock::now() < deadline) {
    const auto t0 = clock::now();
    if (batch == 0) {
      co_await q.enqueue(payload);
      out.jobs += 1;
    } else {
      auto ids = co_await q.enqueue_batch(payloads);
      out.jobs += static_cast<long>(ids.size());
    }
    out.call_ms.push_back(ms_between(t0, clock::now()));
  }
}

struct enqueue_case {
  std::string id, label;
  int producers, batch;
  std::vector<std::string> refs;
};

}  // namespace

void run_enqueue(context& ctx) {
  const std::string dbname = "pgqueue_bench_enqueue";
  const std::vector<enqueue_case> cases = {
      {"enqueue.single.p1", "1 producer, one job per enqueue()", 1, 0, {"ref.insert.c1"}},
      {"enqueue.single.p8",
       "8 producers (8 connections), one job per enqueue()",
       8,
       0,
       {"ref.insert.c8"}},
      {"enqueue.batch100", "1 producer, enqueue_batch of 100", 1, 100, {"ref.insert.batch100"}},
      {"enqueue.batch1000", "1 producer, enqueue_batch of 1000", 1, 1000, {"ref.insert.batch1000"}},
  };
  run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    for (const auto& c : cases) {
      co_await reset_jobs(db);
      say("enqueue", c.label + " (" + std::to_string(ctx.opt.seconds) + " s)");
      std::vector<pgqueue::queue> queues;
      for (int i = 0; i < c.producers; ++i) {
        queues.emplace_back(co_await pgqueue::connect(ex, dsn), bench_queue);
      }
      // A short warm-up on every connection (first statements plan and cache).
      std::vector<tally> tallies(queues.size());
      std::vector<asio::awaitable<void>> tasks;
      for (std::size_t i = 0; i < queues.size(); ++i) {
        tasks.push_back(
            produce(queues[i], c.batch, clock::now() + std::chrono::milliseconds(300), tallies[i]));
      }
      co_await join_all(std::move(tasks));
      co_await reset_jobs(db);
      co_await settle(db);

      tallies.assign(queues.size(), tally{});
      tasks.clear();
      const auto start = clock::now();
      const double cpu_start = process_cpu_seconds();
      const auto deadline = start + std::chrono::seconds(ctx.opt.seconds);
      for (std::size_t i = 0; i < queues.size(); ++i) {
        tasks.push_back(produce(queues[i], c.batch, deadline, tallies[i]));
      }
      co_await join_all(std::move(tasks));
      const double elapsed = seconds_since(start);
      const double cpu = process_cpu_seconds() - cpu_start;
      for (auto& q : queues) q.db().close();

      tally all;
      for (auto& t : tallies) {
        all.jobs += t.jobs;
        all.call_ms.insert(all.call_ms.end(), t.call_ms.begin(), t.call_ms.end());
      }
      const auto in_table = co_await count_jobs(db, "ready");
      row r{c.id, "enqueue", c.label};
      r.rate = static_cast<double>(all.jobs) / elapsed;
      r.lat = summarize(all.call_ms);  // the time of one call
      if (all.jobs > 0) r.extra = {{"client_us/job", cpu * 1e6 / static_cast<double>(all.jobs)}};
      r.refs = c.refs;
      if (in_table != all.jobs) {
        r.note = std::to_string(in_table) + " jobs in the table, " + std::to_string(all.jobs) +
                 " returned";
      }
      ctx.rep.add(std::move(r));
    }
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
  add_peer_rows(ctx, "enqueue1", "enqueue");
  add_peer_rows(ctx, "enqueue_batch", "enqueue");
}

}  // namespace bench
