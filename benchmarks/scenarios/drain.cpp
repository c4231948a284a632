// drain: a pgqueue::worker with a no-op handler drains pre-filled jobs; concurrency 1, 16 and
// 64, with batching (claim_batch = concurrency, coalesced acks) and without (one claim and one
// ack per job). Then configurations that are not the defaults, to show where the limit is: one
// worker on four sessions (worker_options::connections) at concurrency 64 and 400 (the shape of
// reference (a)), four workers on four connections with 128 jobs per claim, and (what-if) the
// worker's session committing without waiting for the WAL flush.
#include <string>
#include <vector>

#include "../support/peers.hpp"
#include "../support/progress.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

struct drain_case {
  std::string id, label;
  drain_setup setup;
  std::vector<std::string> refs;
};

std::vector<drain_case> cases() {
  std::vector<drain_case> out;
  for (bool batched : {true, false}) {
    for (int c : {1, 16, 64}) {
      drain_case d{"drain.c" + std::to_string(c) + (batched ? ".batched" : ".single"),
                   "worker, concurrency " + std::to_string(c) +
                       (batched ? ", batched claims and acks" : ", one claim + one ack per job"),
                   {},
                   batched ? std::vector<std::string>{"ref.batch", "ref.seed"}
                           : std::vector<std::string>{"ref.claim_next", "ref.seed"}};
      d.setup.worker = {.concurrency = c, .claim_batch = batched ? c : 1, .coalesce_acks = batched};
      out.push_back(d);
    }
  }
  // Not the defaults: one worker on as many sessions as reference (a) has clients, at
  // concurrency 64 and at the shape of (a) itself (100 jobs per claim on each of 4 sessions);
  // that shape as four workers; and (what-if) the worker's session committing without waiting
  // for the WAL flush.
  drain_case conn4{"drain.c64.batched.conn4",
                   "worker, concurrency 64, batched, connections = 4",
                   {},
                   {"ref.batch", "ref.seed"}};
  conn4.setup.worker = {.concurrency = 64, .connections = 4};
  out.push_back(conn4);
  drain_case shape_a{"drain.c400.batched.conn4",
                     "worker, concurrency 400, batched, connections = 4 (shape of (a))",
                     {},
                     {"ref.batch", "ref.seed"}};
  shape_a.setup.worker = {.concurrency = 400, .connections = 4};
  out.push_back(shape_a);
  drain_case multi{"drain.4x128.batched",
                   "4 workers (4 connections), concurrency 128 each, batched",
                   {},
                   {"ref.batch", "ref.seed"}};
  multi.setup.worker = {.concurrency = 128};
  multi.setup.workers = 4;
  out.push_back(multi);
  drain_case async{"drain.c64.batched.async",
                   "what-if: concurrency 64 batched, synchronous_commit=off",
                   {},
                   {"ref.batch", "drain.c64.batched"}};
  async.setup.worker = {.concurrency = 64};
  async.setup.session_sql = "SET synchronous_commit = off";
  out.push_back(async);
  return out;
}

}  // namespace

void run_drain(context& ctx) {
  const std::string dbname = "pgqueue_bench_drain";
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    const auto dsn = with_dbname(ctx.opt.dsn, dbname);
    for (const auto& c : cases()) {
      co_await reset_jobs(db);
      say("drain", "filling " + std::to_string(ctx.opt.drain_jobs) + " jobs; then " + c.label);
      co_await fill_ready(db, ctx.opt.drain_jobs);
      auto d = co_await drain(dsn, c.setup, ctx.opt.drain_jobs, ctx.opt.seconds);
      row r{c.id, "drain", c.label};
      r.rate = d.rate;
      r.extra = {{"client_us/job", d.client_us_per_job}};
      r.refs = c.refs;
      if (!d.finished) {
        r.note = std::to_string(d.acked) + " of " + std::to_string(ctx.opt.drain_jobs) +
                 " jobs in " + std::to_string(ctx.opt.seconds) + " s";
      }
      ctx.rep.add(std::move(r));
    }
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
  add_peer_rows(ctx, "drain", "drain");
}

}  // namespace bench
