// The C++ blocks of README.md and docs/, compiled and run against a real server. Each is copied
// here verbatim (the docs_code_blocks test fails when a block of those pages is in no test).
#include <algorithm>
#include <iostream>

#include <pgqueue/pgqueue.hpp>

#include <asio/experimental/awaitable_operators.hpp>

#include "support/async.hpp"
#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_docs_examples_test {

using namespace pgq_test;

namespace {

// What the examples' handlers were given; `arrived` fires (is cancelled) at each call, so a
// test awaits the handler instead of polling.
struct handled {
  std::vector<std::string> payloads;
  asio::steady_timer* arrived = nullptr;

  asio::awaitable<void> take(const std::string& payload) {
    payloads.push_back(payload);
    if (arrived) arrived->cancel();
    co_return;
  }
  // Returns once `n` payloads were handled.
  asio::awaitable<void> wait_for(std::size_t n) {
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(30));
    arrived = &t;
    while (payloads.size() < n) {
      std::error_code ec;
      t.expires_after(std::chrono::seconds(30));
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) break;  // timed out: the caller's checks fail
    }
    arrived = nullptr;
  }
};

handled emailed, delivered;

asio::awaitable<void> send_email(const std::string& payload) {
  return emailed.take(payload);
}
asio::awaitable<void> deliver(const std::string& payload) {
  return delivered.take(payload);
}

// The pages' blocks, as the pages show them.
// clang-format off

// ---- README.md: ten lines ----
asio::awaitable<void> emails(asio::any_io_executor ex, std::string conninfo) {
  auto db = co_await pgqueue::connect(ex, conninfo);  // e.g. "postgresql:///app"
  co_await pgqueue::migrate(db);                     // installs or upgrades the schema
  pgqueue::queue q{db, "emails"};
  co_await q.enqueue(R"({"to":"a@example.com"})");   // durable once this returns
  pgqueue::worker w(q, [](const pgqueue::job& j) -> asio::awaitable<void> {
    co_await send_email(j.payload);                  // return = done; throw = retried later
  }, {.concurrency = 16});
  co_await w.run();  // until w.stop(), or a cancel (e.g. `w.run() || signals.async_wait(...)`)
}

// ---- docs/cpp-api.md: the tour ----
asio::awaitable<void> tour(asio::any_io_executor ex, std::string conninfo) {
  auto db = co_await pgqueue::connect(ex, conninfo);  // e.g. "postgresql:///app"; a shared handle
  co_await pgqueue::migrate(db);                     // applies sql/pgqueue.sql
  pgqueue::queue q{db, "emails"};
  co_await q.enqueue(R"({"to":"a@example.com"})",  // returns the job's id
                     {.idempotency_key = "welcome-42", .priority = 5});
  std::vector<std::string> payloads{R"({"n":1})", R"({"n":2})"};
  std::vector<std::int64_t> ids = co_await q.enqueue_batch(payloads);  // one round trip
  pgqueue::lease lease = co_await q.claim();     // waits until one is claimable: priority 5
  std::optional<pgqueue::lease> maybe = co_await q.try_claim();  // returns at once: ids[0]
  std::vector<pgqueue::lease> some = co_await q.claim_batch(64);  // the rest: ids[1]
  lease.job();  // id, queue, payload (JSON text), priority, attempts, max_attempts
  co_await lease.ack();                              // or co_await lease.nack("reason")
  co_await maybe->nack("smtp timeout");              // retried after a back-off
  co_await pgqueue::ack_batch(some);                 // many leases in one round trip
  pgqueue::notification n = co_await q.next_notification();  // a job became claimable
}

// ---- docs/cpp-api.md: a worker ----
asio::awaitable<void> worker_example(pgqueue::queue& q) {
  pgqueue::worker w(q, [](const pgqueue::job& j) -> asio::awaitable<void> {
    co_await deliver(j.payload);  // return = ack; throw = nack with the exception's message
  }, {.concurrency = 16});
  co_await w.run();               // until w.stop() (e.g. from an asio::signal_set)
}

// ---- docs/cpp-api.md: transactions ----
// The order and its confirmation e-mail: both or neither.
asio::awaitable<void> place_order(pgqueue::pool& pool, pgqueue::queue& emails, int order) {
  co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
    co_await tx.query("INSERT INTO orders (id) VALUES ($1)", {order});
    co_await emails.enqueue(tx, R"({"template": "order-confirmation"})");
  });  // commits when the body returns; a throw rolls both back
}

// ---- README.md: transactions ----
// Runs the README's block, then the worker until `stop` returns.
asio::awaitable<void> readme_transactions(asio::any_io_executor ex, std::string conninfo,
                                          int order_id, asio::awaitable<void> stop) {
auto pool = co_await pgqueue::pool::open(ex, conninfo, {.max_size = 10});
auto emails = co_await pgqueue::queue::open(pool, "emails");  // runs on the pool's shared session

// The order and its confirmation e-mail: both or neither; workers are woken at the commit.
co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
  co_await tx.query("INSERT INTO orders (id) VALUES ($1)", {order_id});
  co_await emails.enqueue(tx, R"({"template": "order-confirmation"})");
});  // commits when the body returns; a throw rolls both back; 40001/40P01 run it again

// Exactly-once effects: the handler's writes and the job's ack commit together.
pgqueue::worker w(emails, [](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
  co_await tx.query("INSERT INTO sent_emails (job) VALUES ($1)", {j.id});
}, {.concurrency = 8});
  using namespace asio::experimental::awaitable_operators;
  co_await (w.run() || std::move(stop));
  pool.close();
}

// ---- docs/cpp-api.md: exactly-once effects ----
asio::awaitable<void> invoice_worker(pgqueue::queue q, asio::awaitable<void> stop) {
// Each job's invoice row and the job's ack commit together: exactly once per job.
pgqueue::worker w(q, [](const pgqueue::job& j, pgqueue::transaction& tx) -> asio::awaitable<void> {
  co_await tx.query("INSERT INTO invoices (job, body) VALUES ($1, $2)", {j.id, j.payload});
}, {.concurrency = 8, .transaction = {.level = pgqueue::isolation::read_committed}});
  using namespace asio::experimental::awaitable_operators;
  co_await (w.run() || std::move(stop));
}

// ---- docs/cpp-api.md: observing workers ----
asio::awaitable<std::string> observed(pgqueue::queue q, pgqueue::database db) {
  pgqueue::worker_metrics metrics;  // shared by every worker given its observer
  pgqueue::worker w(q, [](const pgqueue::job& j) -> asio::awaitable<void> {
    co_await deliver(j.payload);
  }, {.observer = [metrics](const pgqueue::job_event& e) mutable {
        if (e.kind == pgqueue::job_event_kind::failed)  // log with your own logger
          std::clog << "job " << e.job.id << " failed (attempt " << e.job.attempts << "): "
                    << e.error << "\n";
        metrics.record(e);
      }});
  asio::steady_timer serve_for(co_await asio::this_coro::executor, std::chrono::seconds(1));
  using namespace asio::experimental::awaitable_operators;
  co_await (w.run() || serve_for.async_wait(asio::use_awaitable));
  std::string text;  // what the application's GET /metrics answers
  auto status = co_await pgqueue::read_queue_status(db);  // one round trip
  pgqueue::write_queue_metrics(text, status);
  metrics.write(text);
  co_return text;
}

// ---- docs/cpp-api.md: periodic jobs ----
asio::awaitable<void> declare_schedules(pgqueue::database db) {
  pgqueue::schedule nightly{.name = "nightly-report",
                            .queue = "reports",
                            .cron = "30 2 * * *",  // 02:30 on Berlin's wall clock
                            .payload = R"({"kind":"daily"})",
                            .time_zone = "Europe/Berlin"};
  co_await pgqueue::declare_schedule(db, nightly);  // true when created or changed
  pgqueue::schedule ping{.name = "ping",
                         .queue = "health",
                         .cron = "@every 30 seconds",
                         .catch_up = pgqueue::schedule::catch_up_policy::skip};
  co_await pgqueue::declare_schedule(db, ping);
  co_await pgqueue::remove_schedule(db, "ping");  // its jobs stay
}

// ---- README.md, docs/cpp-api.md: limits per queue ----
asio::awaitable<void> limit_queues(pgqueue::database db) {
  // At most 3 renders at once across every process; at most 50 mails a second.
  pgqueue::queue_limits renders{.queue = "render", .max_claimed = 3};
  co_await pgqueue::set_queue_limits(db, renders);  // true when created or changed
  pgqueue::queue_limits mail{.queue = "mail", .rate = 50, .rate_period = std::chrono::seconds(1)};
  co_await pgqueue::set_queue_limits(db, mail);
  auto limits = co_await pgqueue::read_queue_limits(db);  // each with claimed and tokens now
  std::cout << limits.size() << " limited queues\n";
}

// ---- README.md: jobs that wait for other jobs ----
// Resize every photo once the upload is checked; zip them once every resize is done.
asio::awaitable<void> resize_and_zip(pgqueue::queue& images, std::vector<std::string> photos) {
  const std::int64_t check = co_await images.enqueue(R"({"step":"check"})");
  const std::vector<std::int64_t> after_check{check};
  const pgqueue::enqueue_options fan_out{.depends_on = after_check};
  const auto resizes = co_await images.enqueue_batch(std::move(photos), fan_out);
  const pgqueue::enqueue_options fan_in{.depends_on = resizes};
  co_await images.enqueue(R"({"step":"zip"})", fan_in);  // runs once, after the last resize
}

// clang-format on

// Returns once `sql` counts `n` (bounded: the caller's checks fail otherwise).
asio::awaitable<void> until_count(std::string dsn, std::string sql, std::int64_t n) {
  session s(dsn);
  co_await eventually([&] { return s.integer(sql) == n; });
}

// The states of the jobs in `queue`, in id order: "done,ready,…".
std::string states(session& s, const std::string& queue) {
  return *s.scalar("SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs WHERE queue = $1",
                   {queue});
}

}  // namespace

TEST_CASE("the README's ten lines run a job through a worker, and a cancel stops it",
          "[queue][docs]") {
  scratch_database db(false);
  emailed = {};
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    co_await (emails(co_await asio::this_coro::executor, db.dsn()) || emailed.wait_for(1));
  });
  CHECK(emailed.payloads == std::vector<std::string>{R"({"to": "a@example.com"})"});
  session s(db.dsn());
  CHECK(states(s, "emails") == "done");
}

TEST_CASE("the C++ API tour runs", "[queue][docs]") {
  scratch_database db(false);
  run_async([&]() -> asio::awaitable<void> {
    // Another producer adds a job once the tour waits for a notification.
    auto producer = [&]() -> asio::awaitable<void> {
      session s(db.dsn());
      co_await eventually([&] {
        return s.integer(
                   "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                   "current_database() AND query LIKE 'LISTEN%' AND state = 'idle'") > 0;
      });
      s.query("SELECT pgqueue.enqueue('emails', '{}')");
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (tour(co_await asio::this_coro::executor, db.dsn()) && producer());
  });
  session s(db.dsn());
  // The keyed job (priority 5) acked, the first of the batch nacked, the second acked in the
  // batch; the producer's job waits.
  CHECK(states(s, "emails") == "done,ready,done,ready");
  CHECK(*s.scalar("SELECT last_error FROM pgqueue.jobs WHERE id = 2") == "smtp timeout");
}

TEST_CASE("the worker example handles every job", "[queue][docs]") {
  scratch_database db;
  delivered = {};
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue_batch('mail', ARRAY['{\"n\":1}', '{\"n\":2}']::jsonb[])");
  run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    pgqueue::queue q{conn, "mail"};
    using namespace asio::experimental::awaitable_operators;
    co_await (worker_example(q) || delivered.wait_for(2));
  });
  CHECK(delivered.payloads.size() == 2);
  CHECK(states(s, "mail") == "done,done");
}

TEST_CASE("the transactions example enqueues with the order, or not at all", "[queue][docs]") {
  scratch_database db;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto pool = co_await pgqueue::pool::open(ex, db.dsn());
    pgqueue::queue emails{co_await pgqueue::connect(ex, db.dsn()), "emails"};
    session s(db.dsn());
    s.query("CREATE TABLE orders (id int PRIMARY KEY)");
    co_await place_order(pool, emails, 1);
    bool refused = false;
    try {
      co_await place_order(pool, emails, 1);  // the same order again: a unique violation
    } catch (const pgqueue::error& e) {
      refused = e.sqlstate() == "23505";
    }
    CHECK(refused);
    CHECK(s.integer("SELECT count(*) FROM orders") == 1);
    CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'emails'") == 1);
  });
}

TEST_CASE("the README's transactions enqueue with the order and write each effect once",
          "[queue][docs]") {
  scratch_database db;
  session s(db.dsn());
  s.query("CREATE TABLE orders (id int PRIMARY KEY)");
  s.query("CREATE TABLE sent_emails (job bigint PRIMARY KEY)");
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    co_await readme_transactions(ex, db.dsn(), 7,
                                 until_count(db.dsn(), "SELECT count(*) FROM sent_emails", 1));
  });
  CHECK(s.integer("SELECT count(*) FROM orders") == 1);
  CHECK(s.integer("SELECT count(*) FROM sent_emails s JOIN pgqueue.jobs j ON j.id = s.job "
                  "WHERE j.state = 'done'") == 1);
}

TEST_CASE("the exactly-once worker example writes one invoice per job", "[queue][docs]") {
  scratch_database db;
  session s(db.dsn());
  s.query("CREATE TABLE invoices (job bigint PRIMARY KEY, body jsonb)");
  s.query(
      "SELECT pgqueue.enqueue('invoices', jsonb_build_object('n', g)) "
      "FROM generate_series(1, 30) g");
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto pool = co_await pgqueue::pool::open(ex, db.dsn());
    auto q = co_await pgqueue::queue::open(pool, "invoices");
    co_await invoice_worker(q, until_count(db.dsn(), "SELECT count(*) FROM invoices", 30));
    pool.close();
  });
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'done'") == 30);
  CHECK(s.integer("SELECT count(*) FROM invoices") == 30);
}

TEST_CASE("the limits example sets what it says", "[queue][docs]") {
  scratch_database db;
  session s(db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    co_await limit_queues(conn);
    co_await limit_queues(conn);  // again: unchanged
  });
  CHECK(*s.scalar("SELECT string_agg(concat_ws(' ', queue, max_claimed, rate, rate_period, "
                  "burst), ', ' ORDER BY queue) FROM pgqueue.queue_limits") ==
        "mail 50 00:00:01 50, render 3");
}

}  // namespace queue_docs_examples_test

namespace queue_docs_examples_test {

TEST_CASE("the observing example logs, counts and writes the metrics", "[queue][docs]") {
  scratch_database db;
  delivered = {};
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue_batch('mail', ARRAY['{\"n\":1}', '{\"n\":2}']::jsonb[])");
  std::string text;
  run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    pgqueue::queue q{conn, "mail"};
    text = co_await observed(q, conn);
  });
  CHECK(delivered.payloads.size() == 2);
  CHECK_THAT(text, Catch::Contains("pgqueue_worker_jobs_claimed_total{queue=\"mail\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("pgqueue_queue_enqueued_total{queue=\"mail\"} 2\n"));
}

}  // namespace queue_docs_examples_test

namespace queue_docs_examples_test {

TEST_CASE("the periodic jobs example declares one schedule and removes the other",
          "[queue][docs]") {
  scratch_database db;
  session s(db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    co_await declare_schedules(conn);
    co_await declare_schedules(conn);  // again: unchanged
  });
  CHECK(*s.scalar("SELECT concat_ws(' ', name, queue, cron, time_zone, catch_up, payload) "
                  "FROM pgqueue.schedules") ==
        "nightly-report reports 30 2 * * * Europe/Berlin latest {\"kind\": \"daily\"}");
}

TEST_CASE("the README's fan-out and fan-in run in order: check, the resizes, zip",
          "[queue][docs]") {
  scratch_database db(true);
  std::vector<std::string> order;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue images{co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn()),
                          "images"};
    std::vector<std::string> photos;
    for (int i = 0; i < 20; ++i) photos.push_back(R"({"step":"resize"})");
    co_await resize_and_zip(images, std::move(photos));
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(images,
                      [&](const pgqueue::job& j) -> asio::awaitable<void> {
                        order.push_back(j.payload);
                        if (j.payload == R"({"step": "zip"})") self->stop();
                        co_return;
                      },
                      {.concurrency = 4});
    self = &w;
    co_await w.run();
  });
  REQUIRE(order.size() == 22);
  CHECK(order.front() == R"({"step": "check"})");
  CHECK(order.back() == R"({"step": "zip"})");
  CHECK(std::count(order.begin(), order.end(), R"({"step": "resize"})") == 20);
}

}  // namespace queue_docs_examples_test
