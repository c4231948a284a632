// Fault 4: a handler runs past its lease while its heartbeats cannot reach the server (its
// connection is stuck behind a statement waiting on a lock). The janitor takes the job back,
// another worker runs it, and the first holder's ack is refused with errc::lease_lost.
#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace fault_stalled_lease_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE(
    "heartbeats stalled past the lease: the job runs again elsewhere and the first "
    "holder's ack is refused",
    "[fault][lease]") {
  queue_fixture f;
  session admin(f.db.dsn());
  session blocker(f.db.dsn());
  auto ids = fill(admin, "q", 1);
  constexpr std::int64_t lock_key = 4242;
  run_counter runs;
  std::optional<std::error_code> first_ack;  // what the first holder's ack threw
  pgqueue::worker_stats holder_stats, rescuer_stats;
  bool lost_before_ack = false;
  const auto start = std::chrono::steady_clock::now();

  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto holder_db = co_await f.connect();
    auto rescuer_db = co_await f.connect();
    pgqueue::queue holder_q{
        holder_db, "q", {.worker_id = "holder", .lease = 1000ms, .heartbeat_interval = 250ms}};
    pgqueue::queue rescuer_q{
        rescuer_db, "q", {.worker_id = "rescuer", .lease = 1000ms, .poll_interval = 200ms}};
    bool may_finish = false, holder_finished = false;
    pgqueue::worker holder(holder_q,
                           [&](pgqueue::lease& l) -> asio::awaitable<void> {
                             runs.record(l.job().id);
                             // Runs on well past its lease: until the job was done by someone else.
                             co_await eventually([&] { return may_finish; }, 30s);
                             lost_before_ack = l.lost();
                             try {
                               co_await l.ack();
                             } catch (const pgqueue::error& e) {
                               first_ack = e.code();
                             }
                             holder_finished = true;
                           },
                           {.concurrency = 1, .janitor_interval = 0ms});
    pgqueue::worker rescuer(rescuer_q,
                            [&](const pgqueue::job& j) -> asio::awaitable<void> {
                              runs.record(j.id);
                              co_return;
                            },
                            {.concurrency = 1, .janitor_interval = 100ms});

    bool holder_ended = false, rescuer_ended = false;
    auto run_holder = [&]() -> asio::awaitable<void> {
      co_await holder.run();
      holder_ended = true;
    };
    auto run_rescuer = [&]() -> asio::awaitable<void> {
      co_await rescuer.run();
      rescuer_ended = true;
    };
    // Both stop however the scenario ends, so a failed check does not hang the test.
    struct stop_both {
      pgqueue::worker& a;
      pgqueue::worker& b;
      ~stop_both() {
        a.stop();
        b.stop();
      }
    };
    auto scenario = [&]() -> asio::awaitable<void> {
      stop_both guard{holder, rescuer};
      auto held = co_await eventually([&] { return runs.total() == 1; });
      REQUIRE(held);
      // Stall the holder's connection: a statement waiting on a lock the test holds. Its
      // heartbeats are pipelined behind it and reach the server only when it is released.
      blocker.query("SELECT pg_advisory_lock($1)", {std::to_string(lock_key)});
      auto stall = [&]() -> asio::awaitable<void> {
        co_await holder_db.query("SELECT pg_advisory_xact_lock($1)", {lock_key});
      };
      asio::co_spawn(ex, stall(), asio::detached);
      auto waiting = co_await eventually([&] {
        return admin.integer(
                   "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                   "AND NOT granted AND pid = $1",
                   {std::to_string(holder_db.backend_pid())}) == 1;
      });
      REQUIRE(waiting);
      // The rescuer's janitor takes the job back once the lease ran out; the rescuer runs it.
      asio::co_spawn(ex, run_rescuer(), asio::detached);
      auto rescued =
          co_await eventually([&] { return read_job(admin, ids[0]).state == "done"; }, 15s);
      REQUIRE(rescued);
      blocker.query("SELECT pg_advisory_unlock($1)", {std::to_string(lock_key)});
      may_finish = true;
      auto finished = co_await eventually([&] { return holder_finished; });
      REQUIRE(finished);
    };
    asio::co_spawn(ex, run_holder(), asio::detached);
    co_await scenario();
    auto ended = co_await eventually([&] { return holder_ended && rescuer_ended; });
    REQUIRE(ended);
    holder_stats = holder.stats();
    rescuer_stats = rescuer.stats();
  });

  auto a = account(admin, "heartbeats stalled past a 1 s lease", "q", ids, runs.runs());
  a.report.seconds = seconds_since(start);
  a.report.notes =
      "first holder's ack: " + (first_ack ? first_ack->message() : std::string("accepted"));
  a.report.print();
  check_accounting(a);
  REQUIRE(first_ack);
  CHECK(*first_ack == pgqueue::errc::lease_lost);
  auto j = read_job(admin, ids[0]);
  CHECK(j.state == "done");
  CHECK(j.attempts == 2);
  CHECK(j.claimed_by == "rescuer");
  CHECK(j.last_error.value_or("").rfind("lease expired on attempt 1 of 5 (worker holder,", 0) == 0);
  CHECK(a.report.re_run == 1);
  CHECK(a.report.done == 1);
  CHECK(holder_stats.acked == 0);
  CHECK(rescuer_stats.acked == 1);
  CHECK(rescuer_stats.janitor_reset == 1);
  INFO("lease known lost before the ack: " << lost_before_ack);
}

}  // namespace fault_stalled_lease_test
