// Typed access to results and parameter encoding (including array literals).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_result_test {

using namespace pgq_pg_test;

TEST_CASE("array parameters are quoted literals", "[pg][params]") {
  pg::params p;
  p.add(std::vector<std::string>{"a", "b\"c", "d\\e", ""})
      .add(std::vector<std::int64_t>{1, -2})
      .add(std::vector<std::optional<std::string>>{std::nullopt, "NULL"})
      .add(std::vector<int>{});
  REQUIRE(p.size() == 4);
  CHECK(*p[0] == R"({"a","b\"c","d\\e",""})");
  CHECK(*p[1] == R"({"1","-2"})");
  CHECK(*p[2] == R"({NULL,"NULL"})");
  CHECK(*p[3] == "{}");
}

TEST_CASE("array parameters round-trip tricky strings", "[pg][params]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    const std::vector<std::optional<std::string>> tricky = {"plain",
                                                            "with \"quotes\"",
                                                            "back\\slash",
                                                            "comma,separated",
                                                            "{braces}",
                                                            std::nullopt,
                                                            "",
                                                            "NULL",
                                                            " spaced ",
                                                            "ünïcødé ✓",
                                                            "'single'",
                                                            "tab\tand\nnewline"};
    auto r = co_await conn.query(
        "SELECT u.v, u.i FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY u.i",
        pg::params{tricky});
    REQUIRE(r.rows() == static_cast<int>(tricky.size()));
    for (int i = 0; i < r.rows(); ++i) {
      INFO("element " << i);
      CHECK(r.get<std::optional<std::string>>(i, 0) == tricky[i]);
    }

    pg::params arrays{std::vector<std::int64_t>{5, -9000000000}, std::vector<int>{1, 2, 3},
                      std::vector<std::string>{}};
    auto ints = co_await conn.query(
        "SELECT array_length($1::int8[], 1), ($1::int8[])[2], cardinality($2::int4[]), "
        "$3::text[] = '{}'",
        std::move(arrays));
    CHECK(ints.get<int>(0, 0) == 2);
    CHECK(ints.get<std::int64_t>(0, 1) == -9000000000);
    CHECK(ints.get<int>(0, 2) == 3);
    CHECK(ints.get<bool>(0, 3));
  });
}

TEST_CASE("typed access, NULLs, names and conversion errors", "[pg][result]") {
  pgq_test::scratch_database db(false);
  // Fetched in the coroutine, inspected outside it: a result stays valid on its own.
  const auto r = pgq_test::run_async([&]() -> asio::awaitable<pg::result> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    co_return co_await conn.query(
        "SELECT 9223372036854775807::int8 AS big, 7::int4 AS small, 2.5::float8 AS f, "
        "'NaN'::float8 AS nan, false AS flag, 'héllo'::text AS s, NULL::int AS missing, "
        "'abc' AS word, 3000000000::int8 AS too_big");
  });
  CHECK(r.rows() == 1);
  CHECK(r.columns() == 9);
  CHECK(r.get<std::int64_t>(0, 0) == std::numeric_limits<std::int64_t>::max());
  CHECK(r.get<int>(0, "small") == 7);
  CHECK(r.get<double>(0, "f") == 2.5);
  CHECK(std::isnan(r.get<double>(0, "nan")));
  CHECK_FALSE(r.get<bool>(0, "flag"));
  CHECK(r.get<std::string>(0, "s") == "héllo");
  CHECK(r.get<std::string_view>(0, "s") == "héllo");
  CHECK(r.column("missing") == 6);
  CHECK(r.column_name(5) == "s");
  CHECK(r.is_null(0, 6));
  CHECK(r.get<std::optional<int>>(0, 6) == std::nullopt);
  CHECK(r.get<std::optional<int>>(0, 1) == 7);

  auto code_of = [&](auto&& read) -> std::error_code {
    try {
      read();
    } catch (const pg::error& e) {
      return e.code();
    }
    return {};
  };
  CHECK(code_of([&] { r.get<int>(0, 6); }) == pg::errc::unexpected_null);
  CHECK(code_of([&] { r.get<int>(0, "word"); }) == pg::errc::conversion_failed);
  CHECK(code_of([&] { r.get<int>(0, "too_big"); }) == pg::errc::conversion_failed);
  CHECK(code_of([&] { r.get<bool>(0, "word"); }) == pg::errc::conversion_failed);
  CHECK(code_of([&] { r.get<int>(0, "nope"); }) == pg::errc::no_such_column);
  CHECK(code_of([&] { r.get<int>(1, 0); }) == pg::errc::out_of_range);
  CHECK(code_of([&] { r.is_null(0, 9); }) == pg::errc::out_of_range);
  CHECK_THROWS_WITH(
      r.get<int>(0, 6),
      "column 6 (\"missing\") of row 0 is NULL; read it as std::optional to accept NULL");
  CHECK_THROWS_WITH(r.get<int>(0, "word"),
                    "column 7 (\"word\") of row 0 holds \"abc\", which is not a valid "
                    "32-bit integer");
}

TEST_CASE("affected_rows and command_tag report DML outcomes", "[pg][result]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    auto created = co_await conn.query("CREATE TABLE t (x int)");
    CHECK(created.affected_rows() == 0);
    CHECK(created.command_tag() == "CREATE TABLE");
    auto inserted =
        co_await conn.query("INSERT INTO t SELECT generate_series(1, $1::int)", pg::params{3});
    CHECK(inserted.affected_rows() == 3);
    CHECK(inserted.command_tag() == "INSERT 0 3");
    auto updated = co_await conn.query("UPDATE t SET x = x + 1 WHERE x > $1", pg::params{1});
    CHECK(updated.affected_rows() == 2);
    auto empty = co_await conn.query(std::string_view{});
    CHECK(empty.rows() == 0);
  });
}

TEST_CASE("client-side errors read plainly; server errors read like psql", "[pg][error]") {
  pg::error client(pg::errc::connection_lost, "connection to server lost: gone");
  CHECK(std::string(client.what()) == "connection to server lost: gone");
  CHECK(client.sqlstate().empty());
  CHECK(client.code().category() == pg::category());

  pg::error server(
      pg::server_diagnostics{"ERROR", "23505", "duplicate key", "Key (id)=(1).", "Pick another."});
  CHECK(server.code() == pg::errc::server_error);
  CHECK(std::string(server.what()) ==
        "ERROR:  duplicate key\nDETAIL:  Key (id)=(1).\nHINT:  Pick another.");
  const std::system_error& as_system = server;  // catchable as std::system_error
  CHECK(as_system.code() == pg::errc::server_error);
}

}  // namespace pg_result_test
