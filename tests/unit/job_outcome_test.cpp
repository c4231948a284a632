// detail::next_step and flush_acks_now: what the worker does with a job once its handler ended,
// for every combination, without a server.
#include <catch2/catch.hpp>
#include <pgqueue/detail/job_outcome.hpp>

namespace unit_job_outcome_test {

using pgqueue::detail::flush_acks_now;
using pgqueue::detail::job_step;
using pgqueue::detail::next_step;

TEST_CASE("a handler that ended its lease itself is only counted", "[job_outcome]") {
  for (bool failed : {false, true}) {
    for (bool lost : {false, true}) {
      CHECK(next_step(true, failed, lost, true, true) == job_step::counted);
    }
  }
}

TEST_CASE(
    "a failed handler: forgotten when the lease is lost, given back when the stop forced "
    "it, nacked otherwise",
    "[job_outcome]") {
  CHECK(next_step(false, true, true, false, true) == job_step::forgotten);
  CHECK(next_step(false, true, true, true, true) == job_step::forgotten);
  CHECK(next_step(false, true, false, true, true) == job_step::given_back);
  CHECK(next_step(false, true, false, false, true) == job_step::nacked);
  CHECK(next_step(false, true, false, false, false) == job_step::nacked);
}

TEST_CASE("a handler that returned is acked, lost lease or forced stop notwithstanding",
          "[job_outcome]") {
  for (bool lost : {false, true}) {
    for (bool forced : {false, true}) {
      CHECK(next_step(false, false, lost, forced, true) == job_step::coalesced);
      CHECK(next_step(false, false, lost, forced, false) == job_step::acked);
    }
  }
}

TEST_CASE("coalesced acks ride with the next claim unless the worker is idle or stopping",
          "[job_outcome]") {
  CHECK_FALSE(flush_acks_now(false, false));
  CHECK(flush_acks_now(true, false));
  CHECK(flush_acks_now(false, true));
}

}  // namespace unit_job_outcome_test
