// 02: a worker, and stopping it gracefully.
//
// pgqueue::worker claims jobs and runs a handler for each, several at a time: it acks a job when
// the handler returns and nacks it when the handler throws. worker.stop() ends it cleanly: no
// more claims, running handlers get `stop_timeout` to finish, the ones still running after that
// are cancelled and their jobs released (ready again at once, for the next worker).
//
// SIGINT (Ctrl-C) and SIGTERM stop the worker here. So that the example also finishes on its
// own, it stops as well after `--jobs N` handled jobs (default 40; 0: no limit) or after
// `--seconds S` (default: no limit).
//
//   02_worker_graceful_shutdown "<conninfo>" [--jobs N] [--seconds S]
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  int stop_after_jobs = 40;
  int stop_after_seconds = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--jobs")
      stop_after_jobs = std::stoi(argv[++i]);
    else if (std::string_view(argv[i]) == "--seconds")
      stop_after_seconds = std::stoi(argv[++i]);
  }

  return example::run(argc, argv, [&](std::string dsn) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto db = co_await pgqueue::connect(ex, dsn);
    co_await pgqueue::migrate(db);
    pgqueue::queue q{db, example::fresh_queue_name("thumbnails")};

    // 60 jobs of 100 ms each, except the fifth, which hangs for a minute: at stop() it is
    // still running, so it shows what happens to a handler that does not finish in time.
    for (int n = 1; n <= 60; ++n) {
      const char* payload = n == 5 ? R"({"ms": 60000})" : R"({"ms": 100})";
      co_await q.enqueue(payload);
    }
    std::printf("enqueued 60 jobs into '%s'\n", q.name().c_str());

    int handled = 0;
    pgqueue::worker worker(
        q,
        // The handler gets the job (or a pgqueue::lease&, to ack/nack it itself). Whatever it
        // co_awaits is cancelled when stop_timeout runs out, as the hanging job will show.
        [&](const pgqueue::job& j) -> asio::awaitable<void> {
          // The payload is JSON text as PostgreSQL prints jsonb: {"ms": 100}
          auto ms = std::stoi(j.payload.substr(j.payload.find(':') + 1));
          asio::steady_timer work(ex, std::chrono::milliseconds(ms));
          co_await work.async_wait(asio::use_awaitable);
          if (++handled == stop_after_jobs) {
            std::printf("handled %d jobs: stopping\n", handled);
            worker.stop();
          }
        },
        {.concurrency = 4, .stop_timeout = 500ms});

    // Stop on SIGINT/SIGTERM. stop() may be called from any thread (it takes effect on the
    // worker's strand). Cancelling run() stops it as well: `co_await (worker.run() ||
    // signals.async_wait(asio::use_awaitable))` stops gracefully, like stop().
    asio::signal_set signals(ex, SIGINT, SIGTERM);
    signals.async_wait([&](std::error_code ec, int signal) {
      if (ec) return;  // cancelled below, once the worker has finished
      std::printf("%s: stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
      worker.stop();
    });
    asio::steady_timer deadline(ex);
    if (stop_after_seconds > 0) {
      deadline.expires_after(std::chrono::seconds(stop_after_seconds));
      deadline.async_wait([&](std::error_code ec) {
        if (ec) return;
        std::printf("%d s passed: stopping\n", stop_after_seconds);
        worker.stop();
      });
    }

    auto start = std::chrono::steady_clock::now();
    co_await worker.run();  // returns after stop(), once the worker has shut down
    signals.cancel();
    deadline.cancel();

    const auto& s = worker.stats();
    std::printf("worker finished after %.1f s\n", example::seconds_since(start));
    std::cout << "stats: claimed " << s.claimed << ", acked " << s.acked << ", failed " << s.failed
              << ", released " << s.released << ", lost " << s.lost << "\n";

    // Nothing is lost by stopping: unfinished jobs are ready for the next worker.
    auto r = co_await db.query(
        "SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND state = 'ready'", {q.name()});
    std::printf("jobs left ready for the next worker: %lld\n",
                static_cast<long long>(r.get<std::int64_t>(0, 0)));
  });
}
