// detail::idle_backoff: how long an idle claim waits before checking again, driven by scripted
// answers of pgqueue.wait_hint (no server).
#include <chrono>
#include <vector>

#include <catch2/catch.hpp>
#include <pgqueue/detail/idle_backoff.hpp>

namespace unit_idle_backoff_test {

using pgqueue::detail::idle_backoff;
using pgqueue::detail::wait_hint;
using namespace std::chrono_literals;

TEST_CASE("an empty queue waits the poll interval", "[idle_backoff]") {
  idle_backoff b(2000ms);
  CHECK(b.next({}) == 2000ms);
  CHECK(b.next({}) == 2000ms);
}

TEST_CASE("a job due sooner than the poll shortens the wait to its due time", "[idle_backoff]") {
  idle_backoff b(5000ms);
  CHECK(b.next({.next_due = 300ms}) == 300ms);
  CHECK(b.next({.next_due = 9000ms}) == 5000ms);
  // Due already by the client's clock (the server said "later"): check again soon, not at once.
  CHECK(b.next({.next_due = -4ms}) == 1ms);
  CHECK(b.next({.next_due = 0ms}) == 1ms);
}

TEST_CASE("a due job that stays unclaimable backs off from 10 ms, doubling up to the poll",
          "[idle_backoff]") {
  idle_backoff b(1000ms);
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 9; ++i) waits.push_back(b.next({.due_now = true, .next_due = {}}));
  CHECK(waits == std::vector<std::chrono::milliseconds>{10ms, 20ms, 40ms, 80ms, 160ms, 320ms, 640ms,
                                                        1000ms, 1000ms});
  // A scheduled job due before the back-off ends wins.
  CHECK(b.next({.due_now = true, .next_due = 50ms}) == 50ms);
}

TEST_CASE("the back-off starts over once nothing due is blocked any more", "[idle_backoff]") {
  idle_backoff b(1000ms);
  b.next({.due_now = true, .next_due = {}});
  b.next({.due_now = true, .next_due = {}});
  CHECK(b.next({.due_now = true, .next_due = {}}) == 40ms);
  CHECK(b.next({}) == 1000ms);
  CHECK(b.next({.due_now = true, .next_due = {}}) == 10ms);
}

TEST_CASE("a poll interval shorter than the first back-off step caps it", "[idle_backoff]") {
  idle_backoff b(5ms);
  CHECK(b.next({.due_now = true, .next_due = {}}) == 5ms);
  CHECK(b.next({.due_now = true, .next_due = {}}) == 5ms);
  idle_backoff zero(0ms);  // refused by queue_options; still never a zero wait here
  CHECK(zero.next({}) == 1ms);
}

}  // namespace unit_idle_backoff_test
