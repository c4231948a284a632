// The demo behind scripts/demo: a producer and a worker pool in one program. It enqueues a few
// thousand jobs (some fail on purpose, so retries and dead jobs show), prints the queue's depth
// per state while they drain, then a summary.
//
//   demo "<conninfo>" [jobs]
#include <cstdio>
#include <iostream>
#include <string>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct counts {
  long ready = 0, claimed = 0, done = 0, dead = 0;
};

asio::awaitable<counts> depth(pgqueue::database& db, const std::string& queue) {
  auto r = co_await db.query("SELECT state, count FROM pgqueue.depth WHERE queue = $1", {queue});
  counts c;
  for (int i = 0; i < r.rows(); ++i) {
    auto state = r.get<std::string>(i, 0);
    auto n = r.get<long>(i, 1);
    if (state == "ready") c.ready = n;
    if (state == "claimed") c.claimed = n;
    if (state == "done") c.done = n;
    if (state == "dead") c.dead = n;
  }
  co_return c;
}

asio::awaitable<void> demo(std::string dsn, int jobs) {
  auto ex = co_await asio::this_coro::executor;
  auto producer_db = co_await pgqueue::connect(ex, dsn);
  co_await pgqueue::migrate(producer_db);
  auto worker_db = co_await pgqueue::connect(ex, dsn);
  auto monitor_db = co_await pgqueue::connect(ex, dsn);

  const std::string name = "demo-" + std::to_string(std::time(nullptr));
  // Fast retries so the demo shows them within seconds.
  co_await producer_db.query("SELECT pgqueue.set_retry_backoff($1, '20 ms', '100 ms')", {name});
  pgqueue::queue producer{producer_db, name};
  pgqueue::queue consumer{worker_db, name, {.worker_id = "demo-worker"}};

  // Every 25th job fails once (then succeeds on retry); every 500th always fails and ends dead
  // after its 3 attempts.
  std::printf("enqueueing %d jobs into queue '%s' (batches of 500)\n", jobs, name.c_str());
  const auto start = clock_type::now();
  for (int first = 0; first < jobs; first += 500) {
    std::vector<std::string> batch;
    for (int i = first; i < std::min(jobs, first + 500); ++i) {
      int fail = i % 500 == 7 ? 99 : (i % 25 == 3 ? 1 : 0);
      batch.push_back("{\"n\":" + std::to_string(i) + ",\"fail_attempts\":" +
                      std::to_string(fail) + "}");
    }
    co_await producer.enqueue_batch(batch, {.max_attempts = 3});
  }

  long retries = 0;
  pgqueue::worker pool(
      consumer,
      [&](const pgqueue::job& j) -> asio::awaitable<void> {
        asio::steady_timer work(ex, 1ms);  // pretend to do something
        co_await work.async_wait(asio::use_awaitable);
        auto at = j.payload.find("\"fail_attempts\": ");
        int fail = std::stoi(j.payload.substr(at + 17));
        if (j.attempts <= fail) {
          if (j.attempts < j.max_attempts) ++retries;
          throw std::runtime_error("simulated failure on attempt " + std::to_string(j.attempts));
        }
      },
      {.concurrency = 32});

  // The live view: depth per state until every job is done or dead.
  auto monitor = [&]() -> asio::awaitable<void> {
    std::printf("%8s %8s %8s %8s %8s\n", "time", "ready", "claimed", "done", "dead");
    for (;;) {
      auto c = co_await depth(monitor_db, name);
      auto t = std::chrono::duration<double>(clock_type::now() - start).count();
      std::printf("%7.2fs %8ld %8ld %8ld %8ld\n", t, c.ready, c.claimed, c.done, c.dead);
      std::fflush(stdout);
      if (c.done + c.dead == jobs) break;
      asio::steady_timer tick(ex, 250ms);
      co_await tick.async_wait(asio::use_awaitable);
    }
    pool.stop();
  };
  using namespace asio::experimental::awaitable_operators;
  co_await (pool.run() && monitor());

  auto seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  auto c = co_await depth(monitor_db, name);
  std::printf("\nsummary: %d jobs in %.2f s (%.0f jobs/s), %ld retries, %ld done, %ld dead\n",
              jobs, seconds, jobs / seconds, retries, c.done, c.dead);
  auto dead = co_await monitor_db.query(
      "SELECT id, attempts, last_error FROM pgqueue.jobs WHERE queue = $1 AND state = 'dead' "
      "ORDER BY id LIMIT 3",
      {name});
  for (int i = 0; i < dead.rows(); ++i) {
    std::printf("dead job %lld after %d attempts: %s\n",
                static_cast<long long>(dead.get<std::int64_t>(i, 0)), dead.get<int>(i, 1),
                dead.get<std::string>(i, 2).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: demo \"<conninfo>\" [jobs]\n";
    return 2;
  }
  int jobs = argc > 2 ? std::stoi(argv[2]) : 5000;
  asio::io_context io;
  std::exception_ptr failure;
  asio::co_spawn(io, demo(argv[1], jobs), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "demo failed: " << e.what() << "\n";
      return 1;
    }
  }
  return 0;
}
