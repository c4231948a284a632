// The queue layer across a dropped connection: direct calls in flight fail with
// connection_lost and later ones work, an idle claim catches up, a lease keeps heartbeating and
// can still be acked, and a worker drains everything while its backend is terminated.
#include <set>

#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/idle.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace queue_reconnect_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

void terminate(session& admin, int pid) {
  REQUIRE(admin.scalar("SELECT pg_terminate_backend($1)", {std::to_string(pid)}) == "t");
}

// Enqueues without a wake-up, so only a re-check can find the job.
std::int64_t enqueue_silently(session& admin, const std::string& queue) {
  return admin.integer("SELECT pgqueue.enqueue($1, '{}'::jsonb, p_wake => false)", {queue});
}

// Starts `op` now (awaitables are lazy) and records when it finished and how.
struct started {
  bool done = false;
  std::exception_ptr failure;
};
std::shared_ptr<started> start(const asio::any_io_executor& ex, asio::awaitable<void> op) {
  auto s = std::make_shared<started>();
  asio::co_spawn(ex, std::move(op), [s](std::exception_ptr e) {
    s->done = true;
    s->failure = e;
  });
  return s;
}

// Waits until backend `pid` is blocked on a lock.
asio::awaitable<bool> blocked_on_lock(session& admin, int pid) {
  co_return co_await eventually([&] { return waits_on_lock(admin, pid); });
}

// A named coroutine, not a lambda: the frame outlives the statement that starts it.
asio::awaitable<void> ack_all(std::vector<pgqueue::lease>& leases,
                              std::shared_ptr<std::size_t> acked) {
  *acked = co_await pgqueue::ack_batch(leases);
}

asio::awaitable<void> enqueue_with_key(pgqueue::queue q) {
  co_await q.enqueue("{}", {.idempotency_key = "k"});
}

}  // namespace

TEST_CASE("an enqueue in flight fails with connection_lost; later calls work",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  session other(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    pgqueue::queue q{db, "q"};
    // An uncommitted job with the same idempotency key makes the enqueue wait on the server.
    other.script("BEGIN");
    other.query("SELECT pgqueue.enqueue('q', '{}', 'k')");
    auto in_flight = start(db.get_executor(), enqueue_with_key(q));
    CHECK(co_await blocked_on_lock(admin, db.backend_pid()));
    terminate(admin, db.backend_pid());
    other.script("ROLLBACK");
    CHECK(co_await eventually([&] { return in_flight->done; }));
    REQUIRE(in_flight->failure);
    try {
      std::rethrow_exception(in_flight->failure);
    } catch (const pgqueue::error& e) {
      CHECK(e.code() == pgqueue::pg::errc::connection_lost);
      CHECK_THAT(e.what(), Catch::Contains("connection to server lost"));
    }
    auto id = co_await q.enqueue("{}", {.idempotency_key = "k"});
    auto lease = co_await q.claim();
    CHECK(lease.job().id == id);
    co_await lease.ack();
    CHECK(db.reconnects() == 1);
  });
  CHECK(count_jobs(admin, "done") == 1);
  CHECK(count_jobs(admin, "claimed") == 0);
}

TEST_CASE("an idle claim catches up after a reconnect: notifications meanwhile are lost",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    // Polling is out of the picture: only a notification or the reconnect marker wakes it.
    pgqueue::queue q{db, "q", {.poll_interval = 60s}};
    std::optional<pgqueue::lease> got;
    // Named: the coroutine refers to the lambda's captures for as long as it runs.
    auto claimer = [&]() -> asio::awaitable<void> { got.emplace(co_await q.claim()); };
    auto claiming = start(db.get_executor(), claimer());
    // Idle once its last query (how long to sleep) has been answered.
    CHECK(co_await waiting_for_event(admin, db.backend_pid()));
    const auto id = enqueue_silently(admin, "q");  // no NOTIFY: like one lost while down
    terminate(admin, db.backend_pid());
    CHECK(co_await eventually([&] { return claiming->done; }, 10s));
    CHECK_FALSE(claiming->failure);
    if (got) {
      CHECK(got->job().id == id);
      co_await got->ack();
    }
    CHECK(db.reconnects() == 1);
  });
}

TEST_CASE("a lease outlives a reconnect: it heartbeats on the new session and acks",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    pgqueue::queue q{db, "q", {.worker_id = "w1", .lease = 1s}};
    co_await q.enqueue("{}");
    auto lease = co_await q.claim();
    terminate(admin, db.backend_pid());
    // Time is the subject: twice the lease length, which only heartbeats can cover.
    co_await pause(2s);
    CHECK_FALSE(lease.lost());
    CHECK(admin.scalar("SELECT lease_until > now() FROM pgqueue.jobs WHERE id = $1",
                       {std::to_string(lease.job().id)}) == "t");
    co_await lease.ack();
    CHECK(db.reconnects() == 1);
  });
  CHECK(count_jobs(admin, "done") == 1);
}

TEST_CASE("an ack in flight at the drop is sent again; one that already took effect counts",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  session other(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    pgqueue::queue q{db, "q", {.worker_id = "w1"}};
    co_await q.enqueue("{}");
    co_await q.enqueue("{}");
    auto first = co_await q.claim();
    auto second = co_await q.claim();
    const auto ex = db.get_executor();

    // The first ack waits on a row lock when the session drops: its outcome is unknown, it is
    // sent again on the new session and acks.
    lock_job_row(other, first.job().id);
    auto acking = start(ex, first.ack());
    CHECK(co_await blocked_on_lock(admin, db.backend_pid()));
    terminate(admin, db.backend_pid());
    other.script("COMMIT");
    CHECK(co_await eventually([&] { return acking->done; }));
    CHECK_FALSE(acking->failure);

    // The second ack "took effect but its answer was lost": done by w1 at this attempt (in a
    // transaction that commits once the session dropped), the repeated ack finds it so.
    other.script("BEGIN");
    other.query("SELECT pgqueue.ack($1, 'w1', $2)",
                {std::to_string(second.job().id), std::to_string(second.job().attempts)});
    auto acking_again = start(ex, second.ack());
    CHECK(co_await blocked_on_lock(admin, db.backend_pid()));
    terminate(admin, db.backend_pid());
    other.script("COMMIT");
    CHECK(co_await eventually([&] { return acking_again->done; }));
    CHECK_FALSE(acking_again->failure);  // no lease_lost
    CHECK(db.reconnects() == 2);
  });
  CHECK(count_jobs(admin, "done") == 2);
}

TEST_CASE(
    "an ack_batch is sent again after drops while any of its leases is valid, not only "
    "the first",
    "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  session other(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    pgqueue::queue brief{db, "q", {.worker_id = "w1", .lease = 300ms}};
    pgqueue::queue lasting{db, "q", {.worker_id = "w1", .lease = 60s}};
    std::vector<pgqueue::lease> leases;
    co_await brief.enqueue("{}");
    leases.push_back(co_await brief.claim());
    // Taken back behind the first holder's back; its lease runs out unextended.
    take_back(admin, leases[0].job().id);
    CHECK(co_await eventually([&] { return leases[0].lost(); }, 2s));
    co_await pause(400ms);  // past its 300 ms, so only the number of tries keeps it going
    for (int i = 0; i < 5; ++i) {
      co_await lasting.enqueue("{}");
      auto l = co_await lasting.try_claim();
      REQUIRE(l);
      leases.push_back(std::move(*l));
    }
    // The ack waits on a row lock at each of three drops: after the third, only the first
    // lease has run out.
    lock_job_row(other, leases[1].job().id);
    auto acked = std::make_shared<std::size_t>(0);
    auto acking = start(db.get_executor(), ack_all(leases, acked));
    int pid = 0;
    for (int drop = 0; drop < 3; ++drop) {
      // The session of the moment: a new one after each drop.
      CHECK(co_await eventually([&] {
        pid = db.backend_pid();
        return pid != 0 && waits_on_lock(admin, pid);
      }));
      terminate(admin, pid);
      CHECK(co_await eventually([&] { return db.backend_pid() != pid; }));
    }
    other.script("COMMIT");
    CHECK(co_await eventually([&] { return acking->done; }));
    CHECK_FALSE(acking->failure);
    CHECK(*acked == 5);
  });
  CHECK(count_jobs(admin, "done") == 5);
}

TEST_CASE("a worker drains every job while its backend is terminated", "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  constexpr int jobs = 300;
  admin.query(
      "SELECT pgqueue.enqueue_batch('q', array_agg(jsonb_build_object('i', g))) "
      "FROM generate_series(1, $1) g",
      {std::to_string(jobs)});
  std::set<std::int64_t> handled;
  pgqueue::worker_stats stats;
  std::uint64_t reconnects = 0;
  run_async(
      [&]() -> asio::awaitable<void> {
        auto db = co_await f.connect();
        // A short lease: a claim whose answer was lost in the drop comes back through the janitor.
        pgqueue::queue q{db, "q", {.lease = 2s, .poll_interval = 200ms}};
        pgqueue::worker* self = nullptr;
        bool terminated = false;
        pgqueue::worker w(q,
                          [&](const pgqueue::job& j) -> asio::awaitable<void> {
                            co_await pause(2ms);
                            handled.insert(j.id);
                            if (!terminated && handled.size() >= jobs / 3) {
                              terminated = true;
                              terminate(admin, db.backend_pid());
                            }
                            if (handled.size() == jobs) self->stop();
                          },
                          {.concurrency = 8, .janitor_interval = 250ms});
        self = &w;
        co_await w.run();  // returns after stop(); throws if the worker gave up
        stats = w.stats();
        reconnects = db.reconnects();
      },
      90s);
  CHECK(handled.size() == jobs);
  CHECK(reconnects >= 1);
  INFO("acked " << stats.acked << ", lost " << stats.lost << ", claimed " << stats.claimed);
  CHECK(count_jobs(admin, "done") == jobs);
  CHECK(count_jobs(admin, "claimed") == 0);
  CHECK(count_jobs(admin, "ready") == 0);
}

TEST_CASE("a worker sends a claim the drop failed again as soon as the new session is up",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  session holder(f.db.dsn());
  admin.query("SELECT pgqueue.set_queue_limits('q', p_max_claimed => 4)");
  admin.query("SELECT pgqueue.enqueue('q', '{}')");
  // A limited queue's claims take turns on its limits row: held here, the worker's claim waits
  // on it, certainly in flight when its backend is terminated, and again on the new session.
  holder.script("BEGIN; SELECT FROM pgqueue.queue_limits WHERE queue = 'q' FOR UPDATE");
  std::int64_t gap_ms = -1;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    // The new session comes within milliseconds, so a pause of the worker's own shows.
    auto db = co_await pgqueue::connect(ex, f.db.dsn(), {.reconnect_initial_backoff = 1ms});
    pgqueue::queue q{db, "q", {.poll_interval = 60s}};
    pgqueue::worker* self = nullptr;
    pgqueue::worker w(q,
                      [&](const pgqueue::job&) -> asio::awaitable<void> {
                        self->stop();
                        co_return;
                      },
                      {.concurrency = 1, .janitor_interval = 24h});
    self = &w;
    auto running = start(ex, w.run());
    const int first = db.backend_pid();
    REQUIRE(co_await blocked_on_lock(admin, first));
    terminate(admin, first);
    REQUIRE(co_await eventually(
        [&] { return db.backend_pid() != first && waits_on_lock(admin, db.backend_pid()); }));
    // From the new backend's start to its claim: its startup, the LISTEN and the claim. Before,
    // the worker paused 250 ms after every drop, so the claim came about 240 ms after.
    gap_ms = admin.integer(
        "SELECT (extract(epoch FROM query_start - backend_start) * 1000)::bigint "
        "FROM pg_stat_activity WHERE pid = $1",
        {std::to_string(db.backend_pid())});
    holder.script("ROLLBACK");
    REQUIRE(co_await eventually([&] { return running->done; }));
    CHECK_FALSE(running->failure);
    CHECK(w.stats().acked == 1);
  });
  INFO("claim " << gap_ms << " ms after the new backend started");
  CHECK(gap_ms >= 0);
  CHECK(gap_ms < 200);
  CHECK(count_jobs(admin, "done") == 1);
}

TEST_CASE("an idle claim or worker whose connection ends for good fails at once, not at its poll",
          "[queue][reconnect]") {
  queue_fixture f;
  session admin(f.db.dsn());
  for (const bool use_worker : {false, true}) {
    INFO((use_worker ? "worker" : "claim()"));
    run_async([&]() -> asio::awaitable<void> {
      auto ex = co_await asio::this_coro::executor;
      auto db = co_await pgqueue::connect(ex, f.db.dsn(), {.reconnect = false});
      pgqueue::queue q{db, "q", {.poll_interval = 30s}};
      pgqueue::worker w(q, [](const pgqueue::job&) -> asio::awaitable<void> { co_return; });
      auto claimer = [&]() -> asio::awaitable<void> { co_await q.claim(); };
      auto waiting = start(ex, use_worker ? w.run() : claimer());
      REQUIRE(co_await waiting_for_event(admin, db.backend_pid()));
      const auto dropped = std::chrono::steady_clock::now();
      terminate(admin, db.backend_pid());
      // Before, the failed subscription waited for the 30 s poll timer.
      REQUIRE(co_await eventually([&] { return waiting->done; }, 5s));
      CHECK(std::chrono::steady_clock::now() - dropped < 2s);
      REQUIRE(waiting->failure);
      try {
        std::rethrow_exception(waiting->failure);
      } catch (const pgqueue::error& e) {
        CHECK(e.code() == pgqueue::pg::errc::connection_lost);
      }
    });
  }
}

TEST_CASE("a claim or enqueue waiting for the new session stops at once when cancelled",
          "[queue][reconnect][cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto ex = co_await asio::this_coro::executor;
    // The first reconnect attempt comes after 2 s: long enough to cancel while requests wait.
    auto db = co_await pgqueue::connect(
        ex, f.db.dsn(),
        {.reconnect_initial_backoff = 2s, .reconnect_max_backoff = 2s, .reconnect_wait = 10s});
    pgqueue::queue q(db, "q");
    co_await q.enqueue("{}");  // the handle's wake-up gate is known: nothing else is sent later
    terminate(admin, db.backend_pid());
    CHECK(co_await eventually([&] { return db.backend_pid() == 0; }));
    const auto began = std::chrono::steady_clock::now();
    auto claim = co_await (q.try_claim() || pause(50ms));
    CHECK(claim.index() == 1);
    auto added = co_await (q.enqueue("{\"late\": 1}") || pause(50ms));
    CHECK(added.index() == 1);
    CHECK(std::chrono::steady_clock::now() - began < 1s);
    // Neither was sent: once the new session is up, the job is untouched and nothing was added.
    CHECK(co_await eventually([&] { return db.backend_pid() != 0; }));
    auto one = co_await db.query("SELECT 1");
    CHECK(one.get<int>(0, 0) == 1);
  });
  const auto j = read_job(admin, id);
  CHECK(j.state == "ready");
  CHECK(j.attempts == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE payload ? 'late'") == 0);
}

}  // namespace queue_reconnect_test
