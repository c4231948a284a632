// Background load for the scenarios that measure under a steady rate (pinned, latency under
// load): a thread per side, and a producer paced by a schedule rather than by sleeps that drift.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "server.hpp"

namespace bench {

/// Runs `body` (a coroutine taking the executor) on a thread and io_context of its own until it
/// returns; a failure is kept in `failure` and sets `stop`, so the other side ends too.
template <class Body>
std::thread on_thread(Body body, std::exception_ptr& failure, std::atomic<bool>& stop) {
  return std::thread([body, &failure, &stop] {
    try {
      run_async(body);
    } catch (...) {
      failure = std::current_exception();
      stop = true;
    }
  });
}

/// Enqueues batches of `batch` bench jobs (enqueue_batch, its own connection) at `rate` jobs
/// per second until `stop`, counting them in `enqueued`. A late batch is sent at once, so the
/// mean rate holds while the server keeps up.
inline asio::awaitable<void> paced_batches(asio::any_io_executor ex, std::string dsn, int rate,
                                           int batch, std::atomic<bool>& stop,
                                           std::atomic<long>& enqueued) {
  auto db = co_await pgqueue::connect(ex, dsn);
  pgqueue::queue q(db, bench_queue);
  const std::vector<std::string> payloads(static_cast<std::size_t>(batch), bench_payload);
  const auto period = std::chrono::nanoseconds(1'000'000'000LL * batch / rate);
  auto next = clock::now();
  while (!stop) {
    next += period;
    if (next > clock::now()) co_await sleep_for(next - clock::now());
    co_await q.enqueue_batch(payloads);
    enqueued += batch;
  }
}

/// Runs a pgqueue::worker over the bench queue (its own connection) with `options`, calling
/// `handler(job)` as each job starts, until `stop` is set; returns once the worker has stopped.
inline asio::awaitable<void> worker_until(asio::any_io_executor ex, std::string dsn,
                                          pgqueue::worker_options options,
                                          std::function<void(const pgqueue::job&)> handler,
                                          std::atomic<bool>& stop) {
  auto db = co_await pgqueue::connect(ex, dsn);
  pgqueue::queue q(db, bench_queue);
  pgqueue::worker w(
      q,
      [&handler](const pgqueue::job& j) -> asio::awaitable<void> {
        handler(j);
        co_return;
      },
      options);
  auto watch = [&]() -> asio::awaitable<void> {
    while (!stop) co_await sleep_for(std::chrono::milliseconds(20));
    w.stop();
  };
  std::vector<asio::awaitable<void>> tasks;
  tasks.push_back(w.run());
  tasks.push_back(watch());
  co_await join_all(std::move(tasks));
}

}  // namespace bench
