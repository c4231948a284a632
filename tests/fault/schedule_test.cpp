// A schedule firing every second, with 4 workers in 2 processes: each slot enqueued exactly
// once; then every worker stopped for 5 s and started again: the schedule with catch-up
// 'latest' gets one job for the slots missed meanwhile, the one with 'skip' none. And the same
// fleet while each of its backends is terminated at a second old: no slot doubled, none missed.
#include <algorithm>
#include <csignal>
#include <thread>

#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "fault/run_log.hpp"
#include "support/process.hpp"
#include "support/wait.hpp"

namespace fault_schedule_test {

using namespace pgq_test;
using namespace pgq_fault;
using namespace std::chrono_literals;

namespace {

// Two processes of two workers each on queue "ticks"; stopped gracefully (SIGTERM).
struct two_processes {
  std::vector<child_process> live;
  two_processes(const std::string& dsn, const std::string& round) {
    for (const char* p : {"a", "b"}) {
      live.emplace_back(PGQUEUE_FAULT_WORKER,
                        std::vector<std::string>{dsn, "ticks", round + p, "5000", "4", "2"});
    }
  }
  void stop() {
    for (auto& c : live) c.signal(SIGTERM);
    for (auto& c : live) {
      const auto status = c.wait(20s);
      REQUIRE(status);
      CHECK(WIFEXITED(*status));
      CHECK(WEXITSTATUS(*status) == 0);
    }
  }
};

// The slots (epoch seconds) a schedule enqueued a job for, in order.
std::vector<std::int64_t> slots(session& s, const std::string& name) {
  std::vector<std::int64_t> out;
  const auto r = s.query(
      "SELECT split_part(idempotency_key, ':', 3) FROM pgqueue.jobs "
      "WHERE idempotency_key LIKE $1 ORDER BY 1",
      {"pgqueue.schedule:" + name + ":%"});
  for (const auto& row : r) out.push_back(std::stoll(*row[0]));
  return out;
}

// Where consecutive slots are more than a second apart: (before, after) pairs.
std::vector<std::pair<std::int64_t, std::int64_t>> gaps(const std::vector<std::int64_t>& v) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i] - v[i - 1] != 1) out.emplace_back(v[i - 1], v[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("a schedule fires each slot once across processes, and catches up by its policy",
          "[fault][schedule]") {
  scratch_database db;
  session admin(db.dsn());
  admin.query(create_run_log_sql);
  // In one transaction: both start from the same slot (its time is the transaction's).
  admin.script(
      "BEGIN; SELECT pgqueue.schedule('tick', 'ticks', '@every 1 second'); "
      "SELECT pgqueue.schedule('tock', 'ticks', '@every 1 second', '{}', 'UTC', 'skip'); COMMIT");

  // Each fleet's time counts from its first firing: starting two processes can take seconds
  // on a loaded machine.
  const auto fired_since = [&](std::size_t before) {
    return wait_until([&] { return slots(admin, "tick").size() > before; }, 30s);
  };
  two_processes first(db.dsn(), "first");
  REQUIRE(fired_since(0));
  std::this_thread::sleep_for(10s);  // the subject is time: ten slots
  first.stop();
  const auto before_downtime = slots(admin, "tick").size();
  std::this_thread::sleep_for(5s);  // nothing claims, so nothing fires
  two_processes second(db.dsn(), "second");
  REQUIRE(fired_since(before_downtime));
  std::this_thread::sleep_for(5s);
  second.stop();

  const auto tick = slots(admin, "tick");
  const auto tock = slots(admin, "tock");
  INFO("tick " << tick.size() << " slots, tock " << tock.size());
  REQUIRE(tick.size() >= 12);
  // Each slot once: the keys are the slots (a unique index would refuse a second), and no
  // job was enqueued twice under another key.
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") ==
        std::int64_t(tick.size() + tock.size()));
  // While workers ran, every slot fired: one gap each, the downtime. 'latest' fired one slot
  // inside it (the latest missed, just before the recent ones), 'skip' none.
  const auto tick_gaps = gaps(tick), tock_gaps = gaps(tock);
  REQUIRE(tock_gaps.size() == 1);
  REQUIRE(tick_gaps.size() == 1);
  const auto [stopped, resumed] = tock_gaps[0];
  CHECK(resumed - stopped >= 3);  // 5 s stopped; slots up to 3 s old (the grace) still fire
  // Each job was enqueued within the grace of its slot (by the server's clock), but the one
  // 'latest' enqueued for the missed slots.
  const auto late = [&](const std::string& name) {
    return admin.integer(
        "SELECT count(*) FROM pgqueue.jobs WHERE idempotency_key LIKE $1 AND created_at - "
        "to_timestamp(split_part(idempotency_key, ':', 3)::bigint) >= interval '3 seconds'",
        {"pgqueue.schedule:" + name + ":%"});
  };
  CHECK(late("tock") == 0);
  CHECK(late("tick") == 1);
  CHECK(tick_gaps[0] == std::make_pair(stopped, resumed - 1));
  std::vector<std::int64_t> expected_tick = tock;
  expected_tick.push_back(resumed - 1);
  std::sort(expected_tick.begin(), expected_tick.end());
  CHECK(tick == expected_tick);
  // The workers ran them (those fired by the last claims before the stop wait, ready).
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state NOT IN ('done', 'ready')") ==
        0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'done'") >=
        std::int64_t(tick.size() + tock.size()) - 4);
}

TEST_CASE("a schedule fires each slot once while the workers' backends are terminated",
          "[fault][schedule]") {
  scratch_database db;
  session admin(db.dsn());
  admin.query(create_run_log_sql);
  admin.scalar("SELECT pgqueue.schedule('tick', 'ticks', '@every 1 second')");
  const std::string app = "pgq_schedule_workers";
  two_processes fleet(with_application_name(db.dsn(), app), "t");
  // The fault starts once the fleet fires: on a loaded machine starting two processes can take
  // seconds, and the slots before the first firing collapse into it (catch-up 'latest').
  REQUIRE(wait_until([&] { return !slots(admin, "tick").empty(); }, 30s));
  // Sessions live a second here, not 300 ms: a slot has 3 s of grace, and on a loaded machine
  // workers whose sessions lived 300 ms went longer than that without a claim that completed
  // (each new session plans its claim afresh), so a slot fell out of its grace: the fault, not
  // the schedule, decided the outcome.
  const std::atomic<bool> never{false};
  const auto t = terminate_at_age(db.dsn(), app, never, {.lifetime = 1000ms, .at_most = 8s});
  std::this_thread::sleep_for(2s);  // unharmed: the last slots fire
  fleet.stop();

  const auto tick = slots(admin, "tick");
  fault_report{.fault = "schedule every second, 4 workers in 2 processes, backends terminated",
               .enqueued = static_cast<std::int64_t>(tick.size()),
               .done = admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'done'"),
               .ready = admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'ready'"),
               .seconds = 10,
               .notes = t.note() + ", " + std::to_string(gaps(tick).size()) + " gaps"}
      .print();
  CHECK(t.terminated >= 10);
  REQUIRE(tick.size() >= 8);  // of the first and ~10 more: 8 s of faults, 2 s unharmed
  // No slot doubled (one job per slot, under one key each), none missed between the first and
  // the last (a slot whose firing was cut short fires at the next claim, within its grace).
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") == std::int64_t(tick.size()));
  CHECK(gaps(tick).empty());
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'dead'") == 0);
}

}  // namespace fault_schedule_test
