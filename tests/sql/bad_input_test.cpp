// Bad input to every SQL function: a clear error with its SQLSTATE, and nothing changes.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_bad_input_test {

using namespace pgq_test;

TEST_CASE("bad input is refused with the right SQLSTATE and changes nothing", "[bad-input]") {
  scratch_database db;
  session s(db.dsn());
  auto held = enqueue(s, "q");
  enqueue(s, "q");
  claim(s, "q", "w");
  const std::string id = std::to_string(held);

  struct bad_call {
    std::string sql;
    std::string sqlstate;
    std::string says;  // part of the message
  };
  const std::vector<bad_call> calls = {
      {"SELECT pgqueue.enqueue('q', '{not json')", "22P02", "invalid input syntax for type json"},
      {"SELECT pgqueue.enqueue('q', NULL)", "22004", "payload must not be NULL"},
      {"SELECT pgqueue.enqueue('', '{}')", "22023", "invalid queue name"},
      {"SELECT pgqueue.enqueue(NULL, '{}')", "22004", "queue name must not be NULL"},
      {"SELECT pgqueue.enqueue('q', '{}', NULL, NULL)", "22004", "priority must not be NULL"},
      {"SELECT pgqueue.enqueue('q', '{}', NULL, 0, NULL)", "22004", "run_after must not be NULL"},
      {"SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 0)", "22023", "max_attempts"},
      {"SELECT pgqueue.enqueue('q', '{}', NULL, '2147483648')", "22003", "out of range"},
      {"SELECT pgqueue.enqueue_batch('q', NULL)", "22004", "payloads must not be NULL"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY['{}', NULL]::jsonb[])", "22023", "NULL"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY['{}']::jsonb[], ARRAY['a', 'b'])", "22023",
       "2 idempotency keys for 1 payloads"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '[']::jsonb[])", "22P02", "json"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 0)", "22023", "limit"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', -5)", "22023", "limit"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 10001)", "22023", "limit"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', NULL)", "22004", "limit must not be NULL"},
      {"SELECT * FROM pgqueue.claim_batch('q', NULL)", "22004", "worker_id must not be NULL"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 1, '-1 minute')", "22023", "lease_for"},
      {"SELECT * FROM pgqueue.claim_next('q', 'w', '0 s')", "22023", "lease_for"},
      {"SELECT * FROM pgqueue.claim_next(repeat('x', 300), 'w')", "22023", "invalid queue name"},
      {"SELECT pgqueue.heartbeat(" + id + ", 'w', '-1 s')", "22023", "extend_by"},
      {"SELECT pgqueue.heartbeat(NULL, 'w')", "22004", "job_id must not be NULL"},
      {"SELECT pgqueue.ack(NULL, 'w')", "22004", "job_id must not be NULL"},
      {"SELECT pgqueue.ack(" + id + ", NULL)", "22004", "worker_id must not be NULL"},
      {"SELECT pgqueue.ack_batch(ARRAY[" + id + "], 'w', ARRAY[1, 2])", "22023",
       "2 lease tokens for 1 job ids"},
      {"SELECT pgqueue.count_acked(ARRAY[" + id + "], 'w', ARRAY[1, 2])", "22023",
       "2 lease tokens for 1 job ids"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY[['{}', '{}'], ['{}', '{}']]::jsonb[])", "22023",
       "payloads must be a one-dimensional array"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '{}']::jsonb[], ARRAY[['a'], ['b']])",
       "22023", "idempotency keys must be a one-dimensional array"},
      {"SELECT pgqueue.nack(" + id + ", 'w', 'e', '-5 s')", "22023", "requeue_after"},
      {"SELECT pgqueue.gc('1 day', '1 day', 0)", "22023", "batch_size"},
      {"SELECT pgqueue.gc(NULL)", "22004", "retain_done must not be NULL"},
      {"SELECT pgqueue.janitor_reset_stale_claims(NULL)", "22004", "grace must not be NULL"},
      // Would take back the live lease of `held`, and delete jobs just finished.
      {"SELECT pgqueue.janitor_reset_stale_claims('-1 hour')", "22023",
       "grace must not be negative"},
      {"SELECT pgqueue.gc('-7 days')", "22023", "must not be negative"},
      {"SELECT pgqueue.gc('1 day', '-1 day')", "22023", "must not be negative"},
      {"SELECT pgqueue.set_retry_backoff('q', '10 s', '1 s')", "22023", "back-off"},
      {"SELECT pgqueue.retry_dead(E'\\t')", "22023", "invalid queue name"},
      {"SELECT pgqueue.wake('')", "22023", "invalid queue name"},
      // Hostile values: jsonb cannot hold \u0000, text cannot hold invalid UTF-8, and limits,
      // lengths and intervals at the types' extremes are refused, not wrapped around.
      {"SELECT pgqueue.enqueue('q', '{\"a\": \"\\u0000\"}')", "22P05",
       "unsupported Unicode escape sequence"},
      {"SELECT pgqueue.enqueue(E'q\\xc3\\x28', '{}')", "22021", "invalid byte sequence"},
      {"SELECT pgqueue.enqueue(repeat('n', 10240), '{}')", "22023", "invalid queue name"},
      {"SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), -2147483648)", "22023", "max_attempts"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 2147483647)", "22023", "limit"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 1, '0 s')", "22023", "lease_for"},
      {"SELECT * FROM pgqueue.claim_batch('q', 'w', 1, '178000000 years')", "22008",
       "out of range"},
      {"SELECT * FROM pgqueue.claim_batch(E'q\\n', 'w')", "22023", "invalid queue name"},
      {"SELECT pgqueue.heartbeat(" + id + ", 'w', '178000000 years')", "22008", "out of range"},
      {"SELECT pgqueue.nack(" + id + ", 'w', 'e', '178000000 years')", "22008", "out of range"},
      {"SELECT pgqueue.nack(" + id + ", 'w', repeat('e', 10240), '-1 us')", "22023",
       "requeue_after"},
      {"SELECT pgqueue.gc('1 day', '1 day', -2147483648)", "22023", "batch_size"},
      {"SELECT pgqueue.set_retry_backoff('q', '-1 s', '1 s')", "22023", "back-off"},
      {"SELECT pgqueue.set_retry_backoff(repeat('n', 256), '1 s', '1 s')", "22023",
       "invalid queue name"},
      {"SELECT pgqueue.set_retry_backoff(NULL, '1 s', '1 s')", "22004",
       "queue name must not be NULL"},
      {"SELECT pgqueue.next_run_after(NULL)", "22004", "queue name must not be NULL"},
      {"SELECT pgqueue.next_run_after(E'bad\\n')", "22023", "invalid queue name"},
      {"SELECT * FROM pgqueue.wait_hint(NULL)", "22004", "queue name must not be NULL"},
      {"SELECT * FROM pgqueue.wait_hint('')", "22023", "invalid queue name"},
      // The C++ layer refuses these before sending; SQL callers get the same limit.
      {"SELECT pgqueue.enqueue('q', '{}', repeat('k', 256))", "22023",
       "idempotency_key must be at most 255 bytes"},
      {"SELECT pgqueue.enqueue('q', '{}', repeat('k', 3200))", "22023",
       "idempotency_key must be at most 255 bytes"},
      {"SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '{}']::jsonb[], ARRAY['a', repeat('k', 256)])",
       "22023", "idempotency keys must be at most 255 bytes"},
      {"SELECT * FROM pgqueue.claim_batch('q', repeat('w', 256))", "22023",
       "worker_id must be at most 255 bytes"},
  };
  const auto before = jobs_digest(s);
  for (const auto& call : calls) {
    INFO(call.sql);
    try {
      s.query(call.sql);
      FAIL("no error");
    } catch (const sql_error& e) {
      CHECK(e.sqlstate == call.sqlstate);
      CHECK_THAT(e.message, Catch::Contains(call.says));
    }
  }
  CHECK(jobs_digest(s) == before);
  CHECK(s.integer("SELECT 1") == 1);  // the session is still usable
  // Ids that do not exist, or are held by someone else, are answered, not errors.
  CHECK(*s.scalar("SELECT pgqueue.ack(-1, 'w')") == "f");
  CHECK(*s.scalar("SELECT pgqueue.nack(424242, 'w')") == "lost");
  CHECK(*s.scalar("SELECT pgqueue.ack_batch(ARRAY[424242, -1]::bigint[], 'w')") == "{}");
  // A job held by another worker, or named together with another queue, is not touched.
  CHECK(*s.scalar("SELECT pgqueue.ack(" + id + ", 'w2')") == "f");
  CHECK(*s.scalar("SELECT pgqueue.heartbeat(" + id + ", 'w2')") == "f");
  CHECK(*s.scalar("SELECT pgqueue.release(" + id + ", 'w2')") == "f");
  CHECK(*s.scalar("SELECT pgqueue.nack(" + id + ", 'w2', 'x')") == "lost");
  CHECK(*s.scalar("SELECT pgqueue.ack(" + id + ", 'w', 2)") == "f");  // a later attempt's token
  CHECK(s.integer("SELECT pgqueue.retry_dead('other', ARRAY[" + id + "]::bigint[])") == 0);
  CHECK(s.integer("SELECT pgqueue.retry_dead('q', ARRAY[9223372036854775807]::bigint[])") == 0);
  CHECK(jobs_digest(s) == before);
}

}  // namespace sql_bad_input_test
