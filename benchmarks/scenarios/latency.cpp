// latency: an idle worker (default options) and a producer on another connection and thread
// that enqueues one job at a time at a steady rate. Each payload carries the steady-clock time
// taken right before enqueue(); the handler notes when it starts. Reported: from that time, and
// from when enqueue() returned (the commit is between the two), to the handler's start.
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
      .count();
}

struct sent_job {
  std::int64_t id, sent_ns, returned_ns;
};

struct latency_samples {
  std::vector<double> from_call, from_return;  // ms
  long missing = 0;                            // enqueued but never handled
};

// Runs the worker on a thread of its own until `stop` is set; notes each handler's start.
void worker_thread(const std::string& dsn, bool async_commit, std::atomic<bool>& stop,
                   std::atomic<long>& handled,
                   std::unordered_map<std::int64_t, std::int64_t>& started,
                   std::exception_ptr& failure) {
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto db = co_await pgqueue::connect(ex, dsn);
      if (async_commit) co_await db.query("SET synchronous_commit = off");
      pgqueue::queue q(db, bench_queue);
      pgqueue::worker w(q, [&](const pgqueue::job& j) -> asio::awaitable<void> {
        started.emplace(j.id, now_ns());
        handled.fetch_add(1);
        co_return;
      });
      auto watch = [&]() -> asio::awaitable<void> {
        while (!stop.load()) co_await sleep_for(std::chrono::milliseconds(5));
        w.stop();
      };
      std::vector<asio::awaitable<void>> tasks;
      tasks.push_back(w.run());
      tasks.push_back(watch());
      co_await join_all(std::move(tasks));
    });
  } catch (...) {
    failure = std::current_exception();
  }
}

latency_samples measure_latency(const options& opt, const std::string& dsn, bool async_commit) {
  const int warmup = 20;
  const int total = opt.latency_samples + warmup;
  std::atomic<bool> stop{false};
  std::atomic<long> handled{0};
  std::unordered_map<std::int64_t, std::int64_t> started;
  std::exception_ptr worker_failure;
  std::thread worker(
      [&] { worker_thread(dsn, async_commit, stop, handled, started, worker_failure); });
  std::vector<sent_job> sent;
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto db = co_await pgqueue::connect(ex, dsn);
      pgqueue::queue q(db, bench_queue);
      co_await sleep_for(std::chrono::milliseconds(300));  // the worker connects and idles
      const auto period = std::chrono::nanoseconds(1'000'000'000 / opt.latency_rate);
      auto next = clock::now();
      for (int i = 0; i < total; ++i) {
        next += period;
        if (next > clock::now()) co_await sleep_for(next - clock::now());
        const auto t = now_ns();
        const std::string payload = "{\"t\": " + std::to_string(t) + "}";
        const auto id = co_await q.enqueue(payload);
        sent.push_back({id, t, now_ns()});
      }
      const auto give_up = clock::now() + std::chrono::seconds(10);
      while (handled.load() < total && clock::now() < give_up) {
        co_await sleep_for(std::chrono::milliseconds(5));
      }
    });
  } catch (...) {
    stop = true;
    worker.join();
    throw;
  }
  stop = true;
  worker.join();
  if (worker_failure) std::rethrow_exception(worker_failure);
  latency_samples out;
  for (std::size_t i = warmup; i < sent.size(); ++i) {
    auto it = started.find(sent[i].id);
    if (it == started.end()) {
      ++out.missing;
      continue;
    }
    out.from_call.push_back(static_cast<double>(it->second - sent[i].sent_ns) / 1e6);
    out.from_return.push_back(static_cast<double>(it->second - sent[i].returned_ns) / 1e6);
  }
  return out;
}

}  // namespace

void run_latency(context& ctx) {
  const std::string dbname = "pgqueue_bench_latency";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  const std::string rate = std::to_string(ctx.opt.latency_rate) + " jobs/s";
  for (bool async_commit : {false, true}) {
    run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
      auto db = co_await fresh_database(ctx.opt, dbname, true);
      db.close();
    });
    say("latency", std::to_string(ctx.opt.latency_samples) + " jobs at " + rate +
                       (async_commit ? ", worker session with synchronous_commit=off" : ""));
    auto s = measure_latency(ctx.opt, dsn, async_commit);
    const std::string note =
        s.missing ? std::to_string(s.missing) + " jobs not handled within 10 s" : "";
    const std::string what =
        async_commit ? "same, worker synchronous_commit=off: " : "idle worker, " + rate + ": ";
    const std::string id = async_commit ? "latency.async_worker" : "latency";
    row a{id + ".from_call", "latency", what + "enqueue() called -> handler"};
    a.lat = summarize(s.from_call);
    a.note = note;
    ctx.rep.add(std::move(a));
    row b{id + ".from_return", "latency", what + "enqueue() returned -> handler"};
    b.lat = summarize(s.from_return);
    b.note = note;
    ctx.rep.add(std::move(b));
  }
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    co_await drop_database(ctx.opt, dbname);
  });
}

}  // namespace bench
