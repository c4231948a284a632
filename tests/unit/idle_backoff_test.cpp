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

namespace unit_idle_backoff_test {

TEST_CASE("a held queue's claimer wakes for a freed place or a reconnect, not for an enqueue",
          "[idle_backoff]") {
  pgqueue::pg::notification enqueued{.channel = "c", .payload = "mail", .backend_pid = 7};
  CHECK_FALSE(pgqueue::detail::frees_a_place(enqueued));
  pgqueue::pg::notification freed{.channel = "c", .payload = "mail\nfreed", .backend_pid = 7};
  CHECK(pgqueue::detail::frees_a_place(freed));
  pgqueue::pg::notification reconnected{
      .channel = "c", .payload = "", .backend_pid = 0, .reconnected = true};
  CHECK(pgqueue::detail::frees_a_place(reconnected));
  // A queue named "freed" is no such notification (names have no control characters).
  pgqueue::pg::notification named{.channel = "c", .payload = "freed", .backend_pid = 7};
  CHECK_FALSE(pgqueue::detail::frees_a_place(named));
  // Held by a rate limit: the wait is the next token's time, however long the poll.
  pgqueue::detail::idle_backoff b(std::chrono::seconds(60));
  pgqueue::detail::wait_hint token{
      .due_now = false, .next_due = std::chrono::milliseconds(20), .held = true};
  CHECK(b.next(token) == std::chrono::milliseconds(20));
}

}  // namespace unit_idle_backoff_test
