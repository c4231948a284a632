// gc, cancel, retry_dead and the depth view.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/wait.hpp"

namespace sql_maintenance_test {

using namespace pgq_test;

namespace {
// n jobs acked through the API (so the done counters move), finished `age` ago.
void done_jobs(session& s, const std::string& queue, int n, const std::string& age) {
  s.query("SELECT pgqueue.enqueue_batch($1, array_agg('{}'::jsonb)) FROM generate_series(1, $2)",
          {queue, std::to_string(n)});
  s.query(
      "SELECT pgqueue.ack_batch(array_agg(id), 'w', array_agg(lease_token)) "
      "FROM pgqueue.claim_batch($1, 'w', $2)",
      {queue, std::to_string(n)});
  s.query("UPDATE pgqueue.jobs SET finished_at = now() - $2::interval WHERE queue = $1",
          {queue, age});
}
}  // namespace

TEST_CASE("gc deletes in bounded batches and keeps the depth counts right", "[gc]") {
  scratch_database db;
  session s(db.dsn());
  done_jobs(s, "old", 25, "8 days");
  done_jobs(s, "new", 3, "1 day");
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'old' AND state = 'done'") == 25);
  std::vector<std::string> batches;
  for (int i = 0; i < 4; ++i)
    batches.push_back(*s.scalar("SELECT done_deleted FROM pgqueue.gc('7 days', '30 days', 10)"));
  CHECK(batches == std::vector<std::string>{"10", "10", "5", "0"});
  CHECK(s.query("SELECT 1 FROM pgqueue.depth WHERE queue = 'old'").empty());
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'new' AND state = 'done'") == 3);
  CHECK(count_jobs(s, "done") == 3);
}

TEST_CASE("gc folding the done counters never drops an ack committed meanwhile", "[gc]") {
  scratch_database db;
  session acker(db.dsn());
  done_jobs(acker, "q", 1, "8 days");  // one done job, counted in the acker's shard
  auto id = enqueue(acker, "q");
  auto c = claim(acker, "q", "w");
  REQUIRE(c.size() == 1);
  // An ack in flight: its count holds the acker's shard row, uncommitted.
  acker.query("BEGIN");
  acker.query("SELECT pgqueue.ack($1, 'w', $2)",
              {std::to_string(id), std::to_string(c[0].lease_token)});
  // gc deletes the old done job: the committed shards now sum to zero, so it folds them.
  session collector(db.dsn());
  const int collector_pid = collector.backend_pid();
  std::atomic<bool> finished{false};
  std::thread gc([&] {
    collector.query("SELECT * FROM pgqueue.gc('7 days', '30 days')");
    finished = true;
  });
  session watcher(db.dsn());
  // Either it finished (it skipped the locked shard) or it waits for the acker's lock (the
  // flaw: it would then delete the shard the acker just updated).
  const bool settled =
      wait_until([&] { return finished.load() || waits_on_lock(watcher, collector_pid); },
                 std::chrono::seconds(10));
  acker.query("COMMIT");
  gc.join();
  REQUIRE(settled);
  CHECK(finished);
  CHECK(count_jobs(watcher, "done") == 1);
  CHECK(watcher.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'done'") ==
        1);
}

TEST_CASE("gc_all loops until nothing is left, dead jobs by their own retention", "[gc]") {
  scratch_database db;
  session s(db.dsn());
  done_jobs(s, "q", 30, "8 days");
  auto dead = enqueue(s, "q");
  s.query(
      "UPDATE pgqueue.jobs SET state = 'dead', finished_at = now() - interval '10 days' "
      "WHERE id = $1",
      {std::to_string(dead)});
  s.query("CALL pgqueue.gc_all('7 days', '30 days', 7)");
  CHECK(count_jobs(s, "done") == 0);
  CHECK(count_jobs(s, "dead") == 1);
  s.query("CALL pgqueue.gc_all('7 days', '9 days')");
  CHECK(count_jobs(s, "dead") == 0);
}

TEST_CASE("cancel stops a job that has not started, and only such a job", "[cancel]") {
  scratch_database db;
  session s(db.dsn());
  auto waiting = enqueue(s, "q");
  auto running = enqueue(s, "q");
  s.query("SELECT pgqueue.claim_batch('q', 'w', 1)");  // takes `waiting`... by id order
  CHECK(read_job(s, waiting).state == "claimed");
  CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(running)}) == "t");
  CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(waiting)}) == "f");
  CHECK(*s.scalar("SELECT pgqueue.cancel(999999)") == "f");
  CHECK(read_job(s, running).state == "cancelled");
  CHECK(claim(s, "q", "w").empty());
}

TEST_CASE("retry_dead gives dead jobs a fresh set of attempts", "[retry]") {
  scratch_database db;
  session s(db.dsn());
  auto a = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
  auto b = s.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
  for (auto& c : claim(s, "q", "w", 2))
    s.query("SELECT pgqueue.nack($1, 'w', 'bad')", {std::to_string(c.id)});
  CHECK(count_jobs(s, "dead") == 2);
  CHECK(s.integer("SELECT pgqueue.retry_dead('q', ARRAY[$1::bigint])", {std::to_string(a)}) == 1);
  CHECK(read_job(s, a).state == "ready");
  CHECK(read_job(s, a).attempts == 0);
  CHECK(read_job(s, b).state == "dead");
  CHECK(s.integer("SELECT pgqueue.retry_dead('q')") == 1);
  CHECK(claim(s, "q", "w", 5).size() == 2);
}

TEST_CASE("depth reports counts per state and the queue's lag", "[depth]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '30 seconds')");
  enqueue(s, "q");
  enqueue(s, "q");
  claim(s, "q", "w");
  done_jobs(s, "r", 4, "0 s");
  auto rows = s.query("SELECT queue, state, count, lag >= interval '0 s' FROM pgqueue.depth");
  REQUIRE(rows.size() == 3);
  CHECK((*rows[0][0] == "q" && *rows[0][1] == "claimed" && *rows[0][2] == "1"));
  CHECK((*rows[1][0] == "q" && *rows[1][1] == "ready" && *rows[1][2] == "2" && *rows[1][3] == "t"));
  CHECK((*rows[2][0] == "r" && *rows[2][1] == "done" && *rows[2][2] == "4"));
  // The lag is the age of the oldest due job: the claimed overdue one is gone, so under 30 s.
  CHECK(*s.scalar("SELECT lag < interval '29 seconds' FROM pgqueue.depth WHERE state = 'ready'") ==
        "t");
}

TEST_CASE("depth does not read retained completed jobs", "[depth]") {
  scratch_database db;
  session s(db.dsn());
  done_jobs(s, "q", 500, "0 s");
  s.query("ANALYZE pgqueue.jobs");
  // Count the heap rows the view's plan reads: none of the 500 done rows.
  auto plan = s.query("EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pgqueue.depth");
  auto rows_read = s.integer(
      "WITH RECURSIVE n(node) AS (SELECT ($1::jsonb)->0->'Plan' UNION ALL "
      "SELECT jsonb_array_elements(node->'Plans') FROM n WHERE node ? 'Plans') "
      "SELECT coalesce(sum((node->>'Actual Rows')::bigint), 0) FROM n "
      "WHERE node->>'Relation Name' = 'jobs'",
      {*plan[0][0]});
  CHECK(rows_read == 0);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE state = 'done'") == 500);
}

}  // namespace sql_maintenance_test
