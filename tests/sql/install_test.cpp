// Installing and re-installing sql/pgqueue.sql: idempotent, concurrent-safe, refuses downgrades,
// and every function pins its search_path.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/role.hpp"
#include "support/schema.hpp"
#include "support/session.hpp"

namespace sql_install_test {

using namespace pgq_test;

namespace {

// Everything the install defines (schema_structure), plus what a re-run must not touch either:
// each relation's file (a rewrite) and the version row's install time. Two equal snapshots
// mean a re-run changed nothing.
std::string schema_snapshot(session& s) {
  return schema_structure(s) + "\n" + *s.scalar(R"(
    SELECT string_agg(x, E'\n' ORDER BY x) FROM (
      SELECT 'installed ' || installed_at AS x FROM pgqueue.schema_version
      UNION ALL SELECT 'file ' || relname || ' ' || relfilenode FROM pg_class
        WHERE relnamespace = 'pgqueue'::regnamespace) s)");
}

// Runs the file from two sessions at once, each first running `setup`; returns what each threw
// ("" for nothing).
std::vector<std::string> install_twice_at_once(const scratch_database& db,
                                               const std::string& setup = "") {
  const std::string sql = read_file(schema_file());
  std::vector<std::string> errors(2);
  std::thread workers[2];
  for (int i = 0; i < 2; ++i) {
    workers[i] = std::thread([&, i] {
      try {
        session s(db.dsn());
        if (!setup.empty()) s.query(setup);
        s.script(sql);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& w : workers) w.join();
  return errors;
}

}  // namespace

TEST_CASE("a fresh database gets the current schema version", "[install]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(schema_file()));
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 0);
}

TEST_CASE("running the file again changes nothing", "[install]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(schema_file()));
  s.query("SELECT pgqueue.enqueue('q', '{\"a\":1}')");
  auto before = schema_snapshot(s);
  auto rows_before = *s.scalar("SELECT string_agg(j::text, '|') FROM pgqueue.jobs j");
  s.script(read_file(schema_file()));
  CHECK(schema_snapshot(s) == before);
  CHECK(*s.scalar("SELECT string_agg(j::text, '|') FROM pgqueue.jobs j") == rows_before);
}

TEST_CASE("the jobs table is vacuumed by dead rows, and an operator's settings stay", "[install]") {
  scratch_database db(false);
  session s(db.dsn());
  s.script(read_file(schema_file()));
  const std::string options =
      "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'pgqueue.jobs'::regclass";
  CHECK(*s.scalar(options) ==
        "fillfactor=85,autovacuum_vacuum_scale_factor=0,autovacuum_vacuum_threshold=20000,"
        "autovacuum_vacuum_insert_scale_factor=0,autovacuum_vacuum_insert_threshold=20000,"
        "autovacuum_vacuum_cost_delay=0,parallel_workers=0");
  s.script(
      "ALTER TABLE pgqueue.jobs RESET (autovacuum_vacuum_scale_factor, "
      "autovacuum_vacuum_threshold, autovacuum_vacuum_insert_scale_factor, "
      "autovacuum_vacuum_insert_threshold, autovacuum_vacuum_cost_delay); "
      "ALTER TABLE pgqueue.jobs SET (autovacuum_vacuum_scale_factor = 0.05)");
  s.script(read_file(schema_file()));
  CHECK(*s.scalar(options) ==
        "fillfactor=85,parallel_workers=0,autovacuum_vacuum_scale_factor=0.05");
}

TEST_CASE("two sessions installing at once both succeed", "[install][concurrency]") {
  scratch_database db(false);
  CHECK(install_twice_at_once(db) == std::vector<std::string>{"", ""});
  session s(db.dsn());
  CHECK(s.integer("SELECT count(*) FROM pgqueue.schema_version") == 1);
}

TEST_CASE("two installs at once both succeed whatever the sessions' default isolation level",
          "[install][concurrency]") {
  scratch_database db(false);
  CHECK(install_twice_at_once(db, "SET default_transaction_isolation = 'serializable'") ==
        std::vector<std::string>{"", ""});
  session s(db.dsn());
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
}

TEST_CASE("an install waits for another one whatever lock_timeout the database sets",
          "[install][concurrency]") {
  // (With lock_timeout 20 ms, one of two installs run at once failed with 55P03 at the lock
  // that serialises them.)
  scratch_database db(false);
  session holder(db.dsn());
  session watcher(db.dsn());
  holder.query("SELECT pg_advisory_lock(8100266002545501541)");  // as an install in progress
  std::string error;
  std::atomic<int> pid{0};
  std::atomic<bool> ended{false};
  std::thread install([&] {
    try {
      session s(db.dsn());
      pid = s.backend_pid();
      s.query("SET lock_timeout = '20ms'");
      s.script(read_file(schema_file()));
    } catch (const std::exception& e) {
      error = e.what();
    }
    ended = true;
  });
  // Until it waits for the lock (or has failed instead of waiting).
  while (!ended && (pid == 0 || !waits_on_lock(watcher, pid))) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the subject: past the timeout
  holder.query("SELECT pg_advisory_unlock(8100266002545501541)");
  install.join();
  CHECK(error == "");
  CHECK(watcher.integer("SELECT version FROM pgqueue.schema_version") == current_schema_version);
}

TEST_CASE("a role other than the schema's owner may not run the file, a superuser included",
          "[install][security]") {
  scratch_database db(false);
  scoped_role owner(db.dsn(), "schema_owner");
  session admin(db.dsn());
  admin.query("GRANT CREATE ON DATABASE " + db.name() + " TO " + owner.name());
  session as_owner(owner.dsn());
  as_owner.script(read_file(schema_file()));
  as_owner.query("SELECT pgqueue.enqueue('q', '{}')");
  const auto before = schema_snapshot(admin);
  try {
    admin.script(read_file(schema_file()));
    FAIL("a superuser ran the file over another role's schema");
  } catch (const sql_error& e) {
    CHECK(e.sqlstate == "42501");
    CHECK_THAT(e.message, Catch::Contains("belongs to role " + owner.name()));
  }
  CHECK(schema_snapshot(admin) == before);
  // As the owner (SET ROLE), the same session may.
  admin.script("SET ROLE " + owner.name());
  admin.script(read_file(schema_file()));
  admin.script("RESET ROLE");
  CHECK(schema_snapshot(admin) == before);
}

TEST_CASE("a run that changes nothing does not wait for a transaction reading depth", "[install]") {
  scratch_database db;
  session dashboard(db.dsn());
  dashboard.script("BEGIN; SELECT * FROM pgqueue.depth");  // holds the view until it ends
  session s(db.dsn());
  s.query("SET lock_timeout = '1s'");
  CHECK_NOTHROW(s.script(read_file(schema_file())));
  dashboard.script("COMMIT");
}

TEST_CASE("an older file refuses to run against a newer schema", "[install]") {
  scratch_database db;
  session s(db.dsn());
  const auto newer = s.integer("SELECT version + 1 FROM pgqueue.schema_version");
  s.query("UPDATE pgqueue.schema_version SET version = version + 1");
  try {
    s.script(read_file(schema_file()));
    FAIL("the install should have refused");
  } catch (const sql_error& e) {
    CHECK(e.sqlstate == "55000");
    CHECK_THAT(e.message, Catch::Contains("newer than this file"));
  }
  CHECK(s.integer("SELECT version FROM pgqueue.schema_version") == newer);
}

TEST_CASE("every function pins its search_path", "[install][security]") {
  scratch_database db;
  session s(db.dsn());
  // gc_all is a procedure that commits, which a pinned search_path would forbid; floor_starts
  // is inlined into the pgqueue functions that call it (no one else may) and takes theirs;
  // channel, tokens_at and counter_slot are inlined too and qualify every name (the test below
  // shadows md5).
  CHECK(s.integer("SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgqueue'::regnamespace "
                  "AND proname NOT IN ('gc_all', 'floor_starts', 'channel', 'tokens_at', "
                  "'counter_slot') AND NOT "
                  "coalesce(proconfig::text LIKE '%search_path=pg_catalog, pg_temp%', false)") ==
        0);
  // A caller's schema that shadows a built-in the functions use changes nothing.
  s.script(
      "CREATE SCHEMA evil; "
      "CREATE FUNCTION evil.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$; "
      "SET search_path = evil, pg_catalog, pgqueue;");
  CHECK(*s.scalar("SELECT pgqueue.channel('q')") ==
        "pgqueue_" + *s.scalar("SELECT pg_catalog.md5('q')"));
}

}  // namespace sql_install_test
