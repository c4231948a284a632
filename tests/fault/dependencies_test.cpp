// Fault: a worker drains a graph of jobs that wait for other jobs (40 roots, 100 jobs after
// each, one job after each root's 100, one job after those 40) while each of its backends is
// terminated (pg_terminate_backend) at 300 ms old. No job starts before every job it waits for is
// done (checked as each handler starts, by a session the fault leaves alone), and every job ends
// done, re-run only where its lease expired.
#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/database.hpp"
#include "support/session.hpp"

namespace fault_dependencies_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

std::string array_of(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

std::vector<std::int64_t> ids_of(const std::vector<row>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& r : rows) ids.push_back(std::stoll(*r[0]));
  return ids;
}

// The graph, enqueued through the SQL API: each job with the jobs it waits for. Each job has
// 1,000 attempts: on a loaded machine a lease can expire again and again under the fault, and
// a root that died of it would end its 101 dependents too (2,449 dead in one fresh-clone run):
// the subject here is the order, not attempts running out (exactly_once_test does the same).
const std::string many_attempts = "p_max_attempts => 1000";

struct graph {
  std::vector<std::int64_t> all;
  std::map<std::int64_t, std::vector<std::int64_t>> parents;
};

graph build(session& s, const std::string& queue, std::int64_t roots, std::int64_t fan) {
  graph g;
  auto add = [&](std::int64_t id, std::vector<std::int64_t> parents) {
    g.all.push_back(id);
    if (!parents.empty()) g.parents[id] = std::move(parents);
  };
  const auto root_ids = ids_of(
      s.query("SELECT unnest(pgqueue.enqueue_batch($1, array_agg('{\"root\":true}'::jsonb), " +
                  many_attempts + ")) FROM generate_series(1, $2)",
              {queue, std::to_string(roots)}));
  std::vector<std::int64_t> fan_ins;
  for (auto root : root_ids) {
    add(root, {});
    const auto children = ids_of(
        s.query("SELECT unnest(pgqueue.enqueue_batch($1, array_agg('{}'::jsonb), " + many_attempts +
                    ", p_depends_on => ARRAY[$2]::bigint[])) FROM generate_series(1, $3)",
                {queue, std::to_string(root), std::to_string(fan)}));
    for (auto c : children) add(c, {root});
    const auto fan_in = s.integer(
        "SELECT pgqueue.enqueue($1, '{}', " + many_attempts + ", p_depends_on => $2::bigint[])",
        {queue, array_of(children)});
    add(fan_in, children);
    fan_ins.push_back(fan_in);
  }
  add(s.integer(
          "SELECT pgqueue.enqueue($1, '{}', " + many_attempts + ", p_depends_on => $2::bigint[])",
          {queue, array_of(fan_ins)}),
      fan_ins);
  return g;
}

}  // namespace

TEST_CASE("the worker's backends terminated while it drains a fan-out/fan-in graph",
          "[fault][dependencies]") {
  scratch_database db;
  session admin(db.dsn()), probe(db.dsn());
  const auto roots = std::max<std::int64_t>(2, scaled(40));
  const auto g = build(admin, "q", roots, 100);
  REQUIRE(g.all.size() == static_cast<std::size_t>(roots * 102 + 1));
  CHECK(count_jobs(admin, "waiting") == roots * 101 + 1);
  const std::string app = "pgq_fault_worker";
  run_counter runs;
  std::vector<std::int64_t> early;  // jobs that started before a job they wait for was done
  std::int64_t checked = 0;
  drain_setup setup{.worker_dsn = with_application_name(db.dsn(), app),
                    .admin_dsn = db.dsn(),
                    .queue = "q",
                    .jobs = static_cast<std::int64_t>(g.all.size()),
                    .queue_options = {.lease = 2000ms, .poll_interval = 500ms},
                    .worker_options = {.concurrency = 32, .janitor_interval = 500ms},
                    .handler_work = 2ms,
                    .limit = 150s};
  setup.on_run = [&](const pgqueue::job& j) {
    auto it = g.parents.find(j.id);
    if (it == g.parents.end()) return;
    ++checked;
    const auto done =
        probe.integer("SELECT count(*) FROM pgqueue.jobs WHERE id = ANY($1) AND state = 'done'",
                      {array_of(it->second)});
    if (done != static_cast<std::int64_t>(it->second.size())) early.push_back(j.id);
  };
  terminations t;
  auto outcome = drain_under_fault(setup, runs, [&](const std::atomic<bool>& finished) {
    t = terminate_at_age(db.dsn(), app, finished);
  });

  auto a = account(admin, "pg_terminate_backend, dependency graph", "q", g.all, runs.runs());
  report_drain(a, outcome, t.note() + "; " + std::to_string(checked) + " dependent starts checked");
  CHECK(t.terminated >= 3);  // the fault really hit the drain
  CHECK(early.empty());
  CHECK(checked >= roots * 101 + 1);
  CHECK(a.report.done == static_cast<std::int64_t>(g.all.size()));
  CHECK(count_jobs(admin, "waiting") == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.job_dependencies") == 0);
}

}  // namespace fault_dependencies_test
