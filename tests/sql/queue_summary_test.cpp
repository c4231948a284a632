// pgqueue.queue_summary: per-queue counts by state, age and lag, and totals that only grow
// (enqueued, done, failed) across acks, nacks, expired leases, cancels and gc.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_queue_summary_test {

using namespace pgq_test;

namespace {

const char* summary_of_q =
    "SELECT concat_ws(' ', paused, ready, scheduled, claimed, dead, cancelled, done, "
    "enqueued_total, done_total, failed_total) FROM pgqueue.queue_summary() WHERE queue = $1";

std::string summary(session& s, const std::string& queue) {
  return s.scalar(summary_of_q, {queue}).value_or("(no row)");
}

}  // namespace

TEST_CASE("queue_summary counts every state and keeps totals through failures and gc",
          "[queue_summary]") {
  scratch_database db;
  session s(db.dsn());
  CHECK(s.query("SELECT * FROM pgqueue.queue_summary()").empty());

  for (int i = 0; i < 6; ++i) enqueue(s, "q");
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')");
  auto c = claim(s, "q", "w", 5);
  REQUIRE(c.size() == 5);
  s.query("SELECT pgqueue.ack($1, 'w')", {std::to_string(c[0].id)});
  s.query("SELECT pgqueue.ack($1, 'w')", {std::to_string(c[1].id)});
  // A failure retried at once, a failure on the last attempt (dead), an expired lease.
  s.query("SELECT pgqueue.nack($1, 'w', 'again', '0 seconds')", {std::to_string(c[2].id)});
  s.query("UPDATE pgqueue.jobs SET max_attempts = 1 WHERE id = $1", {std::to_string(c[3].id)});
  s.query("SELECT pgqueue.nack($1, 'w', 'boom')", {std::to_string(c[3].id)});
  CHECK(take_back(s, c[4].id) == 1);
  CHECK(*s.scalar("SELECT pgqueue.cancel(6)") == "t");
  // ready: the nacked, the taken back; scheduled 1; dead 1; cancelled 1; done 2; failed: 3.
  CHECK(summary(s, "q") == "f 2 1 0 1 1 2 7 2 3");

  // gc deletes the finished jobs; the totals keep them.
  s.query("SELECT * FROM pgqueue.gc('0 seconds', '0 seconds')");
  CHECK(summary(s, "q") == "f 2 1 0 0 0 0 7 2 3");
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 3);

  // A queue known only by its pause shows, with zeros.
  s.query("SELECT pgqueue.pause('idle')");
  CHECK(summary(s, "idle") == "t 0 0 0 0 0 0 0 0 0");
}

TEST_CASE("queue_summary's age and lag follow the oldest due job", "[queue_summary]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')");
  // Nothing due: no age and no lag (a job scheduled for later is not waiting).
  CHECK(*s.scalar("SELECT coalesce(oldest_ready_age_s::text, '-') || ' ' || "
                  "coalesce(lag_s::text, '-') FROM pgqueue.queue_summary()") == "- -");
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() - interval '10 seconds')");
  CHECK(*s.scalar("SELECT (lag_s BETWEEN 10 AND 60)::text FROM pgqueue.queue_summary()") == "true");
  s.query("UPDATE pgqueue.jobs SET created_at = now() - interval '1 minute' WHERE id = 2");
  CHECK(*s.scalar("SELECT (oldest_ready_age_s BETWEEN 60 AND 120)::text "
                  "FROM pgqueue.queue_summary()") == "true");
}

}  // namespace sql_queue_summary_test
