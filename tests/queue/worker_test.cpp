// pgqueue::worker: drains with concurrency, nacks failures, stops without losing jobs.
#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/role.hpp"
#include "support/session.hpp"

namespace queue_worker_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// Enqueues `n` jobs {"i": k} in batches through the SQL API.
void fill(session& s, const std::string& queue, int n) {
  s.query(
      "SELECT pgqueue.enqueue_batch($1, array_agg(jsonb_build_object('i', g))) "
      "FROM generate_series(1, $2) g",
      {queue, std::to_string(n)});
}

}  // namespace

TEST_CASE("the worker drains 10,000 jobs with concurrency 16, each acked once", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int jobs = 10000;
  fill(admin, "q", jobs);
  std::map<std::int64_t, int> runs;
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        pgqueue::queue q{co_await f.connect(), "q"};
        int max_parallel = 0, parallel = 0;
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(q,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            max_parallel = std::max(max_parallel, ++parallel);
                            co_await pause(0ms);  // yield so handlers overlap
                            --parallel;
                            if (++runs[j.id] && runs.size() == jobs) self->stop();
                          },
                          {.concurrency = 16});
        self = &w;
        co_await w.run();
        stats = w.stats();
        CHECK(max_parallel == 16);
      },
      120s);
  CHECK(runs.size() == jobs);
  CHECK(std::all_of(runs.begin(), runs.end(), [](auto& r) { return r.second == 1; }));
  CHECK(stats.acked == jobs);
  CHECK(stats.lost == 0);
  CHECK(count_jobs(admin, "done") == jobs);
}

TEST_CASE("a worker with 3 connections claims on three sessions and runs each job once",
          "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int jobs = 3000;
  fill(admin, "q", jobs);
  const std::string dsn = f.db.dsn() + " application_name=pgq_lanes";
  const std::string sessions =
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgq_lanes'";
  std::map<std::int64_t, int> runs;
  std::int64_t sessions_while_running = 0;
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        pgqueue::queue q{co_await pgqueue::connect(ex, dsn), "q"};
        const auto no_sessions = pgqueue::worker_options{.concurrency = 2, .connections = 0};
        const auto too_many = pgqueue::worker_options{.concurrency = 2, .connections = 3};
        auto noop = [](const pgqueue::job&) -> asio::awaitable<void> { co_return; };
        CHECK_THROWS_AS(pgqueue::worker(q, noop, no_sessions), pgqueue::error);
        CHECK_THROWS_AS(pgqueue::worker(q, noop, too_many), pgqueue::error);
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(q,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            if (runs.empty()) sessions_while_running = admin.integer(sessions);
                            co_await pause(0ms);
                            if (++runs[j.id] && runs.size() == jobs) self->stop();
                          },
                          {.concurrency = 12, .connections = 3});
        self = &w;
        co_await w.run();
        stats = w.stats();
        // The two sessions the worker opened are closed when run() returns.
        const bool closed = co_await eventually([&] { return admin.integer(sessions) == 1; });
        CHECK(closed);
      },
      120s);
  CHECK(sessions_while_running == 3);
  CHECK(runs.size() == jobs);
  CHECK(std::all_of(runs.begin(), runs.end(), [](auto& r) { return r.second == 1; }));
  CHECK(stats.acked == jobs);
  CHECK(stats.claimed == jobs);
  CHECK(stats.lost == 0);
  CHECK(count_jobs(admin, "done") == jobs);
}

TEST_CASE("a handler that throws leaves the job requeued with the message", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t id = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await q.enqueue("{}");
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](pgqueue::lease&) -> asio::awaitable<void> {
                        self->stop();
                        throw std::runtime_error("smtp timeout");
                        co_return;
                      },
                      {.concurrency = 2});
    self = &w;
    co_await w.run();
    CHECK(w.stats().failed == 1);
  });
  auto j = read_job(admin, id);
  CHECK(j.state == "ready");
  CHECK(*j.last_error == "smtp timeout");
  CHECK(j.attempts == 1);
  CHECK_FALSE(j.due);  // backing off
}

namespace {

// Runs a worker over one job whose handler throws `message` (and stops the worker); returns
// the job's row and the worker's stats.
std::pair<job_row, pgqueue::worker_stats> fail_one_job(queue_fixture& f, session& admin,
                                                       const std::string& message) {
  std::int64_t id = 0;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await q.enqueue("{}");
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](pgqueue::lease&) -> asio::awaitable<void> {
                        self->stop();
                        throw std::runtime_error(message);
                        co_return;
                      },
                      {.concurrency = 1});
    self = &w;
    co_await w.run();
    stats = w.stats();
  });
  return {read_job(admin, id), stats};
}

}  // namespace

TEST_CASE("a handler's message with invalid UTF-8 is stored cleaned and the job requeued",
          "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  auto [j, stats] = fail_one_job(f, admin, "bad \xff\xfe utf8 \x1b[1m");
  CHECK(j.state == "ready");
  CHECK(j.attempts == 1);
  REQUIRE(j.last_error);
  CHECK(*j.last_error == "bad ?? utf8 ?[1m");
  CHECK(stats.failed == 1);
  CHECK(stats.lost == 0);
}

TEST_CASE("a 100 kB handler message is stored cut to 2000 bytes", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::string e_acute;  // 2 bytes each: the server's own cut (2000 characters) would keep 4000
  for (int i = 0; i < 50000; ++i) e_acute += "\xC3\xA9";
  auto [j, stats] = fail_one_job(f, admin, e_acute);
  CHECK(j.state == "ready");
  REQUIRE(j.last_error);
  CHECK(*j.last_error == e_acute.substr(0, 2000));
  CHECK(stats.failed == 1);
}

TEST_CASE("a nack the server refuses is sent again with a fixed reason", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  // Any reason mentioning "poison" fails the update of the job with SQLSTATE 22021.
  admin.script(R"(
    CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.last_error LIKE '%poison%' THEN
        RAISE EXCEPTION 'refused' USING ERRCODE = '22021';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER refuse_poison BEFORE UPDATE ON pgqueue.jobs
      FOR EACH ROW EXECUTE FUNCTION public.refuse_poison();)");
  auto [j, stats] = fail_one_job(f, admin, "poison");
  CHECK(j.state == "ready");
  CHECK(j.attempts == 1);
  REQUIRE(j.last_error);
  CHECK(*j.last_error == "the handler failed; the server refused its message (SQLSTATE 22021)");
  CHECK(stats.failed == 1);
  CHECK(stats.lost == 0);
}

TEST_CASE("stop() under load leaves no job claimed and loses none", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int jobs = 3000;
  fill(admin, "q", jobs);
  std::map<std::int64_t, int> finished;
  pgqueue::worker_stats stats;
  run_async(
      [&]() -> asio::awaitable<void> {
        pgqueue::queue q{co_await f.connect(), "q"};
        pgqueue::worker* self = nullptr;
        int started = 0;
        pgqueue::worker w(q,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            if (++started == 500) self->stop();
                            // Some handlers outlive the stop timeout and are cancelled.
                            co_await pause(j.id % 10 == 0 ? 5s : 1ms);
                            ++finished[j.id];
                          },
                          {.concurrency = 32, .stop_timeout = 200ms});
        self = &w;
        co_await w.run();
        stats = w.stats();
      },
      60s);
  CHECK(count_jobs(admin, "claimed") == 0);
  CHECK(count_jobs(admin, "done") == static_cast<std::int64_t>(stats.acked));
  CHECK(count_jobs(admin, "done") + count_jobs(admin, "ready") == jobs);
  CHECK(stats.lost == 0);
  CHECK(stats.released > 0);
  CHECK(stats.claimed == stats.acked + stats.released);
  // Every handler that finished was acked; none ran twice.
  CHECK(finished.size() == stats.acked);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE attempts > 1") == 0);
}

TEST_CASE("a worker runs again after run() returned, stopped or cancelled", "[worker]") {
  queue_fixture f;
  session admin(f.db.dsn());
  for (int connections : {1, 2}) {
    for (bool cancel : {false, true}) {
      const std::string queue = "again" + std::to_string(connections) + (cancel ? "c" : "s");
      fill(admin, queue, 20);
      std::vector<int> handled_per_run;
      run_async([&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        pgqueue::queue q{co_await f.connect(), queue};
        int handled = 0;
        asio::cancellation_signal enough;  // the first run ends after 5 jobs
        pgqueue::worker* self = nullptr;
        pgqueue::worker w(q,
                          [&](const pgqueue::job&) -> asio::awaitable<void> {
                            if (++handled == 5) {
                              if (cancel) {
                                enough.emit(asio::cancellation_type::terminal);
                              } else {
                                self->stop();
                              }
                            }
                            co_return;
                          },
                          {.concurrency = 2, .connections = connections});
        self = &w;
        std::error_code first;
        try {
          co_await asio::co_spawn(co_await asio::this_coro::executor, w.run(),
                                  asio::bind_cancellation_slot(enough.slot(), asio::use_awaitable));
        } catch (const pgqueue::error& e) {
          first = e.code();
        }
        CHECK(first ==
              (cancel ? std::error_code(asio::error::operation_aborted) : std::error_code()));
        handled_per_run.push_back(handled);
        handled = 100;  // the second run stops once the queue is empty
        auto second = [&]() -> asio::awaitable<void> {
          co_await eventually([&] { return count_jobs(admin, "done", queue) == 20; });
          w.stop();
        };
        co_await (w.run() && second());
        handled_per_run.push_back(handled - 100);
        CHECK(w.stats().acked == 20);
      });
      INFO(connections << " connections, " << (cancel ? "cancelled" : "stopped"));
      REQUIRE(handled_per_run.size() == 2);
      CHECK(handled_per_run[0] >= 5);
      CHECK(handled_per_run[0] + handled_per_run[1] == 20);
      CHECK(count_jobs(admin, "done", queue) == 20);
    }
  }
}

TEST_CASE("one worker in the fleet runs the janitor", "[worker][janitor]") {
  queue_fixture f;
  session admin(f.db.dsn());
  // A job whose lease already expired, as if its worker had crashed.
  admin.query("SELECT pgqueue.enqueue('q', '{}')");
  admin.query("SELECT pgqueue.claim_batch('q', 'crashed', 1, '1 millisecond')");
  admin.query("UPDATE pgqueue.jobs SET lease_until = now() - interval '1 s'");
  pgqueue::worker_stats a_stats, b_stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue qa{co_await f.connect(), "q"};
    pgqueue::queue qb{co_await f.connect(), "q"};
    pgqueue::worker* wa = nullptr;
    pgqueue::worker* wb = nullptr;
    int ran = 0;
    auto handler = [&](const pgqueue::job&) -> asio::awaitable<void> {
      ++ran;
      wa->stop();
      wb->stop();
      co_return;
    };
    pgqueue::worker a(qa, handler, {.janitor_interval = 50ms});
    pgqueue::worker b(qb, handler, {.janitor_interval = 50ms});
    wa = &a;
    wb = &b;
    using namespace asio::experimental::awaitable_operators;
    co_await (a.run() && b.run());
    a_stats = a.stats();
    b_stats = b.stats();
    CHECK(ran == 1);
  });
  CHECK(a_stats.janitor_reset + b_stats.janitor_reset == 1);
  CHECK(count_jobs(admin, "done") == 1);
}

namespace {

// How the jobs of `queue` ended after a worker stopped: done at attempt 1, released (ready,
// the attempt given back), or nacked by the handler (ready later, attempt 1, 'retry').
struct ending {
  std::int64_t total, claimed, done, released, nacked;
};

ending ending_of(session& admin, const std::string& queue) {
  auto count = [&](const std::string& where) {
    return admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = $1 AND " + where,
                         {queue});
  };
  return {count("true"), count("state = 'claimed'"), count("state = 'done' AND attempts = 1"),
          count("state = 'ready' AND attempts = 0"),
          count("state = 'ready' AND attempts = 1 AND last_error = 'retry' AND run_after > now()")};
}

bool aborted(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const pgqueue::error& x) {
    return x.code() == asio::error::operation_aborted;
  } catch (...) {
  }
  return false;
}

// A handler that takes a few ms and then ends its job one of three ways: nacked by itself,
// acked by itself, or returning (acked by the worker).
asio::awaitable<void> mixed_handler(pgqueue::lease& l) {
  co_await pause(std::chrono::milliseconds(l.job().id % 4));
  switch (l.job().id % 3) {
    case 0:
      co_await l.nack("retry", std::chrono::hours(1));
      break;
    case 1:
      co_await l.ack();
      break;
    default:
      break;
  }
}

}  // namespace

TEST_CASE("run() cancelled at any moment returns once all it started has ended, nothing stranded",
          "[worker][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  using namespace asio::experimental::awaitable_operators;
  using trigger = std::function<asio::awaitable<void>()>;
  std::vector<std::pair<std::string, trigger>> moments;
  for (int n = 0; n <= 12; ++n) {
    moments.emplace_back("after " + std::to_string(n) + " hops", [n] { return hops(n); });
  }
  for (int ms : {1, 2, 5, 10, 20, 40}) {
    moments.emplace_back("after " + std::to_string(ms) + " ms",
                         [ms] { return pause(std::chrono::milliseconds(ms)); });
  }
  int round = 0;
  for (int connections : {1, 3}) {
    for (bool terminal : {false, true}) {
      for (auto& [when, start_trigger] : moments) {
        const std::string queue = "c" + std::to_string(++round);
        fill(admin, queue, 24);
        pgqueue::worker_stats stats;
        bool threw_aborted = false;
        run_async([&]() -> asio::awaitable<void> {
          pgqueue::queue q{co_await f.connect(), queue};
          pgqueue::worker w(q, mixed_handler,
                            {.concurrency = 6,
                             .connections = connections,
                             .janitor_interval = 5ms,
                             .stop_timeout = 5s});
          if (terminal) {
            threw_aborted = aborted(
                co_await cancelled_by(w.run(), start_trigger(), asio::cancellation_type::terminal));
          } else {
            // What an application writes; `||` cancels run() with every type allowed.
            auto winner = co_await (w.run() || start_trigger());
            threw_aborted = winner.index() == 1;
          }
          stats = w.stats();
          // Nothing left for the background: every job it claimed has ended by now.
          CHECK(count_jobs(admin, "claimed", queue) == 0);
        });  // the worker is gone here, and so is its io_context
        INFO(connections << " connections, " << (terminal ? "terminal " : "all types ") << when);
        CHECK(threw_aborted);
        const auto e = ending_of(admin, queue);
        CHECK(e.claimed == 0);
        CHECK(e.done + e.released + e.nacked == e.total);
        // Each job claimed was acked, nacked by its handler, or released by the worker.
        CHECK(stats.claimed == static_cast<std::uint64_t>(e.done + e.nacked) + stats.released);
        // With several sessions one job can be released twice: a lane releases it at stop while
        // another lane's claim, sent before the stop, takes it and gives it back again.
        if (connections == 1) CHECK(stats.released <= static_cast<std::uint64_t>(e.released));
        CHECK(stats.lost == 0);
        // The handlers' own nacks count as failed, their acks as acked.
        CHECK(stats.failed == static_cast<std::uint64_t>(e.nacked));
        CHECK(stats.acked + stats.failed + stats.released == stats.claimed);
      }
    }
  }
}

TEST_CASE("a stop now acks the jobs whose handlers still returned normally", "[worker][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int concurrency = 4;
  fill(admin, "q", concurrency);
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q{co_await f.connect(), "q"};
    asio::steady_timer all_started(ex, asio::steady_timer::time_point::max());
    int started = 0;
    pgqueue::worker w(q,
                      [&](const pgqueue::job&) -> asio::awaitable<void> {
                        // In the past: a wait that begins later completes at once, as does one
                        // under way.
                        if (++started == concurrency)
                          all_started.expires_at(asio::steady_timer::time_point::min());
                        // Finishes its work whatever happens: the cancel only ends this wait early.
                        asio::steady_timer t(co_await asio::this_coro::executor, 30s);
                        std::error_code ec;
                        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                      },
                      {.concurrency = concurrency, .stop_timeout = 30s});
    auto wait_started = [&]() -> asio::awaitable<void> {
      std::error_code ec;
      co_await all_started.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    };
    CHECK(
        aborted(co_await cancelled_by(w.run(), wait_started(), asio::cancellation_type::terminal)));
    stats = w.stats();
  });
  CHECK(count_jobs(admin, "done") == concurrency);
  CHECK(stats.acked == concurrency);
  CHECK(stats.released == 0);
}

TEST_CASE("a terminal cancellation of run() stops now; `||` lets handlers finish",
          "[worker][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int concurrency = 6;
  using namespace asio::experimental::awaitable_operators;
  for (int connections : {1, 3}) {
    for (bool terminal : {true, false}) {
      const std::string queue = "s" + std::to_string(connections) + (terminal ? "t" : "g");
      fill(admin, queue, concurrency);
      int cut_short = 0;
      pgqueue::worker_stats stats;
      bool threw_aborted = false;
      auto elapsed = 0ms;
      run_async([&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        pgqueue::queue q{co_await f.connect(), queue};
        // Cancelled when every handler has started: an event, not a guess at the time.
        asio::steady_timer all_started(ex, asio::steady_timer::time_point::max());
        int started = 0;
        pgqueue::worker w(
            q,
            [&](const pgqueue::job&) -> asio::awaitable<void> {
              if (++started == concurrency) all_started.cancel();
              try {
                co_await pause(terminal ? 30s : 300ms);
              } catch (const std::system_error& e) {
                if (e.code() == asio::error::operation_aborted) ++cut_short;
                throw;
              }
            },
            {.concurrency = concurrency, .connections = connections, .stop_timeout = 30s});
        auto wait_started = [&]() -> asio::awaitable<void> {
          std::error_code ec;
          co_await all_started.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        };
        const auto start = std::chrono::steady_clock::now();
        if (terminal) {
          threw_aborted = aborted(
              co_await cancelled_by(w.run(), wait_started(), asio::cancellation_type::terminal));
        } else {
          threw_aborted = (co_await (w.run() || wait_started())).index() == 1;
        }
        elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
        stats = w.stats();
      });
      INFO(connections << " connections, " << (terminal ? "terminal" : "||"));
      CHECK(threw_aborted);
      const auto e = ending_of(admin, queue);
      CHECK(e.claimed == 0);
      if (terminal) {
        // At once, not after stop_timeout: every handler cancelled, every job given back.
        CHECK(elapsed < 5s);
        CHECK(cut_short == concurrency);
        CHECK(e.released == concurrency);
        CHECK(stats.released == concurrency);
      } else {
        CHECK(cut_short == 0);
        CHECK(e.done == concurrency);
        CHECK(stats.acked == concurrency);
      }
    }
  }
}

TEST_CASE("run() cancelled while its connection reconnects still ends everything it started",
          "[worker][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  using namespace asio::experimental::awaitable_operators;
  int round = 0;
  for (int connections : {1, 3}) {
    for (int after_ms : {0, 5, 50, 300}) {
      const std::string queue = "r" + std::to_string(++round);
      fill(admin, queue, 60);
      bool threw_aborted = false;
      auto elapsed = 0ms;
      pgqueue::worker_stats stats;
      run_async([&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        pgqueue::queue q{co_await f.connect(), queue};
        asio::steady_timer some_handled(ex, asio::steady_timer::time_point::max());
        int handled = 0;
        pgqueue::worker w(q,
                          [&](const pgqueue::job&) -> asio::awaitable<void> {
                            co_await pause(2ms);
                            if (++handled == 6) some_handled.cancel();
                          },
                          {.concurrency = 6, .connections = connections, .janitor_interval = 5ms});
        // Once jobs flow: the queue's session is terminated, then run() is cancelled while
        // the connection is (or soon will be) reconnecting.
        auto drop_then_wait = [&]() -> asio::awaitable<void> {
          std::error_code ec;
          co_await some_handled.async_wait(asio::redirect_error(asio::use_awaitable, ec));
          admin.query("SELECT pg_terminate_backend($1)", {std::to_string(q.db().backend_pid())});
          co_await pause(std::chrono::milliseconds(after_ms));
        };
        const auto start = std::chrono::steady_clock::now();
        threw_aborted = (co_await (w.run() || drop_then_wait())).index() == 1;
        elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
        stats = w.stats();
      });
      INFO(connections << " connections, cancelled " << after_ms << " ms after the drop");
      CHECK(threw_aborted);
      CHECK(elapsed < 20s);
      const auto e = ending_of(admin, queue);
      // A claim whose answer the drop lost leaves its jobs claimed until their leases expire
      // (at most one claim's worth); every other job is done or was never taken.
      CHECK(e.claimed <= 6);
      CHECK(e.claimed + e.done + e.released == e.total);
      CHECK(stats.failed == 0);
    }
  }
}

namespace {

constexpr const char* janitor_lock_key = "8100266002545501542";

// Replaces the janitor's statement in the fixture's database by a spy that fails with
// SQLSTATE 57014 (as a statement_timeout would) on its first `failures` calls, then counts
// each call as one job reset and sends a NOTIFY on channel 'janitor_ran'.
void spy_on_janitor(session& admin, int failures) {
  // Claims run the janitor too when it is due (pgqueue.maintain_if_due): never, here, so the
  // spy counts the worker's calls only.
  admin.query("UPDATE pgqueue.maintenance SET janitor_due_at = 'infinity'");
  // A sequence counts the calls: unlike a table, it is not rolled back with a failed call.
  admin.script("CREATE SEQUENCE public.janitor_calls;");
  admin.script(R"(
    CREATE OR REPLACE FUNCTION pgqueue.janitor_reset_stale_claims(
      p_grace interval DEFAULT '0 seconds'::interval)
    RETURNS int LANGUAGE plpgsql AS $$
    DECLARE v_n int;
    BEGIN
      v_n := nextval('public.janitor_calls');
      IF v_n <= )" +
               std::to_string(failures) + R"( THEN
        RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = '57014';
      END IF;
      PERFORM pg_notify('janitor_ran', v_n::text);
      RETURN 1;
    END $$;)");
}

// Waits for `n` notifications on `sub` (bounded by the test's run_async limit).
asio::awaitable<void> notifications(pgqueue::pg::subscription& sub, int n) {
  for (int i = 0; i < n; ++i) co_await sub.next();
}

}  // namespace

TEST_CASE("two workers on one connection: exactly one runs the janitor", "[worker][janitor]") {
  queue_fixture f;
  session admin(f.db.dsn());
  spy_on_janitor(admin, 0);
  pgqueue::worker_stats a_stats, b_stats;
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    auto watcher = co_await f.connect();
    auto ran = co_await watcher.subscribe("janitor_ran");
    pgqueue::queue q{db, "q"};
    auto noop = [](const pgqueue::job&) -> asio::awaitable<void> { co_return; };
    pgqueue::worker a(q, noop, {.janitor_interval = 10ms});
    pgqueue::worker b(q, noop, {.janitor_interval = 10ms});
    auto watch = [&]() -> asio::awaitable<void> {
      co_await notifications(ran, 10);
      a.stop();
      b.stop();
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (a.run() && b.run() && watch());
    a_stats = a.stats();
    b_stats = b.stats();
    // The one lock taken was given back: another session can take it.
    CHECK(*admin.scalar("SELECT pg_try_advisory_lock($1)", {janitor_lock_key}) == "t");
  });
  CHECK(a_stats.janitor_reset + b_stats.janitor_reset >= 10);
  CHECK(std::min(a_stats.janitor_reset, b_stats.janitor_reset) == 0);
}

TEST_CASE("a janitor statement that fails keeps the lock once, and stop() gives it back",
          "[worker][janitor]") {
  queue_fixture f;
  session admin(f.db.dsn());
  spy_on_janitor(admin, 3);
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    auto watcher = co_await f.connect();
    auto ran = co_await watcher.subscribe("janitor_ran");
    pgqueue::queue q{co_await f.connect(), "q"};
    auto noop = [](const pgqueue::job&) -> asio::awaitable<void> { co_return; };
    pgqueue::worker w(q, noop, {.janitor_interval = 10ms});
    auto watch = [&]() -> asio::awaitable<void> {
      co_await notifications(ran, 2);  // the 4th and 5th calls: after three failures
      w.stop();
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (w.run() && watch());
    stats = w.stats();
    // The worker's connection is still open (as an application's would be), yet the lock is
    // free: it was held once, not once per try.
    CHECK(q.db().is_open());
    CHECK(*admin.scalar("SELECT pg_try_advisory_lock($1)", {janitor_lock_key}) == "t");
  });
  CHECK(stats.janitor_reset >= 2);
  CHECK(admin.integer("SELECT last_value FROM public.janitor_calls") >= 5);
}

}  // namespace queue_worker_test

namespace queue_worker_test {

TEST_CASE("run() ended by a claim the server refuses for good still acks the finished jobs",
          "[worker]") {
  // (The acks riding on the refused claim were counted lost: 8 finished jobs stayed claimed
  // and ran again after their leases expired.)
  queue_fixture f;
  session admin(f.db.dsn());
  scoped_role role(f.db.dsn(), "worker");
  admin.query("SELECT pgqueue.grant_worker($1)", {role.name()});
  admin.query("SELECT pgqueue.enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[100]))");
  int handled = 0;
  std::string refused;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await pgqueue::connect(co_await asio::this_coro::executor, role.dsn()),
                     "q"};
    pgqueue::worker w(q,
                      [&](const pgqueue::job&) -> asio::awaitable<void> {
                        if (++handled == 10) {
                          // From the next claim on, refused (42501); ack_batch stays granted.
                          admin.query(
                              "REVOKE EXECUTE ON FUNCTION pgqueue.claim_batch(text, text, int, "
                              "interval) FROM " +
                              role.name());
                        }
                        co_return;
                      },
                      {.concurrency = 4});
    try {
      co_await w.run();
    } catch (const pgqueue::error& e) {
      refused = e.sqlstate();
    }
    stats = w.stats();
  });
  CHECK(refused == "42501");
  CHECK(handled >= 10);
  CHECK(stats.lost == 0);
  CHECK(stats.acked == static_cast<std::uint64_t>(handled));
  CHECK(count_jobs(admin, "done", "q") == handled);
  CHECK(count_jobs(admin, "claimed", "q") == 0);
}

}  // namespace queue_worker_test
