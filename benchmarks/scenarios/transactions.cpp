// transactions: the application's own transactions on a pgqueue::pool. (1) Transactional
// enqueue from 8 producers: an order row and its job in one commit (in_transaction), against
// pgbench -c 8 running the same statements (BEGIN; INSERT; SELECT pgqueue.enqueue; COMMIT).
// (2) The pool's own cost: client CPU per acquire and release of an idle session.
#include <string>
#include <vector>

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
    {  // (2) checkout cost: an idle session taken and given back, no I/O
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
