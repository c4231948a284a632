// Limits per queue, held by a fleet: 8 pgqueue::workers (each on its own session, 16 handlers
// each) on a queue limited to 3 claimed at once, and 4 workers on a queue limited to 50 jobs a
// second; both again while each of the workers' backends is terminated once it is older than
// a handler's run (400 ms; 300 ms for the 1 ms handlers of the rate limit). A sampler on another
// session counts the queue's claimed jobs throughout; the server counts the claims and wait
// hints the workers sent (track_functions), so a worker that polled would show.
#include <algorithm>
#include <atomic>
#include <thread>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <pgqueue/pgqueue.hpp>

#include "fault/fault_support.hpp"
#include "support/database.hpp"
#include "support/function_calls.hpp"
#include "support/session.hpp"

namespace fault_limits_test {

using namespace pgq_fault;
using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

const std::string app = "pgq_limits_worker";

struct fleet_setup {
  std::string queue = "q";
  int workers = 8;
  int concurrency = 16;
  std::chrono::milliseconds work{200};  // each handler run
  std::int64_t jobs = 0;
  std::chrono::milliseconds run_for{0};  // 0: until every job is done
  // 0: no fault. Otherwise each of the workers' backends is terminated at this age.
  std::chrono::milliseconds terminate_at{0};
};

// What the handlers saw (times in seconds from the start) and what the sampler saw.
struct fleet_outcome {
  std::vector<double> starts;
  std::vector<double> ends;
  int max_running = 0;
  std::int64_t max_claimed = 0;  // the sampler's highest count of claimed jobs
  std::int64_t samples = 0;
  std::int64_t terminated = 0;
  std::int64_t done = 0;
  std::string failure;  // what a worker's run() threw
};

fleet_outcome run_fleet(scratch_database& db, const fleet_setup& setup) {
  fleet_outcome out;
  asio::io_context io;
  std::vector<pgqueue::worker*> live;
  bool stop_now = false;
  int running = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [t0] { return seconds_since(t0); };
  for (int i = 0; i < setup.workers; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto ex = co_await asio::this_coro::executor;
          auto conn = co_await pgqueue::connect(ex, with_application_name(db.dsn(), app));
          {
            pgqueue::queue q(
                conn, setup.queue,
                {.worker_id = "w" + std::to_string(i), .lease = 2s, .poll_interval = 1s});
            pgqueue::worker w(q,
                              [&](pgqueue::lease&) -> asio::awaitable<void> {
                                out.starts.push_back(since());
                                out.max_running = std::max(out.max_running, ++running);
                                asio::steady_timer t(co_await asio::this_coro::executor,
                                                     setup.work);
                                co_await t.async_wait(asio::use_awaitable);
                                --running;
                                out.ends.push_back(since());
                              },
                              {.concurrency = setup.concurrency, .janitor_interval = 500ms});
            live.push_back(&w);
            if (stop_now) w.stop();
            try {
              co_await w.run();
            } catch (const std::exception& e) {
              out.failure = e.what();
            }
            std::erase(live, &w);
          }
          conn.close();
        },
        asio::detached);
  }

  std::atomic<bool> finished{false};
  std::thread sampler([&] {
    session s(db.dsn());
    while (!finished) {
      out.max_claimed =
          std::max(out.max_claimed, s.integer("SELECT count(*) FROM pgqueue.jobs "
                                              "WHERE queue = $1 AND state = 'claimed'",
                                              {setup.queue}));
      ++out.samples;
      std::this_thread::sleep_for(2ms);
    }
  });
  std::thread killer([&] {
    if (setup.terminate_at.count() == 0) return;
    out.terminated =
        terminate_at_age(db.dsn(), app, finished, {.lifetime = setup.terminate_at}).terminated;
  });
  std::thread watcher([&] {
    session s(db.dsn());
    const auto limit = setup.run_for.count() > 0 ? std::chrono::milliseconds(setup.run_for)
                                                 : std::chrono::milliseconds(120s);
    while (std::chrono::steady_clock::now() - t0 < limit) {
      if (setup.run_for.count() == 0 &&
          s.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND state = 'done'",
                    {setup.queue}) == setup.jobs) {
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    finished = true;
    asio::post(io, [&] {
      stop_now = true;
      for (auto* w : live) w->stop();
    });
  });
  io.run();
  watcher.join();
  killer.join();
  sampler.join();
  out.done = session(db.dsn()).integer(
      "SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND state = 'done'", {setup.queue});
  return out;
}

// Backends live twice a handler's run: most runs still span a termination, and a worker gets
// to ack on the session it claimed on often enough. Shorter lives (150 ms, under a 200 ms run)
// made every ack wait for a new session, and each new session plans claim_batch afresh while
// it holds the queue's limits row: leases of 2 s expired, on a quiet machine 60 jobs took
// 40-90 s.
const auto concurrency_terminate_at = 400ms;

void concurrency_limit_case(bool terminate) {
  scratch_database db;
  session admin(db.dsn());
  const std::int64_t jobs = 60;
  fill(admin, "q", jobs);
  admin.scalar("SELECT pgqueue.set_queue_limits('q', 3)");
  const auto out = run_fleet(db, {.workers = 8,
                                  .concurrency = 16,
                                  .work = 200ms,
                                  .jobs = jobs,
                                  .terminate_at = terminate ? concurrency_terminate_at : 0ms});
  const double span = out.ends.empty() ? 0 : out.ends.back() - out.starts.front();
  const double rate = span > 0 ? static_cast<double>(jobs) / span : 0;
  fault_report r{
      .fault = terminate ? "concurrency limit 3, 8 workers x 16, backends terminated at 400 ms old"
                         : "concurrency limit 3, 8 workers x 16",
      .enqueued = jobs,
      .done = out.done,
      .re_run = static_cast<std::int64_t>(out.starts.size()) - out.done,
      .seconds = span,
      .notes = "most claimed seen " + std::to_string(out.max_claimed) + " in " +
               std::to_string(out.samples) + " samples, most running " +
               std::to_string(out.max_running) + ", " + std::to_string(rate) +
               " jobs/s (3 / 0.2 s = 15), " + std::to_string(out.terminated) +
               " backends terminated"};
  r.print();
  CHECK(out.failure.empty());
  CHECK(out.done == jobs);
  CHECK(out.samples > 100);
  CHECK(out.max_claimed <= 3);
  if (!terminate) {
    // Every place used, never more; and the places are refilled at once when a job ends (an
    // ack wakes the queue), so the rate is near what three places allow. Places refilled only
    // by the 1 s poll would give about 2.5 a second; the bound, three times that, leaves room
    // for a loaded machine under the sanitizers (10.3-13.2 seen there, 14.5 on a quiet one).
    CHECK(out.max_running == 3);
    CHECK(rate >= 15 * 0.5);
    CHECK(rate <= 15 * 1.1);
  } else {
    CHECK(out.terminated >= 3);
  }
}

void rate_limit_case(bool terminate, std::chrono::seconds length) {
  scratch_database db;
  session admin(db.dsn());
  admin.query("ALTER DATABASE " + db.name() + " SET track_functions = 'all'");
  const std::int64_t jobs = 2000;  // more than 50/s for the run can start
  fill(admin, "q", jobs);
  admin.scalar("SELECT pgqueue.set_queue_limits('q', NULL, 50, '1 second')");  // bursts of 50
  const int workers = 4;
  const auto out = run_fleet(db, {.workers = workers,
                                  .concurrency = 16,
                                  .work = 1ms,
                                  .run_for = length,
                                  .terminate_at = terminate ? 300ms : 0ms});
  REQUIRE(wait_for_sessions_gone(admin, app));
  const auto claims = function_calls(admin, "claim_batch");
  const auto hints = function_calls(admin, "wait_hint");
  // Jobs started in each whole second of the run, and in every one-second window (sliding).
  const double seconds = static_cast<double>(length.count());
  std::vector<int> per_second(static_cast<std::size_t>(length.count()) + 1, 0);
  for (double t : out.starts) ++per_second[std::min(per_second.size() - 1, std::size_t(t))];
  int widest = 0;
  for (std::size_t i = 0, j = 0; j < out.starts.size(); ++j) {
    while (out.starts[j] - out.starts[i] >= 1.0) ++i;
    widest = std::max(widest, static_cast<int>(j - i + 1));
  }
  std::string seconds_text;
  for (int n : per_second) seconds_text += std::to_string(n) + " ";
  fault_report r{.fault = terminate
                              ? "rate limit 50/s, 4 workers, backends terminated at 300 ms old"
                              : "rate limit 50/s, 4 workers",
                 .enqueued = jobs,
                 .done = out.done,
                 .ready = jobs - out.done,
                 .seconds = seconds,
                 .notes = "started per second: " + seconds_text + "; most in any 1 s window " +
                          std::to_string(widest) + "; claim_batch calls " + std::to_string(claims) +
                          ", wait_hint calls " + std::to_string(hints) + ", " +
                          std::to_string(out.terminated) + " backends terminated"};
  r.print();
  CHECK(out.failure.empty());
  const auto started = static_cast<std::int64_t>(out.starts.size());
  // The bucket's bound: at most its burst (50) plus 50 a second, in the run and in any second.
  CHECK(started <= 50 + 50 * length.count());
  CHECK(widest <= 100 + 2);  // two of slack, as below
  // The bucket's invariant, from its start (full) to any time t: at most 50 + 50 t jobs
  // started by then (two of slack: the handlers' clock is not the server's).
  int over = 0;
  for (std::size_t j = 0; j < out.starts.size(); ++j) {
    if (static_cast<double>(j + 1) > 50 + 50 * out.starts[j] + 2) ++over;
  }
  CHECK(over == 0);
  if (!terminate) {
    // Once the burst is spent, the rate itself, second by second (tokens do not gather while
    // the workers keep up; after an outage they do, and a second may start more).
    for (std::size_t s = 1; s + 1 < per_second.size(); ++s) CHECK(per_second[s] <= 52);
    // And not much less: idle workers wake when the next token is due.
    CHECK(started >= 50 * length.count() * 9 / 10);
    // No polling: every idle worker wakes when the next token is due (all four at once: one
    // takes it), and the one that took it claims once more before it is idle again; then a
    // hint after each claim that found nothing. A worker polling at its first back-off step
    // (10 ms) would make 100 claims a second each.
    CHECK(claims <= (workers + 1) * 50 * length.count() * 11 / 10 + 100);
    CHECK(hints <= claims);
  } else {
    CHECK(out.terminated >= 3);
    // The bounds above mean something only if the fleet got past the burst under the fault:
    // with 150 ms lives it started nothing at all, and every bound held trivially.
    CHECK(started > 50 + 50);
  }
}

}  // namespace

TEST_CASE("a concurrency limit of 3 holds across 8 workers x 16 handlers, at 3 / handler time",
          "[fault][limits]") {
  concurrency_limit_case(false);
}

TEST_CASE("a concurrency limit of 3 holds while the workers' backends are terminated",
          "[fault][limits]") {
  concurrency_limit_case(true);
}

TEST_CASE("a rate limit of 50 a second holds for 10 s across 4 workers, without polling",
          "[fault][limits]") {
  rate_limit_case(false, 10s);
}

TEST_CASE("a rate limit holds while the workers' backends are terminated", "[fault][limits]") {
  rate_limit_case(true, 5s);
}

}  // namespace fault_limits_test
