// pg::detail::pool_state: which session an acquire gets, when it opens one or waits, who gets a
// returned or discarded session, idle expiry and closing, driven without a server.
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <pgqueue/pg/detail/pool_state.hpp>

namespace unit_pool_state_test {

using namespace std::chrono_literals;
using state = pgqueue::pg::detail::pool_state<int>;
using kind = state::acquire_step::kind;

const auto t0 = state::clock::time_point{} + 1h;

// Acquires and opens: the session is `id`.
int open_one(state& s, int id) {
  REQUIRE(s.acquire().what == kind::open);
  return id;
}

TEST_CASE("acquires open sessions up to max_size, then wait in line", "[pool_state]") {
  state s(0, 2);
  open_one(s, 1);
  open_one(s, 2);
  auto third = s.acquire();
  CHECK(third.what == kind::wait);
  auto fourth = s.acquire();
  CHECK(fourth.what == kind::wait);
  CHECK(s.size() == 2);
  CHECK(s.waiting() == 2);

  // Returned sessions go to the waiters in the order they asked.
  std::optional<int> none;
  auto h = s.give_back(1, t0, none);
  CHECK(h.waiter == third.waiter);
  CHECK(h.session == 1);
  h = s.give_back(2, t0, none);
  CHECK(h.waiter == fourth.waiter);
  CHECK(s.waiting() == 0);
  CHECK(s.size() == 2);
}

TEST_CASE("the most recently returned idle session is taken first", "[pool_state]") {
  state s(0, 3);
  std::optional<int> none;
  open_one(s, 1);
  open_one(s, 2);
  CHECK(s.give_back(1, t0, none).waiter == 0);
  CHECK(s.give_back(2, t0 + 1s, none).waiter == 0);
  CHECK(s.idle() == 2);
  auto got = s.acquire();
  CHECK(got.what == kind::take);
  CHECK(got.session == 2);
}

TEST_CASE("a discarded session frees its slot, for the first waiter to open one", "[pool_state]") {
  state s(0, 1);
  open_one(s, 1);
  auto w = s.acquire();
  REQUIRE(w.what == kind::wait);
  auto h = s.discard();
  CHECK(h.waiter == w.waiter);
  CHECK_FALSE(h.session);  // it opens a new one in the freed slot
  CHECK(s.size() == 1);
  // Nobody waiting: the slot is simply free.
  CHECK(s.discard().waiter == 0);
  CHECK(s.size() == 0);
  CHECK(s.acquire().what == kind::open);
}

TEST_CASE("a waiter that gives up leaves the line; one handed something already cannot",
          "[pool_state]") {
  state s(0, 1);
  std::optional<int> none;
  open_one(s, 1);
  auto a = s.acquire();
  auto b = s.acquire();
  CHECK(s.leave(a.waiter));
  CHECK(s.waiting() == 1);
  auto h = s.give_back(1, t0, none);
  CHECK(h.waiter == b.waiter);
  CHECK_FALSE(s.leave(b.waiter));  // handed over: the waiter takes (or gives back) the session
}

TEST_CASE("idle sessions beyond min_size expire, oldest first", "[pool_state]") {
  state s(1, 3);
  std::optional<int> none;
  for (int i = 1; i <= 3; ++i) open_one(s, i);
  s.give_back(1, t0, none);
  s.give_back(2, t0 + 10s, none);
  s.give_back(3, t0 + 20s, none);
  CHECK(s.expire(t0 + 30s, 15s) == std::vector<int>{1, 2});  // 3 is recent; 1 would stay anyway
  CHECK(s.size() == 1);
  CHECK(s.expire(t0 + 1h, 15s).empty());  // min_size kept however idle
  CHECK(s.idle() == 1);
}

TEST_CASE("closing returns the idle sessions and the waiters, and refuses from then on",
          "[pool_state]") {
  state s(0, 2);
  std::optional<int> to_close;
  open_one(s, 1);
  open_one(s, 2);
  s.give_back(1, t0, to_close);
  auto w = s.acquire();
  CHECK(w.what == kind::take);  // the idle one
  auto waiting = s.acquire();
  REQUIRE(waiting.what == kind::wait);
  auto [idle, line] = s.close();
  CHECK(idle.empty());
  CHECK(line == std::vector<std::uint64_t>{waiting.waiter});
  CHECK(s.acquire().what == kind::closed);
  // Sessions in use are closed when they come back.
  CHECK(s.give_back(1, t0, to_close).waiter == 0);
  CHECK(to_close == 1);
  s.discard();
  CHECK(s.size() == 0);
}

}  // namespace unit_pool_state_test
