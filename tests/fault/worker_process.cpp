// A worker process for the multi-process fault test: one real pgqueue::worker with a short
// lease, whose handler records each run in the run log (fault_runs) before working for the
// job's "ms" milliseconds. SIGTERM or SIGINT stops it gracefully (exit 0); SIGKILL is the fault.
//
// usage: fault_worker_process <conninfo> <queue> <worker id> <lease ms> <concurrency> [workers]
// With `workers` (default 1) the process runs that many workers, each on its own connection,
// with ids <worker id>-1, <worker id>-2, ...
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

#include "fault/run_log.hpp"

namespace {

// The job's work time: {"ms": N} in the payload (0 when absent).
int work_ms(const std::string& payload) {
  auto at = payload.find("\"ms\":");
  return at == std::string::npos ? 0 : std::atoi(payload.c_str() + at + 5);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr,
                 "usage: %s <conninfo> <queue> <worker id> <lease ms> <concurrency> [workers]\n",
                 argv[0]);
    return 2;
  }
  const std::string conninfo = argv[1], queue_name = argv[2];
  const std::chrono::milliseconds lease{std::atoi(argv[4])};
  const int concurrency = std::atoi(argv[5]);
  const int workers = argc == 7 ? std::atoi(argv[6]) : 1;

  asio::io_context io;
  int status = 0;
  auto body = [&](std::string worker_id) -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    try {
      auto db = co_await pgqueue::connect(ex, conninfo);
      pgqueue::queue q{db,
                       queue_name,
                       {.worker_id = worker_id,
                        .lease = lease,
                        .heartbeat_interval = lease / 3,
                        .poll_interval = std::chrono::milliseconds(500)}};
      pgqueue::worker w(
          q,
          [&](pgqueue::lease& l) -> asio::awaitable<void> {
            const auto& j = l.job();
            // Recorded before the work: a run cut short by SIGKILL is still counted.
            co_await db.query(pgq_fault::record_run_sql, {j.id, worker_id, j.attempts});
            asio::steady_timer t(ex, std::chrono::milliseconds(work_ms(j.payload)));
            co_await t.async_wait(asio::use_awaitable);
          },
          {.concurrency = concurrency,
           .janitor_interval = lease / 4,
           .stop_timeout = std::chrono::seconds(5)});
      asio::signal_set signals(ex, SIGTERM, SIGINT);
      signals.async_wait([&](const std::error_code& ec, int) {
        if (!ec) w.stop();
      });
      co_await w.run();
      signals.cancel();
      const auto& s = w.stats();
      std::fprintf(
          stderr,
          "worker %s: claimed %llu, acked %llu, failed %llu, lost %llu, released %llu, "
          "janitor reset %llu\n",
          worker_id.c_str(), static_cast<unsigned long long>(s.claimed),
          static_cast<unsigned long long>(s.acked), static_cast<unsigned long long>(s.failed),
          static_cast<unsigned long long>(s.lost), static_cast<unsigned long long>(s.released),
          static_cast<unsigned long long>(s.janitor_reset));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "worker %s failed: %s\n", worker_id.c_str(), e.what());
      status = 1;
    }
  };
  for (int i = 1; i <= workers; ++i) {
    asio::co_spawn(
        io,
        body(workers == 1 ? std::string(argv[3]) : std::string(argv[3]) + "-" + std::to_string(i)),
        asio::detached);
  }
  io.run();
  return status;
}
