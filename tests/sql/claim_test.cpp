// claim_batch / claim_next: order, scheduling, limits, and concurrent draining.
#include <mutex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_claim_test {

using namespace pgq_test;

TEST_CASE("claims go by priority, then by how long a job has been due, then by id", "[claim]") {
  scratch_database db;
  session s(db.dsn());
  auto low = enqueue(s, "q", "{}", std::nullopt, 0);
  auto high = enqueue(s, "q", "{}", std::nullopt, 9);
  auto low2 = enqueue(s, "q", "{}", std::nullopt, 0);
  auto overdue =
      s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '1 minute')");
  std::vector<std::int64_t> order;
  while (true) {
    auto got = claim(s, "q", "w");
    if (got.empty()) break;
    order.push_back(got[0].id);
  }
  CHECK(order == std::vector<std::int64_t>{high, overdue, low, low2});
}

TEST_CASE("a job scheduled for later is not claimed before its time", "[claim]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')");
  CHECK(claim(s, "q", "w").empty());
  CHECK(s.scalar("SELECT pgqueue.next_run_after('q') > now() + interval '59 minutes'") == "t");
}

TEST_CASE("a batch claim crosses priorities and skips scheduled jobs in each", "[claim]") {
  scratch_database db;
  session s(db.dsn());
  const auto at = [&](int priority, const char* when) {
    return s.integer(std::string("SELECT pgqueue.enqueue('q', '{}', NULL, ") +
                     std::to_string(priority) + ", now() + interval '" + when + "')");
  };
  at(9, "2 hours");
  auto a = at(5, "-2 minutes");
  at(5, "1 hour");
  auto b = at(5, "-1 minute");
  auto c = at(0, "0 seconds");
  at(0, "30 minutes");
  std::vector<std::int64_t> ids;
  for (const auto& j : claim(s, "q", "w", 10)) ids.push_back(j.id);
  CHECK(ids == std::vector<std::int64_t>{a, b, c});
  // The earliest scheduled job of any priority.
  CHECK(s.scalar("SELECT pgqueue.next_run_after('q') BETWEEN now() + interval '29 minutes' "
                 "AND now() + interval '30 minutes'") == "t");
}

TEST_CASE("claim_batch takes up to its limit and counts an attempt each", "[claim]") {
  scratch_database db;
  session s(db.dsn());
  for (int i = 0; i < 5; ++i) enqueue(s, "q");
  enqueue(s, "other");
  auto got = claim(s, "q", "w", 3, "1 minute");
  REQUIRE(got.size() == 3);
  for (auto& c : got) {
    auto j = read_job(s, c.id);
    CHECK(j.state == "claimed");
    CHECK(j.attempts == 1);
    CHECK(*j.claimed_by == "w");
    CHECK(j.lease_valid);
  }
  CHECK(claim(s, "q", "w", 10).size() == 2);
  CHECK(claim(s, "q", "w", 10).empty());
  CHECK(s.query("SELECT * FROM pgqueue.claim_next('other', 'w')").size() == 1);
}

TEST_CASE("several connections draining one queue claim each job exactly once",
          "[claim][concurrency]") {
  scratch_database db;
  constexpr int jobs = 2000;
  {
    session s(db.dsn());
    s.query("SELECT pgqueue.enqueue_batch('q', array_agg('{}'::jsonb)) FROM generate_series(1, $1)",
            {std::to_string(jobs)});
  }
  std::mutex m;
  std::multiset<std::int64_t> seen;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      session s(db.dsn());
      std::string name = "w" + std::to_string(w);
      while (true) {
        auto got = claim(s, "q", name, 7);
        if (got.empty()) break;
        std::string ids = "{", attempts = "{";
        for (auto& c : got) {
          ids += std::to_string(c.id) + ",";
          attempts += std::to_string(c.attempts) + ",";
        }
        ids.back() = '}';
        attempts.back() = '}';
        s.query("SELECT pgqueue.ack_batch($1::bigint[], $2, $3::int[])", {ids, name, attempts});
        std::lock_guard lock(m);
        for (auto& c : got) seen.insert(c.id);
      }
    });
  }
  for (auto& t : workers) t.join();
  session s(db.dsn());
  CHECK(seen.size() == jobs);
  CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == jobs);
  CHECK(count_jobs(s, "done") == jobs);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE state = 'done'") == jobs);
}

TEST_CASE("wait_hint: a due job that cannot be claimed, the next due time, never infinity",
          "[claim]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, 'infinity')");
  CHECK(*s.scalar(
            "SELECT due_now::text || coalesce(next_due::text, '-') FROM pgqueue.wait_hint('q')") ==
        "false-");
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.wait_hint('q') "
                  "WHERE NOT due_now AND next_due > now() + interval '59 minutes'") == 1);
  auto id = enqueue(s, "q");
  session locker(db.dsn());
  locker.query("BEGIN");
  locker.query("SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", {std::to_string(id)});
  CHECK(claim(s, "q", "w").empty());
  CHECK(*s.scalar("SELECT due_now FROM pgqueue.wait_hint('q')") == "t");
  locker.query("ROLLBACK");
}

TEST_CASE("jobs due at -infinity and infinity are claimed in order and counted by depth",
          "[claim]") {
  scratch_database db;
  session s(db.dsn());
  const auto never = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, 'infinity')");
  const auto always = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, '-infinity')");
  const auto now = enqueue(s, "q");
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'ready'") == 3);
  CHECK(claim(s, "q", "w")[0].id == always);
  CHECK(claim(s, "q", "w")[0].id == now);
  CHECK(claim(s, "q", "w").empty());
  CHECK(*s.scalar("SELECT state FROM pgqueue.jobs WHERE id = $1", {std::to_string(never)}) ==
        "ready");
}

}  // namespace sql_claim_test
