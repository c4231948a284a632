// transactions: the application's own transactions on a pgqueue::pool. (1) Transactional
// enqueue from 8 producers: an order row and its job in one commit (in_transaction), against
// pgbench -c 8 running the same statements (BEGIN; INSERT; SELECT pgqueue.enqueue; COMMIT).
// (2) A transactional-handler worker (concurrency 8, a pool of 9: the shared session and 8
// transactions) draining pre-filled jobs, each handler inserting an effect row in the job's
// transaction (BEGIN, INSERT, ack, COMMIT per job; claims batched on the shared session),
// against pgbench -c 8 running BEGIN; claim_next; the INSERT; ack; COMMIT.
// (3) The pool's own cost: client CPU per acquire and release of an idle session.
#include <algorithm>
#include <string>
#include <vector>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>

#include "../support/pgbench.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

const char* const order_sql = "INSERT INTO orders (note) VALUES ('x')";

// Orders with their jobs, one transaction each, until `deadline`.
asio::awaitable<void> place_orders(pgqueue::pool pool, pgqueue::queue q, clock::time_point deadline,
                                   long& placed) {
  const std::string payload = bench_payload;
  while (clock::now() < deadline) {
    co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
      co_await tx.query_prepared(order_sql);
      co_await q.enqueue(tx, payload);
    });
    ++placed;
  }
}

const char* const effect_sql = "INSERT INTO effects (job) VALUES ($1)";

// Runs a transactional-handler worker on `q` for `secs` seconds; returns the jobs it finished
// per second (done jobs counted from the table, over the time until run() returned).
asio::awaitable<double> tx_worker_rate(pgqueue::queue q, int concurrency, int secs,
                                       const pgqueue::database& db) {
  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  const auto before = co_await count_jobs(db, "done");
  pgqueue::worker w(q,
                    [](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
                      co_await tx.query_prepared(effect_sql, {j.id});
                    },
                    {.concurrency = concurrency});
  asio::steady_timer timer(ex, std::chrono::seconds(secs));
  const auto start = clock::now();
  co_await (w.run() || timer.async_wait(asio::use_awaitable));  // the timer stops the worker
  const double elapsed = seconds_since(start);
  const auto done = co_await count_jobs(db, "done") - before;
  co_return static_cast<double>(done) / elapsed;
}

asio::awaitable<std::int64_t> count_orders(const pgqueue::database& db) {
  auto r = co_await db.query("SELECT count(*) FROM orders");
  co_return r.get<std::int64_t>(0, 0);
}

}  // namespace

void run_transactions(context& ctx) {
  const std::string dbname = "pgqueue_bench_transactions";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  const int producers = 8;
  run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    co_await db.execute_script("CREATE TABLE orders (id bigserial PRIMARY KEY, note text)");
    auto pool =
        co_await pgqueue::pool::open(ex, dsn, {.min_size = producers, .max_size = producers});
    pgqueue::queue q{db, bench_queue};

    {  // (1) transactional enqueue, 8 producers
      std::vector<long> placed(producers, 0);
      std::vector<asio::awaitable<void>> warm;
      for (int i = 0; i < producers; ++i) {
        warm.push_back(
            place_orders(pool, q, clock::now() + std::chrono::milliseconds(300), placed[i]));
      }
      co_await join_all(std::move(warm));
      co_await reset_jobs(db);
      co_await settle(db);
      say("transactions", "order + enqueue in one transaction, 8 producers (" +
                              std::to_string(ctx.opt.seconds) + " s)");
      placed.assign(producers, 0);
      const auto jobs_before = co_await count_jobs(db, "ready");
      const auto start = clock::now();
      std::vector<asio::awaitable<void>> tasks;
      const auto deadline = start + std::chrono::seconds(ctx.opt.seconds);
      for (int i = 0; i < producers; ++i) {
        tasks.push_back(place_orders(pool, q, deadline, placed[i]));
      }
      co_await join_all(std::move(tasks));
      const double elapsed = seconds_since(start);
      const auto jobs = co_await count_jobs(db, "ready") - jobs_before;
      row r{"tx.enqueue.p8", "transactions",
            "order INSERT + enqueue, one commit, 8 producers (in_transaction on a pool)"};
      r.rate = static_cast<double>(jobs) / elapsed;
      r.refs = {"ref.tx_enqueue.c8"};
      long total = 0;
      for (auto n : placed) total += n;
      if (total != jobs) {
        r.note = std::to_string(jobs) + " jobs for " + std::to_string(total) + " orders";
      }
      ctx.rep.add(std::move(r));
    }
    {  // the same statements via pgbench
      co_await reset_jobs(db);
      co_await settle(db);
      const std::string script = std::string("BEGIN;\n") + order_sql + ";\n" +
                                 "SELECT pgqueue.enqueue('" + bench_queue + "', '" + bench_payload +
                                 "');\nCOMMIT;\n";
      say("transactions", "the same via pgbench -c 8 (" + std::to_string(ctx.opt.seconds) + " s)");
      const auto before = co_await count_jobs(db, "ready");
      const auto orders_before = co_await count_orders(db);
      auto p = run_pgbench(ctx.opt, dsn, script, producers, ctx.opt.seconds);
      const auto jobs = co_await count_jobs(db, "ready") - before;
      row r{"ref.tx_enqueue.c8", "reference",
            "BEGIN; INSERT order; SELECT pgqueue.enqueue; COMMIT, pgbench -c 8"};
      r.tag = "(tx)";
      r.rate = static_cast<double>(jobs) / ctx.opt.seconds;
      if (p.exit_code != 0) r.note = "pgbench exited with " + std::to_string(p.exit_code);
      if (co_await count_orders(db) - orders_before != jobs) r.note += " orders != jobs";
      ctx.rep.add(std::move(r));
    }
    {  // (2) a transactional-handler worker, and the same SQL via pgbench
      constexpr int concurrency = 8;
      co_await db.execute_script("CREATE TABLE effects (job bigint PRIMARY KEY)");
      const long fill = std::max(20000L, 8000L * ctx.opt.seconds);
      co_await reset_jobs(db);
      co_await fill_ready(db, fill);
      auto worker_pool = co_await pgqueue::pool::open(
          ex, dsn, {.min_size = concurrency + 1, .max_size = concurrency + 1});
      auto wq = co_await pgqueue::queue::open(worker_pool, bench_queue);
      say("transactions", "transactional-handler worker, concurrency 8 (" +
                              std::to_string(ctx.opt.seconds) + " s)");
      row r{"tx.worker.c8", "transactions",
            "worker, handler INSERT + ack in the job's transaction, concurrency 8, pool of 9"};
      r.rate = co_await tx_worker_rate(wq, concurrency, ctx.opt.seconds, db);
      r.refs = {"ref.tx_worker.c8"};
      ctx.rep.add(std::move(r));
      worker_pool.close();

      co_await reset_jobs(db);
      co_await db.execute_script("TRUNCATE effects");
      co_await fill_ready(db, fill);
      const std::string script =
          std::string("BEGIN;\nSELECT id, attempts FROM pgqueue.claim_next('") + bench_queue +
          "', 'w') \\gset\nINSERT INTO effects (job) VALUES (:id);\n"
          "SELECT pgqueue.ack(:id, 'w', :attempts);\nCOMMIT;\n";
      say("transactions", "the same via pgbench -c 8 (" + std::to_string(ctx.opt.seconds) + " s)");
      const auto before = co_await count_jobs(db, "done");
      auto p = run_pgbench(ctx.opt, dsn, script, concurrency, ctx.opt.seconds);
      const auto done = co_await count_jobs(db, "done") - before;
      row ref{"ref.tx_worker.c8", "reference",
              "BEGIN; claim_next; INSERT effect; ack; COMMIT, pgbench -c 8"};
      ref.tag = "(tx)";
      ref.rate = static_cast<double>(done) / ctx.opt.seconds;
      if (p.exit_code != 0) ref.note = "pgbench exited with " + std::to_string(p.exit_code);
      ctx.rep.add(std::move(ref));
    }
    {  // (3) checkout cost: an idle session taken and given back, no I/O
      const long n = 200000;
      say("transactions", "pool acquire + release, " + std::to_string(n) + " times");
      const double cpu0 = process_cpu_seconds();
      const auto start = clock::now();
      for (long i = 0; i < n; ++i) {
        auto c = co_await pool.acquire();
        c.release();
      }
      const double elapsed = seconds_since(start);
      const double cpu = process_cpu_seconds() - cpu0;
      row r{"pool.checkout", "transactions", "pool acquire + release of an idle session"};
      r.rate = static_cast<double>(n) / elapsed;
      r.extra = {{"client_us/checkout", cpu * 1e6 / static_cast<double>(n)}};
      ctx.rep.add(std::move(r));
    }
    pool.close();
    db.close();
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
