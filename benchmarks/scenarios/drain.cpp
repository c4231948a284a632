// drain: a pgqueue::worker with a no-op handler drains pre-filled jobs; concurrency 1, 16 and
// 64, with batching (claim_batch = concurrency, coalesced acks) and without (one claim and one
// ack per job).
#include <string>
#include <vector>

#include "../support/progress.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {

void run_drain(context& ctx) {
  const std::string dbname = "pgqueue_bench_drain";
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    for (bool batched : {true, false}) {
      for (int concurrency : {1, 16, 64}) {
        const std::string label = "worker, concurrency " + std::to_string(concurrency) +
                                  (batched ? ", batched claims and acks" : ", one claim/ack per job");
        co_await reset_jobs(db);
        say("drain", "filling " + std::to_string(ctx.opt.drain_jobs) + " jobs; then " + label);
        co_await fill_ready(db, ctx.opt.drain_jobs);
        pgqueue::worker_options wo{.concurrency = concurrency,
                                   .claim_batch = batched ? concurrency : 1,
                                   .coalesce_acks = batched};
        auto d = co_await drain(dsn, wo, ctx.opt.drain_jobs, ctx.opt.seconds);
        row r{"drain.c" + std::to_string(concurrency) + (batched ? ".batched" : ".single"),
              "drain", label};
        r.rate = d.rate;
        r.refs = batched ? std::vector<std::string>{"ref.batch", "ref.seed"}
                         : std::vector<std::string>{"ref.claim_next", "ref.seed"};
        if (!d.finished) {
          r.note = std::to_string(d.acked) + " of " + std::to_string(ctx.opt.drain_jobs) +
                   " jobs in " + std::to_string(ctx.opt.seconds) + " s";
        }
        ctx.rep.add(std::move(r));
      }
    }
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
