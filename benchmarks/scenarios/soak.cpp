// soak (opt-in: --only soak): jobs in and out for --soak-minutes (default 30) at half the
// peak rate of the worker it uses (measured first by draining pre-filled jobs), with gc running
// as docs/operations.md says to run it: `CALL pgqueue.gc_all(...)` every 10 s, here keeping finished
// jobs for one minute so that the table reaches a steady size within the run. A producer adds
// batches of 100; another connection adds 200 timed jobs per second whose payload carries the
// steady-clock time of the call, and the handler notes enqueue -> start for them. Every
// --soak-window seconds: jobs in and out per second, p50/p99 of the timed jobs, table and index
// sizes, live and dead tuples, autovacuum runs. The series is also written as a TSV file and,
// when gnuplot is installed, drawn as a PNG (--soak-out PREFIX: PREFIX.tsv, PREFIX.png).
// --soak-table-settings applies storage parameters to pgqueue.jobs first (e.g.
// "autovacuum_vacuum_scale_factor = 0.01"), to measure what the schema should carry.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/load.hpp"
#include "../support/pgbench.hpp"
#include "../support/progress.hpp"
#include "../support/server.hpp"
#include "../support/workload.hpp"
#include "scenarios.hpp"

namespace bench {
namespace {

constexpr int soak_batch = 100;
constexpr int timed_rate = 200;
constexpr auto gc_every = std::chrono::seconds(10);

// enqueue -> start of the timed jobs handled since the last take().
class timed_starts {
 public:
  void note(const std::string& payload) {
    // The timed jobs' payload is {"t": <ns>} (jsonb's own spacing).
    if (payload.rfind("{\"t\": ", 0) != 0) return;
    const double ms = static_cast<double>(now_ns() - std::atoll(payload.c_str() + 6)) / 1e6;
    std::lock_guard lock(m_);
    ms_.push_back(ms);
  }
  std::vector<double> take() {
    std::lock_guard lock(m_);
    return std::exchange(ms_, {});
  }

 private:
  std::mutex m_;
  std::vector<double> ms_;
};

// Adds timed_rate jobs per second, one per enqueue(), each carrying the time of its call.
asio::awaitable<void> timed_jobs(asio::any_io_executor ex, std::string dsn, std::atomic<bool>& stop,
                                 std::atomic<long>& enqueued) {
  auto db = co_await pgqueue::connect(ex, dsn);
  pgqueue::queue q(db, bench_queue);
  const auto period = std::chrono::nanoseconds(1'000'000'000 / timed_rate);
  auto next = clock::now();
  while (!stop) {
    next += period;
    if (next > clock::now()) co_await sleep_for(next - clock::now());
    const std::string payload = "{\"t\": " + std::to_string(now_ns()) + "}";
    co_await q.enqueue(payload);
    ++enqueued;
  }
}

const pgqueue::worker_options worker_setup{.concurrency = soak_batch, .claim_batch = soak_batch};

// The worker's peak: a drain of pre-filled jobs in the soak's own shape.
double peak_rate(const options& opt, const std::string& dbname, const std::string& dsn) {
  return run_async([&](asio::any_io_executor) -> asio::awaitable<double> {
    auto db = co_await fresh_database(opt, dbname, true);
    co_await fill_ready(db, opt.drain_jobs);
    db.close();
    drain_setup setup;  // named: GCC 12 destroys an aggregate temporary in co_await twice
    setup.worker = worker_setup;
    const auto d = co_await drain(dsn, setup, opt.drain_jobs, opt.seconds);
    co_return d.rate;
  });
}

struct sample {
  double t_s, in_per_s, out_per_s, p50_ms, p99_ms, total_mb, table_mb, index_mb, live, dead,
      autovacuums, gc_ms;
};

void write_series(const std::vector<sample>& series, const std::string& prefix, double rate) {
  {
    std::ofstream f(prefix + ".tsv");
    f << "t_s\tin_per_s\tout_per_s\tp50_ms\tp99_ms\ttotal_mb\ttable_mb\tindex_mb\tlive\tdead\t"
         "autovacuums\tgc_ms\n";
    for (const auto& s : series) {
      f << s.t_s << '\t' << s.in_per_s << '\t' << s.out_per_s << '\t' << s.p50_ms << '\t'
        << s.p99_ms << '\t' << s.total_mb << '\t' << s.table_mb << '\t' << s.index_mb << '\t'
        << s.live << '\t' << s.dead << '\t' << s.autovacuums << '\t' << s.gc_ms << '\n';
    }
  }
  say("soak", "series: " + prefix + ".tsv");
  const std::string plot = prefix + ".gnuplot";
  {
    std::ofstream g(plot);
    g << "set terminal pngcairo size 1200,900 font ',10'\n"
      << "set output '" << prefix << ".png'\n"
      << "set termoption noenhanced\n"
      << "set datafile separator '\\t'\n"
      << "set key autotitle columnhead top left\n"
      << "set xlabel 'minutes'\nset grid\n"
      << "set multiplot layout 2,2 title 'pgqueue soak: " << static_cast<long>(rate)
      << " jobs/s in and out, gc every 10 s'\n"
      << "set title 'throughput (jobs/s)'\nset yrange [0:*]\n"
      << "plot '" << prefix << ".tsv' using ($1/60):2 with lines lw 2, '' using ($1/60):3 with "
      << "lines lw 2\n"
      << "set title 'enqueue -> handler start (ms)'\n"
      << "plot '' using ($1/60):4 with lines lw 2, '' using ($1/60):5 with lines lw 2\n"
      << "set title 'pgqueue.jobs size (MB)'\n"
      << "plot '' using ($1/60):6 with lines lw 2, '' using ($1/60):7 with lines lw 2, '' using "
      << "($1/60):8 with lines lw 2\n"
      << "set title 'tuples'\n"
      << "plot '' using ($1/60):9 with lines lw 2, '' using ($1/60):10 with lines lw 2\n"
      << "unset multiplot\n";
  }
  try {
    auto p = run_process({"gnuplot", plot});
    if (p.exit_code == 0) {
      say("soak", "plot: " + prefix + ".png");
    } else {
      say("soak", "gnuplot failed: " + p.output);
    }
  } catch (const std::exception&) {
    say("soak", "no gnuplot: install it (Debian: gnuplot-nox) for the PNG");
  }
}

}  // namespace

void run_soak(context& ctx) {
  const std::string dbname = "pgqueue_bench_soak";
  const auto dsn = with_dbname(ctx.opt.dsn, dbname);
  const double peak = peak_rate(ctx.opt, dbname, dsn);
  const int rate = ctx.opt.soak_rate > 0 ? ctx.opt.soak_rate : static_cast<int>(peak / 2);
  run_async([&](asio::any_io_executor) -> asio::awaitable<void> {
    auto db = co_await fresh_database(ctx.opt, dbname, true);
    if (!ctx.opt.soak_table_settings.empty()) {
      co_await db.execute_script("ALTER TABLE pgqueue.jobs SET (" + ctx.opt.soak_table_settings +
                                 ")");
    }
    db.close();
  });
  say("soak", std::to_string(ctx.opt.soak_minutes) + " min at " + std::to_string(rate) +
                  " jobs/s in and out (the worker's peak: " +
                  std::to_string(static_cast<long>(peak)) + " jobs/s)");

  std::atomic<bool> stop{false};
  std::atomic<long> enqueued{0}, handled{0};
  timed_starts starts;
  std::exception_ptr producer_failure, worker_failure;
  std::thread producer = on_thread(
      [&](asio::any_io_executor ex) -> asio::awaitable<void> {
        std::vector<asio::awaitable<void>> tasks;
        tasks.push_back(paced_batches(ex, dsn, std::max(rate - timed_rate, soak_batch), soak_batch,
                                      stop, enqueued));
        tasks.push_back(timed_jobs(ex, dsn, stop, enqueued));
        co_await join_all(std::move(tasks));
      },
      producer_failure, stop);
  std::thread consumer = on_thread(
      [&](asio::any_io_executor ex) {
        return worker_until(
            ex, dsn, worker_setup,
            [&](const pgqueue::job& j) {
              starts.note(j.payload);
              ++handled;
            },
            stop);
      },
      worker_failure, stop);

  std::vector<sample> series;
  try {
    run_async([&](asio::any_io_executor ex) -> asio::awaitable<void> {
      auto db = co_await pgqueue::connect(ex, dsn);
      const auto start = clock::now();
      const auto end = start + std::chrono::minutes(ctx.opt.soak_minutes);
      const auto window = std::chrono::seconds(ctx.opt.soak_window_seconds);
      auto next_gc = start + gc_every, next_sample = start + window;
      long in_then = 0, out_then = 0;
      double gc_ms = 0;
      auto previous = start;
      while (clock::now() < end && !stop) {
        co_await sleep_for(std::min(next_gc, next_sample) - clock::now());
        if (clock::now() >= next_gc) {
          const auto t0 = clock::now();
          co_await db.execute_script(
              "CALL pgqueue.gc_all(interval '1 minute', interval '1 minute', 10000)");
          gc_ms += ms_between(t0, clock::now());
          next_gc += gc_every;
        }
        if (clock::now() < next_sample) continue;
        next_sample += window;
        const auto now = clock::now();
        const long in_now = enqueued.load(), out_now = handled.load();
        const auto lat = summarize(starts.take());
        auto r = co_await db.query(
            "SELECT pg_total_relation_size(s.relid) / 1048576.0, "
            "pg_relation_size(s.relid) / 1048576.0, pg_indexes_size(s.relid) / 1048576.0, "
            "s.n_live_tup::float8, s.n_dead_tup::float8, s.autovacuum_count::float8 "
            "FROM pg_stat_user_tables s WHERE s.relid = 'pgqueue.jobs'::regclass");
        const double secs = std::chrono::duration<double>(now - previous).count();
        sample s{std::chrono::duration<double>(now - start).count(),
                 static_cast<double>(in_now - in_then) / secs,
                 static_cast<double>(out_now - out_then) / secs,
                 lat.p50,
                 lat.p99,
                 r.get<double>(0, 0),
                 r.get<double>(0, 1),
                 r.get<double>(0, 2),
                 r.get<double>(0, 3),
                 r.get<double>(0, 4),
                 r.get<double>(0, 5),
                 gc_ms};
        char line[320];
        std::snprintf(line, sizeof line,
                      "%5.0f s: in %.0f/s, out %.0f/s, p50 %.2f ms, p99 %.2f ms, %.0f MB "
                      "(indexes %.0f), live %.0f, dead %.0f, autovacuums %.0f, gc %.0f ms",
                      s.t_s, s.in_per_s, s.out_per_s, s.p50_ms, s.p99_ms, s.total_mb, s.index_mb,
                      s.live, s.dead, s.autovacuums, s.gc_ms);
        say("soak", line);
        series.push_back(s);
        previous = now;
        in_then = in_now;
        out_then = out_now;
        gc_ms = 0;
      }
      stop = true;
    });
  } catch (...) {
    stop = true;
    producer.join();
    consumer.join();
    throw;
  }
  stop = true;
  producer.join();
  consumer.join();
  if (producer_failure) std::rethrow_exception(producer_failure);
  if (worker_failure) std::rethrow_exception(worker_failure);

  int n = 0;
  for (const auto& s : series) {
    row r{"soak.w" + std::to_string(++n), "soak",
          "soak, " + std::to_string(static_cast<long>(s.t_s)) + " s"};
    r.rate = s.out_per_s;
    r.extra = {{"in_per_s", s.in_per_s},      {"p50_ms", s.p50_ms},     {"p99_ms", s.p99_ms},
               {"total_mb", s.total_mb},      {"index_mb", s.index_mb}, {"dead", s.dead},
               {"autovacuums", s.autovacuums}};
    ctx.rep.add(std::move(r));
  }
  if (series.size() >= 2) {
    // The rate asked for, and how the end compares with the middle of the run.
    const auto& mid = series[series.size() / 2];
    const auto& last = series.back();
    row asked{"soak.asked", "soak", "soak: the rate asked (half the worker's peak)"};
    asked.rate = rate;
    asked.extra = {{"peak_per_s", peak}};
    ctx.rep.add(std::move(asked));
    row end{"soak.end", "soak", "soak: the last window"};
    end.rate = last.out_per_s;
    end.extra = {{"p99_ms", last.p99_ms},
                 {"size_end_vs_mid", mid.total_mb > 0 ? last.total_mb / mid.total_mb : 0}};
    ctx.rep.add(std::move(end));
  }
  if (!series.empty()) {
    const std::string prefix = ctx.opt.soak_out.empty()
                                   ? "/tmp/pgqueue-soak-" + std::to_string(std::time(nullptr))
                                   : ctx.opt.soak_out;
    write_series(series, prefix, rate);
  }
  run_async([&](asio::any_io_executor) { return drop_database(ctx.opt, dbname); });
}

}  // namespace bench
