// Fault 1: each of the worker's backends is terminated (pg_terminate_backend) at 300 ms old
// while one pgqueue::worker drains 20,000 jobs. The worker reconnects and keeps draining; a job
// runs again only where its lease expired while the connection was down, and none stays claimed.
// Run twice: as the schema's owner, and as a least-privilege role (pgqueue.grant_worker),
// which may not read pgqueue.jobs: what a worker checks after a reconnect goes through
// functions that role may call.
#include <thread>

#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/database.hpp"
#include "support/role.hpp"
#include "support/session.hpp"

namespace fault_terminate_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// The drain under the fault, with the worker connecting through `worker_dsn`.
void terminate_during_drain(scratch_database& db, const std::string& worker_dsn,
                            const std::string& fault_name) {
  session admin(db.dsn());
  const auto jobs = scaled(20000);
  auto ids = fill(admin, "q", jobs);
  const std::string app = "pgq_fault_worker";
  run_counter runs;
  terminations t;
  drain_setup setup{.worker_dsn = with_application_name(worker_dsn, app),
                    .admin_dsn = db.dsn(),
                    .queue = "q",
                    .jobs = jobs,
                    .queue_options = {.lease = 2000ms, .poll_interval = 500ms},
                    .worker_options = {.concurrency = 32, .janitor_interval = 500ms},
                    .limit = 150s};
  auto outcome = drain_under_fault(setup, runs, [&](const std::atomic<bool>& finished) {
    t = terminate_at_age(db.dsn(), app, finished);
  });

  auto a = account(admin, fault_name, "q", ids, runs.runs());
  report_drain(a, outcome, t.note());
  CHECK(t.terminated >= 3);  // the fault really hit the drain
}

}  // namespace

TEST_CASE("the worker's backends terminated while it drains 20,000 jobs", "[fault][terminate]") {
  scratch_database db;
  terminate_during_drain(db, db.dsn(), "pg_terminate_backend");
}

TEST_CASE("the same as the least-privilege worker role", "[fault][terminate]") {
  scratch_database db;
  scoped_role worker(db.dsn(), "fault_worker");
  session(db.dsn()).query("SELECT pgqueue.grant_worker($1::regrole)", {worker.name()});
  terminate_during_drain(db, worker.dsn(), "pg_terminate_backend, worker role");
}

}  // namespace fault_terminate_test
