// The queue layer on an io_context run by 4 threads (built under ThreadSanitizer in CI): a
// worker on its own strand drains jobs 16 at a time while producers enqueue concurrently from
// the io_context's other threads through one shared queue handle; a worker awaited from the bare
// io_context (1 and 3 sessions) is stopped from a thread outside it.
#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include <asio/strand.hpp>
#include <asio/use_future.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_threads_test {

using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("a worker drains jobs enqueued from other threads on a 4-thread io_context",
          "[queue][threads]") {
  scratch_database db;
  constexpr int producers = 4, per_producer = 100, total = producers * per_producer;
  asio::io_context io(4);
  std::atomic<int> handled{0};
  std::atomic<int> enqueued{0};

  // The application's coroutine runs on a strand here (run() makes its own strand of it); the
  // connections make their own strands, so they get the plain io_context executor.
  auto worker_strand = asio::make_strand(io);
  auto worker_body = [&]() -> asio::awaitable<pgqueue::worker_stats> {
    auto conn = co_await pgqueue::connect(io.get_executor(), db.dsn());
    pgqueue::queue q(conn, "mt", {.worker_id = "mt-worker", .poll_interval = 200ms});
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](const pgqueue::job&) -> asio::awaitable<void> {
                        // Handlers run on the worker's strand, where stop() may be called.
                        if (++handled == total) self->stop();
                        co_return;
                      },
                      {.concurrency = 16, .janitor_interval = 100ms});
    self = &w;
    co_await w.run();
    co_return w.stats();
  };
  auto worker_done = asio::co_spawn(worker_strand, worker_body(), asio::use_future);

  // Producers: coroutines on the bare io_context (so on any of its threads), sharing one
  // connection and one queue handle, whose wake-up bookkeeping they all touch.
  // (co_spawn needs a default-constructible result, hence the optional.)
  auto shared_queue = [&]() -> asio::awaitable<std::optional<pgqueue::queue>> {
    auto conn = co_await pgqueue::connect(io.get_executor(), db.dsn());
    co_return std::optional<pgqueue::queue>(std::in_place, conn, "mt");
  };
  auto q = asio::co_spawn(io, shared_queue(), asio::use_future);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run_for(60s); });
  // Producers start once the shared handle exists (from this thread, as an application would).
  auto producer_queue = q.get();
  auto produce = [&](int p) -> asio::awaitable<void> {
    for (int i = 0; i < per_producer; ++i) {
      const std::string payload =
          "{\"p\": " + std::to_string(p) + ", \"i\": " + std::to_string(i) + "}";
      co_await producer_queue->enqueue(payload);
      ++enqueued;
    }
  };
  std::vector<std::future<void>> produced;
  for (int p = 0; p < producers; ++p)
    produced.push_back(asio::co_spawn(io, produce(p), asio::use_future));
  for (auto& f : produced) f.get();
  auto stats = worker_done.get();
  // Dropping the last handle closes the producers' connection; the threads then run out of
  // work and return (nothing left behind on the io_context).
  producer_queue.reset();
  for (auto& t : threads) t.join();
  CHECK(std::chrono::steady_clock::now() - start < 60s);

  CHECK(enqueued == total);
  CHECK(handled == total);
  CHECK(stats.acked == static_cast<std::uint64_t>(total));
  session s(db.dsn());
  CHECK(count_jobs(s, "done", "mt") == total);
  CHECK(count_jobs(s, "ready", "mt") == 0);
  CHECK(count_jobs(s, "claimed", "mt") == 0);
}

TEST_CASE(
    "a worker on a 4-thread io_context (no strand of the caller's) is stopped from another "
    "thread",
    "[queue][threads]") {
  scratch_database db;
  session admin(db.dsn());
  constexpr int total = 400;
  for (int connections : {1, 3}) {
    const std::string name = "mt" + std::to_string(connections);
    admin.query(
        "SELECT pgqueue.enqueue_batch($1, array_agg(jsonb_build_object('i', g))) "
        "FROM generate_series(1, $2) g",
        {name, std::to_string(total)});
    asio::io_context io(4);
    auto open = [&]() -> asio::awaitable<std::optional<pgqueue::queue>> {
      auto conn = co_await pgqueue::connect(io.get_executor(), db.dsn());
      co_return std::optional<pgqueue::queue>(std::in_place, conn, name);
    };
    auto q = asio::co_spawn(io, open(), asio::use_future);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run_for(60s); });
    auto queue = q.get();
    std::atomic<int> handled{0};
    std::promise<void> all_handled;
    // Plain (non-atomic) state touched by every handler: the worker's strand orders them,
    // lanes included, which TSan checks.
    int unsynchronised = 0;
    std::optional<pgqueue::worker> w;
    w.emplace(
        *queue,
        [&](const pgqueue::job&) -> asio::awaitable<void> {
          ++unsynchronised;
          co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
          if (++handled == total) all_handled.set_value();
        },
        pgqueue::worker_options{
            .concurrency = 12, .connections = connections, .janitor_interval = 5ms});
    // run() awaited from the bare io_context: it makes its own strand.
    auto run = [&]() -> asio::awaitable<void> { co_await w->run(); };
    auto done = asio::co_spawn(io, run(), asio::use_future);
    REQUIRE(all_handled.get_future().wait_for(60s) == std::future_status::ready);
    w->stop();  // from this thread, while the io_context's threads run the worker
    REQUIRE(done.wait_for(60s) == std::future_status::ready);
    done.get();
    const auto stats = w->stats();
    w.reset();  // at once: nothing it started still runs
    queue.reset();
    for (auto& t : threads) t.join();
    INFO(connections << " connections");
    CHECK(unsynchronised == total);
    CHECK(stats.acked == static_cast<std::uint64_t>(total));
    CHECK(count_jobs(admin, "done", name) == total);
    CHECK(count_jobs(admin, "claimed", name) == 0);
  }
}

}  // namespace queue_threads_test
