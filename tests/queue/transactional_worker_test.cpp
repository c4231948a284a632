// A worker whose handler runs inside a transaction: the job is done if and only if the
// handler's writes commit; a throw rolls them back and nacks the job; 40001 runs it again.
// Also a queue opened on a pool, and a worker's extra sessions taken from that pool.
#include <map>
#include <set>

#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_transactional_worker_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// Enqueues `n` jobs {"i": k} through the SQL API.
void fill(session& s, int n) {
  s.query(
      "SELECT pgqueue.enqueue_batch('q', array_agg(jsonb_build_object('i', g))) "
      "FROM generate_series(1, $1) g",
      {std::to_string(n)});
}

// The effect table: a unique job id, so a second effect for one job fails.
void make_effects(session& s) {
  s.query("CREATE TABLE effects (job bigint PRIMARY KEY)");
}

asio::awaitable<pgqueue::pool> open_pool(queue_fixture& f, std::size_t max_size = 10) {
  auto ex = co_await asio::this_coro::executor;
  co_return co_await pgqueue::pool::open(ex, f.db.dsn(), {.min_size = 1, .max_size = max_size});
}

}  // namespace

TEST_CASE("a transactional handler's effect and the job's ack commit together, once per job",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  make_effects(admin);
  constexpr int jobs = 500;
  fill(admin, jobs);
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f, 9);
        auto q = co_await pgqueue::queue::open(pool, "q");
        int done = 0;
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
              co_await tx.query("INSERT INTO effects VALUES ($1)", {j.id});
              if (++done == jobs) self->stop();
            },
            {.concurrency = 8});
        self = &w;
        co_await w.run();
        stats = w.stats();
        // The shared session and at most 8 transactions.
        CHECK(pool.stats().size <= 9);
        pool.close();
      },
      120s);
  CHECK(stats.acked == jobs);
  CHECK(stats.failed == 0);
  CHECK(stats.lost == 0);
  CHECK(count_jobs(admin, "done") == jobs);
  CHECK(admin.integer("SELECT count(*) FROM effects") == jobs);
  CHECK(admin.integer("SELECT count(*) FROM effects e JOIN pgqueue.jobs j ON j.id = e.job "
                      "WHERE j.state = 'done'") == jobs);
}

TEST_CASE("a transactional handler that throws leaves no effect and its job nacked",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  make_effects(admin);
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 1)");
  pgqueue::worker_stats stats;
  int runs = 0;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f);
        auto q = co_await pgqueue::queue::open(pool, "q");
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
              co_await tx.query("INSERT INTO effects VALUES ($1)", {j.id});
              ++runs;
              self->stop();
              throw std::runtime_error("card declined");
            },
            {.concurrency = 2});
        self = &w;
        co_await w.run();
        stats = w.stats();
        // Every session came back rolled back.
        for (int i = 0; i < 3; ++i) {
          auto c = co_await pool.acquire();
          CHECK_FALSE(c->in_transaction());
        }
        pool.close();
      },
      60s);
  CHECK(runs == 1);
  CHECK(stats.failed == 1);
  CHECK(stats.acked == 0);
  const auto row = read_job(admin, id);
  CHECK(row.state == "dead");
  CHECK(row.attempts == 1);
  CHECK(row.last_error.value_or("") == "card declined");
  CHECK(admin.integer("SELECT count(*) FROM effects") == 0);
}

TEST_CASE("a transactional handler is run again after a serialization failure",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  make_effects(admin);
  // Each job's first run fails with 40001 after writing its effect; the second succeeds.
  constexpr int jobs = 20;
  fill(admin, jobs);
  std::map<std::int64_t, int> runs;
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f);
        auto q = co_await pgqueue::queue::open(pool, "q");
        std::set<std::int64_t> done;
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
              co_await tx.query("INSERT INTO effects VALUES ($1)", {j.id});
              if (++runs[j.id] == 1) {
                co_await tx.query(
                    "DO $$BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END$$");
              }
              // Counted once per job: serializable claims and acks may conflict for real too,
              // and run a handler a third time.
              done.insert(j.id);
              if (done.size() == jobs) self->stop();
            },
            {.concurrency = 4, .transaction = {.level = pgqueue::isolation::serializable}});
        self = &w;
        co_await w.run();
        stats = w.stats();
        pool.close();
      },
      60s);
  REQUIRE(runs.size() == jobs);
  for (auto& [id, n] : runs) CHECK(n >= 2);
  CHECK(stats.acked == jobs);
  CHECK(stats.failed == 0);
  CHECK(count_jobs(admin, "done") == jobs);
  CHECK(admin.integer("SELECT count(*) FROM effects") == jobs);
  CHECK(admin.integer("SELECT max(attempts) FROM pgqueue.jobs") == 1);  // one claim each
}

TEST_CASE("a transactional handler that always conflicts stops after max_attempts runs",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 1)");
  int runs = 0;
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f);
        auto q = co_await pgqueue::queue::open(pool, "q");
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job&, pgqueue::transaction& tx) -> asio::awaitable<void> {
              if (++runs == 3) self->stop();
              co_await tx.query(
                  "DO $$BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40P01'; END$$");
            },
            {.concurrency = 1, .transaction = {.max_attempts = 3}});
        self = &w;
        co_await w.run();
        stats = w.stats();
        pool.close();
      },
      60s);
  CHECK(runs == 3);
  CHECK(stats.failed == 1);
  const auto row = read_job(admin, id);
  CHECK(row.state == "dead");
  CHECK(row.last_error.value_or("").find("conflict") != std::string::npos);
}

TEST_CASE("a transactional handler needs a queue opened on a pool", "[transactional_worker]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    CHECK_FALSE(q.sessions());
    bool refused = false;
    try {
      pgqueue::worker w(q, [](const pgqueue::job&, pgqueue::transaction&) -> asio::awaitable<void> {
        co_return;
      });
    } catch (const pgqueue::error& e) {
      refused = e.code() == pgqueue::errc::invalid_argument;
    }
    CHECK(refused);
  });
}

TEST_CASE("queues opened on one pool share its shared session; a worker's lanes borrow sessions",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int jobs = 300;
  fill(admin, jobs);
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f, 4);
        auto q = co_await pgqueue::queue::open(pool, "q");
        auto other = co_await pgqueue::queue::open(pool, "other");
        CHECK(q.db().backend_pid() == other.db().backend_pid());
        CHECK(pool.stats().size == 1);  // min_size 1: the shared session is that one
        CHECK(pool.stats().idle == 0);
        std::size_t size_while_running = 0;
        int done = 0;
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(q,
                          [&](const pgqueue::job&) -> asio::awaitable<void> {
                            size_while_running = std::max(size_while_running, pool.stats().size);
                            if (++done == jobs) self->stop();
                            co_return;
                          },
                          {.concurrency = 6, .connections = 3});
        self = &w;
        co_await w.run();
        CHECK(w.stats().acked == jobs);
        CHECK(size_while_running == 3);  // the shared session and two borrowed
        // Given back after the run (a session with its UNLISTEN still in flight is reset
        // first, in the background).
        const bool back = co_await eventually([&] { return pool.stats().idle == 2; }, 5s);
        CHECK(back);
        CHECK(pool.stats().size == 3);
        pool.close();
        bool closed = false;
        try {
          co_await pool.shared();
        } catch (const pgqueue::error& e) {
          closed = e.code() == pgqueue::pg::errc::closed;
        }
        CHECK(closed);
        // The shared session closed with it: the queues on it fail at once.
        CHECK_FALSE(q.db().is_open());
        CHECK(pool.stats().size == 0);
        bool enqueue_closed = false;
        try {
          co_await other.enqueue("{}");
        } catch (const pgqueue::error& e) {
          enqueue_closed = e.code() == pgqueue::pg::errc::closed;
        }
        CHECK(enqueue_closed);
      },
      60s);
  CHECK(count_jobs(admin, "done") == jobs);
}

TEST_CASE("a transactional handler that ends its transaction itself has its job nacked",
          "[transactional_worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  make_effects(admin);
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 1)");
  run_async(
      [&]() -> asio::awaitable<void> {
        auto pool = co_await open_pool(f);
        auto q = co_await pgqueue::queue::open(pool, "q");
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
              co_await tx.query("INSERT INTO effects VALUES ($1)", {j.id});
              co_await tx.commit();
              self->stop();
            },
            {.concurrency = 1});
        self = &w;
        co_await w.run();
        CHECK(w.stats().failed == 1);
        CHECK(w.stats().acked == 0);
        pool.close();
      },
      60s);
  const auto row = read_job(admin, id);
  CHECK(row.state == "dead");
  CHECK(row.last_error.value_or("").find("ended its transaction itself") != std::string::npos);
}

TEST_CASE("a transactional worker with read-only transactions is refused",
          "[transactional_worker]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto pool = co_await open_pool(f);
    auto q = co_await pgqueue::queue::open(pool, "q");
    bool refused = false;
    try {
      pgqueue::worker w(
          q, [](const pgqueue::job&, pgqueue::transaction&) -> asio::awaitable<void> { co_return; },
          {.transaction = {.read_only = true}});
    } catch (const pgqueue::error& e) {
      refused = e.code() == pgqueue::errc::invalid_argument &&
                std::string(e.what()).find("read_only") != std::string::npos;
    }
    CHECK(refused);
    pool.close();
  });
}

}  // namespace queue_transactional_worker_test
