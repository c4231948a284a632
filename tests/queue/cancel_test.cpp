// Every queue-level awaitable cancelled at every step it has: after 0, 1, 2 ... executor hops
// and after growing delays (before the request is sent, while it is in flight, after the
// answer came). Whatever the moment, nothing is stranded on the server (no job left claimed,
// no attempt used up by a claim nobody saw) and the objects may go away at once.
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_cancel_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// The moments a cancellation is tried at: k executor hops (k = 0..hops), then delays.
struct moment {
  int hops;
  std::chrono::microseconds delay;
};
std::vector<moment> moments() {
  std::vector<moment> out;
  for (int k = 0; k <= 12; ++k) out.push_back({k, 0us});
  for (int us = 50; us <= 3000; us += 150) out.push_back({0, std::chrono::microseconds(us)});
  for (int ms : {5, 10, 20, 40, 80}) out.push_back({0, std::chrono::milliseconds(ms)});
  // One the operation always beats, however loaded the machine: each test sees it complete.
  out.push_back({0, 5s});
  return out;
}

// Completes after `m`: the other side of a `||` that cancels the operation under test.
asio::awaitable<void> after(moment m) {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < m.hops; ++i) co_await asio::post(ex, asio::use_awaitable);
  if (m.delay.count() > 0) {
    asio::steady_timer t(ex, m.delay);
    co_await t.async_wait(asio::use_awaitable);
  }
}

// Jobs of `queue` in `state`.
std::int64_t jobs_in(session& s, const std::string& state) {
  return count_jobs(s, state);
}

}  // namespace

TEST_CASE("try_claim cancelled at any step strands nothing and uses no attempt", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  // One attempt each: a claim that stranded its job would kill it.
  admin.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
  int won = 0, cancelled = 0;
  for (const auto m : moments()) {
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto db = co_await f.connect();
      pgqueue::queue q(db, "q");
      auto r = co_await (q.try_claim() || after(m));
      if (r.index() == 0) {
        auto& got = std::get<0>(r);
        REQUIRE(got);
        ++won;
        co_await got->release();  // gives the attempt back: ready for the next round
      } else {
        ++cancelled;
      }
      // A cancelled claim's jobs are released in the background: wait for it to land.
      CHECK(co_await eventually([&] { return jobs_in(admin, "claimed") == 0; }));
    });
    auto j = read_job(admin, 1);
    INFO("hops " << m.hops << " delay " << m.delay.count() << " us");
    CHECK(j.state == "ready");
    CHECK(j.attempts == 0);
  }
  CHECK(cancelled > 0);
  CHECK(won > 0);
}

TEST_CASE("claim (waiting, then claiming) cancelled at any step strands nothing", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int won = 0, cancelled = 0;
  for (const auto m : moments()) {
    const bool with_job = m.hops % 2 == 0;  // alternately: a job waiting, or an empty queue
    if (with_job) admin.query("SELECT pgqueue.enqueue('q', '{}', NULL, 0, now(), 1)");
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto db = co_await f.connect();
      pgqueue::queue q(db, "q", {.poll_interval = 50ms});
      auto r = co_await (q.claim() || after(m));
      if (r.index() == 0) {
        ++won;
        co_await std::get<0>(r).ack();
      } else {
        ++cancelled;
      }
      CHECK(co_await eventually([&] { return jobs_in(admin, "claimed") == 0; }));
    });
    INFO("hops " << m.hops << " delay " << m.delay.count() << " us");
    CHECK(jobs_in(admin, "dead") == 0);
    // Leftovers are ready with their attempt unused, for the next round.
    CHECK(admin.integer(
              "SELECT count(*) FROM pgqueue.jobs WHERE state = 'ready' AND attempts > 0") == 0);
  }
  CHECK(won > 0);
  CHECK(cancelled > 0);
}

TEST_CASE("ack, nack and release cancelled at any step end the lease exactly once", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int op = 0;
  for (const auto m : moments()) {
    for (op = 0; op < 3; ++op) {
      auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
      bool finished_by_call = false;
      run_async([&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        auto db = co_await f.connect();
        pgqueue::queue q(db, "q");
        auto l = co_await q.claim();
        REQUIRE(l.job().id == id);
        auto finish = [&]() -> asio::awaitable<void> {
          if (op == 0) co_await l.ack();
          if (op == 1) co_await l.nack("failed", 1h);
          if (op == 2) co_await l.release();
        };
        try {
          auto r = co_await (finish() || after(m));
          finished_by_call = r.index() == 0 || l.finished();
        } catch (const pgqueue::error& e) {
          FAIL("unexpected " << e.what());
        }
        // Not started (cancelled before): the lease is still held and usable.
        if (!l.finished()) {
          CHECK_FALSE(finished_by_call);
          co_await finish();
        }
      });
      INFO("op " << op << " hops " << m.hops << " delay " << m.delay.count() << " us");
      auto j = read_job(admin, id);
      CHECK(j.state == (op == 0 ? "done" : "ready"));
      CHECK(j.attempts == (op == 2 ? 0 : 1));
      if (op == 2)
        admin.query("SELECT pgqueue.cancel($1)", {std::to_string(id)});  // out of the way
    }
  }
}

TEST_CASE("an ack from a coroutine already cancelled is refused and leaves the lease held",
          "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q(co_await f.connect(), "q");
    auto l = co_await q.claim();
    std::error_code refused;
    auto handler = [&]() -> asio::awaitable<void> {
      asio::steady_timer t(ex, 1h);
      std::error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));  // cancelled here
      try {
        co_await l.ack();
      } catch (const std::system_error& e) {  // Asio's own check may throw first
        refused = e.code();
      }
    };
    co_await (handler() || after({0, 10ms}));
    CHECK(refused == asio::error::operation_aborted);
    CHECK_FALSE(l.finished());
    CHECK(read_job(admin, id).state == "claimed");
    co_await l.ack();
  });
  CHECK(read_job(admin, id).state == "done");
}

TEST_CASE("enqueue cancelled at any step adds the job or nothing, never an error", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int returned = 0, cancelled = 0;
  for (const auto m : moments()) {
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto db = co_await f.connect();
      pgqueue::queue q(db, "q");
      auto r = co_await (q.enqueue("{\"k\": 1}") || after(m));
      (r.index() == 0 ? returned : cancelled)++;
      // The connection is still fine for everyone else.
      auto one = co_await db.query("SELECT 1");
      CHECK(one.get<int>(0, 0) == 1);
    });
  }
  const auto jobs = count_jobs(admin, "ready");
  CHECK(jobs >= returned);
  CHECK(jobs <= returned + cancelled);
  CHECK(returned > 0);
  CHECK(cancelled > 0);
}

TEST_CASE("an enqueue cancelled at any step announces the job it added", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int added = 0;
  int round = 0;
  for (const auto m : moments()) {
    // A queue per round, so a wake-up left from an earlier round cannot stand in for this one.
    const std::string name = "q" + std::to_string(++round);
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      pgqueue::queue listener(co_await f.connect(), name);
      co_await listener.watch();
      // A fresh handle: its first enqueue does not carry its wake-up, it sends one afterwards.
      pgqueue::queue q(co_await f.connect(), name);
      co_await (q.enqueue("{}") || after(m));
      // The enqueue has ended (a cancel does not cut off a request already sent).
      if (count_jobs(admin, "ready", name) == 1) {
        ++added;
        auto heard = co_await (listener.next_notification() || pause(5s));
        INFO("hops " << m.hops << " delay " << m.delay.count() << " us");
        CHECK(heard.index() == 0);
      }
    });
  }
  CHECK(added > 0);
}

TEST_CASE("a cancelled coroutine that turned Asio's check off still cannot claim or enqueue",
          "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
  std::vector<std::error_code> refusals;
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    pgqueue::queue q(co_await f.connect(), "q");
    auto cancelled_then_try = [&]() -> asio::awaitable<void> {
      co_await asio::this_coro::throw_if_cancelled(false);
      asio::steady_timer t(co_await asio::this_coro::executor, 1h);
      std::error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));  // cancelled here
      for (int op = 0; op < 3; ++op) {
        try {
          if (op == 0) co_await q.try_claim();
          if (op == 1) co_await q.enqueue("{\"late\": 1}");
          if (op == 2) co_await q.claim();
        } catch (const pgqueue::error& e) {
          refusals.push_back(e.code());
        }
      }
    };
    co_await (cancelled_then_try() || after({0, 10ms}));
  });
  REQUIRE(refusals.size() == 3);
  for (const auto& code : refusals) CHECK(code == asio::error::operation_aborted);
  CHECK(read_job(admin, id).state == "ready");
  CHECK(count_jobs(admin, "ready") == 1);
}

TEST_CASE("a claim cancelled while its request is in flight releases what it took", "[cancel]") {
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query(
      "SELECT pgqueue.enqueue_batch('q', array_agg('{}'::jsonb), NULL, 0, now(), 1) "
      "FROM generate_series(1, 5)");
  // The claim is sent, then a row lock held by another session... no: a slow server is
  // simulated by a statement queued ahead of it on the same session.
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto db = co_await f.connect();
    pgqueue::queue q(db, "q");
    auto ex = co_await asio::this_coro::executor;
    // pg_sleep ahead of the claim in the pipeline: the claim is sent and waits its turn.
    asio::co_spawn(ex, db.query("SELECT pg_sleep(0.3)"), asio::detached);
    auto r = co_await (q.try_claim_batch(5) || after({0, 100ms}));
    CHECK(r.index() == 1);
    CHECK(co_await eventually([&] { return count_jobs(admin, "claimed") == 0; }));
  });
  CHECK(count_jobs(admin, "ready") == 5);
  CHECK(admin.integer("SELECT sum(attempts) FROM pgqueue.jobs") == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE lease_token > 0") == 5);
}

// Sessions of `db` inside a transaction (open or failed) right now.
std::int64_t in_transaction_sessions(session& admin, const std::string& db) {
  return admin.integer("SELECT count(*) FROM pg_stat_activity WHERE datname = '" + db +
                       "' AND state LIKE 'idle in transaction%'");
}

TEST_CASE(
    "a transactional enqueue cancelled at any step commits the order and its job together "
    "or neither, and leaves no session in a transaction",
    "[cancel][transaction]") {
  queue_fixture f;
  session admin(f.db.dsn());
  admin.query("CREATE TABLE orders (id int PRIMARY KEY)");
  int order = 0, committed = 0, cancelled = 0;
  for (const auto m : moments()) {
    ++order;
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto ex = co_await asio::this_coro::executor;
      auto pool = co_await pgqueue::pool::open(ex, f.db.dsn(), {.min_size = 1, .max_size = 1});
      pgqueue::queue q(co_await f.connect(), "q");
      auto place = [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
        co_await tx.query("INSERT INTO orders VALUES ($1)", {order});
        co_await q.enqueue(tx, "{\"order\": " + std::to_string(order) + "}");
      };
      auto r = co_await (pgqueue::in_transaction(pool, place) || after(m));
      (r.index() == 0 ? committed : cancelled) += 1;
      // The pool rolls back what a cancel left open, in the background.
      CHECK(co_await eventually([&] { return pool.stats().idle == pool.stats().size; }));
    });  // the pool, the queue and the io_context go at once
    INFO("hops " << m.hops << " delay " << m.delay.count() << " us");
    const auto orders =
        admin.integer("SELECT count(*) FROM orders WHERE id = " + std::to_string(order));
    const auto jobs = admin.integer(
        "SELECT count(*) FROM pgqueue.jobs WHERE payload = '{\"order\": " + std::to_string(order) +
        "}'");
    CHECK(orders == jobs);
    CHECK(in_transaction_sessions(admin, f.db.name()) == 0);
  }
  CHECK(committed > 0);
  CHECK(cancelled > 0);
}

TEST_CASE(
    "an ack inside a transaction cancelled at any step finishes the lease exactly when it "
    "commits",
    "[cancel][transaction]") {
  queue_fixture f;
  session admin(f.db.dsn());
  int done = 0, held = 0;
  for (const auto m : moments()) {
    const auto id = admin.integer("SELECT pgqueue.enqueue('q', '{}')");
    bool finished = false;
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto ex = co_await asio::this_coro::executor;
      auto pool = co_await pgqueue::pool::open(ex, f.db.dsn(), {.min_size = 1, .max_size = 1});
      pgqueue::queue q(co_await f.connect(), "q");
      auto l = co_await q.claim();
      auto ack_in_transaction = [&]() -> asio::awaitable<void> {
        auto tx = co_await pgqueue::transaction::begin(pool);
        co_await l.ack(tx);
        co_await tx.commit();
      };
      co_await (ack_in_transaction() || after(m));
      finished = l.finished();
      if (finished) {
        ++done;
      } else {
        ++held;
        co_await l.release();  // held as before: still ours to give back
      }
    });
    INFO("hops " << m.hops << " delay " << m.delay.count() << " us");
    CHECK(read_job(admin, id).state == (finished ? "done" : "ready"));
    CHECK(in_transaction_sessions(admin, f.db.name()) == 0);
    admin.query("DELETE FROM pgqueue.jobs WHERE state = 'ready'");  // the next round's job is new
  }
  CHECK(done > 0);
  CHECK(held > 0);
}

}  // namespace queue_cancel_test
