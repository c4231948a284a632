// pgqueue.jobs.errors: a job's last 10 failures (nack and expired leases), each with its
// attempt, time, holder and error, oldest first.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_error_history_test {

using namespace pgq_test;

namespace {

std::string s_(std::int64_t v) {
  return std::to_string(v);
}

// Claims job `id` of queue q as `worker` and nacks it with `error`, retry due at once.
std::string fail_once(session& s, std::int64_t id, const std::string& worker,
                      const std::string& error) {
  auto c = claim(s, "q", worker);
  REQUIRE(c.size() == 1);
  REQUIRE(c[0].id == id);
  return *s.scalar("SELECT pgqueue.nack($1, $2, $3, '0 seconds', $4)",
                   {s_(id), worker, error, s_(c[0].lease_token)});
}

// "attempt holder error" of each entry, oldest first, one per line.
std::string history(session& s, std::int64_t id) {
  return s
      .scalar(
          "SELECT string_agg(concat_ws(' ', e->>'attempt', e->>'holder', e->>'error'), "
          "E'\\n' ORDER BY n) FROM pgqueue.jobs j, "
          "jsonb_array_elements(j.errors) WITH ORDINALITY AS x(e, n) WHERE j.id = $1",
          {s_(id)})
      .value_or("");
}

}  // namespace

TEST_CASE("each nack is kept with its attempt and holder, up to the job's death", "[errors]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = *s.scalar("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 3)");
  CHECK(s.scalar("SELECT errors FROM pgqueue.jobs WHERE id = $1", {id}) == std::nullopt);
  CHECK(fail_once(s, std::stoll(id), "w1", "smtp timeout") == "requeued");
  CHECK(fail_once(s, std::stoll(id), "w2", "smtp refused") == "requeued");
  CHECK(fail_once(s, std::stoll(id), "w1", "mailbox full") == "dead");
  CHECK(history(s, std::stoll(id)) == "1 w1 smtp timeout\n2 w2 smtp refused\n3 w1 mailbox full");
  CHECK(*s.scalar("SELECT last_error FROM pgqueue.jobs WHERE id = $1", {id}) == "mailbox full");
  // Times in order, none in the future.
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs j, jsonb_array_elements(j.errors) e "
                  "WHERE j.id = $1 AND (e->>'at')::timestamptz <= now()",
                  {id}) == 3);
}

TEST_CASE("the history keeps the last 10 failures", "[errors]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = std::stoll(*s.scalar("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 20)"));
  for (int i = 1; i <= 12; ++i)
    REQUIRE(fail_once(s, id, "w", "e" + std::to_string(i)) == "requeued");
  CHECK(s.integer("SELECT jsonb_array_length(errors) FROM pgqueue.jobs WHERE id = $1", {s_(id)}) ==
        10);
  CHECK(history(s, id).starts_with("3 w e3\n4 w e4\n"));
  CHECK(history(s, id).ends_with("\n12 w e12"));
}

TEST_CASE("an expired lease is a failure in the history; retry_dead keeps the history",
          "[errors]") {
  scratch_database db;
  session s(db.dsn());
  const auto id = std::stoll(*s.scalar("SELECT pgqueue.enqueue('q', '{}', p_max_attempts => 2)"));
  CHECK(fail_once(s, id, "w1", std::string(3000, 'x')) == "requeued");  // bounded to 2000
  REQUIRE(claim(s, "q", "crashed").size() == 1);
  CHECK(take_back(s, id) == 1);  // the janitor: no attempts left, dead
  CHECK(read_job(s, id).state == "dead");
  CHECK(s.integer("SELECT length(errors->0->>'error') FROM pgqueue.jobs WHERE id = $1", {s_(id)}) ==
        2000);
  CHECK(s.scalar("SELECT errors->1->>'holder' FROM pgqueue.jobs WHERE id = $1", {s_(id)}) ==
        "crashed");
  CHECK_THAT(*s.scalar("SELECT errors->1->>'error' FROM pgqueue.jobs WHERE id = $1", {s_(id)}),
             Catch::StartsWith("lease expired on attempt 2 of 2 (worker crashed") &&
                 Catch::EndsWith(": no attempts left"));
  CHECK(s.integer("SELECT pgqueue.retry_dead('q')") == 1);
  CHECK(s.integer("SELECT jsonb_array_length(errors) FROM pgqueue.jobs WHERE id = $1", {s_(id)}) ==
        2);
}

}  // namespace sql_error_history_test
