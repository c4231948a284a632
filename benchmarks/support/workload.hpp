// Draining pre-filled jobs with a pgqueue::worker and a no-op handler (drain and scale).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>

#include <asio/co_spawn.hpp>
#include <pgqueue/pgqueue.hpp>

#include "server.hpp"

namespace bench {

struct drain_result {
  double rate = 0;          ///< jobs acked per second
  std::uint64_t acked = 0;  ///< within the measured time
  double seconds = 0;
  bool finished = false;  ///< every job was acked (else the time limit ended the run)
};

/// Runs one worker on its own connection to `dsn` over the bench queue until `jobs` are acked
/// or `max_seconds` passed; the clock starts when run() starts (after connecting).
inline asio::awaitable<drain_result> drain(const std::string& dsn, pgqueue::worker_options wo,
                                           long jobs, double max_seconds) {
  auto ex = co_await asio::this_coro::executor;
  auto db = co_await pgqueue::connect(ex, dsn);
  pgqueue::queue q(db, bench_queue);
  pgqueue::worker w(
      q, [](const pgqueue::job&) -> asio::awaitable<void> { co_return; }, wo);
  bool ended = false;
  std::exception_ptr failure;
  const auto start = clock::now();
  asio::co_spawn(ex, w.run(), [&](std::exception_ptr e) {
    failure = e;
    ended = true;
  });
  while (!ended && w.stats().acked < static_cast<std::uint64_t>(jobs) &&
         seconds_since(start) < max_seconds) {
    co_await sleep_for(std::chrono::milliseconds(1));
  }
  drain_result r;
  r.seconds = seconds_since(start);
  r.acked = w.stats().acked;
  r.finished = r.acked >= static_cast<std::uint64_t>(jobs);
  r.rate = static_cast<double>(r.acked) / r.seconds;
  w.stop();
  while (!ended) co_await sleep_for(std::chrono::milliseconds(1));
  if (failure) std::rethrow_exception(failure);
  co_return r;
}

}  // namespace bench
