// Pipelined statements: server errors, many concurrent requests, isolation of a failure.
#include <cstdint>
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_query_test {

using namespace pgq_pg_test;

TEST_CASE("a server error carries SQLSTATE, message and detail", "[pg][query]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    auto e = co_await expect_error(conn.query("SELECT '{x'::jsonb"));
    CHECK(e.code() == pg::errc::server_error);
    CHECK(e.sqlstate() == "22P02");
    CHECK(e.severity() == "ERROR");
    CHECK(e.message() == "invalid input syntax for type json");
    CHECK(e.detail() == "Token \"x\" is invalid.");
    CHECK(std::string(e.what()) ==
          "ERROR:  invalid input syntax for type json\nDETAIL:  Token \"x\" is invalid.");

    auto h = co_await expect_error(conn.query("SELECT * FROM no_such_table"));
    CHECK(h.sqlstate() == "42P01");
    // The connection is still fine afterwards.
    auto r = co_await conn.query("SELECT $1::int8 + 1", pg::params{std::int64_t{41}});
    CHECK(r.get<std::int64_t>(0, 0) == 42);
  });
}

TEST_CASE("200 concurrent queries on one connection each get their own answer", "[pg][query]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    std::vector<asio::awaitable<pg::result>> ops;
    for (std::int64_t i = 0; i < 200; ++i) {
      ops.push_back(
          conn.query("SELECT $1::int8, $2::text", pg::params{i * 7, "v" + std::to_string(i)}));
    }
    auto outcomes = co_await gather(std::move(ops));
    REQUIRE(outcomes.size() == 200);
    for (std::int64_t i = 0; i < 200; ++i) {
      INFO("request " << i);
      REQUIRE(outcomes[i].value);
      CHECK(outcomes[i].value->get<std::int64_t>(0, 0) == i * 7);
      CHECK(outcomes[i].value->get<std::string>(0, 1) == "v" + std::to_string(i));
    }
  });
}

TEST_CASE("a failing statement among concurrent ones affects only its caller", "[pg][query]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    co_await conn.query("CREATE TABLE t (id int8 PRIMARY KEY)");
    std::vector<asio::awaitable<pg::result>> ops;
    for (std::int64_t i = 0; i < 100; ++i) {
      if (i == 50) {
        ops.push_back(conn.query("SELECT '{x'::jsonb"));
      } else if (i == 60) {
        ops.push_back(conn.query("INSERT INTO t VALUES (1)"));  // duplicate of i == 1
      } else {
        ops.push_back(conn.query("INSERT INTO t VALUES ($1) RETURNING id", pg::params{i}));
      }
    }
    auto outcomes = co_await gather(std::move(ops));
    for (std::int64_t i = 0; i < 100; ++i) {
      INFO("request " << i);
      if (i == 50) {
        REQUIRE(outcomes[i].failure);
        CHECK(outcomes[i].failure->sqlstate() == "22P02");
      } else if (i == 60) {
        REQUIRE(outcomes[i].failure);
        CHECK(outcomes[i].failure->sqlstate() == "23505");
      } else {
        REQUIRE(outcomes[i].value);
        CHECK(outcomes[i].value->get<std::int64_t>(0, 0) == i);
      }
    }
    // Each request is its own transaction: 98 rows, none rolled back by the failures.
    auto n = co_await conn.query("SELECT count(*) FROM t");
    CHECK(n.get<std::int64_t>(0, 0) == 98);
  });
}

TEST_CASE("parameters are bound, never spliced into SQL", "[pg][query][params]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const std::string nasty = "'); DROP TABLE t; --";
    co_await conn.query("CREATE TABLE t (s text)");
    co_await conn.query("INSERT INTO t VALUES ($1)", pg::params{nasty});
    auto r = co_await conn.query("SELECT s FROM t");
    CHECK(r.get<std::string>(0, 0) == nasty);

    auto all = co_await conn.query(
        "SELECT $1::int8, $2::int4, $3::float8, $4::bool, $5::text, $6::text, $7::text",
        pg::params{std::int64_t{-9007199254740993}, 2147483647, 0.1, true, std::string_view("sv"),
                   std::nullopt, std::optional<std::string>{}});
    CHECK(all.get<std::int64_t>(0, 0) == -9007199254740993);
    CHECK(all.get<int>(0, 1) == 2147483647);
    CHECK(all.get<double>(0, 2) == 0.1);
    CHECK(all.get<bool>(0, 3));
    CHECK(all.get<std::string_view>(0, 4) == "sv");
    CHECK(all.is_null(0, 5));
    CHECK(all.is_null(0, 6));
  });
}

TEST_CASE("a NUL byte in a parameter or in SQL is a clear client-side error", "[pg][params]") {
  const std::string with_nul("ab\0cd", 5);
  try {
    pg::params p{std::int64_t{1}, with_nul};
    FAIL("no error");
  } catch (const pg::error& e) {
    CHECK(e.code() == pg::errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("parameter $2") && Catch::Contains("NUL"));
  }
  CHECK_THROWS_AS(pg::params{}.add(std::vector<std::string>{"ok", with_nul}), pg::error);

  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    auto e = co_await expect_error(conn.query(std::string("SELECT 1\0; SELECT 2", 19)));
    CHECK(e.code() == pg::errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("SQL text contains a NUL byte"));
    auto r = co_await conn.query("SELECT 1");
    CHECK(r.get<int>(0, 0) == 1);
  });
}

namespace {

// How many prepared statements the session of `conn` holds for `sql`.
asio::awaitable<std::int64_t> prepared_count(const pg::connection& conn, const std::string& sql) {
  auto r = co_await conn.query("SELECT count(*) FROM pg_prepared_statements WHERE statement = $1",
                               pg::params{sql});
  co_return r.get<std::int64_t>(0, 0);
}

}  // namespace

TEST_CASE("a prepared statement is parsed once per session, also under concurrent first use",
          "[pg][query][prepared]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const std::string sql = "SELECT $1::int8 * 2, $2::text";
    std::vector<asio::awaitable<pg::result>> ops;
    for (std::int64_t i = 0; i < 50; ++i) {
      ops.push_back(conn.query_prepared(sql, pg::params{i, "p" + std::to_string(i)}));
    }
    auto outcomes = co_await gather(std::move(ops));
    for (std::int64_t i = 0; i < 50; ++i) {
      INFO("request " << i);
      REQUIRE(outcomes[i].value);
      CHECK(outcomes[i].value->get<std::int64_t>(0, 0) == i * 2);
      CHECK(outcomes[i].value->get<std::string>(0, 1) == "p" + std::to_string(i));
    }
    const auto count = co_await prepared_count(conn, sql);
    CHECK(count == 1);
    // A statement that returns no rows answers with its own status, not the Parse's.
    co_await conn.query("CREATE TABLE t (v int8)");
    auto ins = co_await conn.query_prepared("INSERT INTO t VALUES ($1)", pg::params{7});
    CHECK(ins.rows() == 0);
    auto sum = co_await conn.query("SELECT sum(v)::int8 FROM t");
    CHECK(sum.get<std::int64_t>(0, 0) == 7);
  });
}

TEST_CASE("a prepared statement that fails to parse is prepared again on next use",
          "[pg][query][prepared]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const std::string sql = "SELECT later_fn($1::int)";
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto e = co_await expect_error(conn.query_prepared(sql, pg::params{1}));
      CHECK(e.sqlstate() == "42883");  // each time the real error, never 26000
    }
    auto none = co_await prepared_count(conn, sql);
    CHECK(none == 0);
    co_await conn.query("CREATE FUNCTION later_fn(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1'");
    auto r = co_await conn.query_prepared(sql, pg::params{41});
    CHECK(r.get<int>(0, 0) == 42);
    auto one = co_await prepared_count(conn, sql);
    CHECK(one == 1);
  });
}

TEST_CASE("after DEALLOCATE by the application one call fails with 26000, the next prepares again",
          "[pg][query][prepared]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const std::string sql = "SELECT $1::int + 1";
    auto first = co_await conn.query_prepared(sql, pg::params{1});
    CHECK(first.get<int>(0, 0) == 2);
    co_await conn.execute_script("DEALLOCATE ALL");
    auto e = co_await expect_error(conn.query_prepared(sql, pg::params{2}));
    CHECK(e.sqlstate() == "26000");
    auto again = co_await conn.query_prepared(sql, pg::params{3});
    CHECK(again.get<int>(0, 0) == 4);
    auto n = co_await prepared_count(conn, sql);
    CHECK(n == 1);
  });
}

}  // namespace pg_query_test
