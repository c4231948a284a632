// Fault 5: worker.stop() while other coroutines keep enqueueing (on the worker's connection and
// on connections of their own). Nothing claimed is stranded: handlers still running at
// stop_timeout are cancelled and their jobs released, every job enqueued is done or ready.
#include <system_error>

#include <asio/experimental/awaitable_operators.hpp>
#include <catch2/catch.hpp>

#include "fault/fault_support.hpp"
#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace fault_stop_flood_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("stop() during a flood of enqueues strands no claimed job", "[fault][stop]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_counter runs;
  std::vector<std::int64_t> enqueued;
  pgqueue::worker_stats stats;
  std::int64_t runs_at_stop = 0, enqueued_at_stop = 0, enqueued_after_stop = 0;
  std::int64_t slow_cancelled = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t stop_after = scaled(2000);

  run_async(
      [&]() -> asio::awaitable<void> {
        auto worker_db = co_await f.connect();
        pgqueue::queue wq{worker_db, "q", {.worker_id = "stopping-worker"}};
        int slow_running = 0;
        bool stopped = false;
        pgqueue::worker w(wq,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            runs.record(j.id);
                            if (j.payload.find("slow") == std::string::npos) {
                              co_await pause(1ms);
                              co_return;
                            }
                            // A slow job outlives stop_timeout: stop() cancels it and releases the
                            // job.
                            struct running_guard {
                              int& n;
                              ~running_guard() { --n; }
                            } guard{++slow_running};
                            try {
                              co_await pause(60s);
                            } catch (const std::system_error&) {
                              ++slow_cancelled;
                              throw;
                            }
                          },
                          {.concurrency = 16, .stop_timeout = 300ms});

        auto run_worker = [&]() -> asio::awaitable<void> {
          co_await w.run();
          stopped = true;
          stats = w.stats();
        };
        auto stopper = [&]() -> asio::awaitable<void> {
          auto busy = co_await eventually(
              [&] { return runs.total() >= stop_after && slow_running > 0; }, 60s);
          INFO("handler runs " << runs.total() << ", slow handlers running " << slow_running);
          REQUIRE(busy);
          runs_at_stop = runs.total();
          enqueued_at_stop = static_cast<std::int64_t>(enqueued.size());
          w.stop();
        };
        // Enqueues one job at a time, every 4th round a batch of 10, 1 in 200 slow; keeps going
        // until 200 more jobs went in after the worker stopped.
        auto producer = [&](pgqueue::database db) -> asio::awaitable<void> {
          pgqueue::queue q{db, "q"};
          std::int64_t after = 0;
          for (int n = 1; after < 200; ++n) {
            // (n % 200 == 1 is never a batch round: ten slow jobs at once would fill the slots.)
            std::string payload = n % 200 == 1 ? R"({"slow": true})" : R"({"n": 1})";
            std::vector<std::int64_t> ids;
            if (n % 4 == 0) {
              std::vector<std::string> batch(10, payload);
              ids = co_await q.enqueue_batch(std::move(batch));
            } else {
              ids.push_back(co_await q.enqueue(payload));
            }
            enqueued.insert(enqueued.end(), ids.begin(), ids.end());
            if (stopped) {
              after += static_cast<std::int64_t>(ids.size());
              enqueued_after_stop += static_cast<std::int64_t>(ids.size());
            }
          }
        };
        auto own_1 = co_await f.connect();
        auto own_2 = co_await f.connect();
        using namespace asio::experimental::awaitable_operators;
        co_await (run_worker() && stopper() && producer(worker_db) && producer(own_1) &&
                  producer(own_2));
      },
      120s);

  auto a = account(admin, "worker.stop() during a flood of enqueues", "q", enqueued, runs.runs(),
                   /*ready_allowed=*/true);
  a.report.seconds = seconds_since(start);
  a.report.notes = "stopped after " + std::to_string(runs_at_stop) + " runs with " +
                   std::to_string(enqueued_at_stop) + " enqueued; " +
                   std::to_string(slow_cancelled) + " running handlers cancelled, " +
                   std::to_string(stats.released) + " jobs released; enqueued after stop " +
                   std::to_string(enqueued_after_stop);
  a.report.print();
  check_accounting(a);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs "
                      "WHERE state = 'claimed' AND claimed_by = 'stopping-worker'") == 0);
  CHECK(a.report.done + a.report.ready == a.report.enqueued);
  CHECK(a.report.dead == 0);
  CHECK(a.report.re_run == 0);
  CHECK(stats.acked == static_cast<std::uint64_t>(a.report.done));
  CHECK(stats.lost == 0);
  CHECK(stats.failed == 0);
  // The slow jobs running at stop were cancelled and released: ready again, their attempt given
  // back. Jobs a claim returned after stop() were released without running.
  CHECK(slow_cancelled >= 1);
  CHECK(stats.released >= static_cast<std::uint64_t>(slow_cancelled));
  std::int64_t ran_but_ready = 0, ready_with_attempts = 0;
  for (const auto& [id, j] : a.jobs) {
    if (j.state != "ready") continue;
    if (j.runs > 0) ++ran_but_ready;
    if (j.attempts != 0) ++ready_with_attempts;
  }
  CHECK(ran_but_ready == slow_cancelled);
  CHECK(ready_with_attempts == 0);
  CHECK(enqueued_after_stop >= 600);
}

}  // namespace fault_stop_flood_test
