// pg::detail::reconnect_policy: the delays between reconnect attempts, without a server.
#include <chrono>

#include <catch2/catch.hpp>
#include <pgqueue/pg/detail/reconnect_policy.hpp>

namespace unit_reconnect_policy_test {

using pgqueue::pg::detail::reconnect_policy;
using namespace std::chrono_literals;

TEST_CASE("delays double up to the maximum, each drawn from its upper half", "[reconnect_policy]") {
  reconnect_policy p(50ms, 400ms);
  for (auto d : {50ms, 100ms, 200ms, 400ms, 400ms, 400ms}) {
    const auto got = p.next_delay();
    CHECK(got >= d / 2);
    CHECK(got <= d);
  }
}

TEST_CASE("a session that was established starts the delays again", "[reconnect_policy]") {
  reconnect_policy p(50ms, 2000ms);
  for (int i = 0; i < 5; ++i) p.next_delay();
  p.reset();
  const auto got = p.next_delay();
  CHECK(got >= 25ms);
  CHECK(got <= 50ms);
}

TEST_CASE("a zero initial delay still waits, and a maximum below it is raised to it",
          "[reconnect_policy]") {
  reconnect_policy p(0ms, 0ms);
  CHECK(p.next_delay() <= 1ms);
  reconnect_policy q(100ms, 10ms);
  for (int i = 0; i < 3; ++i) {
    const auto got = q.next_delay();
    CHECK(got >= 50ms);
    CHECK(got <= 100ms);
  }
}

}  // namespace unit_reconnect_policy_test
