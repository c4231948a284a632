// pg::detail::check_watchdog: when a connection gives up on a silent server, without a server.
#include <catch2/catch.hpp>
#include <chrono>
#include <pgqueue/pg/detail/watchdog.hpp>

namespace unit_watchdog_test {

using namespace std::chrono_literals;
using pgqueue::pg::detail::check_watchdog;
using verdict = pgqueue::pg::detail::watchdog_check::verdict;

const auto t0 = std::chrono::steady_clock::time_point{} + 1h;

TEST_CASE("the watchdog is off without a statement_timeout, a session or an answer due",
          "[watchdog]") {
  CHECK(check_watchdog(0ms, true, true, t0, t0 + 1h).what == verdict::off);
  CHECK(check_watchdog(500ms, false, true, t0, t0 + 1h).what == verdict::off);
  CHECK(check_watchdog(500ms, true, false, t0, t0 + 1h).what == verdict::off);
}

TEST_CASE("the server may be silent for statement_timeout and a second more", "[watchdog]") {
  auto c = check_watchdog(500ms, true, true, t0, t0);
  CHECK(c.what == verdict::wait);
  CHECK(c.at == t0 + 1500ms);
  CHECK(check_watchdog(500ms, true, true, t0, t0 + 1499ms).what == verdict::wait);
  CHECK(check_watchdog(500ms, true, true, t0, t0 + 1500ms).what == verdict::expired);
}

TEST_CASE("an answer moves the deadline", "[watchdog]") {
  // The timer set for the first request fires; an answer came meanwhile at t0 + 1 s.
  const auto c = check_watchdog(500ms, true, true, t0 + 1s, t0 + 1500ms);
  CHECK(c.what == verdict::wait);
  CHECK(c.at == t0 + 2500ms);
}

}  // namespace unit_watchdog_test
