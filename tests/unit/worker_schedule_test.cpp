// detail::worker_schedule: the worker's claim step, the stop a request or a cancellation of
// run() asks for, and the shutdown's steps, driven through whole stops without a server.
#include <catch2/catch.hpp>
#include <pgqueue/detail/worker_schedule.hpp>
#include <vector>

namespace unit_worker_schedule_test {

using namespace pgqueue::detail;
using ct = asio::cancellation_type;

TEST_CASE("a cancellation of run(): partial or total stops gracefully, terminal alone now",
          "[worker_schedule]") {
  CHECK(stop_for(ct::none) == stop_kind::none);
  CHECK(stop_for(ct::partial) == stop_kind::graceful);
  CHECK(stop_for(ct::total) == stop_kind::graceful);
  CHECK(stop_for(ct::terminal | ct::partial) == stop_kind::graceful);  // what || emits
  CHECK(stop_for(ct::terminal | ct::total) == stop_kind::graceful);
  CHECK(stop_for(ct::terminal) == stop_kind::now);
}

TEST_CASE("a later stop request only makes the stop more urgent", "[worker_schedule]") {
  CHECK(merged(stop_kind::none, stop_kind::graceful) == stop_kind::graceful);
  CHECK(merged(stop_kind::graceful, stop_kind::now) == stop_kind::now);
  CHECK(merged(stop_kind::now, stop_kind::graceful) == stop_kind::now);
  CHECK(merged(stop_kind::graceful, stop_kind::graceful) == stop_kind::graceful);
}

TEST_CASE("the claim loop claims for its free slots, a batch at most", "[worker_schedule]") {
  auto step = next_claim(false, 8, 3, 4);
  CHECK(step.what == claim_step::kind::claim);
  CHECK(step.want == 4);
  step = next_claim(false, 8, 6, 4);
  CHECK(step.what == claim_step::kind::claim);
  CHECK(step.want == 2);
  CHECK(next_claim(false, 8, 8, 4).what == claim_step::kind::wait_for_slot);
  CHECK(next_claim(true, 8, 0, 4).what == claim_step::kind::stop);
  CHECK(next_claim(true, 8, 8, 4).what == claim_step::kind::stop);
}

TEST_CASE("a failed claim is repeated only after a drop being repaired, and not once stopping",
          "[worker_schedule]") {
  CHECK(claim_again_after_failure(false, true));
  CHECK_FALSE(claim_again_after_failure(false, false));
  CHECK_FALSE(claim_again_after_failure(true, true));
}

TEST_CASE(
    "serialization failures, deadlocks and lock or statement timeouts are refusals of "
    "one statement; other errors are not",
    "[worker_schedule]") {
  for (const char* state : {"40001", "40P01", "55P03", "57014"}) {
    INFO(state);
    CHECK(transient_refusal(state));
  }
  for (const char* state : {"", "22023", "42501", "23505", "53200", "57P01", "25006", "40003"}) {
    INFO(state);
    CHECK_FALSE(transient_refusal(state));
  }
}

TEST_CASE("a request a drop failed goes out again at once unless no new session came since",
          "[worker_schedule]") {
  using std::chrono::milliseconds;
  repeat_pacing pacing;
  // Dropped on the first session: at once (the repeat waits for the new session).
  CHECK(pacing.after_drop(0) == milliseconds(0));
  // The repeat ran on the new session, which dropped too (backends being killed): at once.
  CHECK(pacing.after_drop(1) == milliseconds(0));
  CHECK(pacing.after_drop(2) == milliseconds(0));
  // Failed again with no new session (not re-established within reconnect_wait, or
  // reconnect_wait zero): paced, as long as that lasts.
  CHECK(pacing.after_drop(2) == repeat_pacing::pause);
  CHECK(pacing.after_drop(2) == repeat_pacing::pause);
  CHECK(pacing.after_drop(3) == milliseconds(0));
  // An answer in between: a drop of the same session later is a new one.
  pacing.answered();
  CHECK(pacing.after_drop(3) == milliseconds(0));
  CHECK(pacing.after_drop(3) == repeat_pacing::pause);
}

// Drives a shutdown: `events` says what happened while each wait lasted.
struct shutdown_script {
  drain_state state;
  std::vector<drain_step> steps;

  void run(const std::vector<void (*)(drain_state&)>& events) {
    std::size_t next = 0;
    for (int guard = 0; guard < 20; ++guard) {
      const auto step = next_drain_step(state);
      steps.push_back(step);
      if (step == drain_step::done) return;
      if (step == drain_step::cancel_handlers) {
        state.cancelled = true;
        continue;
      }
      if (next < events.size()) events[next++](state);
    }
    FAIL("the shutdown did not end");
  }
};

TEST_CASE("a graceful stop waits for its handlers, then for their acks", "[worker_schedule]") {
  shutdown_script s{{2, false, false, false, false, true}, {}};
  s.run({[](drain_state& d) { d.in_flight = 1; },
         [](drain_state& d) {
           d.in_flight = 0;
           d.ack_in_flight = true;
         },
         [](drain_state& d) { d.ack_in_flight = false; },
         [](drain_state& d) { d.janitor_running = false; }});
  CHECK(s.steps == std::vector{drain_step::wait_for_handlers, drain_step::wait_for_handlers,
                               drain_step::wait_for_rest, drain_step::wait_for_rest,
                               drain_step::done});
}

TEST_CASE("stop_timeout passing cancels the handlers, once, and waits until they end",
          "[worker_schedule]") {
  shutdown_script s{{1, false, false, false, false, false}, {}};
  s.run({[](drain_state& d) { d.past_deadline = true; }, [](drain_state& d) { d.in_flight = 0; }});
  CHECK(s.steps == std::vector{drain_step::wait_for_handlers, drain_step::cancel_handlers,
                               drain_step::wait_for_rest, drain_step::done});
}

TEST_CASE("a stop now cancels at once, and a stop with nothing running ends at once",
          "[worker_schedule]") {
  shutdown_script now{{3, true, false, false, false, false}, {}};
  now.run({[](drain_state& d) { d.in_flight = 0; }});
  CHECK(now.steps ==
        std::vector{drain_step::cancel_handlers, drain_step::wait_for_rest, drain_step::done});
  shutdown_script idle{{}, {}};
  idle.run({});
  CHECK(idle.steps == std::vector{drain_step::done});
}

}  // namespace unit_worker_schedule_test
