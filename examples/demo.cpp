// The demo behind scripts/demo: a producer and a worker in one program, watched live for a few
// seconds. The producer enqueues at a steady rate with a burst in the middle (the worker falls
// behind, then catches up); the handler "works" 2-18 ms per job, 20 at a time; 1 job in 20
// fails once and is retried, 1 in 500 fails every attempt and ends dead. The view shows, as it
// happens: jobs enqueued and done per second, the enqueue -> handler start latency (p50 and p99
// over the last interval, from a timestamp in each payload), retries, dead jobs with the error
// the queue kept, and the queue's depth per state (pgqueue.depth). On a terminal it redraws in
// place a few times a second; otherwise it prints a line a second. Then a summary, a check that
// every job ended done or dead as planned (exit status 1 if not), and what to try next.
//
//   demo "<conninfo>" [seconds]      (default 8; examples/run_all.sh runs it for 1)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sys/ioctl.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// What the demo does. The worker handles at most 20 jobs per 10 ms on average, 2000 jobs/s (1400
// to 1600 measured on 2 cores), so the producer's burst builds a backlog that drains after it.
constexpr double base_rate = 1000;   // jobs/s
constexpr double burst_rate = 2500;  // jobs/s, from 40% to 60% of the run
constexpr int concurrency = 20;
constexpr int work_ms_min = 2, work_ms_max = 18;
constexpr int fail_once_every = 20;  // job n fails once when n % 20 == 7
constexpr int dead_every = 500;      // and every attempt when n % 500 == 13 (disjoint)
constexpr int max_attempts = 3;
constexpr auto drain_limit = 30s;  // after the producer stops, at most this long to finish

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Microseconds on the steady clock: what the producer stamps into each payload.
std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now().time_since_epoch())
      .count();
}

int failures_planned(long n) {
  if (n % dead_every == 13) return max_attempts;
  return n % fail_once_every == 7 ? 1 : 0;
}

// A number field of the payload as PostgreSQL prints jsonb: {"n": 12, "fail": 0, ...}
std::int64_t field(const std::string& json, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  auto at = json.find(quoted);
  if (at != std::string::npos) at = json.find(':', at + quoted.size());
  if (at == std::string::npos) throw std::runtime_error("payload without " + quoted + ": " + json);
  return std::strtoll(json.c_str() + at + 1, nullptr, 10);
}

// 12345 -> "12,345"
std::string grouped(long n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string millis(double ms) {
  if (ms >= 1000) return format("%.2f s", ms / 1000);
  return format(ms < 10 ? "%.1f ms" : "%.0f ms", ms);
}

// Nearest-rank percentile of `v` (sorted here); 0 for none.
double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// Counted by the producer and the handler (one thread: no locks).
struct tallies {
  long enqueued = 0, done = 0, retried = 0;
  std::vector<double> latency_ms;      // first attempts since the last frame
  std::vector<double> all_latency_ms;  // first attempts, whole run
};

struct depth_counts {
  long ready = 0, claimed = 0, done = 0, dead = 0;
};

asio::awaitable<depth_counts> depth(pgqueue::database& db, const std::string& queue) {
  auto r = co_await db.query("SELECT state, count FROM pgqueue.depth WHERE queue = $1", {queue});
  depth_counts c;
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

struct dead_job {
  std::int64_t id = 0;
  int attempts = 0;
  std::string error;
};

// The queue's most recent dead job, as the server keeps it.
asio::awaitable<dead_job> last_dead(pgqueue::database& db, const std::string& queue) {
  auto r = co_await db.query(
      "SELECT id, attempts, last_error FROM pgqueue.jobs WHERE queue = $1 AND state = 'dead' "
      "ORDER BY finished_at DESC, id DESC LIMIT 1",
      {queue});
  dead_job d;
  if (r.rows() > 0) {
    d.id = r.get<std::int64_t>(0, 0);
    d.attempts = r.get<int>(0, 1);
    d.error = r.get<std::optional<std::string>>(0, 2).value_or("");
  }
  co_return d;
}

// Where the frames go: redrawn in place on a terminal (ANSI codes), else plain lines.
class screen {
 public:
  screen() {
    const char* term = std::getenv("TERM");
    live_ = isatty(STDOUT_FILENO) == 1 && !(term && std::string_view(term) == "dumb");
    if (live_) std::fputs("\033[?25l", stdout);  // hide the cursor while redrawing
  }
  ~screen() { restore(); }
  screen(const screen&) = delete;
  screen& operator=(const screen&) = delete;

  bool live() const { return live_; }

  // Replaces the previous frame with `lines`, each cut to the terminal's width.
  void draw(const std::vector<std::string>& lines) {
    if (drawn_ > 0) std::printf("\033[%dF", drawn_);
    const std::size_t width = columns() - 1;
    for (const auto& line : lines) {
      std::printf("\033[2K%s\n", line.substr(0, width).c_str());
    }
    drawn_ = static_cast<int>(lines.size());
    std::fflush(stdout);
  }

  void restore() {
    if (live_) std::fputs("\033[?25h", stdout);
    live_ = false;
    std::fflush(stdout);
  }

 private:
  static std::size_t columns() {
    winsize ws{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
    return 80;
  }
  bool live_ = false;
  int drawn_ = 0;
};

struct plan {
  double seconds = 8;
  double burst_from() const { return 0.4 * seconds; }
  double burst_to() const { return 0.6 * seconds; }
  bool bursting(double t) const { return t >= burst_from() && t < burst_to(); }
  // Jobs the producer has enqueued by `t` seconds into the run.
  long target(double t) const {
    const double burst = std::clamp(t, burst_from(), burst_to()) - burst_from();
    return static_cast<long>(base_rate * t + (burst_rate - base_rate) * burst);
  }
};

asio::awaitable<void> demo(std::string dsn, plan p) {
  auto ex = co_await asio::this_coro::executor;
  auto producer_db = co_await pgqueue::connect(ex, dsn);
  co_await pgqueue::migrate(producer_db);
  auto worker_db = co_await pgqueue::connect(ex, dsn);
  auto monitor_db = co_await pgqueue::connect(ex, dsn);

  const std::string name =
      "demo-" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
  // Fast retries, so they show within the run: 20 ms doubling up to 100 ms.
  co_await producer_db.query("SELECT pgqueue.set_retry_backoff($1, '20 ms', '100 ms')", {name});
  pgqueue::queue producer{producer_db, name};
  pgqueue::queue consumer{worker_db, name, {.worker_id = "demo-worker"}};

  std::printf(
      "pgqueue demo: %.0f s on queue '%s'\n"
      "  producer  %.0f jobs/s, %.0f jobs/s from %.1f s to %.1f s (more than the worker handles)\n"
      "  worker    %d handlers at once, %d-%d ms of work each\n"
      "  failures  1 job in %d fails once and is retried; 1 in %d fails all %d attempts: dead\n"
      "  latency   from the enqueue to the handler's start (a timestamp in the payload), p50 and\n"
      "            p99 of the jobs started in the last interval; depth from pgqueue.depth\n\n",
      p.seconds, name.c_str(), base_rate, burst_rate, p.burst_from(), p.burst_to(), concurrency,
      work_ms_min, work_ms_max, fail_once_every, dead_every, max_attempts);
  std::fflush(stdout);

  tallies t;
  screen out;
  const auto start = clock_type::now();
  bool producing = true, interrupted = false;

  // The worker: the handler returns for done, throws for a retry (or dead, at the last attempt).
  std::minstd_rand rng(42);
  pgqueue::worker w(
      consumer,
      [&](const pgqueue::job& j) -> asio::awaitable<void> {
        if (j.attempts == 1) {
          const double ms = static_cast<double>(now_us() - field(j.payload, "enqueued_us")) / 1e3;
          t.latency_ms.push_back(ms);
          t.all_latency_ms.push_back(ms);
        }
        const int work_ms = work_ms_min + static_cast<int>(rng() % (work_ms_max - work_ms_min + 1));
        asio::steady_timer work(co_await asio::this_coro::executor,
                                std::chrono::milliseconds(work_ms));
        co_await work.async_wait(asio::use_awaitable);
        const auto n = field(j.payload, "n");
        if (j.attempts <= field(j.payload, "fail")) {
          if (j.attempts < j.max_attempts) {
            ++t.retried;
            throw std::runtime_error("upstream timed out (attempt " + std::to_string(j.attempts) +
                                     ")");
          }
          throw std::runtime_error("card declined (order " + std::to_string(n) + ", attempt " +
                                   std::to_string(j.attempts) + " of " +
                                   std::to_string(j.max_attempts) + ")");
        }
        ++t.done;
      },
      {.concurrency = concurrency});

  // Ctrl-C: stop producing, stop the worker (running jobs finish or go back to ready).
  asio::signal_set signals(ex, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code ec, int) {
    if (!ec) interrupted = true;
  });

  // The producer: every 10 ms, one batch that brings the total up to the plan.
  auto produce = [&]() -> asio::awaitable<void> {
    asio::steady_timer tick(ex);
    auto next = start;
    for (;;) {
      const double now = seconds(clock_type::now() - start);
      if (now >= p.seconds || interrupted) break;
      const long want = p.target(now) - t.enqueued;
      if (want > 0) {
        std::vector<std::string> batch;
        const auto stamp = now_us();
        for (long n = t.enqueued; n < t.enqueued + want; ++n) {
          batch.push_back("{\"n\":" + std::to_string(n) +
                          ",\"fail\":" + std::to_string(failures_planned(n)) +
                          ",\"enqueued_us\":" + std::to_string(stamp) + "}");
        }
        const pgqueue::enqueue_options opts{.max_attempts = max_attempts};
        co_await producer.enqueue_batch(std::move(batch), opts);
        t.enqueued += want;
      }
      next = std::max(next + 10ms, clock_type::now() - 100ms);
      tick.expires_at(next);
      co_await tick.async_wait(asio::use_awaitable);
    }
    producing = false;
  };

  // The view: a frame every 250 ms on a terminal, a line a second otherwise, until the
  // producer has stopped and every job is done or dead (checked every 100 ms by then).
  auto watch = [&]() -> asio::awaitable<void> {
    const auto frame = out.live() ? 250ms : 1000ms;
    asio::steady_timer tick(ex);
    auto next = start;
    auto last = start, due = start + frame;
    long last_enqueued = 0, last_done = 0;
    std::int64_t last_dead_id = 0;
    std::optional<clock_type::time_point> stopped_producing;
    if (!out.live()) {
      std::printf("%7s %7s %7s %9s %9s %7s %5s %7s %7s %7s\n", "time", "enq/s", "done/s", "p50",
                  "p99", "retries", "dead", "ready", "claimed", "done");
    }
    for (;;) {
      next += producing ? frame : 100ms;
      tick.expires_at(next);
      co_await tick.async_wait(asio::use_awaitable);
      auto d = co_await depth(monitor_db, name);
      const auto now = clock_type::now();
      bool finished = interrupted;
      if (!producing) {
        if (!stopped_producing) stopped_producing = now;
        finished = finished || d.ready + d.claimed == 0 || now - *stopped_producing > drain_limit;
      }
      if (!finished && now < due) continue;  // draining: no frame due yet
      while (due <= now) due += frame;

      auto dead = co_await last_dead(monitor_db, name);
      const double dt = seconds(now - last), elapsed = seconds(now - start);
      const double enq_rate = static_cast<double>(t.enqueued - last_enqueued) / dt;
      const double done_rate = static_cast<double>(t.done - last_done) / dt;
      const double p50 = percentile(t.latency_ms, 0.50), p99 = percentile(t.latency_ms, 0.99);
      const bool any_latency = !t.latency_ms.empty();
      t.latency_ms.clear();
      last = now;
      last_enqueued = t.enqueued;
      last_done = t.done;

      if (out.live()) {
        const double shown = std::min(elapsed, p.seconds);
        const int bar_width = 30;
        const int filled = static_cast<int>(bar_width * shown / p.seconds);
        const long backlog_full = 2000;  // a full backlog bar
        const int backlog = static_cast<int>(
            std::min<long>(bar_width, (d.ready * bar_width + backlog_full - 1) / backlog_full));
        std::vector<std::string> lines;
        lines.push_back(format("  %5.1f s [%s%s] %s", elapsed, std::string(filled, '#').c_str(),
                               std::string(bar_width - filled, '.').c_str(),
                               producing
                                   ? (p.bursting(elapsed) ? "producer: burst" : "producer: steady")
                                   : "producer stopped, draining"));
        lines.push_back(format("  enqueued  %6s jobs/s   %8s in all",
                               grouped(std::lround(enq_rate)).c_str(),
                               grouped(t.enqueued).c_str()));
        lines.push_back(format("  done      %6s jobs/s   %8s in all",
                               grouped(std::lround(done_rate)).c_str(), grouped(t.done).c_str()));
        lines.push_back(
            any_latency
                ? format("  latency   p50 %s   p99 %s   enqueue -> handler start, last %.2f s",
                         millis(p50).c_str(), millis(p99).c_str(), dt)
                : std::string("  latency   -"));
        lines.push_back(format("  retries   %6s          failed attempts put back to run again",
                               grouped(t.retried).c_str()));
        const std::string last_error =
            dead.id
                ? format("last: job %lld: %s", static_cast<long long>(dead.id), dead.error.c_str())
                : "out of attempts: kept with their last error";
        lines.push_back(
            format("  dead      %6s          %s", grouped(d.dead).c_str(), last_error.c_str()));
        lines.push_back(format("  depth     ready %s   claimed %s   done %s   dead %s",
                               grouped(d.ready).c_str(), grouped(d.claimed).c_str(),
                               grouped(d.done).c_str(), grouped(d.dead).c_str()));
        lines.push_back(format("  backlog   [%s%s] %s ready", std::string(backlog, '#').c_str(),
                               std::string(bar_width - backlog, ' ').c_str(),
                               grouped(d.ready).c_str()));
        out.draw(lines);
      } else {
        std::printf(
            "%6.1fs %7ld %7ld %9s %9s %7ld %5ld %7ld %7ld %7ld\n", elapsed, std::lround(enq_rate),
            std::lround(done_rate), any_latency ? millis(p50).c_str() : "-",
            any_latency ? millis(p99).c_str() : "-", t.retried, d.dead, d.ready, d.claimed, d.done);
        if (dead.id != last_dead_id) {
          std::printf("        dead: job %lld after %d attempts: %s\n",
                      static_cast<long long>(dead.id), dead.attempts, dead.error.c_str());
        }
        std::fflush(stdout);
      }
      last_dead_id = dead.id;
      if (finished) break;
    }
    w.stop();
  };

  using namespace asio::experimental::awaitable_operators;
  auto working = w.run();
  auto producing_and_watching = produce() && watch();
  co_await (std::move(working) && std::move(producing_and_watching));
  signals.cancel();
  out.restore();

  // The summary, from the queue's own counts (pgqueue.depth) and the worker's stats().
  const double took = seconds(clock_type::now() - start);
  auto d = co_await depth(monitor_db, name);
  auto dead = co_await last_dead(monitor_db, name);
  const auto stats = w.stats();
  long planned_dead = 0;
  for (long n = 0; n < t.enqueued; ++n) planned_dead += failures_planned(n) >= max_attempts;
  const double p50 = percentile(t.all_latency_ms, 0.50), p99 = percentile(t.all_latency_ms, 0.99);
  const double worst = t.all_latency_ms.empty() ? 0 : t.all_latency_ms.back();
  std::printf("\n%s jobs in %.1f s: %s done, %s dead, %s retries%s\n", grouped(t.enqueued).c_str(),
              took, grouped(d.done).c_str(), grouped(d.dead).c_str(), grouped(t.retried).c_str(),
              interrupted ? " (interrupted)" : "");
  std::printf("  enqueue -> handler start over the run: p50 %s, p99 %s, max %s%s\n",
              millis(p50).c_str(), millis(p99).c_str(), millis(worst).c_str(),
              took >= p.burst_to() ? " (in the burst's backlog)" : "");
  std::printf("  worker.stats(): claimed %s, acked %s, failed %s\n",
              grouped(static_cast<long>(stats.claimed)).c_str(),
              grouped(static_cast<long>(stats.acked)).c_str(),
              grouped(static_cast<long>(stats.failed)).c_str());
  if (dead.id) {
    std::printf("  a dead job keeps its last error: job %lld after %d attempts: %s\n",
                static_cast<long long>(dead.id), dead.attempts, dead.error.c_str());
  }
  const bool ok = d.done + d.dead == t.enqueued && d.dead == planned_dead;
  if (!interrupted) {
    if (ok) {
      std::printf("  check: every job ended done or dead, and the dead are the %ld planned\n",
                  planned_dead);
    } else {
      std::printf(
          "  check FAILED: %ld enqueued, %ld done + %ld dead (%ld dead planned), %ld ready, "
          "%ld claimed\n",
          t.enqueued, d.done, d.dead, planned_dead, d.ready, d.claimed);
    }
  }

  std::printf(
      "\nwhat to try next:\n"
      "  scripts/demo 30       the same for 30 s (any number of seconds; Ctrl-C ends it early)\n"
      "  README.md             \"Ten lines\" (this worker, in ten lines), \"Transactions\" (jobs\n"
      "                        that commit with your own data), \"What it guarantees\"\n"
      "  examples/             01_enqueue_and_claim.cpp ... 07_exactly_once_worker.cpp, one idea\n"
      "                        each (`ninja -C build` builds them into build/examples/)\n"
      "  psql                  scripts/demo's own server is gone when it ends; run it on yours\n"
      "                        (PGQUEUE_DSN=postgresql:///yourdb scripts/demo), then:\n"
      "                          SELECT * FROM pgqueue.depth;\n"
      "                          SELECT id, attempts, last_error FROM pgqueue.jobs WHERE state = "
      "'dead';\n"
      "                          SELECT pgqueue.retry_dead('%s');\n"
      "  scripts/test          the whole test suite (about 15 min on 2 cores the first time)\n"
      "  benchmarks/run        the numbers in README.md's table (docs/benchmarks.md)\n",
      name.c_str());
  if (!interrupted && !ok) throw std::runtime_error("not every job ended as planned");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: demo \"<conninfo>\" [seconds]\n");
    return 2;
  }
  plan p;
  if (argc > 2) {
    char* end = nullptr;
    p.seconds = std::strtod(argv[2], &end);
    if (end == argv[2] || *end != '\0' || !(p.seconds >= 0.5 && p.seconds <= 3600)) {
      std::fprintf(stderr, "demo: seconds must be a number from 0.5 to 3600, not '%s'\n", argv[2]);
      return 2;
    }
  }
  asio::io_context io;
  std::exception_ptr failure;
  // An xvalue, not a temporary: GCC 12 destroys a coroutine parameter twice when it is
  // initialised straight from a temporary.
  std::string dsn = argv[1];
  asio::co_spawn(io, demo(std::move(dsn), p), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "demo failed: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
