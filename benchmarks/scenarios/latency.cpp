// latency: an idle worker (default options) and a producer on another connection and thread
// that enqueues one job at a time at a steady rate. Each payload carries the steady-clock time
// taken right before enqueue(); the handler notes when it starts. Reported: from that time, and
// from when enqueue() returned (the commit is between the two), to the handler's start. Then
// the same under load: the worker's peak rate is measured by draining pre-filled jobs, and a
// third connection enqueues batches of 10 (then, for comparison, of 100) so that the worker
// drains at half that rate while the timed jobs go in between.
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../support/load.hpp"
#include "../support/peers.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

struct sent_job {
  std::int64_t id, sent_ns, returned_ns;
};

struct latency_samples {
  std::vector<double> from_call, from_return;  // ms
  long missing = 0;                            // enqueued but never handled
  double drained_per_s = 0;                    // every job the worker handled, per second
};

// Runs the worker on a thread of its own until `stop` is set; notes when the handler of each
// timed job (its payload starts with {"t") starts, and counts every job in `handled`.
void worker_thread(const std::string& dsn, bool async_commit, std::atomic<bool>& stop,
                   std::atomic<long>& timed, std::atomic<long>& handled,
                   std::unordered_map<std::int64_t, std::int64_t>& started,
                   std::exception_ptr& failure) {
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto db = co_await pgqueue::connect(ex, dsn);
      if (async_commit) co_await db.query("SET synchronous_commit = off");
      pgqueue::queue q(db, bench_queue);
      pgqueue::worker w(q, [&](const pgqueue::job& j) -> asio::awaitable<void> {
        if (j.payload.rfind("{\"t\"", 0) == 0) {
          started.emplace(j.id, now_ns());
          timed.fetch_add(1);
        }
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

// With `load` > 0 jobs/s, batches of `load_batch` go in on another connection meanwhile.
latency_samples measure_latency(const options& opt, const std::string& dsn, bool async_commit,
                                int load = 0, int load_batch = 0) {
  const int warmup = 20;
  const int total = opt.latency_samples + warmup;
  std::atomic<bool> stop{false}, stop_load{false};
  std::atomic<long> timed{0}, handled{0}, loaded{0};
  std::unordered_map<std::int64_t, std::int64_t> started;
  std::exception_ptr worker_failure, load_failure;
  std::thread worker(
      [&] { worker_thread(dsn, async_commit, stop, timed, handled, started, worker_failure); });
  std::thread producer;
  if (load > 0) {
    producer = on_thread(
        [&](asio::any_io_executor ex) {
          return paced_batches(ex, dsn, load, load_batch, stop_load, loaded);
        },
        load_failure, stop_load);
  }
  auto stop_all = [&] {
    stop_load = true;
    if (producer.joinable()) producer.join();
    stop = true;
    worker.join();
  };
  std::vector<sent_job> sent;
  double handled_at_start = 0, handled_in_run = 0, seconds = 0;
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto db = co_await pgqueue::connect(ex, dsn);
      pgqueue::queue q(db, bench_queue);
      co_await sleep_for(std::chrono::milliseconds(300));  // the worker connects and idles
      const auto started_at = clock::now();
      handled_at_start = static_cast<double>(handled.load());
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
      seconds = seconds_since(started_at);
      handled_in_run = static_cast<double>(handled.load()) - handled_at_start;
      const auto give_up = clock::now() + std::chrono::seconds(10);
      while (timed.load() < total && clock::now() < give_up) {
        co_await sleep_for(std::chrono::milliseconds(5));
      }
    });
  } catch (...) {
    stop_all();
    throw;
  }
  stop_all();
  if (worker_failure) std::rethrow_exception(worker_failure);
  if (load_failure) std::rethrow_exception(load_failure);
  latency_samples out;
  out.drained_per_s = seconds > 0 ? handled_in_run / seconds : 0;
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

// Adds the two rows of a latency run: from enqueue() called and from enqueue() returned.
void add_rows(context& ctx, const std::string& id, const std::string& what,
              const latency_samples& s, std::vector<std::pair<std::string, double>> extra = {}) {
  const std::string note =
      s.missing ? std::to_string(s.missing) + " jobs not handled within 10 s" : "";
  row a{id + ".from_call", "latency", what + "enqueue() called -> handler"};
  a.lat = summarize(s.from_call);
  a.note = note;
  a.extra = extra;
  ctx.rep.add(std::move(a));
  row b{id + ".from_return", "latency", what + "enqueue() returned -> handler"};
  b.lat = summarize(s.from_return);
  b.note = note;
  ctx.rep.add(std::move(b));
}

asio::awaitable<void> fresh(const options& opt, const std::string& dbname) {
  auto db = co_await fresh_database(opt, dbname, true);
  db.close();
}

}  // namespace

void run_latency(context& ctx) {
  const std::string dbname = "pgqueue_bench_latency";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  const std::string rate = std::to_string(ctx.opt.latency_rate) + " jobs/s";
  for (bool async_commit : {false, true}) {
    run_async([&](asio::any_io_executor) { return fresh(ctx.opt, dbname); });
    say("latency", std::to_string(ctx.opt.latency_samples) + " jobs at " + rate +
                       (async_commit ? ", worker session with synchronous_commit=off" : ""));
    add_rows(ctx, async_commit ? "latency.async_worker" : "latency",
             async_commit ? "same, worker synchronous_commit=off: " : "idle worker, " + rate + ": ",
             measure_latency(ctx.opt, dsn, async_commit));
  }

  // Under load: the same worker's peak, then half of it (the timed jobs count towards it).
  const double peak = run_async([&](asio::any_io_executor) -> asio::awaitable<double> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    co_await fill_ready(db, ctx.opt.drain_jobs);
    db.close();
    const drain_setup defaults;  // named: GCC 12 destroys an aggregate temporary in co_await twice
    const auto d = co_await drain(dsn, defaults, ctx.opt.drain_jobs, ctx.opt.seconds);
    co_return d.rate;
  });
  const int load = std::max(100, static_cast<int>(peak / 2) - ctx.opt.latency_rate);
  // The target's row takes its load in batches of 10 (0.4 ms of work at the peak). With
  // batches of 100, a job enqueued right behind one waits for its 100 jobs first: 4 ms at a
  // peak of 25,000 jobs/s, whatever the queue does, so that row is reported without a target.
  // Then the target's load with the worker's commits not waiting for the WAL flush (what-if):
  // how much of the tail is the claims' flushes.
  struct loaded_case {
    int batch;
    bool async_commit;
    std::string id, what;
  };
  const std::vector<loaded_case> cases = {
      {10, false, "latency.loaded", ""},
      {100, false, "latency.loaded.batch100", ""},
      {10, true, "latency.loaded.async_worker", "what-if, worker synchronous_commit=off: "}};
  for (const auto& c : cases) {
    run_async([&](asio::any_io_executor) { return fresh(ctx.opt, dbname); });
    say("latency", "under load: the worker's peak " + std::to_string(static_cast<long>(peak)) +
                       " jobs/s; " + std::to_string(load) + " jobs/s more in batches of " +
                       std::to_string(c.batch) +
                       (c.async_commit ? ", worker session with synchronous_commit=off" : ""));
    auto loaded = measure_latency(ctx.opt, dsn, c.async_commit, load, c.batch);
    add_rows(ctx, c.id,
             c.what + "worker at half its peak (" + std::to_string(static_cast<long>(peak / 2)) +
                 " jobs/s, load in batches of " + std::to_string(c.batch) + "), " + rate +
                 " timed: ",
             loaded, {{"peak_per_s", peak}, {"drained_per_s", loaded.drained_per_s}});
  }

  run_async([&](asio::any_io_executor) { return drop_database(ctx.opt, dbname); });
  add_peer_rows(ctx, "latency", "latency");
}

}  // namespace bench
