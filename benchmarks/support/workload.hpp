// Draining pre-filled jobs with pgqueue::worker and a no-op handler (drain and scale).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <pgqueue/pgqueue.hpp>

#include "server.hpp"

namespace bench {

struct drain_result {
  double rate = 0;          ///< jobs acked per second
  std::uint64_t acked = 0;  ///< within the measured time
  double seconds = 0;
  bool finished = false;         ///< every job was acked (else the time limit ended the run)
  double client_us_per_job = 0;  ///< this process's CPU time per acked job, microseconds
};

struct drain_setup {
  pgqueue::worker_options worker{};
  int workers = 1;            ///< each on a connection of its own
  std::string session_sql{};  ///< run on each worker's connection first (what-if settings)
};

/// Runs the workers over the bench queue until `jobs` are acked or `max_seconds` passed; the
/// clock starts when they start (after connecting).
inline asio::awaitable<drain_result> drain(const std::string& dsn, const drain_setup& setup,
                                           long jobs, double max_seconds) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::unique_ptr<pgqueue::worker>> workers;
  for (int i = 0; i < setup.workers; ++i) {
    auto db = co_await pgqueue::connect(ex, dsn);
    if (!setup.session_sql.empty()) co_await db.execute_script(setup.session_sql);
    workers.push_back(std::make_unique<pgqueue::worker>(
        pgqueue::queue(db, bench_queue),
        [](const pgqueue::job&) -> asio::awaitable<void> { co_return; }, setup.worker));
  }
  auto acked = [&] {
    std::uint64_t n = 0;
    for (auto& w : workers) n += w->stats().acked;
    return n;
  };
  int running = 0;
  std::exception_ptr failure;
  const auto start = clock::now();
  const double cpu_start = process_cpu_seconds();
  for (auto& w : workers) {
    ++running;
    asio::co_spawn(ex, w->run(), [&](std::exception_ptr e) {
      if (e && !failure) failure = e;
      --running;
    });
  }
  const auto goal = static_cast<std::uint64_t>(jobs);
  while (running == setup.workers && acked() < goal && seconds_since(start) < max_seconds) {
    co_await sleep_for(std::chrono::milliseconds(1));
  }
  drain_result r;
  r.seconds = seconds_since(start);
  r.acked = acked();
  r.finished = r.acked >= goal;
  r.rate = static_cast<double>(r.acked) / r.seconds;
  if (r.acked > 0) {
    r.client_us_per_job = (process_cpu_seconds() - cpu_start) * 1e6 / static_cast<double>(r.acked);
  }
  for (auto& w : workers) w->stop();
  while (running > 0) co_await sleep_for(std::chrono::milliseconds(1));
  if (failure) std::rethrow_exception(failure);
  co_return r;
}

}  // namespace bench
