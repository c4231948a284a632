// Enqueueing inside the application's transaction: the job exists if and only if the
// transaction commits, together with the application's own rows, and listeners are woken at
// that commit, once, never for a rollback.
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_transaction_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// A queue watched on its own connection, a pool, and an orders table.
struct shop {
  pgqueue::queue watcher, emails;
  pgqueue::pool pool;
};

asio::awaitable<shop> open_shop(queue_fixture& f) {
  auto ex = co_await asio::this_coro::executor;
  pgqueue::queue watcher{co_await f.connect(), "emails"};
  co_await watcher.watch();
  auto pool = co_await pgqueue::pool::open(ex, f.db.dsn());
  {
    auto c = co_await pool.acquire();
    co_await c->query("CREATE TABLE orders (id int PRIMARY KEY)");
  }
  pgqueue::queue emails{co_await f.connect(), "emails"};
  co_return shop{watcher, emails, pool};
}

// Notifications that arrive for `q` within `limit`.
asio::awaitable<int> notifications_within(pgqueue::queue& q, std::chrono::milliseconds limit) {
  int n = 0;
  for (;;) {
    auto r = co_await (q.next_notification() || pause(limit));
    if (r.index() == 1) co_return n;
    ++n;
  }
}

asio::awaitable<std::int64_t> count(const pgqueue::pool& p, const std::string& sql) {
  auto c = co_await p.acquire();
  co_return (co_await c->query(sql)).get<std::int64_t>(0, 0);
}

}  // namespace

TEST_CASE(
    "a committed transaction makes the order and its job visible together, with one "
    "wake-up",
    "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto s = co_await open_shop(f);
    auto tx = co_await pgqueue::transaction::begin(s.pool);
    co_await tx.query("INSERT INTO orders VALUES (1)");
    const auto id = co_await s.emails.enqueue(tx, R"({"order": 1})");
    const std::vector<std::string> two{"{}", "{}"};
    const auto batch = co_await s.emails.enqueue_batch(tx, two);
    CHECK(batch.size() == 2);
    // Not visible, nor announced, before the commit.
    CHECK(co_await count(s.pool, "SELECT count(*) FROM pgqueue.jobs") == 0);
    const int before = co_await notifications_within(s.watcher, 100ms);
    CHECK(before == 0);
    co_await tx.commit();
    const int after = co_await notifications_within(s.watcher, 300ms);
    CHECK(after == 1);  // one per transaction
    CHECK(co_await count(s.pool, "SELECT count(*) FROM orders") == 1);
    auto l = co_await s.emails.try_claim();
    REQUIRE(l);
    CHECK(l->job().id == id);
    CHECK(l->job().payload == R"({"order": 1})");
  });
}

TEST_CASE("a rolled-back transaction leaves no job and sends no wake-up", "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto s = co_await open_shop(f);
    {
      auto tx = co_await pgqueue::transaction::begin(s.pool);
      co_await tx.query("INSERT INTO orders VALUES (1)");
      co_await s.emails.enqueue(tx, "{}", {.idempotency_key = "order-1"});
      co_await tx.rollback();
    }
    {
      bool threw = false;
      try {
        co_await pgqueue::in_transaction(s.pool,
                                         [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
                                           co_await tx.query("INSERT INTO orders VALUES (2)");
                                           co_await s.emails.enqueue(tx, "{}");
                                           throw std::runtime_error("payment declined");
                                         });
      } catch (const std::runtime_error&) {
        threw = true;
      }
      CHECK(threw);
    }
    const int heard = co_await notifications_within(s.watcher, 300ms);
    CHECK(heard == 0);
    CHECK(co_await count(s.pool, "SELECT count(*) FROM pgqueue.jobs") == 0);
    CHECK(co_await count(s.pool, "SELECT count(*) FROM orders") == 0);
    // The key was never taken.
    auto tx = co_await pgqueue::transaction::begin(s.pool);
    const auto id = co_await s.emails.enqueue(tx, "{}", {.idempotency_key = "order-1"});
    co_await tx.commit();
    CHECK(co_await count(s.pool, "SELECT count(*) FROM pgqueue.jobs") == 1);
    CHECK(id > 0);
  });
}

TEST_CASE("a bad job fails the transaction with the server's error", "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto s = co_await open_shop(f);
    auto tx = co_await pgqueue::transaction::begin(s.pool);
    co_await tx.query("INSERT INTO orders VALUES (1)");
    std::string state;
    try {
      co_await s.emails.enqueue(tx, "{not json");
    } catch (const pgqueue::error& e) {
      state = e.sqlstate();
    }
    CHECK(state == "22P02");
    co_await tx.rollback();
    CHECK(co_await count(s.pool, "SELECT count(*) FROM orders") == 0);
    // An ended transaction is refused before anything is sent.
    bool closed = false;
    try {
      co_await s.emails.enqueue(tx, "{}");
    } catch (const pgqueue::error& e) {
      closed = e.code() == pgqueue::pg::errc::closed;
    }
    CHECK(closed);
  });
}

TEST_CASE("a job acked inside a transaction is done if and only if it commits", "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto s = co_await open_shop(f);
    session admin(f.db.dsn());
    admin.query("CREATE TABLE sent (job bigint PRIMARY KEY)");
    const auto id = co_await s.emails.enqueue("{}");
    auto l = co_await s.emails.claim();
    {
      auto tx = co_await pgqueue::transaction::begin(s.pool);
      co_await l.ack(tx);
      co_await tx.rollback();
    }
    CHECK_FALSE(l.finished());  // held as before
    CHECK(read_job(admin, id).state == "claimed");
    auto tx = co_await pgqueue::transaction::begin(s.pool);
    co_await tx.query("INSERT INTO sent VALUES ($1)", {id});
    co_await l.ack(tx);
    bool pending = false;
    try {
      co_await l.ack(tx);
    } catch (const pgqueue::error& e) {
      pending = e.code() == pgqueue::errc::lease_finished;
    }
    CHECK(pending);
    // Nor a plain ack, nack or release: the transaction holds the row (nothing is sent).
    int refused = 0;
    for (int which = 0; which < 3; ++which) {
      try {
        if (which == 0) co_await l.ack();
        if (which == 1) co_await l.nack("no");
        if (which == 2) co_await l.release();
      } catch (const pgqueue::error& e) {
        if (e.code() == pgqueue::errc::lease_finished) ++refused;
      }
    }
    CHECK(refused == 3);
    CHECK_FALSE(l.finished());
    co_await tx.commit();
    CHECK(l.finished());
    CHECK(read_job(admin, id).state == "done");
    CHECK(admin.integer("SELECT count(*) FROM sent") == 1);
    // Counted in the session's own slot (the ack was not the transaction's first statement),
    // which gc folds into the shared ones.
    CHECK(admin.integer("SELECT count FROM pgqueue.depth WHERE queue = 'emails' AND state = "
                        "'done'") == 1);
    admin.query("SELECT pgqueue.gc()");
    CHECK(admin.integer("SELECT count(*) FROM pgqueue.done_counts WHERE slot >= 32") == 0);
    CHECK(admin.integer("SELECT count FROM pgqueue.depth WHERE queue = 'emails' AND state = "
                        "'done'") == 1);
  });
}

TEST_CASE("a transaction holding an acked job's row longer than the lease holds up nothing",
          "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto pool = co_await pgqueue::pool::open(ex, f.db.dsn());
    session admin(f.db.dsn());
    // A 600 ms lease: heartbeats every 200 ms, on the queue's (shared) connection.
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 600ms}};
    const auto id = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    auto tx = co_await pgqueue::transaction::begin(pool);
    co_await l.ack(tx);
    // For three leases' time the shared connection answers at once (no heartbeat waits on the
    // row), and the janitor does not take the job back (it skips rows in use).
    auto slowest = std::chrono::milliseconds(0);
    const auto until = std::chrono::steady_clock::now() + 1800ms;
    while (std::chrono::steady_clock::now() < until) {
      const auto t0 = std::chrono::steady_clock::now();
      co_await q.db().query("SELECT 1");
      slowest = std::max(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - t0));
      co_await pause(50ms);
    }
    CHECK(slowest < 150ms);
    CHECK(admin.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 0);
    co_await tx.commit();
    CHECK(l.finished());
    CHECK(read_job(admin, id).state == "done");
  });
}

TEST_CASE("a lease destroyed while its ack waits in a transaction follows the transaction",
          "[transaction]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto s = co_await open_shop(f);
    session admin(f.db.dsn());
    const auto rolled_back = co_await s.emails.enqueue("{}");
    const auto committed = co_await s.emails.enqueue("{}");
    {
      auto l = co_await s.emails.claim();
      REQUIRE(l.job().id == rolled_back);
      auto tx = co_await pgqueue::transaction::begin(s.pool);
      co_await l.ack(tx);
      { auto gone = std::move(l); }  // destroyed: no nack now (it would wait on the row)
      co_await tx.rollback();        // then given back as "abandoned"
    }
    CHECK(co_await eventually([&] { return read_job(admin, rolled_back).state == "ready"; }));
    CHECK(read_job(admin, rolled_back).last_error.value_or("") == "abandoned");
    {
      auto l = co_await s.emails.claim();
      REQUIRE(l.job().id == committed);
      auto tx = co_await pgqueue::transaction::begin(s.pool);
      co_await l.nack(tx, "invalid address", 0ms);
      { auto gone = std::move(l); }
      co_await tx.commit();
    }
    const auto row = read_job(admin, committed);
    CHECK(row.state == "ready");
    CHECK(row.last_error.value_or("") == "invalid address");
    CHECK(row.attempts == 1);
  });
}

}  // namespace queue_transaction_test
