// Exactly-once effects under faults: pg_terminate_backend of each backend at 300 ms old,
// and a server restarted twice in immediate mode, while
// - 8 producers place orders, each order row and its job in one transaction
//   (in_transaction + enqueue(tx)), retrying after any failure (an order already there, a
//   unique violation, means an earlier try whose COMMIT's answer was lost did commit): for
//   every order there is exactly one job, and for every job an order;
// - a transactional-handler worker drains the queue, each handler inserting its job's row into
//   an effect table with a unique job column in the job's transaction: every done job has its
//   effect row, exactly once, and none is left claimed or lost.
#include <atomic>
#include <stdexcept>
#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/async.hpp"
#include "support/cluster.hpp"
#include "support/database.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/wait.hpp"

namespace fault_exactly_once_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

const std::string app = "pgq_fault_once";

struct produce_outcome {
  std::atomic<std::int64_t> committed{0};  // orders known committed
  std::int64_t retries = 0;                // transactions run again after a failure
  std::int64_t unknown = 0;                // commit_unknown among those failures
  std::int64_t found_committed = 0;        // a retry found the order there (unique violation)
  std::string failure;
  double seconds = 0;
};

// One producer's orders: id = first, first + step, ... up to `orders`, each retried until it
// is known committed; paced so that all producers take fault_window at least.
asio::awaitable<void> place_orders(pgqueue::pool pool, pgqueue::queue q, std::int64_t first,
                                   std::int64_t step, std::int64_t orders, produce_outcome& out) {
  const auto pace = paced(0ms, orders, static_cast<int>(step));
  for (std::int64_t id = first; id <= orders; id += step) {
    for (int attempt = 1;; ++attempt) {
      bool done = false;
      try {
        co_await pgqueue::in_transaction(
            pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
              co_await tx.query("INSERT INTO orders (id) VALUES ($1)", {id});
              co_await q.enqueue(tx, "{\"order\": " + std::to_string(id) + "}");
            });
        done = true;
      } catch (const pgqueue::error& e) {
        if (e.sqlstate() == "23505") {
          ++out.found_committed;
          done = true;
        } else if (e.code() == pgqueue::pg::errc::commit_unknown) {
          ++out.unknown;
        }
      } catch (const std::exception&) {
      }
      if (done) break;
      if (attempt == 500) {
        out.failure = "order " + std::to_string(id) + " failed 500 times";
        co_return;
      }
      ++out.retries;
      co_await pause(10ms);  // the server is restarting or the session was just killed
    }
    ++out.committed;
    co_await pause(pace);
  }
}

// Runs 8 producers placing `orders` orders through a pool of `dsn` while `fault` runs on a
// thread of its own until the flag it is given turns true (once the producers are done).
void produce_under_fault(const std::string& dsn, std::int64_t orders, produce_outcome& out,
                         const std::function<void(const std::atomic<bool>&)>& fault) {
  asio::io_context io;
  std::atomic<bool> finished{false};
  std::string fault_failure;
  const auto start = std::chrono::steady_clock::now();
  std::thread fault_thread([&] {
    try {
      fault(finished);
    } catch (const std::exception& e) {
      fault_failure = e.what();
    }
  });
  auto body = [&]() -> asio::awaitable<void> {
    constexpr int producers = 8;
    auto ex = co_await asio::this_coro::executor;
    try {
      auto pool = co_await pgqueue::pool::open(ex, dsn, {.max_size = producers + 1});
      auto q = co_await pgqueue::queue::open(pool, "q");
      int left = producers;
      asio::steady_timer all_done(ex, std::chrono::steady_clock::time_point::max());
      for (int k = 1; k <= producers; ++k) {
        asio::co_spawn(ex, place_orders(pool, q, k, producers, orders, out),
                       [&](std::exception_ptr) {
                         if (--left == 0) all_done.cancel();
                       });
      }
      std::error_code ec;
      co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      pool.close();
    } catch (const std::exception& e) {
      out.failure = std::string("producers' set-up failed: ") + e.what();
    }
    finished = true;
  };
  asio::co_spawn(io, body(), asio::detached);
  io.run_for(150s);
  finished = true;
  fault_thread.join();
  out.seconds = seconds_since(start);
  if (!fault_failure.empty()) out.failure += " fault thread threw: " + fault_failure;
}

// Prints and checks the orders and their jobs: one job per order, one order per job.
void check_orders(session& s, std::int64_t orders, const produce_outcome& out,
                  const std::string& fault) {
  const auto order_rows = s.integer("SELECT count(*) FROM orders");
  const auto jobs = s.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'q'");
  const auto not_one = s.integer(
      "SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM pgqueue.jobs j "
      "WHERE j.queue = 'q' AND (j.payload->>'order')::bigint = o.id) <> 1");
  const auto orphans = s.integer(
      "SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = 'q' AND NOT EXISTS "
      "(SELECT 1 FROM orders o WHERE o.id = (j.payload->>'order')::bigint)");
  std::printf(
      "fault report: %s, transactional enqueue: %lld orders, %lld jobs, %lld orders without "
      "exactly one job, %lld jobs without an order, %.1f s (retries %lld, commit_unknown %lld, "
      "found committed on retry %lld)\n",
      fault.c_str(), static_cast<long long>(order_rows), static_cast<long long>(jobs),
      static_cast<long long>(not_one), static_cast<long long>(orphans), out.seconds,
      static_cast<long long>(out.retries), static_cast<long long>(out.unknown),
      static_cast<long long>(out.found_committed));
  std::fflush(stdout);
  INFO(out.failure);
  CHECK(out.failure.empty());
  CHECK(order_rows == orders);
  CHECK(jobs == orders);
  CHECK(not_one == 0);
  CHECK(orphans == 0);
}

// The drain's own checks: re-runs are expected (a transaction rolled back by the fault runs its
// handler again), lost effects or doubled ones are not.
void check_drain(accounting& a, const drain_outcome& outcome, session& s,
                 const std::string& fault_note) {
  a.report.seconds = outcome.seconds;
  a.report.notes = fault_note + "; " + check_effects(s, "q") + "; worker acked " +
                   std::to_string(outcome.stats.acked) + ", failed " +
                   std::to_string(outcome.stats.failed) + ", lost " +
                   std::to_string(outcome.stats.lost);
  a.report.print();
  INFO(a.report.line());
  INFO(outcome.failure);
  CHECK(outcome.failure.empty());
  CHECK(outcome.drained);
  CHECK(a.missing == 0);
  CHECK(a.claimed == 0);
  CHECK(a.report.lost == 0);
  CHECK(a.report.dead == 0);
  CHECK(a.report.done == a.report.enqueued);
  CHECK(a.done_acks == a.report.done);  // each job acked once
}

// Restarts `cluster` immediately each time `progress()` reaches a third and two thirds of
// `total`; returns the restarts done.
int restart_twice(const throwaway_cluster& cluster, const std::function<std::int64_t()>& progress,
                  std::int64_t total, const std::atomic<bool>& finished) {
  int restarts = 0;
  for (int k = 1; k <= 2; ++k) {
    wait_until([&] { return finished || progress() >= total * k / 3; }, 120s);
    if (finished) break;
    if (cluster.pg_ctl("-m immediate restart") != 0) {
      throw std::runtime_error("pg_ctl restart failed; see " + cluster.directory() + "/server.log");
    }
    ++restarts;
  }
  return restarts;
}

drain_setup transactional_drain(const std::string& dsn, std::int64_t jobs) {
  return {.worker_dsn = with_application_name(dsn, app),
          .admin_dsn = dsn,
          .queue = "q",
          .jobs = jobs,
          .queue_options = {.lease = 2000ms, .poll_interval = 500ms},
          .worker_options = {.concurrency = 16, .janitor_interval = 500ms},
          .limit = 150s,
          // Unpaced: the pool's many backends meet the fault often enough (85 terminations in a
          // 2 s drain), and paced handlers that it rolls back made the drain last 11 s.
          .at_least = 0ms,
          .transactional = true};
}

// Jobs that may be retried many times: a fault may roll back a job's transaction again and
// again, and a job must not die of that.
const std::string many_attempts = "1000";

}  // namespace

TEST_CASE("transactional enqueues while each backend is terminated: one job per order",
          "[fault][exactly_once]") {
  scratch_database db;
  session admin(db.dsn());
  admin.query("CREATE TABLE orders (id bigint PRIMARY KEY)");
  const auto orders = scaled(2000);
  produce_outcome out;
  terminations t;
  produce_under_fault(
      with_application_name(db.dsn(), app), orders, out,
      [&](const std::atomic<bool>& finished) { t = terminate_at_age(db.dsn(), app, finished); });
  check_orders(admin, orders, out, "pg_terminate_backend (" + t.note() + ")");
  CHECK(t.terminated >= 3);
}

TEST_CASE("transactional enqueues across two immediate restarts: one job per order",
          "[fault][exactly_once]") {
  throwaway_cluster cluster(/*durable=*/true);
  session(cluster.dsn()).script(read_file(schema_file()));
  session(cluster.dsn()).query("CREATE TABLE orders (id bigint PRIMARY KEY)");
  const auto orders = scaled(1500);
  produce_outcome out;
  int restarts = 0;
  produce_under_fault(cluster.dsn(), orders, out, [&](const std::atomic<bool>& finished) {
    restarts = restart_twice(
        cluster, [&] { return out.committed.load(); }, orders, finished);
  });
  session admin(cluster.dsn());
  check_orders(admin, orders, out, "pg_ctl restart -m immediate, twice");
  CHECK(restarts == 2);
}

TEST_CASE("a transactional-handler drain while each backend is terminated: each effect once",
          "[fault][exactly_once]") {
  scratch_database db;
  session admin(db.dsn());
  admin.query("CREATE TABLE effects (job bigint PRIMARY KEY)");
  const auto jobs = scaled(3000);
  auto ids = fill(admin, "q", jobs, "jsonb_build_object('i', g)", many_attempts);
  run_counter runs;
  terminations t;
  auto outcome = drain_under_fault(
      transactional_drain(db.dsn(), jobs), runs,
      [&](const std::atomic<bool>& finished) { t = terminate_at_age(db.dsn(), app, finished); });
  auto a = account(admin, "pg_terminate_backend, transactional handler", "q", ids, runs.runs());
  check_drain(a, outcome, admin, t.note());
  CHECK(t.terminated >= 3);
}

TEST_CASE("a transactional-handler drain across two immediate restarts: each effect once",
          "[fault][exactly_once]") {
  throwaway_cluster cluster(/*durable=*/true);
  std::vector<std::int64_t> ids;
  const auto jobs = scaled(3000);
  {
    session s(cluster.dsn());
    s.script(read_file(schema_file()));
    s.query("CREATE TABLE effects (job bigint PRIMARY KEY)");
    ids = fill(s, "q", jobs, "jsonb_build_object('i', g)", many_attempts);
  }
  run_counter runs;
  int restarts = 0;
  auto outcome = drain_under_fault(transactional_drain(cluster.dsn(), jobs), runs,
                                   [&](const std::atomic<bool>& finished) {
                                     restarts = restart_twice(
                                         cluster, [&] { return runs.total(); }, jobs, finished);
                                   });
  session admin(cluster.dsn());
  auto a = account(admin, "pg_ctl restart -m immediate twice, transactional handler", "q", ids,
                   runs.runs());
  check_drain(a, outcome, admin, std::to_string(restarts) + " restarts");
  CHECK(restarts == 2);
}

}  // namespace fault_exactly_once_test
