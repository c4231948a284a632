// Jobs that wait for other jobs (enqueue's p_depends_on): released by the last parent's ack,
// ended with a dead or cancelled parent, retried with their parents, under concurrent acks and
// enqueues, behind the claim floors, and by the janitor's safety net.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/wait.hpp"

namespace sql_dependencies_test {

using namespace pgq_test;

namespace {

std::string array_of(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

// Enqueues a job into `queue` that waits for `parents`.
std::int64_t enqueue_after(session& s, const std::string& queue,
                           const std::vector<std::int64_t>& parents,
                           const value& key = std::nullopt) {
  return s.integer(
      "SELECT pgqueue.enqueue($1, '{}', p_idempotency_key => $2, p_depends_on => $3::bigint[])",
      {queue, key, array_of(parents)});
}

std::int64_t enqueue_max(session& s, const std::string& queue, int max_attempts) {
  return s.integer("SELECT pgqueue.enqueue($1, '{}', p_max_attempts => $2)",
                   {queue, std::to_string(max_attempts)});
}

std::string state_of(session& s, std::int64_t id) {
  return read_job(s, id).state;
}

std::int64_t edges(session& s) {
  return s.integer("SELECT count(*) FROM pgqueue.job_dependencies");
}

// Claims the next job of `queue` (it must be `id`) and acks it.
void run(session& s, const std::string& queue, std::int64_t id) {
  auto got = claim(s, queue, "w");
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].id == id);
  REQUIRE(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)",
                    {std::to_string(id), std::to_string(got[0].lease_token)}) == "t");
}

// Claims the next job of `queue` (it must be `id`) and fails its last attempt.
void kill(session& s, const std::string& queue, std::int64_t id) {
  auto got = claim(s, queue, "w");
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].id == id);
  REQUIRE(*s.scalar("SELECT pgqueue.nack($1, 'w', 'boom', NULL, $2)",
                    {std::to_string(id), std::to_string(got[0].lease_token)}) == "dead");
}

// Runs `sql` on `s` in a thread, waits until it blocks on a lock, runs `unblock`, and joins.
void blocked_then(session& s, const std::string& sql, const std::vector<value>& params,
                  session& watcher, const std::function<void()>& unblock) {
  std::atomic<bool> finished{false};
  std::thread t([&] {
    s.query(sql, params);
    finished = true;
  });
  const bool blocked =
      wait_until([&] { return finished.load() || waits_on_lock(watcher, s.backend_pid()); },
                 std::chrono::seconds(10));
  const bool finished_early = finished.load();
  unblock();
  t.join();
  CHECK(blocked);
  CHECK_FALSE(finished_early);
}

}  // namespace

TEST_CASE("a job waits for its parents and the last parent's ack releases it", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto p1 = enqueue(s, "p");
  const auto p2 = enqueue(s, "p");
  const auto p3 = enqueue(s, "p");
  const auto child = enqueue_after(s, "q", {p1, p2, p3, p2});  // a repeated id counts once
  CHECK(state_of(s, child) == "waiting");
  CHECK(edges(s) == 3);
  CHECK(s.query("SELECT depends_on, state FROM pgqueue.job_dependencies_of($1)",
                {std::to_string(child)}) == std::vector<row>{{std::to_string(p1), "ready"},
                                                             {std::to_string(p2), "ready"},
                                                             {std::to_string(p3), "ready"}});
  CHECK(claim(s, "q", "w").empty());
  CHECK(s.integer("SELECT waiting FROM pgqueue.queue_summary() WHERE queue = 'q'") == 1);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'waiting'") == 1);

  run(s, "p", p1);
  CHECK(state_of(s, child) == "waiting");
  CHECK(edges(s) == 2);
  // ack_batch of the other two: the child becomes ready, due now, its queue woken at commit.
  auto got = claim(s, "p", "w", 2);
  REQUIRE(got.size() == 2);
  s.query("LISTEN " + *s.scalar("SELECT pgqueue.channel('q')"));
  CHECK(*s.scalar("SELECT cardinality(pgqueue.ack_batch($1::bigint[], 'w', $2::bigint[]))",
                  {array_of({got[0].id, got[1].id}),
                   array_of({got[0].lease_token, got[1].lease_token})}) == "2");
  const auto woken = s.wait_notification(5000);
  REQUIRE(woken);
  CHECK(woken->second == "q");
  const auto job = read_job(s, child);
  CHECK(job.state == "ready");
  CHECK(job.due);
  CHECK(edges(s) == 0);
  CHECK(s.integer("SELECT waiting FROM pgqueue.queue_summary() WHERE queue = 'q'") == 0);
  run(s, "q", child);
}

TEST_CASE("enqueue refuses an unknown dependency and stores nothing", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto p = enqueue(s, "p");
  const auto failure = s.failure_of(
      "SELECT pgqueue.enqueue('q', '{}', p_depends_on => $1::bigint[])", {array_of({p, 424242})});
  CHECK(failure.rfind("23503: pgqueue: dependency 424242 does not exist", 0) == 0);
  CHECK(s.error_of("SELECT pgqueue.enqueue_batch('q', ARRAY['{}'::jsonb, '{}'], "
                   "p_depends_on => $1::bigint[])",
                   {array_of({424242, p})}) == "23503");
  CHECK(s.error_of("SELECT pgqueue.enqueue('q', '{}', p_depends_on => ARRAY[$1, NULL]::bigint[])",
                   {std::to_string(p)}) == "22023");
  // An empty batch too: nothing would be stored, but the caller's ids are wrong all the same.
  CHECK(s.error_of("SELECT pgqueue.enqueue_batch('q', '{}'::jsonb[], p_depends_on => $1::bigint[])",
                   {array_of({424242})}) == "23503");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 1);
  CHECK(edges(s) == 0);
}

TEST_CASE("parents already finished at enqueue", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto done = enqueue(s, "p");
  run(s, "p", done);
  SECTION("done parents are dropped: with none left the job is ready") {
    const auto child = enqueue_after(s, "q", {done});
    CHECK(state_of(s, child) == "ready");
    CHECK(edges(s) == 0);
    CHECK(state_of(s, s.integer("SELECT pgqueue.enqueue('q', '{}', p_depends_on => '{}')")) ==
          "ready");
    const auto open = enqueue(s, "p");
    const auto waiting = enqueue_after(s, "q", {done, open});
    CHECK(state_of(s, waiting) == "waiting");
    CHECK(s.query("SELECT job_id, depends_on FROM pgqueue.job_dependencies") ==
          std::vector<row>{{std::to_string(waiting), std::to_string(open)}});
  }
  SECTION("a dead parent makes the job dead at once") {
    const auto dead = enqueue_max(s, "p", 1);
    kill(s, "p", dead);
    const auto child = enqueue_after(s, "q", {done, dead});
    const auto job = read_job(s, child);
    CHECK(job.state == "dead");
    CHECK(job.last_error == "dependency " + std::to_string(dead) + " is dead");
    CHECK(s.integer("SELECT jsonb_array_length(errors) FROM pgqueue.jobs WHERE id = $1",
                    {std::to_string(child)}) == 1);
    CHECK(edges(s) == 1);  // kept, for retry_dead
  }
  SECTION("a cancelled parent cancels the job") {
    const auto cancelled = enqueue(s, "p");
    CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(cancelled)}) == "t");
    const auto batch = s.query(
        "SELECT unnest(pgqueue.enqueue_batch('q', ARRAY['{}'::jsonb, '{}'], "
        "p_depends_on => $1::bigint[]))",
        {array_of({cancelled})});
    REQUIRE(batch.size() == 2);
    for (const auto& r : batch) {
      const auto job = read_job(s, std::stoll(*r[0]));
      CHECK(job.state == "cancelled");
      CHECK(job.last_error == "dependency " + std::to_string(cancelled) + " was cancelled");
    }
  }
}

TEST_CASE("fan-out and fan-in with enqueue_batch", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue(s, "p");
  auto children = s.query(
      "SELECT unnest(pgqueue.enqueue_batch('c', array_agg('{}'::jsonb), "
      "p_depends_on => ARRAY[$1]::bigint[])) FROM generate_series(1, 50)",
      {std::to_string(parent)});
  REQUIRE(children.size() == 50);
  const auto fan_in = s.integer(
      "SELECT pgqueue.enqueue('f', '{}', p_depends_on => (SELECT array_agg(id) FROM pgqueue.jobs "
      "WHERE queue = 'c'))");
  CHECK(count_jobs(s, "waiting") == 51);
  CHECK(edges(s) == 100);
  run(s, "p", parent);
  CHECK(count_jobs(s, "ready", "c") == 50);
  for (int i = 0; i < 49; ++i) {
    auto got = claim(s, "c", "w");
    REQUIRE(got.size() == 1);
    s.query("SELECT pgqueue.ack($1, 'w', $2)",
            {std::to_string(got[0].id), std::to_string(got[0].lease_token)});
    REQUIRE(state_of(s, fan_in) == "waiting");
  }
  auto last = claim(s, "c", "w");
  REQUIRE(last.size() == 1);
  s.query("SELECT pgqueue.ack($1, 'w', $2)",
          {std::to_string(last[0].id), std::to_string(last[0].lease_token)});
  run(s, "f", fan_in);
  CHECK(edges(s) == 0);
}

TEST_CASE("a dead parent ends its waiting jobs, transitively", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue_max(s, "p", 1);
  const auto other = enqueue(s, "p");
  const auto child = enqueue_after(s, "q", {parent, other});
  const auto grandchild = enqueue_after(s, "q", {child});
  const auto unrelated = enqueue_after(s, "q", {other});
  SECTION("by nack") {
    kill(s, "p", parent);
  }
  SECTION("by the janitor, the last attempt's lease expired") {
    auto got = claim(s, "p", "w");
    REQUIRE(got.size() == 1);
    CHECK(take_back(s, parent) == 1);
    CHECK(state_of(s, parent) == "dead");
  }
  auto job = read_job(s, child);
  CHECK(job.state == "dead");
  CHECK(job.last_error == "dependency " + std::to_string(parent) + " is dead");
  job = read_job(s, grandchild);
  CHECK(job.state == "dead");
  CHECK(job.last_error == "dependency " + std::to_string(child) + " is dead");
  CHECK(state_of(s, unrelated) == "waiting");
  CHECK(edges(s) == 4);  // the dead keep theirs
  // The other parent's ack releases only the job that still waits.
  run(s, "p", other);
  CHECK(state_of(s, unrelated) == "ready");
  CHECK(state_of(s, child) == "dead");
}

TEST_CASE("cancel stops a waiting job, and the jobs waiting for a cancelled job",
          "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue(s, "p");
  const auto child = enqueue_after(s, "q", {parent});
  const auto grandchild = enqueue_after(s, "q", {child});
  SECTION("the parent") {
    CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(parent)}) == "t");
    auto job = read_job(s, child);
    CHECK(job.state == "cancelled");
    CHECK(job.last_error == "dependency " + std::to_string(parent) + " was cancelled");
    CHECK(read_job(s, grandchild).last_error ==
          "dependency " + std::to_string(child) + " was cancelled");
  }
  SECTION("a waiting job") {
    CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(child)}) == "t");
    CHECK(state_of(s, child) == "cancelled");
    CHECK(read_job(s, child).last_error == std::nullopt);
    CHECK(state_of(s, parent) == "ready");
    run(s, "p", parent);
    CHECK(state_of(s, child) == "cancelled");
  }
  CHECK(state_of(s, grandchild) == "cancelled");
  CHECK(count_jobs(s, "ready", "q") == 0);
}

TEST_CASE("retry_dead: a retried job waits again for its parents", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue_max(s, "q", 1);
  const auto child = enqueue_after(s, "q", {parent});
  kill(s, "q", parent);
  REQUIRE(state_of(s, child) == "dead");
  SECTION("retried alone, its parent still dead: dead again") {
    CHECK(s.integer("SELECT pgqueue.retry_dead('q', $1::bigint[])", {array_of({child})}) == 1);
    const auto job = read_job(s, child);
    CHECK(job.state == "dead");
    CHECK(job.last_error == "dependency " + std::to_string(parent) + " is dead");
  }
  SECTION("retried with its parent in one call: waits for it, then runs after it") {
    CHECK(s.integer("SELECT pgqueue.retry_dead('q')") == 2);
    CHECK(state_of(s, parent) == "ready");
    CHECK(state_of(s, child) == "waiting");
    run(s, "q", parent);
    CHECK(state_of(s, child) == "ready");
    run(s, "q", child);
  }
  SECTION("its parent retried first and done: the child retried later is ready") {
    CHECK(s.integer("SELECT pgqueue.retry_dead('q', $1::bigint[])", {array_of({parent})}) == 1);
    CHECK(state_of(s, child) == "dead");
    run(s, "q", parent);
    CHECK(state_of(s, child) == "dead");
    CHECK(edges(s) == 0);
    CHECK(s.integer("SELECT pgqueue.retry_dead('q', $1::bigint[])", {array_of({child})}) == 1);
    CHECK(state_of(s, child) == "ready");
  }
  SECTION("its parent gone (gc): dead again") {
    s.query("DELETE FROM pgqueue.jobs WHERE id = $1", {std::to_string(parent)});
    CHECK(s.integer("SELECT pgqueue.retry_dead('q', $1::bigint[])", {array_of({child})}) == 1);
    CHECK(read_job(s, child).last_error ==
          "dependency " + std::to_string(parent) + " no longer exists");
  }
}

TEST_CASE("an idempotency key that exists returns its job and adds no edge", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto p1 = enqueue(s, "p");
  const auto p2 = enqueue(s, "p");
  const auto first = enqueue_after(s, "q", {p1}, "k");
  CHECK(enqueue_after(s, "q", {p2}, "k") == first);
  const auto batch = s.query(
      "SELECT unnest(pgqueue.enqueue_batch('q', ARRAY['{}'::jsonb, '{}'], ARRAY['k', 'new'], "
      "p_depends_on => $1::bigint[]))",
      {array_of({p2})});
  REQUIRE(batch.size() == 2);
  CHECK(batch[0][0] == std::to_string(first));
  const auto fresh = std::stoll(*batch[1][0]);
  CHECK(s.query("SELECT job_id, depends_on FROM pgqueue.job_dependencies ORDER BY 1") ==
        std::vector<row>{{std::to_string(first), std::to_string(p1)},
                         {std::to_string(fresh), std::to_string(p2)}});
}

TEST_CASE("an ack racing an enqueue of a child: the child is ready exactly when the parent is done",
          "[dependencies]") {
  scratch_database db;
  session acker(db.dsn()), producer(db.dsn()), watcher(db.dsn());
  const auto parent = enqueue(acker, "p");
  auto got = claim(acker, "p", "w");
  REQUIRE(got.size() == 1);
  const std::vector<value> ack_args{std::to_string(parent), std::to_string(got[0].lease_token)};
  std::int64_t child = 0;
  SECTION("the enqueue holds the parent first: the ack waits, then releases the child") {
    producer.query("BEGIN");
    child = enqueue_after(producer, "q", {parent});
    blocked_then(acker, "SELECT pgqueue.ack($1, 'w', $2)", ack_args, watcher,
                 [&] { producer.query("COMMIT"); });
  }
  SECTION("the ack holds the parent first: the enqueue waits, then sees it done") {
    acker.query("BEGIN");
    acker.query("SELECT pgqueue.ack($1, 'w', $2)", ack_args);
    std::atomic<std::int64_t> id{0};
    std::atomic<bool> finished{false};
    std::thread t([&] {
      id = enqueue_after(producer, "q", {parent});
      finished = true;
    });
    const bool blocked = wait_until(
        [&] { return finished.load() || waits_on_lock(watcher, producer.backend_pid()); },
        std::chrono::seconds(10));
    CHECK_FALSE(finished.load());
    acker.query("COMMIT");
    t.join();
    CHECK(blocked);
    child = id;
  }
  CHECK(state_of(watcher, parent) == "done");
  CHECK(state_of(watcher, child) == "ready");
  CHECK(edges(watcher) == 0);
}

TEST_CASE("two parents acked at once by two sessions release their child once", "[dependencies]") {
  scratch_database db;
  session a(db.dsn()), b(db.dsn()), watcher(db.dsn());
  const auto p1 = enqueue(a, "p");
  const auto p2 = enqueue(a, "p");
  const auto child = enqueue_after(a, "q", {p1, p2});
  auto got = claim(a, "p", "w", 2);
  REQUIRE(got.size() == 2);
  a.query("BEGIN");
  a.query("SELECT pgqueue.ack($1, 'w', $2)",
          {std::to_string(got[0].id), std::to_string(got[0].lease_token)});
  CHECK(state_of(watcher, child) == "waiting");
  // b's ack waits for the child's row, which a holds, then sees a's deleted edge.
  blocked_then(b, "SELECT pgqueue.ack($1, 'w', $2)",
               {std::to_string(got[1].id), std::to_string(got[1].lease_token)}, watcher,
               [&] { a.query("COMMIT"); });
  CHECK(state_of(watcher, child) == "ready");
  CHECK(edges(watcher) == 0);
}

TEST_CASE("an enqueue waiting for a job an ack releases does not deadlock with that ack",
          "[dependencies]") {
  scratch_database db;
  session acker(db.dsn()), producer(db.dsn()), watcher(db.dsn());
  const auto p3 = enqueue(acker, "p");
  const auto c7 = enqueue_after(acker, "q", {p3});
  const auto p5 = enqueue(acker, "p");
  auto got = claim(acker, "p", "w", 2);
  REQUIRE(got.size() == 2);
  acker.query("BEGIN");
  acker.query("SELECT pgqueue.ack($1, 'w', $2)",
              {std::to_string(p5), std::to_string(got[1].lease_token)});
  // The enqueue locks p5 (held by the ack) before the waiting c7, which the ack of p3 then
  // locks to release it: no lock cycle.
  std::int64_t x = 0;
  std::string failed;  // a deadlock would fail one of the two (40P01)
  std::atomic<bool> finished{false};
  std::thread t([&] {
    try {
      x = enqueue_after(producer, "q", {c7, p5});
    } catch (const sql_error& e) {
      failed = e.sqlstate;
    }
    finished = true;
  });
  const bool blocked =
      wait_until([&] { return finished.load() || waits_on_lock(watcher, producer.backend_pid()); },
                 std::chrono::seconds(10));
  CHECK_FALSE(finished.load());
  acker.query("SELECT pgqueue.ack($1, 'w', $2)",
              {std::to_string(p3), std::to_string(got[0].lease_token)});
  acker.query("COMMIT");
  t.join();
  CHECK(blocked);
  CHECK(failed.empty());
  CHECK(state_of(watcher, c7) == "ready");
  CHECK(state_of(watcher, x) == "waiting");
  CHECK(watcher.query("SELECT depends_on FROM pgqueue.job_dependencies WHERE job_id = $1",
                      {std::to_string(x)}) == std::vector<row>{{std::to_string(c7)}});
}

TEST_CASE("a child released long after it was enqueued is claimed (claim floors)",
          "[dependencies]") {
  scratch_database db;
  session s(db.dsn()), other(db.dsn());
  const auto parent = enqueue(s, "p");
  const auto child = enqueue_after(s, "q", {parent});
  auto got = claim(s, "p", "w");
  REQUIRE(got.size() == 1);
  s.query("BEGIN");  // its now() is from before the floor move below
  s.query("SELECT now()");
  // Another job of the queue runs, and the floor moves past the child's enqueue and now().
  const auto passing = enqueue(other, "q");
  run(other, "q", passing);
  other.query("SELECT pgqueue.floor_advance('q')");
  CHECK(*other.scalar("SELECT (f.run_after, f.id) > (j.run_after, j.id) "
                      "FROM pgqueue.ready_floor f, pgqueue.jobs j "
                      "WHERE f.queue = 'q' AND j.id = $1",
                      {std::to_string(child)}) == "t");
  s.query("SELECT pgqueue.ack($1, 'w', $2)",
          {std::to_string(parent), std::to_string(got[0].lease_token)});
  s.query("COMMIT");
  CHECK(state_of(other, child) == "ready");
  run(other, "q", child);
}

TEST_CASE("the janitor's safety net", "[dependencies]") {
  scratch_database db;
  session s(db.dsn()), producer(db.dsn()), watcher(db.dsn());
  const auto parent = enqueue(s, "p");
  SECTION("releases a job whose parent's ack did not see its edge (REPEATABLE READ)") {
    auto got = claim(s, "p", "w");
    REQUIRE(got.size() == 1);
    producer.query("BEGIN");
    const auto child = enqueue_after(producer, "q", {parent});
    s.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    s.query("SELECT 1");  // the snapshot: before the child committed
    blocked_then(s, "SELECT pgqueue.ack($1, 'w', $2)",
                 {std::to_string(parent), std::to_string(got[0].lease_token)}, watcher,
                 [&] { producer.query("COMMIT"); });
    s.query("COMMIT");
    CHECK(state_of(s, parent) == "done");
    CHECK(state_of(s, child) == "waiting");
    s.query("SELECT pgqueue.janitor_reset_stale_claims()");
    CHECK(state_of(s, child) == "ready");
    CHECK(edges(s) == 0);
    run(s, "q", child);
  }
  SECTION("ends a job whose parent was cancelled unseen, even once gc ran before it") {
    s.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    s.query("SELECT 1");  // the snapshot: before the child
    const auto child = enqueue_after(producer, "q", {parent});
    CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(parent)}) == "t");
    s.query("COMMIT");
    REQUIRE(state_of(s, child) == "waiting");  // the cancel did not see the edge
    // gc keeps the parent while something waits for it, so the net sees how it ended.
    s.query("SELECT * FROM pgqueue.gc('0 seconds', '0 seconds')");
    CHECK(state_of(s, parent) == "cancelled");
    s.query("SELECT pgqueue.janitor_reset_stale_claims()");
    CHECK(state_of(s, child) == "cancelled");
    CHECK(claim(s, "q", "w").empty());
  }
  SECTION("ends a job whose parent died unseen") {
    const auto child = enqueue_after(s, "q", {parent});
    s.query("UPDATE pgqueue.jobs SET state = 'dead', finished_at = now() WHERE id = $1",
            {std::to_string(parent)});
    s.query("SELECT pgqueue.janitor_reset_stale_claims()");
    CHECK(read_job(s, child).state == "dead");
  }
  SECTION("looks at waiting jobs in slices") {
    const auto a = enqueue_after(s, "q", {parent});
    const auto b = enqueue_after(s, "q", {parent});
    s.query("DELETE FROM pgqueue.job_dependencies");  // both have nothing left to wait for
    CHECK(s.integer("SELECT pgqueue.dependencies_sweep(1)") == 1);
    CHECK(state_of(s, a) == "ready");
    CHECK(state_of(s, b) == "waiting");
    CHECK(s.integer("SELECT pgqueue.dependencies_sweep(1)") == 1);
    CHECK(state_of(s, b) == "ready");
    CHECK(s.integer("SELECT pgqueue.dependencies_sweep(1)") == 0);
  }
}

TEST_CASE("two retries of dead jobs that wait for each other's queues take turns",
          "[dependencies]") {
  scratch_database db;
  session s(db.dsn()), other(db.dsn());
  // A dead parent in each queue with a dead child in the other one.
  const auto pa = enqueue_max(s, "xa", 1), pb = enqueue_max(s, "xb", 1);
  const auto cb = enqueue_after(s, "xb", {pa}), ca = enqueue_after(s, "xa", {pb});
  kill(s, "xa", pa);
  kill(s, "xb", pb);
  REQUIRE(state_of(s, ca) == "dead");
  REQUIRE(state_of(s, cb) == "dead");
  session watcher(db.dsn());
  s.query("BEGIN");
  CHECK(s.integer("SELECT pgqueue.retry_dead('xa')") == 2);
  // The second waits for its turn (it used to lock the first's jobs as the first locked its
  // own: 40P01, which would throw here), and runs once the first commits.
  blocked_then(other, "SELECT pgqueue.retry_dead('xb')", {}, watcher, [&] { s.query("COMMIT"); });
  CHECK(state_of(s, pa) == "ready");
  CHECK(state_of(s, pb) == "ready");
  CHECK(state_of(s, ca) == "dead");     // retried first, while its parent was still dead
  CHECK(state_of(s, cb) == "waiting");  // retried after its parent: waits for it
}

TEST_CASE("gc deletes the edges of the jobs it deletes", "[dependencies]") {
  scratch_database db;
  session s(db.dsn());
  const auto parent = enqueue_max(s, "p", 1);
  const auto dead_child = enqueue_after(s, "q", {parent});
  const auto cancelled_child = enqueue_after(s, "q", {parent});
  CHECK(*s.scalar("SELECT pgqueue.cancel($1)", {std::to_string(cancelled_child)}) == "t");
  kill(s, "p", parent);
  REQUIRE(state_of(s, dead_child) == "dead");
  CHECK(edges(s) == 2);
  s.query("UPDATE pgqueue.jobs SET finished_at = now() - interval '40 days' WHERE id = ANY($1)",
          {array_of({dead_child, cancelled_child})});
  s.query("SELECT * FROM pgqueue.gc('7 days', '30 days')");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 1);
  CHECK(edges(s) == 0);
}

}  // namespace sql_dependencies_test
