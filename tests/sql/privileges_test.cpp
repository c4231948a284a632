// Least privilege: a producer role may only add jobs, a worker role may also claim and finish
// them; neither reads a table, administers the queue or changes the schema.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/role.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

#include <pgqueue/pgqueue.hpp>

namespace sql_privileges_test {

using namespace pgq_test;

namespace {

constexpr const char* denied = "42501";  // insufficient_privilege

// What neither role may do, whatever it was granted: read or write the tables, administer the
// queue, use the grant helpers, or change the schema.
void check_cannot_escalate(session& s, const std::string& self) {
  const std::vector<std::string> forbidden = {
      "SELECT * FROM pgqueue.jobs",
      "SELECT * FROM pgqueue.done_counts",
      "SELECT * FROM pgqueue.queue_settings",
      "SELECT * FROM public.secrets",
      "INSERT INTO pgqueue.jobs (queue, payload) VALUES ('q', '{}')",
      "UPDATE pgqueue.jobs SET state = 'done'",
      "DELETE FROM pgqueue.jobs",
      "SELECT nextval('pgqueue.jobs_id_seq')",
      "SELECT pgqueue.cancel(1)",
      "SELECT pgqueue.retry_dead('q')",
      "SELECT * FROM pgqueue.gc()",
      "SELECT pgqueue.set_retry_backoff('q', '1 s', '1 min')",
      "SELECT pgqueue.count_failed(ARRAY['q'])",
      "SELECT pgqueue.notify_queue('q')",
      "SELECT pgqueue.grant_worker('" + self + "')",
      "SELECT pgqueue.revoke_access('" + self + "')",
      "CREATE TABLE pgqueue.mine (x int)",
      "CREATE FUNCTION pgqueue.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
      "CREATE OR REPLACE FUNCTION pgqueue.channel(p_queue text) RETURNS text LANGUAGE sql "
      "AS $$ SELECT 'x' $$",
      "ALTER FUNCTION pgqueue.enqueue(text, jsonb, text, int, timestamptz, int, boolean, bigint[]) "
      "SECURITY INVOKER",
      "DROP FUNCTION pgqueue.wake(text)",
      "DROP TABLE pgqueue.jobs",
      "ALTER TABLE pgqueue.jobs ADD COLUMN x int",
      "CREATE SCHEMA mine",
      "GRANT SELECT ON pgqueue.jobs TO " + self,
  };
  for (const auto& sql : forbidden) {
    INFO(sql);
    CHECK(s.error_of(sql) == denied);
  }
  // The connection stays usable after each refusal.
  CHECK(s.integer("SELECT 1") == 1);
}

// A database with the schema, a table outside pgqueue, and a producer and a worker role.
struct roles_fixture {
  scratch_database db;
  session admin{db.dsn()};
  scoped_role producer{db.dsn(), "producer"};
  scoped_role worker{db.dsn(), "worker"};

  roles_fixture() {
    admin.script("CREATE TABLE public.secrets (x text); INSERT INTO public.secrets VALUES ('s');");
    admin.query("SELECT pgqueue.grant_producer($1)", {producer.name()});
    admin.query("SELECT pgqueue.grant_worker($1)", {worker.name()});
  }
};

}  // namespace

TEST_CASE("no pgqueue function is executable without a grant", "[privileges]") {
  scratch_database db;
  session admin(db.dsn());
  scoped_role nobody(db.dsn(), "nobody");
  CHECK(admin.integer("SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgqueue'::regnamespace "
                      "AND has_function_privilege($1, oid, 'EXECUTE')",
                      {nobody.name()}) == 0);
  CHECK(admin.scalar("SELECT has_schema_privilege($1, 'pgqueue', 'USAGE')", {nobody.name()}) ==
        "f");
  // Every function runs as its owner except the grant helpers, which must run as their caller,
  // and floor_starts, channel, tokens_at and counter_slot, which are inlined into pgqueue's own
  // functions.
  CHECK(admin.integer("SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgqueue'::regnamespace "
                      "AND prokind = 'f' AND prosecdef = (proname LIKE 'grant%' OR "
                      "proname IN ('revoke_access', 'floor_starts', 'channel', 'tokens_at', "
                      "'counter_slot'))") == 0);
  session s(nobody.dsn());
  CHECK(s.error_of("SELECT pgqueue.enqueue('q', '{}')") == denied);
}

TEST_CASE("a producer can enqueue and nothing else", "[privileges]") {
  roles_fixture f;
  session s(f.producer.dsn());
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{\"a\": 1}')");
  auto batch = s.query("SELECT unnest(pgqueue.enqueue_batch('q', ARRAY['{}', '[]']::jsonb[]))");
  CHECK(batch.size() == 2);
  s.query("SELECT pgqueue.enqueue('q', '{}', p_wake => false)");
  s.query("SELECT pgqueue.wake('q')");
  CHECK(count_jobs(f.admin, "ready", "q") == 4);
  CHECK(read_job(f.admin, id).payload == "{\"a\": 1}");

  // Bad input still gets its own error, not a privilege error.
  CHECK(s.error_of("SELECT pgqueue.enqueue('', '{}')") == "22023");

  for (const std::string sql :
       {"SELECT * FROM pgqueue.claim_batch('q', 'w', 1)",
        "SELECT * FROM pgqueue.claim_next('q', 'w')", "SELECT pgqueue.ack(1, 'w')",
        "SELECT pgqueue.nack(1, 'w')", "SELECT pgqueue.release(1, 'w')",
        "SELECT pgqueue.heartbeat(1, 'w')", "SELECT pgqueue.janitor_reset_stale_claims()",
        "SELECT * FROM pgqueue.depth"}) {
    INFO(sql);
    CHECK(s.error_of(sql) == denied);
  }
  check_cannot_escalate(s, f.producer.name());
  CHECK(count_jobs(f.admin, "ready", "q") == 4);
}

TEST_CASE("a worker can claim, heartbeat, ack, nack and release, and nothing more",
          "[privileges]") {
  roles_fixture f;
  session s(f.worker.dsn());
  for (int i = 0; i < 3; ++i) s.query("SELECT pgqueue.enqueue('q', '{}')");
  auto jobs = claim(s, "q", "w", 3);
  REQUIRE(jobs.size() == 3);
  const auto id = [&](int i) { return std::to_string(jobs[i].id); };
  CHECK(s.scalar("SELECT pgqueue.heartbeat(" + id(0) + ", 'w', '1 min', 1)") == "t");
  CHECK(s.scalar("SELECT pgqueue.ack(" + id(0) + ", 'w', 1)") == "t");
  CHECK(s.scalar("SELECT pgqueue.nack(" + id(1) + ", 'w', 'boom', '1 h', 1)") == "requeued");
  CHECK(s.scalar("SELECT pgqueue.release(" + id(2) + ", 'w', 1)") == "t");
  CHECK(s.integer("SELECT pgqueue.janitor_reset_stale_claims()") == 0);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'done'") == 1);
  CHECK(s.integer("SELECT count FROM pgqueue.depth WHERE queue = 'q' AND state = 'ready'") == 2);
  CHECK(read_job(f.admin, jobs[1].id).last_error == "boom");
  check_cannot_escalate(s, f.worker.name());
}

TEST_CASE("the insert trigger and deferred wake-ups work for a producer", "[privileges]") {
  roles_fixture f;
  session listener(f.worker.dsn());
  const auto channel = *listener.scalar("SELECT pgqueue.channel('q')");
  listener.query("LISTEN " + channel);
  session s(f.producer.dsn());

  s.query("SELECT pgqueue.enqueue('q', '{}')");  // the trigger notifies
  auto n = listener.wait_notification(5000);
  REQUIRE(n);
  CHECK(n->second == "q");

  // enqueue sets pgqueue.admitting inside the (owner's) function: the trigger stands aside,
  // and with p_wake => false nothing is announced until the producer's own wake().
  // It is switched off again before the function returns, so a later insert in the same
  // transaction is announced as usual.
  s.query("BEGIN");
  s.query("SELECT pgqueue.enqueue('q', '{}', p_wake => false)");
  CHECK(*s.scalar("SELECT current_setting('pgqueue.admitting')") == "off");
  s.query("COMMIT");
  CHECK_FALSE(listener.wait_notification(200));
  s.query("SELECT pgqueue.wake('q')");
  CHECK(listener.wait_notification(5000));
}

TEST_CASE("a producer's temporary objects do not reach into the functions", "[privileges]") {
  roles_fixture f;
  session s(f.producer.dsn());
  // pg_temp is pinned last in the functions' search_path, and they qualify every name: a
  // caller's temporary table or function of the same name changes nothing.
  s.script(
      "CREATE TEMP TABLE jobs (id bigint); "
      "CREATE FUNCTION pg_temp.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'x' $$; "
      "SET search_path = pg_temp, public;");
  auto id = s.integer("SELECT pgqueue.enqueue('q', '{}')");
  CHECK(read_job(f.admin, id).queue == "q");
  CHECK(*s.scalar("SELECT pgqueue.channel('q')") ==
        "pgqueue_" + *f.admin.scalar("SELECT md5('q')"));
  CHECK(s.integer("SELECT count(*) FROM pg_temp.jobs") == 0);
}

TEST_CASE("grants are idempotent and revoke_access takes them back", "[privileges]") {
  roles_fixture f;
  f.admin.query("SELECT pgqueue.grant_worker($1)", {f.worker.name()});
  f.admin.query("SELECT pgqueue.grant_producer($1)", {f.worker.name()});
  CHECK(f.admin.error_of("SELECT pgqueue.grant_worker('no_such_role_pgq')") == "42704");
  CHECK(f.admin.error_of("SELECT pgqueue.grant_worker(NULL)") == "22004");
  session s(f.worker.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}')");
  f.admin.query("SELECT pgqueue.revoke_access($1)", {f.worker.name()});
  CHECK(s.error_of("SELECT pgqueue.enqueue('q', '{}')") == denied);
  CHECK(s.error_of("SELECT * FROM pgqueue.depth") == denied);
  // Re-running the install keeps the roles' grants and the owner's rights model.
  f.admin.script(read_file(schema_file()));
  session p(f.producer.dsn());
  p.query("SELECT pgqueue.enqueue('q', '{}')");
  CHECK(p.error_of("SELECT * FROM pgqueue.jobs") == denied);
  CHECK(count_jobs(f.admin, "ready", "q") == 2);
}

TEST_CASE("a worker role runs the C++ queue end to end", "[privileges]") {
  roles_fixture f;
  const auto dsn = f.worker.dsn();
  auto outcome = run_async([&]() -> asio::awaitable<std::string> {
    auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
    pgqueue::queue q(db, "q");
    co_await q.enqueue("{\"n\": 1}");
    auto l = co_await q.claim();
    auto payload = l.job().payload;
    co_await l.ack();
    co_return payload;
  });
  CHECK(outcome == "{\"n\": 1}");
  CHECK(count_jobs(f.admin, "done", "q") == 1);
}

TEST_CASE("the library's wake-ups reach listeners when a producer role enqueues", "[privileges]") {
  roles_fixture f;
  session listener(f.worker.dsn());
  listener.query("LISTEN " + *listener.scalar("SELECT pgqueue.channel('q')"));
  const auto dsn = f.producer.dsn();
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
    pgqueue::queue q(db, "q");
    co_await q.enqueue("{}");
  });
  auto n = listener.wait_notification(5000);
  REQUIRE(n);
  CHECK(n->second == "q");
}

}  // namespace sql_privileges_test
