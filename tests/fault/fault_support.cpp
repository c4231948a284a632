#include "fault/fault_support.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <catch2/catch.hpp>

#include "support/async.hpp"

namespace pgq_fault {

using namespace std::chrono_literals;

std::int64_t scaled(std::int64_t jobs) {
  long percent = 100;
  if (const char* env = std::getenv("PGQUEUE_FAULT_SCALE"); env && *env) percent = std::atol(env);
  return std::max<std::int64_t>(1, jobs * percent / 100);
}

std::chrono::milliseconds paced(std::chrono::milliseconds work, std::int64_t items, int parallel,
                                std::chrono::milliseconds window) {
  const auto spread = window.count() * std::max(parallel, 1) / std::max<std::int64_t>(items, 1);
  return std::max(work, std::chrono::milliseconds(spread + 1));
}

std::string with_application_name(const std::string& dsn, const std::string& name) {
  if (dsn.find("://") == std::string::npos) return dsn + " application_name=" + name;
  return dsn + (dsn.find('?') == std::string::npos ? "?" : "&") + "application_name=" + name;
}

std::string terminations::note() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  return std::to_string(terminated) + " backends terminated at " +
         std::to_string(fault.lifetime.count()) + " ms old, in " + std::to_string(rounds) +
         " rounds over " + buf;
}

terminations terminate_at_age(const std::string& dsn, const std::string& application_name,
                              const std::atomic<bool>& finished, termination_fault fault) {
  session killer(dsn);
  terminations out{.fault = fault};
  const auto ms = std::to_string(fault.lifetime.count());
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + fault.at_most;
  while (!finished && std::chrono::steady_clock::now() < until) {
    // Kills the backends due and says how long until the next one is: one statement.
    auto r = killer.query(
        "SELECT count(*) FILTER (WHERE due AND pg_terminate_backend(pid)), "
        "       ceil(extract(epoch FROM min(backend_start) FILTER (WHERE NOT due) "
        "                               + $2 * interval '1 ms' - clock_timestamp()) * 1000) "
        "  FROM (SELECT pid, backend_start, "
        "               backend_start <= clock_timestamp() - $2 * interval '1 ms' AS due "
        "          FROM pg_stat_activity "
        "         WHERE datname = current_database() AND application_name = $1) a",
        {application_name, ms});
    const auto killed = std::stoll(*r.at(0)[0]);
    out.terminated += killed;
    if (killed > 0) ++out.rounds;
    auto wait = fault.lifetime;
    if (r.at(0)[1]) {
      wait = std::clamp(std::chrono::milliseconds(std::stoll(*r.at(0)[1])), 1ms, fault.lifetime);
    }
    std::this_thread::sleep_for(wait);  // the fault's timing: here time is the subject
  }
  out.seconds = seconds_since(start);
  return out;
}

std::vector<std::int64_t> fill(session& s, const std::string& queue, std::int64_t n,
                               const std::string& payload_sql,
                               const std::string& max_attempts_sql) {
  // One statement, one transaction; the wake-up is deferred to one pgqueue.wake after it.
  auto rows = s.query("SELECT pgqueue.enqueue($1, " + payload_sql + ", NULL, 0, now(), " +
                          max_attempts_sql + ", false) FROM generate_series(1, $2) g ORDER BY g",
                      {queue, std::to_string(n)});
  s.query("SELECT pgqueue.wake($1)", {queue});
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto& r : rows) ids.push_back(std::stoll(*r[0]));
  return ids;
}

std::string fault_report::line() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  std::ostringstream out;
  out << "fault report: " << fault << ": enqueued " << enqueued << ", done " << done << ", re-run "
      << re_run << ", dead " << dead;
  if (ready) out << ", ready " << ready;
  out << ", lost " << lost << ", " << buf << " (extra claims " << extra_claims;
  if (!notes.empty()) out << "; " << notes;
  out << ")";
  return out.str();
}

void fault_report::print() const {
  std::printf("%s\n", line().c_str());
  std::fflush(stdout);
}

accounting account(session& s, const std::string& fault, const std::string& queue,
                   const std::vector<std::int64_t>& enqueued,
                   const std::map<std::int64_t, int>& runs, bool ready_allowed) {
  accounting a;
  a.report.fault = fault;
  a.report.enqueued = static_cast<std::int64_t>(enqueued.size());
  std::map<std::int64_t, job_outcome> rows;
  for (auto& r : s.query("SELECT id, state, attempts, max_attempts, last_error, claimed_by "
                         "FROM pgqueue.jobs WHERE queue = $1",
                         {queue})) {
    job_outcome j;
    j.id = std::stoll(*r[0]);
    j.state = *r[1];
    j.attempts = std::stoi(*r[2]);
    j.max_attempts = std::stoi(*r[3]);
    j.last_error = r[4];
    j.claimed_by = r[5];
    if (j.state == "claimed") ++a.claimed;
    rows.emplace(j.id, std::move(j));
  }
  for (auto id : enqueued) {
    auto it = rows.find(id);
    if (it == rows.end()) {
      ++a.missing;
      ++a.report.lost;
      continue;
    }
    job_outcome j = it->second;
    if (auto r = runs.find(id); r != runs.end()) j.runs = r->second;
    if (j.runs > 1) a.report.re_run += j.runs - 1;
    if (j.attempts > 1) a.report.extra_claims += j.attempts - 1;
    if (j.state == "done" && j.runs > 0) {
      ++a.report.done;
    } else if (j.state == "dead") {
      ++a.report.dead;
    } else if (j.state == "ready" && ready_allowed) {
      ++a.report.ready;
    } else {
      ++a.report.lost;  // claimed, cancelled, ready where the queue should be empty, or
                        // done although no handler ever ran it
    }
    a.jobs.emplace(id, std::move(j));
  }
  a.done_acks =
      s.integer("SELECT coalesce(sum(n), 0) FROM pgqueue.done_counts WHERE queue = $1", {queue});
  return a;
}

void report_drain(accounting& a, const drain_outcome& outcome, const std::string& fault_note) {
  a.report.seconds = outcome.seconds;
  a.report.notes = fault_note + "; worker acked " + std::to_string(outcome.stats.acked) +
                   ", lost " + std::to_string(outcome.stats.lost) + ", janitor reset " +
                   std::to_string(outcome.stats.janitor_reset);
  a.report.print();
  INFO(outcome.failure);
  CHECK(outcome.failure.empty());
  CHECK(outcome.drained);
  check_accounting(a);
}

void check_accounting(const accounting& a) {
  INFO(a.report.line());
  CHECK(a.missing == 0);
  CHECK(a.claimed == 0);
  CHECK(a.report.lost == 0);
  // Each successful ack adds one to done_counts in the same transaction: equal counts mean no
  // job was acked twice and none ended done any other way.
  CHECK(a.done_acks == a.report.done);
  std::vector<std::int64_t> unexplained;
  for (const auto& [id, j] : a.jobs) {
    if (j.runs <= 1) continue;
    const bool expired = j.last_error && j.last_error->find("lease expired") != std::string::npos;
    if (!expired || j.attempts < j.runs) unexplained.push_back(id);
  }
  if (!unexplained.empty()) {
    const auto& j = a.jobs.at(unexplained.front());
    UNSCOPED_INFO("first unexplained re-run: job "
                  << j.id << " state " << j.state << " runs " << j.runs << " attempts "
                  << j.attempts << " last_error " << j.last_error.value_or("NULL"));
  }
  CHECK(unexplained.empty());
}

std::map<std::int64_t, std::vector<logged_run>> read_run_log(session& s) {
  std::map<std::int64_t, std::vector<logged_run>> out;
  for (auto& r : s.query("SELECT job_id, worker, attempt FROM fault_runs "
                         "ORDER BY job_id, attempt, at")) {
    out[std::stoll(*r[0])].push_back({*r[1], std::stoi(*r[2])});
  }
  return out;
}

std::map<std::int64_t, int> run_counts(const std::map<std::int64_t, std::vector<logged_run>>& log) {
  std::map<std::int64_t, int> out;
  for (const auto& [id, runs] : log) out[id] = static_cast<int>(runs.size());
  return out;
}

std::string check_effects(session& s, const std::string& queue) {
  const auto effects = s.integer(
      "SELECT count(*) FROM effects e JOIN pgqueue.jobs j ON j.id = e.job WHERE j.queue = $1",
      {queue});
  const auto done_without = s.integer(
      "SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = $1 AND j.state = 'done' "
      "AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.job = j.id)",
      {queue});
  const auto effect_without = s.integer(
      "SELECT count(*) FROM effects e JOIN pgqueue.jobs j ON j.id = e.job "
      "WHERE j.queue = $1 AND j.state <> 'done'",
      {queue});
  CHECK(done_without == 0);
  CHECK(effect_without == 0);
  return std::to_string(effects) + " effect rows (unique per job), " +
         std::to_string(done_without) + " done jobs without one, " +
         std::to_string(effect_without) + " for jobs not done";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

drain_outcome drain_under_fault(const drain_setup& setup, run_counter& runs,
                                const std::function<void(const std::atomic<bool>&)>& fault) {
  drain_outcome out;
  asio::io_context io;
  std::atomic<bool> finished{false};      // tells `fault` to return
  std::atomic<bool> worker_ended{false};  // run() returned or threw
  std::atomic<bool> drained{false};
  pgqueue::worker* running = nullptr;  // touched on the io thread only
  std::string fault_failure;
  const auto start = std::chrono::steady_clock::now();

  // Named: the coroutine refers to the lambda's captures for as long as it runs.
  auto body = [&]() -> asio::awaitable<void> {
    try {
      auto ex = co_await asio::this_coro::executor;
      std::optional<pgqueue::queue> q;
      pgqueue::pool pool;
      if (setup.transactional) {
        // Room for every handler's transaction besides the shared session.
        const auto size = static_cast<std::size_t>(setup.worker_options.concurrency) + 1;
        pool =
            co_await pgqueue::pool::open(ex, setup.worker_dsn, {.min_size = 1, .max_size = size});
        q = co_await pgqueue::queue::open(pool, setup.queue, setup.queue_options);
      } else {
        q.emplace(co_await pgqueue::connect(ex, setup.worker_dsn), setup.queue,
                  setup.queue_options);
      }
      const auto work =
          paced(setup.handler_work, setup.jobs, setup.worker_options.concurrency, setup.at_least);
      std::optional<pgqueue::worker> w;
      if (setup.transactional) {
        w.emplace(
            *q,
            [&runs, &setup, work](const pgqueue::job& j,
                                  pgqueue::transaction& tx) -> asio::awaitable<void> {
              runs.record(j.id);
              if (setup.on_run) setup.on_run(j);
              co_await tx.query("INSERT INTO effects (job) VALUES ($1)", {j.id});
              co_await pgq_test::pause(work);
            },
            setup.worker_options);
      } else {
        w.emplace(
            *q,
            [&runs, &setup, work](const pgqueue::job& j) -> asio::awaitable<void> {
              runs.record(j.id);
              if (setup.on_run) setup.on_run(j);
              co_await pgq_test::pause(work);
            },
            setup.worker_options);
      }
      running = &*w;
      try {
        co_await w->run();
      } catch (const std::exception& e) {
        out.failure = std::string("worker.run() threw: ") + e.what();
      }
      running = nullptr;
      out.stats = w->stats();
      pool.close();
    } catch (const std::exception& e) {
      out.failure = std::string("worker set-up failed: ") + e.what();
    }
    worker_ended = true;
  };
  asio::co_spawn(io, body(), asio::detached);

  std::thread fault_thread([&] {
    try {
      fault(finished);
    } catch (const std::exception& e) {
      fault_failure = e.what();
    }
  });
  std::thread watcher([&] {
    std::optional<session> s;
    const auto deadline = start + setup.limit;
    while (!worker_ended && std::chrono::steady_clock::now() < deadline) {
      try {
        if (!s) s.emplace(setup.admin_dsn);
        auto final_jobs = s->integer(
            "SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND state IN ('done', 'dead')",
            {setup.queue});
        if (final_jobs >= setup.jobs) {
          drained = true;
          break;
        }
      } catch (const std::exception&) {
        s.reset();  // the server is restarting or our session was hit: open a new one next time
      }
      std::this_thread::sleep_for(50ms);  // polling the database: no event to wait on
    }
    finished = true;
    fault_thread.join();
    asio::post(io, [&] {
      if (running) running->stop();
    });
  });

  io.run_for(setup.limit + std::chrono::seconds(30));
  if (!worker_ended && out.failure.empty()) out.failure = "the worker did not stop in time";
  watcher.join();
  out.seconds = seconds_since(start);
  out.drained = drained;
  if (!fault_failure.empty()) out.failure += " fault thread threw: " + fault_failure;
  return out;
}

}  // namespace pgq_fault
