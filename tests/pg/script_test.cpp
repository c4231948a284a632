// Multi-statement scripts: simple protocol outside the pipeline, then back to pipelining.
#include <cstdint>
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_script_test {

using namespace pgq_pg_test;

namespace {

// Shaped like a migration: a transaction, a DO block, a function with a dollar-quoted body.
const std::string migration = R"sql(
BEGIN;
CREATE TABLE item (id int8 PRIMARY KEY, note text NOT NULL);
DO $$
BEGIN
  FOR i IN 1..5 LOOP
    INSERT INTO item VALUES (i, 'row; ' || i);
  END LOOP;
END
$$;
CREATE FUNCTION item_count() RETURNS int8 LANGUAGE sql AS $fn$ SELECT count(*) FROM item; $fn$;
COMMIT;
)sql";

}  // namespace

TEST_CASE("execute_script runs a migration and the pipeline works afterwards", "[pg][script]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    co_await conn.execute_script(migration);
    auto r = co_await conn.query("SELECT item_count(), (SELECT note FROM item WHERE id = $1)",
                                 pg::params{3});
    CHECK(r.get<std::int64_t>(0, 0) == 5);
    CHECK(r.get<std::string>(0, 1) == "row; 3");
  });
}

TEST_CASE("requests issued around a script are answered in order", "[pg][script]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    std::vector<asio::awaitable<pg::result>> ops;
    for (int i = 0; i < 30; ++i) ops.push_back(conn.query("SELECT $1::int4", pg::params{i}));
    // Queued after the 30 above and before the 30 below: those must see the table.
    ops.push_back([](pg::connection c) -> asio::awaitable<pg::result> {
      co_await c.execute_script(migration);
      co_return pg::result{};
    }(conn));
    for (int i = 0; i < 30; ++i) {
      ops.push_back(conn.query("SELECT count(*) + $1 FROM item", pg::params{i}));
    }
    auto outcomes = co_await gather(std::move(ops));
    for (int i = 0; i < 30; ++i) {
      INFO("before " << i);
      REQUIRE(outcomes[i].value);
      CHECK(outcomes[i].value->get<int>(0, 0) == i);
    }
    CHECK(outcomes[30].value);
    for (int i = 0; i < 30; ++i) {
      INFO("after " << i);
      REQUIRE(outcomes[31 + i].value);
      CHECK(outcomes[31 + i].value->get<std::int64_t>(0, 0) == 5 + i);
    }
  });
}

TEST_CASE("a failing script reports the first error and leaves the connection usable",
          "[pg][script]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    auto e = co_await expect_error(
        conn.execute_script("CREATE TABLE a (x int); SELECT 1/0; CREATE TABLE b (x int);"));
    CHECK(e.sqlstate() == "22012");
    // The simple protocol runs the text as one implicit transaction: nothing was created.
    auto r = co_await conn.query("SELECT to_regclass('a') IS NULL, to_regclass('b') IS NULL");
    CHECK(r.get<bool>(0, 0));
    CHECK(r.get<bool>(0, 1));
    co_await conn.execute_script("");  // an empty script is fine too
    auto again = co_await conn.query("SELECT $1::text", pg::params{"ok"});
    CHECK(again.get<std::string>(0, 0) == "ok");
  });
}

}  // namespace pg_script_test
