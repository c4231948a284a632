// Fault 2: the server is restarted with `pg_ctl restart -m immediate` (a crash: no shutdown
// checkpoint, every backend killed) twice while a pgqueue::worker drains. The worker reconnects
// once the server is back; nothing committed is lost and none stays claimed. The test has a
// cluster of its own so the restarts touch no other test.
#include <stdexcept>

#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/cluster.hpp"
#include "support/database.hpp"
#include "support/session.hpp"
#include "support/wait.hpp"

namespace fault_restart_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("the server restarted (immediate mode) twice mid-drain", "[fault][restart]") {
  // Durable: an immediate shutdown loses commits that synchronous_commit=off had not flushed.
  throwaway_cluster cluster(/*durable=*/true);
  const auto jobs = scaled(10000);
  std::vector<std::int64_t> ids;
  {
    session s(cluster.dsn());
    s.script(read_file(schema_file()));
    ids = fill(s, "q", jobs);
  }
  run_counter runs;
  std::atomic<int> restarts{0};
  drain_setup setup{.worker_dsn = cluster.dsn(),
                    .admin_dsn = cluster.dsn(),
                    .queue = "q",
                    .jobs = jobs,
                    .queue_options = {.lease = 2000ms, .poll_interval = 500ms},
                    .worker_options = {.concurrency = 32, .janitor_interval = 500ms},
                    .limit = 150s};
  auto outcome = drain_under_fault(setup, runs, [&](const std::atomic<bool>& finished) {
    for (int k = 1; k <= 2; ++k) {
      // At a third and at two thirds of the handler runs.
      wait_until([&] { return finished || runs.total() >= jobs * k / 3; }, 120s);
      if (finished) return;
      if (cluster.pg_ctl("-m immediate restart") != 0) {
        throw std::runtime_error("pg_ctl restart failed; see " + cluster.directory() +
                                 "/server.log");
      }
      ++restarts;
    }
  });

  session admin(cluster.dsn());
  auto a = account(admin, "pg_ctl restart -m immediate, twice", "q", ids, runs.runs());
  report_drain(a, outcome, std::to_string(restarts.load()) + " restarts");
  CHECK(restarts == 2);
}

}  // namespace fault_restart_test
