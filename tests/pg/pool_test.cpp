// pg::pool against a real server: sessions lent one holder at a time, waiting in order when all
// are taken (cancellable, with a timeout), reset before reuse when returned mid-transaction,
// replaced when broken.
#include <asio/experimental/awaitable_operators.hpp>
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/pool.hpp"
#include "support/async.hpp"
#include "support/server.hpp"

namespace pg_pool_test {

using namespace pgq_pg_test;
using namespace asio::experimental::awaitable_operators;

pg::pool_options sized(std::size_t min, std::size_t max,
                       std::chrono::milliseconds acquire_timeout = 10s) {
  pg::pool_options o;
  o.min_size = min;
  o.max_size = max;
  o.acquire_timeout = acquire_timeout;
  return o;
}

TEST_CASE("a pool lends distinct sessions up to max_size, then in the order callers asked",
          "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 2));
    CHECK(p.stats().size == 1);
    CHECK(p.stats().idle == 1);
    auto a = co_await p.acquire();
    auto b = co_await p.acquire();  // opened on demand
    CHECK(a->backend_pid() != b->backend_pid());
    CHECK(p.stats().size == 2);

    // Two more wait; the first to ask gets the first session back.
    std::vector<int> got;
    std::vector<pg::pooled_connection> kept;  // held, so each waiter gets a different one
    auto take = [&](int who) -> asio::awaitable<void> {
      auto c = co_await p.acquire();
      got.push_back(who);
      got.push_back(c->backend_pid());
      kept.push_back(std::move(c));
    };
    asio::co_spawn(ex, take(1), asio::detached);
    asio::co_spawn(ex, take(2), asio::detached);
    CHECK(co_await pgq_test::eventually([&] { return p.stats().waiting == 2; }));
    const int pid_a = a->backend_pid(), pid_b = b->backend_pid();
    a.release();
    CHECK(co_await pgq_test::eventually([&] { return got.size() == 2; }));
    b.release();
    CHECK(co_await pgq_test::eventually([&] { return got.size() == 4; }));
    CHECK(got == std::vector<int>{1, pid_a, 2, pid_b});
    kept.clear();
    CHECK(p.stats().size == 2);
    CHECK(p.stats().idle == 2);
  });
}

TEST_CASE("an acquire times out with pool_timeout; a cancelled one leaves nothing behind",
          "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1, 100ms));
    auto held = co_await p.acquire();
    const auto start = std::chrono::steady_clock::now();
    auto e = co_await expect_error(p.acquire());
    CHECK(e.code() == pg::errc::pool_timeout);
    CHECK(std::string(e.what()).find("max_size 1") != std::string::npos);
    CHECK(since(start) >= 100ms);
    CHECK(since(start) < 5s);
    CHECK(p.stats().waiting == 0);

    auto raced = co_await (p.acquire() || after(20ms));
    CHECK(raced.index() == 1);  // cancelled by the timer
    CHECK(p.stats().waiting == 0);
    held.release();
    CHECK(p.stats().idle == 1);
    auto again = co_await p.acquire();
    CHECK(again->is_open());
  });
}

TEST_CASE("a session returned inside a transaction is rolled back before it is lent again",
          "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1));
    {
      auto c = co_await p.acquire();
      co_await c->query("CREATE TABLE t (x int)");
      co_await c->query("BEGIN");
      co_await c->query("INSERT INTO t VALUES (1)");
      CHECK(c->in_transaction());
    }                               // back without COMMIT
    auto c = co_await p.acquire();  // waits for the rollback
    CHECK_FALSE(c->in_transaction());
    CHECK(c->outstanding() == 0);
    auto r = co_await c->query("SELECT count(*) FROM t");
    CHECK(r.get<std::int64_t>(0, 0) == 0);
  });
}

TEST_CASE("a closed or lost session is replaced by a new one", "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1));
    auto killer = co_await pg::connect(ex, db.dsn());
    int first = 0;
    {
      auto c = co_await p.acquire();
      first = c->backend_pid();
      // Dropped inside a transaction: the session is not replaced under the holder's feet.
      co_await c->query("BEGIN");
      co_await killer.query("SELECT pg_terminate_backend($1)", {first});
      auto e = co_await expect_error(c->query("SELECT 1"));
      CHECK(e.code() == pg::errc::connection_lost);
      CHECK_FALSE(c->is_open());
    }
    auto c = co_await p.acquire();
    CHECK(c->is_open());
    CHECK(c->backend_pid() != first);
    CHECK(p.stats().size == 1);
    const int second = c->backend_pid();
    c->close();
    c.release();
    auto d = co_await p.acquire();
    CHECK(d->backend_pid() != second);
    CHECK(p.stats().size == 1);
  });
}

TEST_CASE("a pool opens min_size sessions, all of them idle and lendable", "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(3, 3, 200ms));
    CHECK(p.stats().size == 3);
    CHECK(p.stats().idle == 3);
    auto a = co_await p.acquire();
    auto b = co_await p.acquire();
    auto c = co_await p.acquire();
    CHECK(a->backend_pid() != b->backend_pid());
    CHECK(b->backend_pid() != c->backend_pid());
    CHECK(a->backend_pid() != c->backend_pid());
    auto r =
        co_await c->query("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", {db.name()});
    CHECK(r.get<std::int64_t>(0, 0) == 3);
  });
}

TEST_CASE(
    "close(use_awaitable) returns once the idle and shared sessions are closed; a lent "
    "one closes when it comes back",
    "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(2, 4));
    auto shared = co_await p.shared();
    std::optional<pg::pooled_connection> lent = co_await p.acquire();
    CHECK(p.stats().size == 2);  // the min_size sessions: one shared, one lent
    co_await p.close(asio::use_awaitable);
    CHECK_FALSE(shared.is_open());
    CHECK(p.stats().idle == 0);
    CHECK(p.stats().size == 1);  // the lent session
    CHECK((*lent)->is_open());
    auto failed = co_await expect_error(p.acquire());
    CHECK(failed.code() == pg::errc::closed);
    auto still = co_await (*lent)->query("SELECT 1");
    CHECK(still.get<int>(0, 0) == 1);
    pg::connection back = **lent;
    lent.reset();  // given back to a closed pool: closed
    CHECK_FALSE(back.is_open());
    CHECK(p.stats().size == 0);
    co_await p.close(asio::use_awaitable);  // again: nothing left, at once
  });
}

TEST_CASE("a closed pool fails waiting and later acquires", "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1));
    auto held = co_await p.acquire();
    std::optional<pg::error> waiting;
    asio::co_spawn(
        ex, [&]() -> asio::awaitable<void> { waiting = co_await expect_error(p.acquire()); },
        asio::detached);
    CHECK(co_await pgq_test::eventually([&] { return p.stats().waiting == 1; }));
    p.close();
    CHECK(co_await pgq_test::eventually([&] { return waiting.has_value(); }));
    CHECK(waiting->code() == pg::errc::closed);
    const auto after_close = co_await expect_error(p.acquire());
    CHECK(after_close.code() == pg::errc::closed);
    const auto session = *held;
    held.release();
    CHECK_FALSE(session.is_open());  // closed on its way back
    CHECK(p.stats().size == 0);
  });
}

TEST_CASE("pool options outside their range are refused", "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto e = co_await expect_error(pg::pool::open(ex, db.dsn(), sized(3, 2)));
    CHECK(e.code() == pg::errc::invalid_argument);
    CHECK(std::string(e.what()).find("min_size") != std::string::npos);
    e = co_await expect_error(pg::pool::open(ex, db.dsn(), sized(0, 0)));
    CHECK(std::string(e.what()).find("max_size") != std::string::npos);
  });
}

TEST_CASE("a cancelled first shared() leaves nothing behind; the next takes the session",
          "[pg][pool]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1, 200ms));
    auto held = co_await p.acquire();
    for (int hops = 0; hops < 4; ++hops) {
      // Waits for the one session (held): cancelled while in line.
      auto raced = co_await (p.shared() || pgq_test::hops(hops));
      CHECK(raced.index() == 1);
      CHECK(p.stats().waiting == 0);
    }
    held.release();
    auto shared = co_await p.shared();
    auto again = co_await p.shared();
    CHECK(shared.backend_pid() == again.backend_pid());
    CHECK(p.stats().idle == 0);  // the shared session is never idle in the pool
    auto e = co_await expect_error(p.acquire());
    CHECK(e.code() == pg::errc::pool_timeout);
    p.close();
    CHECK_FALSE(shared.is_open());
  });
}

namespace {

// Holds the pool's one session until the context is destroyed.
asio::awaitable<void> hold(pg::pool p) {
  auto c = co_await p.acquire();
  asio::steady_timer t(co_await asio::this_coro::executor, 1h);
  co_await t.async_wait(asio::use_awaitable);
}

// Waits for a session that never comes free; `got` if it does.
asio::awaitable<void> wait_for_one(pg::pool p, bool& got) {
  auto c = co_await p.acquire();
  got = true;
}

}  // namespace

TEST_CASE("an io_context destroyed while one coroutine holds a session and another waits",
          "[pg][pool]") {
  pgq_test::scratch_database db(false);
  for (const bool holder_first : {true, false}) {
    auto io = std::make_unique<asio::io_context>();
    bool got = false;
    pg::pool kept;  // to see the waiter in line
    asio::co_spawn(
        *io,
        [&]() -> asio::awaitable<void> {
          auto ex = co_await asio::this_coro::executor;
          auto p = co_await pg::pool::open(ex, db.dsn(), sized(1, 1));
          kept = p;
          if (holder_first) {
            asio::co_spawn(ex, hold(p), asio::detached);
            co_await pgq_test::hops(5);
            asio::co_spawn(ex, wait_for_one(p, got), asio::detached);
          } else {
            auto c = co_await p.acquire();
            asio::co_spawn(ex, wait_for_one(p, got), asio::detached);
            asio::steady_timer t(ex, 1h);
            co_await t.async_wait(asio::use_awaitable);
          }
        },
        asio::detached);
    // Until the waiter waits: the pool then has one in line.
    for (int i = 0; i < 2000 && !(kept && kept.stats().waiting == 1); ++i) io->run_for(5ms);
    REQUIRE(kept);
    CHECK(kept.stats().waiting == 1);
    kept = pg::pool();  // handles go before their context; the frames hold the pool now
    io.reset();         // destroys every frame: the holder's gives its session back as it goes
    CHECK_FALSE(got);
  }
}

}  // namespace pg_pool_test
