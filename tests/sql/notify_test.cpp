// Wake-ups: who is notified, when, and how often.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace sql_notify_test {

using namespace pgq_test;

namespace {

// A session listening on a queue's channel.
struct listener {
  session s;
  std::string channel;
  listener(const std::string& dsn, const std::string& queue) : s(dsn) {
    channel = *s.scalar("SELECT pgqueue.channel($1)", {queue});
    s.query("LISTEN \"" + channel + "\"");
  }
  // The payloads received within `ms` milliseconds.
  std::vector<std::string> drain(int ms) {
    std::vector<std::string> out;
    while (auto n = s.wait_notification(ms)) {
      CHECK(n->first == channel);
      out.push_back(n->second);
      ms = 50;  // after the first, anything else would already be here
    }
    return out;
  }
};

}  // namespace

TEST_CASE("enqueue wakes the queue's listeners with the queue name", "[notify]") {
  scratch_database db;
  std::string queue = "a \"long\" queue name, ünïcödé, well past the 63-byte channel limit........";
  listener l(db.dsn(), queue);
  session s(db.dsn());
  enqueue(s, queue);
  CHECK(l.drain(2000) == std::vector<std::string>{queue});
}

TEST_CASE("one transaction sends at most one notification per queue", "[notify]") {
  scratch_database db;
  listener a(db.dsn(), "a");
  listener b(db.dsn(), "b");
  session s(db.dsn());
  s.query("BEGIN");
  for (int i = 0; i < 50; ++i) enqueue(s, "a");
  s.query("SELECT pgqueue.enqueue_batch('a', array_agg('{}'::jsonb)) FROM generate_series(1, 100)");
  enqueue(s, "b");
  CHECK(a.drain(200).empty());  // nothing before commit
  s.query("COMMIT");
  CHECK(a.drain(2000).size() == 1);
  CHECK(b.drain(2000).size() == 1);
}

TEST_CASE("a job enqueued for later and a delayed retry wake listeners (they learn the due time)",
          "[notify]") {
  scratch_database db;
  listener l(db.dsn(), "q");
  session s(db.dsn());
  // An idle claimer must learn of the earlier due time instead of sleeping through it.
  s.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now() + interval '1 hour')");
  CHECK(l.drain(2000).size() == 1);
  auto id = enqueue(s, "q");
  claim(s, "q", "w");
  CHECK(l.drain(2000).size() == 1);
  s.query("SELECT pgqueue.nack($1, 'w', 'later', '1 hour')", {std::to_string(id)});
  CHECK(l.drain(2000).size() == 1);
}

TEST_CASE("a direct INSERT into pgqueue.jobs still wakes listeners", "[notify]") {
  scratch_database db;
  listener l(db.dsn(), "q");
  session s(db.dsn());
  s.query("INSERT INTO pgqueue.jobs (queue, payload) VALUES ('q', '{}'), ('q', '{}')");
  CHECK(l.drain(2000) == std::vector<std::string>{"q"});
}

TEST_CASE("deferred wake: enqueue with p_wake false notifies only through wake()", "[notify]") {
  scratch_database db;
  listener l(db.dsn(), "q");
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue('q', '{}', p_wake => false)");
  s.query("SELECT pgqueue.enqueue_batch('q', ARRAY['{}'::jsonb], p_wake => false)");
  CHECK(l.drain(300).empty());
  s.query("SELECT pgqueue.wake('q')");
  CHECK(l.drain(2000) == std::vector<std::string>{"q"});
  // The deferral ends with the call: a later direct insert in the same transaction wakes.
  const auto call = GENERATE(as<std::string>{}, "pgqueue.enqueue('q', '{}', p_wake => false)",
                             "pgqueue.enqueue_batch('q', ARRAY['{}'::jsonb], p_wake => false)");
  CAPTURE(call);
  s.query("BEGIN");
  s.query("SELECT " + call);
  s.query("INSERT INTO pgqueue.jobs (queue, payload) VALUES ('q', '{}')");
  s.query("COMMIT");
  CHECK(l.drain(2000).size() == 1);
}

TEST_CASE("enqueue_batch wakes listeners, with keys also when every key already existed",
          "[notify]") {
  scratch_database db;
  listener l(db.dsn(), "q");
  session s(db.dsn());
  s.query("SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '{}']::jsonb[], ARRAY['a', 'b'])");
  CHECK(l.drain(2000) == std::vector<std::string>{"q"});
  s.query("SELECT pgqueue.enqueue_batch('q', ARRAY['{}', '{}']::jsonb[], ARRAY['a', 'b'])");
  CHECK(l.drain(2000) == std::vector<std::string>{"q"});
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 2);
}

TEST_CASE("wake() commits asynchronously only when its transaction wrote nothing", "[notify]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SET synchronous_commit = on");  // the test server's default is off
  s.query("BEGIN");
  s.query("SELECT pgqueue.wake('q')");
  CHECK(*s.scalar("SHOW synchronous_commit") == "off");
  s.query("COMMIT");
  s.query("BEGIN");
  enqueue(s, "q");
  s.query("SELECT pgqueue.wake('q')");
  CHECK(*s.scalar("SHOW synchronous_commit") == "on");
  s.query("COMMIT");
}

TEST_CASE("the janitor and an immediate nack wake listeners", "[notify]") {
  scratch_database db;
  session s(db.dsn());
  auto id = enqueue(s, "q");
  claim(s, "q", "w");
  listener l(db.dsn(), "q");
  s.query("SELECT pgqueue.nack($1, 'w', 'again', '0 seconds')", {std::to_string(id)});
  CHECK(l.drain(2000).size() == 1);
  claim(s, "q", "w");
  s.query("UPDATE pgqueue.jobs SET lease_until = now() - interval '1 s' WHERE id = $1",
          {std::to_string(id)});
  s.query("SELECT pgqueue.janitor_reset_stale_claims()");
  CHECK(l.drain(2000).size() == 1);
}

}  // namespace sql_notify_test
