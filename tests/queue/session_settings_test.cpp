// Settings a database, role or environment may give that the library's sessions set back to
// what its statements need: READ COMMITTED (claim floors, pause, SKIP LOCKED claims that do
// not fail with 40001 when another claim took a job first), array_nulls, extra_float_digits,
// and UTF-8 as the client encoding, but not in a SQL_ASCII database.
#include <unistd.h>
#include <asio/experimental/awaitable_operators.hpp>
#include <pgqueue/pgqueue.hpp>
#include <set>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_isolation_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// Makes `value` the default of `setting` for every session that connects to the fixture's
// database from now on, and checks that a plain libpq session gets it.
void database_default(queue_fixture& f, session& admin, const std::string& setting,
                      const std::string& value) {
  admin.script("ALTER DATABASE \"" + f.db.name() + "\" SET " + setting + " = '" + value + "'");
  session plain(f.db.dsn());
  REQUIRE(plain.scalar("SELECT current_setting($1)", {setting}) == value);
}

void default_to_repeatable_read(queue_fixture& f, session& admin) {
  database_default(f, admin, "default_transaction_isolation", "repeatable read");
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

TEST_CASE("a worker's claim that waits past a database's lock_timeout is sent again",
          "[queue][isolation]") {
  // (The 55P03 ended run(), and the acks that rode with that claim were counted lost: their
  // jobs ran again once their leases expired.)
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query("SELECT pgqueue.set_queue_limits('lim', 50)");  // claims then lock its row
  admin.query("SELECT pgqueue.enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[200]))");
  database_default(f, admin, "lock_timeout", "50ms");
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "lim"};
    int ran = 0;
    std::optional<pgqueue::worker> w;
    w.emplace(q, [&](const pgqueue::job&) -> asio::awaitable<void> {
      if (++ran == 200) w->stop();
      co_return;
    });
    // Claims of the queue wait for this transaction's lock on its limits row: the first goes
    // past the lock_timeout, and so do those sent again meanwhile.
    admin.script("BEGIN");
    admin.query("SELECT pgqueue.set_queue_limits('lim', 40)");
    auto hold = [&]() -> asio::awaitable<void> {
      co_await pause(400ms);  // the subject is time: longer than the lock_timeout
      admin.script("COMMIT");
    };
    co_await (w->run() && hold());
    CHECK(ran == 200);
    CHECK(w->stats().lost == 0);
    // Each refused claim waited 50 ms of the 400: counted, at most eight.
    CHECK(w->stats().refused >= 1);
    CHECK(w->stats().refused <= 8);
  });
  CHECK(count_jobs(admin, "done", "lim") == 200);
  CHECK(admin.integer("SELECT max(attempts) FROM pgqueue.jobs WHERE queue = 'lim'") == 1);
}

TEST_CASE("a worker's nack the server refuses for a while is sent again with the handler's text",
          "[queue][isolation]") {
  // (Two refusals 100 ms apart and the worker gave up: the job waited for its lease to expire,
  // counted lost, its error "lease expired" instead of the handler's.)
  queue_fixture f;
  session admin(f.db.dsn());
  database_default(f, admin, "lock_timeout", "100ms");
  std::int64_t id = 0;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await q.enqueue("{}");
    std::optional<pgqueue::worker> w;
    w.emplace(q, [&](const pgqueue::job&) -> asio::awaitable<void> {
      // The job's row is locked while its nack goes out, for 800 ms: eight refusals.
      lock_job_row(admin, id);
      w->stop();
      throw std::runtime_error("the handler's own message");
    });
    auto hold = [&]() -> asio::awaitable<void> {
      while (admin.integer("SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' "
                           "AND NOT granted") == 0) {
        co_await pause(10ms);
      }
      co_await pause(800ms);  // the subject is time: several lock_timeouts
      admin.query("COMMIT");
    };
    co_await (w->run() && hold());
    stats = w->stats();
  });
  CHECK(stats.failed == 1);
  CHECK(stats.lost == 0);
  CHECK(stats.refused >= 1);  // each refusal waited 100 ms of the 800
  CHECK(stats.refused <= 8);
  const auto j = read_job(admin, id);
  CHECK(j.state == "ready");
  CHECK(*j.last_error == "the handler's own message");
}

TEST_CASE("stop() ends at stop_timeout while the server keeps refusing a finished job's ack",
          "[queue][isolation]") {
  // (The ack batch went out again every 250 ms for as long as the row stayed locked: stop()
  // waited for the other transaction, whatever stop_timeout said.)
  queue_fixture f;
  session admin(f.db.dsn());
  database_default(f, admin, "lock_timeout", "50ms");
  std::int64_t id = 0;
  pgqueue::worker_stats stats;
  auto took = std::chrono::steady_clock::duration::max();
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await q.enqueue("{}");
    std::optional<pgqueue::worker> w;
    w.emplace(
        q,
        [&](const pgqueue::job&) -> asio::awaitable<void> {
          lock_job_row(admin, id);
          w->stop();
          co_return;
        },
        pgqueue::worker_options{.stop_timeout = 300ms});
    bool ended = false;
    auto timed_run = [&]() -> asio::awaitable<void> {
      const auto start = std::chrono::steady_clock::now();
      co_await w->run();
      took = std::chrono::steady_clock::now() - start;
      ended = true;
    };
    // The lock is held until run() ends, or for 5 s, so a stop that waits for it fails here.
    auto hold = [&]() -> asio::awaitable<void> {
      const auto give_up = std::chrono::steady_clock::now() + 5s;
      while (!ended && std::chrono::steady_clock::now() < give_up) co_await pause(10ms);
      admin.query("COMMIT");
    };
    co_await (timed_run() && hold());
    stats = w->stats();
  });
  CHECK(took < 3s);  // 300 ms, a refusal's 50 ms and a pause, with room for the sanitizers
  CHECK(stats.acked == 0);
  CHECK(stats.lost == 1);
  CHECK(stats.refused >= 1);
  CHECK(read_job(admin, id).state == "claimed");  // its lease expires, and it runs again
}

TEST_CASE("a batch's keyless jobs stay apart where array_nulls is off", "[queue][isolation]") {
  // (The NULLs among the keys were read as the key "NULL": the four jobs came back as two.)
  queue_fixture f;
  session admin(f.db.dsn());
  database_default(f, admin, "array_nulls", "off");
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    std::vector<std::optional<std::string>> keys{std::nullopt, "k1", std::nullopt, std::nullopt};
    std::vector<std::string> payloads(4, "{}");  // named: GCC 12 and temporaries in co_await
    auto ids = co_await q.enqueue_batch(payloads, {}, keys);
    CHECK(std::set<std::int64_t>(ids.begin(), ids.end()).size() == 4);
  });
  CHECK(count_jobs(admin, "ready", "q") == 4);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE idempotency_key IS NOT NULL") == 1);
}

TEST_CASE("a claim's times are exact where extra_float_digits is negative", "[queue][isolation]") {
  // (At -15 an epoch came back with one significant digit: due_at in 2033.)
  queue_fixture f;
  session admin(f.db.dsn());
  database_default(f, admin, "extra_float_digits", "-15");
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    co_await q.enqueue("{}");
    auto lease = co_await q.claim();
    const auto off = std::chrono::abs(lease.job().claimed_at - std::chrono::system_clock::now());
    CHECK(off < std::chrono::minutes(1));
    CHECK(lease.job().due_at <= lease.job().claimed_at);
    co_await lease.ack();
  });
}

TEST_CASE("in a SQL_ASCII database a payload that is not UTF-8 is handed out as stored",
          "[queue][isolation]") {
  // (With the client encoding set to UTF-8 there, the server refused to convert it, and so
  // every claim of the queue: the job stayed at the head, and the jobs behind it waited.)
  const std::string name = "pgqueue_test_sql_ascii_" + std::to_string(::getpid());
  session server(server_dsn());
  server.script("DROP DATABASE IF EXISTS " + name);
  server.script("CREATE DATABASE " + name +
                " TEMPLATE template0 ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'");
  const std::string dsn = server_dsn() + " dbname=" + name;
  const std::string latin1 = "{\"s\": \"caf\xe9\"}";
  {
    session admin(dsn);
    admin.script(read_file(schema_file()));
    admin.query("SELECT pgqueue.enqueue('q', $1::jsonb)", {latin1});
    admin.query("SELECT pgqueue.enqueue('q', '{}')");
  }
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
    pgqueue::queue q{db, "q"};
    auto leases = co_await q.claim_batch(2);
    REQUIRE(leases.size() == 2);
    CHECK(leases[0].job().payload == latin1);
    for (auto& l : leases) co_await l.ack();
    db.close();
  });
  server.script("DROP DATABASE " + name + " WITH (FORCE)");
}

}  // namespace queue_isolation_test
