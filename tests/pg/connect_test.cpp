// Connecting: success, failures with clear (and password-free) messages, the deadline, close().
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <string>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"

namespace pg_connect_test {

using namespace pgq_pg_test;

TEST_CASE("connect opens a session in pipeline mode and close() ends it", "[pg][connect]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    CHECK(conn.is_open());
    auto r = co_await conn.query("SELECT pg_backend_pid(), current_database()");
    CHECK(r.get<int>(0, 0) == conn.backend_pid());
    CHECK(r.get<std::string>(0, 1) == db.name());

    auto copy = conn;
    copy.close();
    CHECK_FALSE(conn.is_open());
    auto e = co_await expect_error(conn.query("SELECT 1"));
    CHECK(e.code() == pg::errc::closed);
  });
}

TEST_CASE("connect accepts a URI", "[pg][connect]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    // Same server, spelled as a URI with the socket directory as a query parameter.
    auto probe = co_await pg::connect(co_await asio::this_coro::executor, db.dsn());
    auto where = co_await probe.query(
        "SELECT current_setting('unix_socket_directories'), current_setting('port'), "
        "current_user");
    const std::string uri = "postgresql:///" + db.name() + "?host=" + where.get<std::string>(0, 0) +
                            "&port=" + where.get<std::string>(0, 1) +
                            "&user=" + where.get<std::string>(0, 2);
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, uri);
    auto r = co_await conn.query("SELECT current_database()");
    CHECK(r.get<std::string>(0, 0) == db.name());
  });
}

TEST_CASE("connect to a missing socket directory fails with libpq's reason", "[pg][connect]") {
  auto e = connect_error("host=/nonexistent/pgq-socket-dir dbname=x connect_timeout=5");
  CHECK(e.code() == pg::errc::connect_failed);
  CHECK_THAT(e.what(), Catch::Contains("could not connect to PostgreSQL"));
  CHECK_THAT(e.what(), Catch::Contains("/nonexistent/pgq-socket-dir"));
}

TEST_CASE("a password never appears in connect errors", "[pg][connect]") {
  for (const std::string conninfo : {
           "host=/nonexistent/pgq-socket-dir user=u password=secret dbname=x",
           "host=/nonexistent/pgq-socket-dir password='secret' dbname=x",
           "host=/nonexistent/pgq-socket-dir password secret",  // malformed: libpq quotes tokens
           "postgresql://u:secret@/x?host=/nonexistent/pgq-socket-dir",
           "postgresql://u:secret@h:notaport/x",
           "postgresql://u:se%zzcret@/x",
       }) {
    INFO(conninfo);
    auto e = connect_error(conninfo);
    CHECK(e.code() == pg::errc::connect_failed);
    CHECK(std::string(e.what()).size() > 30);
    CHECK_THAT(e.what(), !Catch::Contains("secret") && !Catch::Contains("se%zzcret"));
  }
}

TEST_CASE("connect gives up at the deadline", "[pg][connect]") {
  // A listener that never accepts: the TCP handshake completes in the kernel, the startup
  // packet is never answered.
  asio::io_context listener_io;
  asio::ip::tcp::acceptor silent(listener_io, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = silent.local_endpoint().port();
  const auto start = std::chrono::steady_clock::now();
  auto e = connect_error("host=127.0.0.1 port=" + std::to_string(port) + " dbname=x user=u",
                         pg::connect_options{300ms});
  CHECK(e.code() == pg::errc::connect_timeout);
  CHECK_THAT(e.what(), Catch::Contains("timed out after 300 ms"));
  CHECK(since(start) >= 300ms);
  CHECK(since(start) < 5s);
}

TEST_CASE("an empty connection handle fails cleanly", "[pg][connect]") {
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    // Nothing below suspends; without one real suspension co_spawn hands the result to
    // use_future on another thread, after run_async has already looked for it.
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    pg::connection none;
    CHECK_FALSE(none.is_open());
    CHECK(none.backend_pid() == 0);
    auto e = co_await expect_error(none.query("SELECT 1"));
    CHECK(e.code() == pg::errc::closed);
    auto e2 = co_await expect_error(none.subscribe("c"));
    CHECK(e2.code() == pg::errc::closed);
  });
}

}  // namespace pg_connect_test
