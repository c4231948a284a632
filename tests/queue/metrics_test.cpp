// What a worker tells its observer (worker_options::observer), and the Prometheus text that
// worker_metrics and write_queue_metrics make of it and of the server's counts, checked with
// Prometheus' own promtool.
#include <cmath>
#include <string>
#include <vector>

#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/command.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace queue_metrics_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

struct seen {
  pgqueue::job_event_kind kind;
  std::int64_t id;
  std::chrono::steady_clock::duration run_time;
  std::string error;
  std::chrono::system_clock::duration waited;
};

// Runs a worker over queue "q" (3 jobs: 1 returns, 2 throws on its last attempt, 3 due 10 s
// ago) until all three ended, telling `observer`.
void run_three_jobs(queue_fixture& f, pgqueue::job_observer observer) {
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    co_await q.enqueue("{}");
    co_await q.enqueue("{}", {.max_attempts = 1});
    co_await q.enqueue("{}", {.run_after = std::chrono::system_clock::now() - 10s});
    int ended = 0;
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](const pgqueue::job& j) -> asio::awaitable<void> {
                        co_await pause(5ms);  // a run time worth measuring
                        if (++ended == 3) self->stop();
                        if (j.id == 2) throw std::runtime_error("boom <2>");
                      },
                      {.concurrency = 1, .observer = std::move(observer)});
    self = &w;
    co_await w.run();
  });
}

}  // namespace

TEST_CASE("a worker tells its observer each job's claim, start and ending, in order", "[metrics]") {
  queue_fixture f;
  std::vector<seen> events;
  run_three_jobs(f, [&](const pgqueue::job_event& e) {
    events.push_back(
        {e.kind, e.job.id, e.run_time, std::string(e.error), e.job.claimed_at - e.job.due_at});
  });
  using k = pgqueue::job_event_kind;
  std::vector<std::pair<k, std::int64_t>> order;
  for (const auto& e : events) order.emplace_back(e.kind, e.id);
  // Claim order: the job due 10 s ago first (then by id). One at a time (concurrency 1).
  const std::vector<std::pair<k, std::int64_t>> expected = {
      {k::claimed, 3},  {k::started, 3}, {k::finished, 3}, {k::claimed, 1}, {k::started, 1},
      {k::finished, 1}, {k::claimed, 2}, {k::started, 2},  {k::failed, 2}};
  REQUIRE(order == expected);
  for (const auto& e : events) {
    INFO("event " << static_cast<int>(e.kind) << " of job " << e.id);
    if (e.kind == k::finished || e.kind == k::failed) {
      CHECK(e.run_time >= 5ms);
    } else {
      CHECK(e.run_time == std::chrono::steady_clock::duration::zero());
    }
    CHECK(e.error == (e.kind == k::failed ? "boom <2>" : ""));
    if (e.id == 3) {
      CHECK(e.waited >= 10s);  // by the server's clock: due 10 s before it was claimed
      CHECK(e.waited < 60s);
    } else {
      CHECK(e.waited >= 0s);
      CHECK(e.waited < 10s);
    }
  }
}

TEST_CASE(
    "worker_metrics and write_queue_metrics write what happened, and promtool accepts "
    "it",
    "[metrics]") {
  queue_fixture f;
  pgqueue::worker_metrics metrics;
  run_three_jobs(f, metrics.observer());
  std::string text;
  metrics.write(text);
  // Exact series: the counters, and the histograms' counts.
  for (const char* line : {
           "pgqueue_worker_jobs_claimed_total{queue=\"q\"} 3\n",
           "pgqueue_worker_jobs_acked_total{queue=\"q\"} 2\n",
           "pgqueue_worker_jobs_failed_total{queue=\"q\"} 1\n",
           "pgqueue_worker_jobs_lost_total{queue=\"q\"} 0\n",
           "pgqueue_worker_jobs_released_total{queue=\"q\"} 0\n",
           "pgqueue_job_wait_seconds_count{queue=\"q\"} 3\n",
           "pgqueue_job_wait_seconds_bucket{queue=\"q\",le=\"5\"} 2\n",  // the third waited 10 s
           "pgqueue_job_wait_seconds_bucket{queue=\"q\",le=\"+Inf\"} 3\n",
           "pgqueue_job_run_seconds_count{queue=\"q\"} 3\n",
           "pgqueue_job_run_seconds_bucket{queue=\"q\",le=\"0.001\"} 0\n",
       }) {
    CHECK_THAT(text, Catch::Contains(line));
  }

  // The server's side, with a queue whose name needs escaping and a paused one.
  session admin(f.db.dsn());
  admin.query("SELECT pgqueue.enqueue($1, '{}')", {"we\"ird\\queue"});
  admin.query("SELECT pgqueue.pause('q')");
  std::vector<pgqueue::queue_status> status;
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    status = co_await pgqueue::read_queue_status(db);
  });
  REQUIRE(status.size() == 2);
  std::string server;
  pgqueue::write_queue_metrics(server, status);
  for (const char* line : {
           "pgqueue_queue_jobs{queue=\"q\",state=\"done\"} 2\n",
           "pgqueue_queue_jobs{queue=\"q\",state=\"dead\"} 1\n",
           "pgqueue_queue_jobs{queue=\"q\",state=\"ready\"} 0\n",
           "pgqueue_queue_jobs{queue=\"we\\\"ird\\\\queue\",state=\"ready\"} 1\n",
           "pgqueue_queue_paused{queue=\"q\"} 1\n",
           "pgqueue_queue_enqueued_total{queue=\"q\"} 3\n",
           "pgqueue_queue_done_total{queue=\"q\"} 2\n",
           "pgqueue_queue_failed_total{queue=\"q\"} 1\n",
           "pgqueue_queue_lag_seconds{queue=\"q\"} 0\n",
       }) {
    CHECK_THAT(server, Catch::Contains(line));
  }

  // Both together, as an application's endpoint would serve them.
  REQUIRE(std::string(PGQUEUE_PROMTOOL) != "");  // scripts/test installs prometheus
  const auto checked = run_command({PGQUEUE_PROMTOOL, "check", "metrics"}, server + text, {},
                                   std::chrono::seconds(30));
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 0);
  // promtool does find fault: a family named twice is refused (the check can fail).
  const auto twice = run_command({PGQUEUE_PROMTOOL, "check", "metrics"}, server + server, {},
                                 std::chrono::seconds(30));
  CHECK(twice.exit_code != 0);
}

TEST_CASE("a job whose lease was lost while its handler ran ends lost, as stats() counts it",
          "[metrics]") {
  queue_fixture f;
  session admin(f.db.dsn());
  using k = pgqueue::job_event_kind;
  std::vector<k> endings;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    co_await q.enqueue("{}");
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](const pgqueue::job& j) -> asio::awaitable<void> {
                        // The janitor takes it back behind the handler's back; the handler returns,
                        // the worker's ack is refused.
                        CHECK(take_back(admin, j.id) == 1);
                        self->stop();
                        co_return;
                      },
                      {.concurrency = 1, .observer = [&](const pgqueue::job_event& e) {
                         if (e.kind != k::claimed && e.kind != k::started)
                           endings.push_back(e.kind);
                       }});
    self = &w;
    co_await w.run();
    stats = w.stats();
  });
  CHECK(endings == std::vector<k>{k::lost});
  CHECK(stats.lost == 1);
  CHECK(stats.acked == 0);
}

TEST_CASE("histogram bounds: NaN and infinities are dropped, +Inf is written once", "[metrics]") {
  const std::vector<double> bounds{0.1, INFINITY, NAN, -INFINITY, 1, 0.1};
  pgqueue::worker_metrics m(bounds, bounds);
  pgqueue::job j;
  j.queue = "q";
  m.record(pgqueue::job_event{pgqueue::job_event_kind::claimed, j});
  std::string text;
  m.write(text);
  CHECK_THAT(text, Catch::Contains("pgqueue_job_wait_seconds_bucket{queue=\"q\",le=\"0.1\"} 1\n"
                                   "pgqueue_job_wait_seconds_bucket{queue=\"q\",le=\"1\"} 1\n"
                                   "pgqueue_job_wait_seconds_bucket{queue=\"q\",le=\"+Inf\"} 1\n"
                                   "pgqueue_job_wait_seconds_sum"));
  CHECK_THAT(text, !Catch::Contains("NaN") && !Catch::Contains("-Inf"));
}

}  // namespace queue_metrics_test
