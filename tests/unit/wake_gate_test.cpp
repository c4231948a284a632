// detail::wake_gate: how the wake-ups of one queue are folded across a process (carried by an
// enqueue, or sent by a sender round), driven by scripted calls without a server. Gaps are 0
// (always passed) or an hour (never passed within a test), so no outcome depends on timing.
#include <chrono>

#include <catch2/catch.hpp>
#include <pgqueue/detail/wake_gate.hpp>

namespace unit_wake_gate_test {

using pgqueue::detail::wake_gate;
using namespace std::chrono_literals;

TEST_CASE("an enqueue carries the wake-up; requests meanwhile start one sender round after it",
          "[wake_gate]") {
  wake_gate g;
  CHECK(g.try_carry(0s));
  CHECK_FALSE(g.try_carry(0s));  // one on its way at a time
  CHECK(g.request() == 0);       // jobs committed meanwhile: left to whoever is on its way
  CHECK(g.request() == 0);
  const auto ticket = g.finish(true);
  CHECK(ticket != 0);  // the carrier hands over one sender round for both
  CHECK(g.begin(ticket));
  CHECK(g.finish(true) == 0);  // nothing new: the gate is idle again
  CHECK(g.try_carry(0s));
}

TEST_CASE("a carrier takes over a waiting sender's round", "[wake_gate]") {
  wake_gate g;
  const auto ticket = g.request();
  REQUIRE(ticket != 0);
  CHECK(g.try_carry(0s));
  CHECK_FALSE(g.begin(ticket));  // the sender stops: the carrier's commit covers its jobs
  CHECK(g.finish(true) == 0);
}

TEST_CASE("a failed wake-up stays owed", "[wake_gate]") {
  wake_gate g;
  REQUIRE(g.try_carry(0s));
  const auto ticket = g.finish(false);
  CHECK(ticket != 0);
  CHECK(g.begin(ticket));
  CHECK(g.finish(false) != 0);  // and again, until one is delivered
}

TEST_CASE("within the gap no enqueue carries, and the sender waits the gap and a half",
          "[wake_gate]") {
  wake_gate g;
  REQUIRE(g.try_carry(1h));  // the first ever: the gap has passed
  REQUIRE(g.finish(true) == 0);
  CHECK_FALSE(g.try_carry(1h));
  const auto ticket = g.request();
  REQUIRE(ticket != 0);
  const auto wait = g.delay(1h);
  CHECK(wait > 1h);
  CHECK(wait <= 90min);
  CHECK(g.delay(0s) == wake_gate::clock::duration::zero());
  CHECK(g.begin(ticket));
  CHECK(g.finish(true) == 0);
}

TEST_CASE("one gate per database and queue in the process, while anyone holds it", "[wake_gate]") {
  auto a = wake_gate::get("db/a");
  CHECK(wake_gate::get("db/a") == a);
  CHECK(wake_gate::get("db/b") != a);
  a->try_carry(0s);
  a.reset();
  auto again = wake_gate::get("db/a");
  CHECK(again->try_carry(0s));  // a new gate: the old one's state went with it
}

}  // namespace unit_wake_gate_test
