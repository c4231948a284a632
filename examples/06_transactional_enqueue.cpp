// 06: enqueue inside your own transaction.
//
// An order and the e-mail that confirms it: both or neither. The job is written by the same
// transaction as the order, so a rolled-back order leaves no e-mail to send, and a committed
// one always has its e-mail. Listeners are woken when the transaction commits, never for a
// rollback.
//
//   06_transactional_enqueue "<conninfo>"      (or set PGQUEUE_DSN)
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

namespace {

// Places an order and enqueues its confirmation in one transaction. in_transaction commits
// when the body returns, rolls back when it throws, and runs it again after a serialization
// failure or deadlock.
asio::awaitable<void> place_order(const pgqueue::pool& pool, pgqueue::queue& emails, int order,
                                  bool paid) {
  co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
    co_await tx.query("INSERT INTO example_orders (id) VALUES ($1)", {order});
    co_await emails.enqueue(tx, R"({"order": )" + std::to_string(order) + "}");
    if (!paid) throw std::runtime_error("payment declined");
  });
}

asio::awaitable<std::int64_t> count(const pgqueue::pool& pool, const std::string& sql,
                                    pgqueue::pg::params args = {}) {
  auto session = co_await pool.acquire();  // a session of our own, back to the pool at scope end
  auto r = co_await session->query(sql, std::move(args));
  co_return r.get<std::int64_t>(0, 0);
}

asio::awaitable<void> orders(std::string dsn) {
  auto ex = co_await asio::this_coro::executor;
  {
    auto db = co_await pgqueue::connect(ex, dsn);
    co_await pgqueue::migrate(db);
    co_await db.query("CREATE TABLE IF NOT EXISTS example_orders (id int PRIMARY KEY)");
    co_await db.query("TRUNCATE example_orders");
  }

  // One object to configure: a pool of sessions. The queue runs its own statements on the
  // pool's shared session; each transaction takes a session of its own.
  auto pool = co_await pgqueue::pool::open(ex, dsn, {.max_size = 4});
  auto emails = co_await pgqueue::queue::open(pool, example::fresh_queue_name("emails"));

  co_await place_order(pool, emails, 1, true);
  std::printf("order 1: paid, committed\n");
  try {
    co_await place_order(pool, emails, 2, false);
  } catch (const std::exception& e) {
    std::printf("order 2: %s, rolled back\n", e.what());
  }

  const auto orders = co_await count(pool, "SELECT count(*) FROM example_orders");
  const auto jobs =
      co_await count(pool, "SELECT count(*) FROM pgqueue.jobs WHERE queue = $1", {emails.name()});
  std::printf("orders: %lld, confirmation jobs: %lld\n", static_cast<long long>(orders),
              static_cast<long long>(jobs));
  if (orders != 1 || jobs != 1) throw std::runtime_error("expected one order and one job");

  // The manual form: begin ... commit; rolled back if dropped uncommitted.
  {
    auto tx = co_await pgqueue::transaction::begin(pool);
    co_await tx.query("INSERT INTO example_orders (id) VALUES (3)");
    co_await emails.enqueue(tx, R"({"order": 3})");
    co_await tx.commit();
  }
  auto lease = co_await emails.try_claim();
  std::printf("claimed the e-mail for %s\n", lease ? lease->job().payload.c_str() : "(none)");
  if (lease) co_await lease->ack();
  pool.close();
}

}  // namespace

int main(int argc, char** argv) {
  return example::run(argc, argv, orders);
}
