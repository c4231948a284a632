// pg::transaction and in_transaction against a real server: commit and rollback, a transaction
// dropped unfinished, serialization failures retried to completion (and no further than
// allowed), a failed statement's COMMIT, and drops inside the transaction and during COMMIT.
#include <asio/experimental/awaitable_operators.hpp>
#include <string>

#include "pg_test_util.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "support/async.hpp"
#include "support/server.hpp"

namespace pg_transaction_test {

using namespace pgq_pg_test;

namespace {

// A pool on `db` with a table t (x int) and a one-row counter (n int).
asio::awaitable<pg::pool> pool_with_tables(const std::string& dsn) {
  auto ex = co_await asio::this_coro::executor;
  pg::pool_options o;
  o.min_size = 1;
  o.max_size = 4;
  auto p = co_await pg::pool::open(ex, dsn, o);
  auto c = co_await p.acquire();
  co_await c->execute_script(
      "CREATE TABLE t (x int); CREATE TABLE counter (n int); INSERT INTO counter VALUES (0);");
  co_return p;
}

asio::awaitable<std::int64_t> count_t(const pg::pool& p) {
  auto c = co_await p.acquire();
  auto r = co_await c->query("SELECT count(*) FROM t");
  co_return r.get<std::int64_t>(0, 0);
}

}  // namespace

TEST_CASE("commit makes a transaction's rows visible; rollback and an unfinished one do not",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto p = co_await pool_with_tables(db.dsn());
    {
      auto tx = co_await pg::transaction::begin(p);
      co_await tx.query("INSERT INTO t VALUES (1)");
      CHECK(co_await count_t(p) == 0);  // not yet, from another session
      co_await tx.commit();
      CHECK_FALSE(tx.active());
    }
    CHECK(co_await count_t(p) == 1);
    {
      auto tx = co_await pg::transaction::begin(p);
      co_await tx.query("INSERT INTO t VALUES (2)");
      co_await tx.rollback();
      auto e = co_await expect_error(tx.query("SELECT 1"));
      CHECK(e.code() == pg::errc::closed);
    }
    {
      auto tx = co_await pg::transaction::begin(p);
      co_await tx.query("INSERT INTO t VALUES (3)");
    }  // dropped open: rolled back by the pool
    CHECK(co_await count_t(p) == 1);
  });
}

TEST_CASE("in_transaction commits the body's work, or rolls it back when the body throws",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto p = co_await pool_with_tables(db.dsn());
    auto n = co_await pg::in_transaction(p, [](pg::transaction& tx) -> asio::awaitable<int> {
      co_await tx.query("INSERT INTO t VALUES (1)");
      co_return 7;
    });
    CHECK(n == 7);
    bool threw = false;
    try {
      co_await pg::in_transaction(p, [](pg::transaction& tx) -> asio::awaitable<void> {
        co_await tx.query("INSERT INTO t VALUES (2)");
        throw std::runtime_error("business rule");
      });
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "business rule";
    }
    CHECK(threw);
    CHECK(co_await count_t(p) == 1);
  });
}

namespace {

// Two serializable bodies read the counter, wait until both have read it, then write it: one
// of them fails with 40001 the first time. Returns how many times the bodies ran.
asio::awaitable<int> conflicting_increments(const pg::pool& p, int max_attempts,
                                            std::optional<pg::error>& failure) {
  auto ex = co_await asio::this_coro::executor;
  int runs = 0, read = 0;
  pg::transaction_options o;
  o.level = pg::isolation::serializable;
  o.max_attempts = max_attempts;
  auto body = [&](pg::transaction& tx) -> asio::awaitable<void> {
    const bool first_round = ++runs <= 2;
    auto r = co_await tx.query("SELECT n FROM counter");
    ++read;
    if (first_round) {
      // Both read before either writes (a bounded wait on the other's read).
      CHECK(co_await pgq_test::eventually([&] { return read >= 2; }));
    }
    co_await tx.query("UPDATE counter SET n = $1", {r.get<int>(0, 0) + 1});
  };
  int done = 0;
  auto one = [&]() -> asio::awaitable<void> {
    try {
      co_await pg::in_transaction(p, body, o);
    } catch (const pg::error& e) {
      failure = e;
    }
    ++done;
  };
  asio::co_spawn(ex, one(), asio::detached);
  asio::co_spawn(ex, one(), asio::detached);
  CHECK(co_await pgq_test::eventually([&] { return done == 2; }));
  co_return runs;
}

}  // namespace

TEST_CASE(
    "in_transaction runs a body again after a serialization failure, a bounded number of "
    "times",
    "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto p = co_await pool_with_tables(db.dsn());
    std::optional<pg::error> failure;
    auto runs = co_await conflicting_increments(p, 5, failure);
    CHECK(runs == 3);  // one ran twice
    CHECK_FALSE(failure);
    auto c = co_await p.acquire();
    auto n = co_await c->query("SELECT n FROM counter");
    CHECK(n.get<int>(0, 0) == 2);

    // With one run allowed, the loser's 40001 reaches the caller.
    runs = co_await conflicting_increments(p, 1, failure);
    CHECK(runs == 2);
    REQUIRE(failure);
    CHECK(failure->sqlstate() == "40001");
    n = co_await c->query("SELECT n FROM counter");
    CHECK(n.get<int>(0, 0) == 3);
  });
}

TEST_CASE("COMMIT after a failed statement fails with 25P02 and keeps nothing",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto p = co_await pool_with_tables(db.dsn());
    auto tx = co_await pg::transaction::begin(p);
    co_await tx.query("INSERT INTO t VALUES (1)");
    const auto failed = co_await expect_error(tx.query("SELECT 1/0"));
    CHECK(failed.sqlstate() == "22012");
    auto e = co_await expect_error(tx.commit());
    CHECK(e.sqlstate() == "25P02");
    CHECK(co_await count_t(p) == 0);
  });
}

TEST_CASE("a transaction whose statement was cancelled cannot commit: it rolls back",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto p = co_await pool_with_tables(db.dsn());
    auto tx = co_await pg::transaction::begin(p);
    // Cancelled by the timer after it was sent: it still runs on the server.
    auto raced = co_await (tx.query("INSERT INTO t SELECT 1 FROM pg_sleep(0.2)") || after(20ms));
    CHECK(raced.index() == 1);
    const auto e = co_await expect_error(tx.commit());
    CHECK(e.sqlstate() == "25P02");
    CHECK(co_await count_t(p) == 0);
  });
}

TEST_CASE("a session that dropped while idle in the pool still begins a transaction",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pg::pool_options o;
    o.max_size = 1;
    auto p = co_await pg::pool::open(ex, db.dsn(), o);
    auto killer = co_await pg::connect(ex, db.dsn());
    int pid = 0;
    {
      auto c = co_await p.acquire();
      pid = c->backend_pid();
    }
    co_await killer.query("SELECT pg_terminate_backend($1)", {pid});
    auto tx = co_await pg::transaction::begin(p);  // its first BEGIN meets the dead session
    auto r = co_await tx.query("SELECT 1");
    CHECK(r.get<int>(0, 0) == 1);
    co_await tx.commit();
  });
}

TEST_CASE("a drop inside a transaction fails it with connection_lost and replays nothing",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pool_with_tables(db.dsn());
    auto killer = co_await pg::connect(ex, db.dsn());
    auto tx = co_await pg::transaction::begin(p);
    co_await tx.query("INSERT INTO t VALUES (1)");
    co_await killer.query("SELECT pg_terminate_backend($1)", {tx.session().backend_pid()});
    auto e = co_await expect_error(tx.query("INSERT INTO t VALUES (2)"));
    CHECK(e.code() == pg::errc::connection_lost);
    // Known to have ended before COMMIT was sent: rolled back, not unknown.
    const auto at_commit = co_await expect_error(tx.commit());
    CHECK(at_commit.code() == pg::errc::connection_lost);
    CHECK(co_await count_t(p) == 0);
  });
}

TEST_CASE("a drop while COMMIT is in flight fails commit() with commit_unknown",
          "[pg][transaction]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await pool_with_tables(db.dsn());
    auto killer = co_await pg::connect(ex, db.dsn());
    // A deferred constraint trigger that sleeps: COMMIT runs it, and is in flight meanwhile.
    co_await killer.execute_script(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$; "
        "CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION slow();");
    auto tx = co_await pg::transaction::begin(p);
    co_await tx.query("INSERT INTO t VALUES (1)");
    const int pid = tx.session().backend_pid();
    std::optional<pg::error> failure;
    bool done = false;
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          failure = co_await expect_error(tx.commit());
          done = true;
        },
        asio::detached);
    auto sleeping = [&]() -> asio::awaitable<bool> {
      auto r = co_await killer.query(
          "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'", {pid});
      co_return r.get<std::int64_t>(0, 0) == 1;
    };
    bool in_commit = false;
    for (int i = 0; i < 500 && !in_commit; ++i) {
      in_commit = co_await sleeping();
      if (!in_commit) co_await pgq_test::pause(10ms);
    }
    REQUIRE(in_commit);
    co_await killer.query("SELECT pg_terminate_backend($1)", {pid});
    CHECK(co_await pgq_test::eventually([&] { return done; }));
    REQUIRE(failure);
    CHECK(failure->code() == pg::errc::commit_unknown);
    CHECK(std::string(failure->what()).find("outcome is unknown") != std::string::npos);
  });
}

}  // namespace pg_transaction_test
