// enqueue and enqueue_batch: ids, idempotency (also under concurrency), queue-name rules.
#include <thread>

#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/wait.hpp"

namespace sql_enqueue_test {

using namespace pgq_test;

TEST_CASE("enqueue stores the job ready with its options", "[enqueue]") {
  scratch_database db;
  session s(db.dsn());
  auto id = s.integer(
      "SELECT pgqueue.enqueue('mail', '{\"to\":\"a\"}', 'k', 5, now() + interval '1 hour', 3)");
  auto j = read_job(s, id);
  CHECK(j.state == "ready");
  CHECK(j.payload == R"({"to": "a"})");
  CHECK(j.priority == 5);
  CHECK(j.max_attempts == 3);
  CHECK(j.attempts == 0);
  CHECK(*j.idempotency_key == "k");
  CHECK_FALSE(j.due);
}

TEST_CASE("the same idempotency key returns the same job", "[enqueue]") {
  scratch_database db;
  session s(db.dsn());
  auto a = enqueue(s, "mail", R"({"n":1})", "welcome-42");
  auto b = enqueue(s, "mail", R"({"n":2})", "welcome-42");
  auto other_queue = enqueue(s, "sms", R"({"n":3})", "welcome-42");
  CHECK(a == b);
  CHECK(other_queue != a);
  CHECK(read_job(s, a).payload == R"({"n": 1})");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 2);
}

TEST_CASE("concurrent enqueues with one key both return the same id", "[enqueue][concurrency]") {
  scratch_database db;
  session first(db.dsn());
  session second(db.dsn());
  // The first insert stays uncommitted while the second arrives: the second must wait for it
  // and return its id instead of failing with a unique violation (the seed's race).
  first.query("BEGIN");
  auto a = enqueue(first, "mail", "{}", "race");
  std::int64_t b = 0;
  std::string error;
  std::thread t([&] {
    try {
      b = enqueue(second, "mail", "{}", "race");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  // The second call is blocked on the first's key until the first commits.
  wait_until([&] { return waits_on_lock(first, second.backend_pid()); }, std::chrono::seconds(5),
             std::chrono::milliseconds(10));
  first.query("COMMIT");
  t.join();
  CHECK(error == "");
  CHECK(b == a);
}

TEST_CASE("enqueue_batch returns ids in input order and dedupes keys", "[enqueue]") {
  scratch_database db;
  session s(db.dsn());
  auto existing = enqueue(s, "mail", "{}", "old");
  auto ids = *s.scalar(
      "SELECT pgqueue.enqueue_batch('mail', "
      "ARRAY['{\"i\":0}','{\"i\":1}','{\"i\":2}','{\"i\":3}']::jsonb[], "
      "ARRAY[NULL, 'old', 'x', 'x'])");
  auto rows = s.query(
      "SELECT u, (SELECT payload->>'i' FROM pgqueue.jobs WHERE id = u) "
      "FROM unnest($1::bigint[]) WITH ORDINALITY AS t(u, o) ORDER BY o",
      {ids});
  REQUIRE(rows.size() == 4);
  CHECK(*rows[0][1] == "0");
  CHECK(std::stoll(*rows[1][0]) == existing);
  CHECK(*rows[2][1] == "2");
  CHECK(*rows[3][0] == *rows[2][0]);
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 3);
  CHECK(*s.scalar("SELECT pgqueue.enqueue_batch('mail', '{}'::jsonb[])") == "{}");
  // An empty batch gets the checks of any other: keys without payloads are refused.
  CHECK(s.failure_of("SELECT pgqueue.enqueue_batch('mail', '{}'::jsonb[], ARRAY['k'])")
            .rfind("22023: pgqueue: 1 idempotency keys for 0 payloads", 0) == 0);
}

TEST_CASE("queue names: any text up to 255 bytes works, others are refused", "[enqueue]") {
  scratch_database db;
  session s(db.dsn());
  std::string tricky = "it's a \"queue\"; DROP TABLE x; -- ünïcödé ✓";
  std::string longest(255 - tricky.size(), 'x');
  for (const auto& name : {tricky, tricky + longest}) {
    auto id = enqueue(s, name);
    auto got = claim(s, name, "w");
    REQUIRE(got.size() == 1);
    CHECK(got[0].id == id);
    CHECK(got[0].queue == name);
  }
  auto before = jobs_digest(s);
  CHECK(s.error_of("SELECT pgqueue.enqueue('', '{}')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.enqueue($1, '{}')", {std::string(256, 'x')}) == "22023");
  CHECK(s.error_of("SELECT pgqueue.enqueue(E'a\\nb', '{}')") == "22023");
  CHECK(s.error_of("SELECT pgqueue.enqueue(NULL, '{}')") == "22004");
  // A direct INSERT is held to the same rule.
  CHECK(s.error_of("INSERT INTO pgqueue.jobs (queue, payload) VALUES ('', '{}')") == "23514");
  CHECK(jobs_digest(s) == before);
}

}  // namespace sql_enqueue_test
