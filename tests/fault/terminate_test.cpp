// Fault 1: the worker's backend is terminated (pg_terminate_backend) every 200 ms while one
// pgqueue::worker drains 20,000 jobs. The worker reconnects and keeps draining; a job runs
// again only where its lease expired while the connection was down, and none stays claimed.
#include <thread>

#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/database.hpp"
#include "support/session.hpp"

namespace fault_terminate_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("the worker's backend terminated every 200 ms while it drains 20,000 jobs",
          "[fault][terminate]") {
  scratch_database db;
  session admin(db.dsn());
  const auto jobs = scaled(20000);
  auto ids = fill(admin, "q", jobs);
  const std::string app = "pgq_fault_worker";
  run_counter runs;
  std::atomic<std::int64_t> terminated{0}, rounds{0};
  drain_setup setup{.worker_dsn = with_application_name(db.dsn(), app),
                    .admin_dsn = db.dsn(),
                    .queue = "q",
                    .jobs = jobs,
                    .queue_options = {.lease = 2000ms, .poll_interval = 500ms},
                    .worker_options = {.concurrency = 32, .janitor_interval = 500ms},
                    .limit = 150s};
  auto outcome = drain_under_fault(setup, runs, [&](const std::atomic<bool>& finished) {
    session killer(db.dsn());
    while (!finished) {
      std::this_thread::sleep_for(200ms);  // the fault's period: here time is the subject
      if (finished) break;
      terminated += killer.integer(
          "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
          "WHERE datname = current_database() AND application_name = $1",
          {app});
      ++rounds;
    }
  });

  auto a = account(admin, "pg_terminate_backend every 200 ms", "q", ids, runs.runs());
  report_drain(a, outcome, std::to_string(terminated.load()) + " backends terminated in " +
                               std::to_string(rounds.load()) + " rounds");
  CHECK(terminated >= 3);  // the fault really hit the drain
}

}  // namespace fault_terminate_test
