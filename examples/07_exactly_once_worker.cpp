// 07: a worker whose handler writes in the job's own transaction.
//
// The handler receives a transaction: what it writes and the job's ack commit together, so
// each job's effect exists exactly once, even if the worker dies between its write and its
// ack (the write then rolls back with the ack, and the job runs again). A handler that throws
// has its writes rolled back and the job retried.
//
//   07_exactly_once_worker "<conninfo>"      (or set PGQUEUE_DSN)
#include <cstdio>
#include <stdexcept>
#include <string>

#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

asio::awaitable<void> invoices(std::string dsn) {
  auto ex = co_await asio::this_coro::executor;
  auto pool = co_await pgqueue::pool::open(ex, dsn, {.max_size = 6});
  {
    auto session = co_await pool.acquire();
    co_await pgqueue::migrate(*session);
    // The effect table: one row per job, enforced by the primary key.
    co_await session->query(
        "CREATE TABLE IF NOT EXISTS example_invoices (job bigint PRIMARY KEY, total int)");
  }
  auto q = co_await pgqueue::queue::open(pool, example::fresh_queue_name("invoices"));
  constexpr int jobs = 20;
  for (int i = 1; i <= jobs; ++i) {
    co_await q.enqueue(R"({"total": )" + std::to_string(i * 10) + "}");
  }

  int handled = 0;
  bool failed_once = false;
  pgqueue::worker* self = nullptr;
  pgqueue::worker w(
      q,
      [&](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
        co_await tx.query(
            "INSERT INTO example_invoices (job, total) VALUES ($1, ($2::jsonb->>'total')::int)",
            {j.id, j.payload});
        // The first job fails once after writing: its row is rolled back and the job retried.
        if (!failed_once) {
          failed_once = true;
          throw std::runtime_error("printer jammed");
        }
        if (++handled == jobs) self->stop();
      },
      {.concurrency = 4});
  self = &w;
  co_await w.run();

  const auto& s = w.stats();
  std::printf("acked %llu, failed %llu\n", static_cast<unsigned long long>(s.acked),
              static_cast<unsigned long long>(s.failed));
  auto session = co_await pool.acquire();
  auto r = co_await session->query(
      "SELECT count(*), count(*) FILTER (WHERE j.state = 'done') FROM example_invoices i "
      "JOIN pgqueue.jobs j ON j.id = i.job WHERE j.queue = $1",
      {q.name()});
  std::printf("invoices: %lld, of which for done jobs: %lld\n",
              static_cast<long long>(r.get<std::int64_t>(0, 0)),
              static_cast<long long>(r.get<std::int64_t>(0, 1)));
  if (r.get<std::int64_t>(0, 0) != jobs || r.get<std::int64_t>(0, 1) != jobs) {
    throw std::runtime_error("expected one invoice per job");
  }
  session.release();
  pool.close();
}

int main(int argc, char** argv) {
  return example::run(argc, argv, invoices);
}
