// A database (or role) whose default isolation is REPEATABLE READ: the library's sessions run
// READ COMMITTED anyway, which the queue's functions need (claim floors, pause, SKIP LOCKED
// claims that do not fail with 40001 when another claim took a job first).
#include <asio/experimental/awaitable_operators.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_isolation_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// Makes REPEATABLE READ the default of every session that connects to the fixture's database
// from now on, and checks that a plain libpq session gets it.
void default_to_repeatable_read(queue_fixture& f, session& admin) {
  admin.script("ALTER DATABASE \"" + f.db.name() +
               "\" SET default_transaction_isolation = 'repeatable read'");
  session plain(f.db.dsn());
  REQUIRE(plain.scalar("SELECT current_setting('transaction_isolation')") == "repeatable read");
}

asio::awaitable<std::string> isolation_of(pgqueue::database& db) {
  auto r = co_await db.query("SELECT current_setting('transaction_isolation')");
  co_return r.get<std::string>(0, 0);
}

}  // namespace

TEST_CASE("sessions run READ COMMITTED whatever the database's default, also after a reconnect",
          "[queue][isolation]") {
  queue_fixture f;
  session admin(f.db.dsn());
  default_to_repeatable_read(f, admin);
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    const auto first = co_await isolation_of(db);
    CHECK(first == "read committed");
    pgqueue::queue q{db, "q"};
    // pause and resume refuse REPEATABLE READ (22023); a first enqueue makes its claim floor
    // only in READ COMMITTED (without one, a long transaction elsewhere slows every claim).
    const bool paused = co_await q.pause();
    CHECK(paused);
    const bool resumed = co_await q.resume();
    CHECK(resumed);
    const auto id = co_await q.enqueue("{}");
    CHECK(admin.integer("SELECT count(*) FROM pgqueue.ready_floor WHERE queue = 'q'") == 1);
    REQUIRE(admin.scalar("SELECT pg_terminate_backend($1)", {std::to_string(db.backend_pid())}) ==
            "t");
    CHECK(co_await eventually([&] { return db.reconnects() == 1; }));
    auto lease = co_await q.claim();  // on the new session
    CHECK(lease.job().id == id);
    co_await lease.ack();
    const auto after_reconnect = co_await isolation_of(db);
    CHECK(after_reconnect == "read committed");
    // A pool's sessions too; a transaction still chooses its own level.
    auto pool = co_await pgqueue::pool::open(co_await asio::this_coro::executor, f.db.dsn());
    {
      auto c = co_await pool.acquire();
      auto r = co_await c->query("SELECT current_setting('transaction_isolation')");
      CHECK(r.get<std::string>(0, 0) == "read committed");
    }
    auto tx =
        co_await pgqueue::transaction::begin(pool, {.level = pgqueue::pg::isolation::serializable});
    auto r = co_await tx.query("SELECT current_setting('transaction_isolation')");
    CHECK(r.get<std::string>(0, 0) == "serializable");
    co_await tx.rollback();
  });
  CHECK(count_jobs(admin, "done", "q") == 1);
}

TEST_CASE("two workers drain a queue together in a database that defaults to REPEATABLE READ",
          "[queue][isolation]") {
  // In REPEATABLE READ a claim that meets a job another claim took after its snapshot fails
  // with 40001, which ended a worker's run.
  queue_fixture f;
  session admin(f.db.dsn());
  default_to_repeatable_read(f, admin);
  const int jobs = 600;
  admin.query("SELECT pgqueue.enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[$1::int]))",
              {std::to_string(jobs)});
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue a{co_await f.connect(), "q"};
    pgqueue::queue b{co_await f.connect(), "q"};
    int ran = 0;
    std::optional<pgqueue::worker> wa, wb;
    auto handler = [&](const pgqueue::job&) -> asio::awaitable<void> {
      if (++ran == jobs) {
        wa->stop();
        wb->stop();
      }
      co_return;
    };
    wa.emplace(a, handler, pgqueue::worker_options{.concurrency = 4, .claim_batch = 1});
    wb.emplace(b, handler, pgqueue::worker_options{.concurrency = 4, .claim_batch = 1});
    co_await (wa->run() && wb->run());
    CHECK(ran == jobs);
  });
  CHECK(count_jobs(admin, "done", "q") == jobs);
}

}  // namespace queue_isolation_test
