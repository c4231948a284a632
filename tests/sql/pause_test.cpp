// pause / resume: a paused queue accepts jobs, hands none out, tells idle claimers nothing is
// due; resume wakes them. Jobs already claimed finish as usual.
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/role.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/wait.hpp"

namespace sql_pause_test {

using namespace pgq_test;

TEST_CASE("a paused queue takes jobs and hands none out until resumed, which wakes listeners",
          "[pause]") {
  scratch_database db;
  session s(db.dsn());
  session listener(db.dsn());
  listener.query("LISTEN \"" + *s.scalar("SELECT pgqueue.channel('q')") + "\"");
  const auto held = enqueue(s, "q");
  auto c = claim(s, "q", "w");
  REQUIRE(c.size() == 1);
  while (listener.wait_notification(50)) {
  }

  CHECK(*s.scalar("SELECT pgqueue.pause('q')") == "t");
  CHECK(*s.scalar("SELECT pgqueue.pause('q')") == "f");  // already paused
  const auto waiting = enqueue(s, "q");                  // accepted
  CHECK(claim(s, "q", "w2", 10).empty());
  CHECK(s.query("SELECT * FROM pgqueue.claim_next('q', 'w2')").empty());
  CHECK(*s.scalar("SELECT due_now::text || coalesce(next_due::text, '-') "
                  "FROM pgqueue.wait_hint('q')") == "false-");
  CHECK(claim(s, "other", "w2").empty());  // no job there; other queues are not paused
  CHECK(enqueue(s, "other") > 0);
  CHECK(claim(s, "other", "w2").size() == 1);
  // The job claimed before the pause finishes as usual.
  CHECK(*s.scalar("SELECT pgqueue.ack($1, 'w', $2)",
                  {std::to_string(held), std::to_string(c[0].lease_token)}) == "t");
  while (listener.wait_notification(50)) {
  }

  CHECK(*s.scalar("SELECT pgqueue.resume('q')") == "t");
  const auto woken = listener.wait_notification(5000);
  REQUIRE(woken);
  CHECK(woken->second == "q");
  auto after = claim(s, "q", "w2");
  REQUIRE(after.size() == 1);
  CHECK(after[0].id == waiting);
  CHECK(*s.scalar("SELECT pgqueue.resume('q')") == "f");  // not paused
}

TEST_CASE("an expired lease comes back during a pause and is claimed after it", "[pause]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = enqueue(s, "q");
  REQUIRE(claim(s, "q", "crashed").size() == 1);
  s.scalar("SELECT pgqueue.pause('q')");
  CHECK(take_back(s, id) == 1);
  CHECK(read_job(s, id).state == "ready");
  CHECK(claim(s, "q", "w").empty());
  s.scalar("SELECT pgqueue.resume('q')");
  auto c = claim(s, "q", "w");
  REQUIRE(c.size() == 1);
  CHECK(c[0].id == id);
}

// Claims' first pass does not look at pauses: the queue's floors say it (held). A floor made by
// a transaction still open when the pause ran must be held too, so the pause waits for it.
TEST_CASE("a pause waits for a transaction making the queue's first floor, which is then held",
          "[pause]") {
  scratch_database db;
  session s(db.dsn());
  session maker(db.dsn());
  session pauser(db.dsn());
  maker.query("BEGIN");
  enqueue(maker, "q");  // makes q's first floor, committed below
  std::string error;
  std::thread t([&] {
    try {
      pauser.scalar("SELECT pgqueue.pause('q')");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  const auto pause_waits =
      wait_until([&] { return waits_on_lock(s, pauser.backend_pid()); }, std::chrono::seconds(10));
  maker.query("COMMIT");
  t.join();
  CHECK(pause_waits);
  CHECK(error == "");
  CHECK(*s.scalar("SELECT string_agg(held::text, ',') FROM pgqueue.ready_floor") == "true");
  CHECK(claim(s, "q", "w").empty());
  s.scalar("SELECT pgqueue.resume('q')");
  CHECK(*s.scalar("SELECT string_agg(held::text, ',') FROM pgqueue.ready_floor") == "false");
  CHECK(claim(s, "q", "w").size() == 1);
}

TEST_CASE("a floor still held after its pause was lifted does not keep jobs back", "[pause]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = enqueue(s, "q");
  s.query("UPDATE pgqueue.ready_floor SET held = true");  // as if a lift had not reached it
  auto c = claim(s, "q", "w");
  REQUIRE(c.size() == 1);
  CHECK(c[0].id == id);
}

TEST_CASE("pause, resume and set_queue_limits refuse an older snapshot than READ COMMITTED's",
          "[pause]") {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  for (const char* call : {"pgqueue.pause('q')", "pgqueue.resume('q')",
                           "pgqueue.set_queue_limits('q', p_max_claimed => 1)"}) {
    CAPTURE(call);
    if (std::string(call) == "pgqueue.resume('q')") s.scalar("SELECT pgqueue.pause('q')");
    s.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    CHECK(s.error_of(std::string("SELECT ") + call) == "22023");
    s.query("ROLLBACK");
  }
  CHECK(s.integer("SELECT count(*) FROM pgqueue.queue_limits") == 0);
  CHECK(*s.scalar("SELECT pgqueue.resume('q')") == "t");  // the pause above, still in force
}

TEST_CASE("a REPEATABLE READ claim whose snapshot predates a pause fails instead of claiming",
          "[pause]") {
  scratch_database db;
  session s(db.dsn());
  session rr(db.dsn());
  enqueue(s, "q");
  rr.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  rr.query("SELECT 1");  // the snapshot: no pause in it
  CHECK(*s.scalar("SELECT pgqueue.pause('q')") == "t");
  CHECK(rr.error_of("SELECT * FROM pgqueue.claim_batch('q', 'rr', 5)") == "40001");
  rr.query("ROLLBACK");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'ready'") == 1);
}

TEST_CASE("pause and resume: bad names refused, and not for producer or worker roles", "[pause]") {
  scratch_database db;
  session s(db.dsn());
  CHECK(s.error_of("SELECT pgqueue.pause('')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.resume(NULL)") == "22004");
  scoped_role worker(db.dsn(), "pause_worker");
  s.scalar("SELECT pgqueue.grant_worker($1)", {worker.name()});
  session as_worker(worker.dsn());
  CHECK(as_worker.error_of("SELECT pgqueue.pause('q')") == "42501");
  CHECK(as_worker.error_of("SELECT pgqueue.resume('q')") == "42501");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.paused_queues") == 0);
}

}  // namespace sql_pause_test
