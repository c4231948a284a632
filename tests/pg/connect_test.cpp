// Connecting: success, failures with clear (and password-free) messages, the deadline, close().
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/async.hpp"
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

TEST_CASE("close(use_awaitable) returns once the session has ended and pending work failed",
          "[pg][connect]") {
  using namespace asio::experimental::awaitable_operators;
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto conn = co_await pg::connect(ex, db.dsn());
    auto admin = co_await pg::connect(ex, db.dsn());
    const int pid = conn.backend_pid();
    std::error_code sleeping_failed;
    auto sleeper = [&]() -> asio::awaitable<void> {
      try {
        co_await conn.query("SELECT pg_sleep(30)");
      } catch (const pg::error& e) {
        sleeping_failed = e.code();
      }
    };
    bool returned = false;
    auto closer = [&]() -> asio::awaitable<void> {
      for (int i = 0; i < 250; ++i) {  // until the server runs the sleep: 5 s at most
        pg::params who{pid};
        auto r = co_await admin.query(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
            std::move(who));
        if (r.get<std::int64_t>(0, 0) == 1) break;
        co_await pgq_test::pause(20ms);
      }
      auto copy = conn;
      co_await copy.close(asio::use_awaitable);
      returned = true;
      CHECK_FALSE(conn.is_open());
      CHECK(conn.backend_pid() == 0);
    };
    const auto start = std::chrono::steady_clock::now();
    co_await (sleeper() && closer());
    CHECK(returned);
    CHECK(sleeping_failed == pg::errc::closed);
    CHECK(std::chrono::steady_clock::now() - start < 10s);
    auto e = co_await expect_error(conn.query("SELECT 1"));
    CHECK(e.code() == pg::errc::closed);
    // The sleeping backend reads nothing until its statement ends: cancel it (it runs the
    // statement: a cancel that came while it read the statement would be dropped), and it
    // finds the socket closed. An idle one reads the Terminate message at once.
    co_await admin.query("SELECT pg_cancel_backend($1)", {pid});
    auto idle = co_await pg::connect(ex, db.dsn());
    const int idle_pid = idle.backend_pid();
    co_await idle.close(asio::use_awaitable);
    std::int64_t left = 1;
    for (int i = 0; i < 250 && left > 0; ++i) {  // the backend exits on its own time: 5 s at most
      pg::params pids{std::vector<int>{pid, idle_pid}};
      auto r = co_await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                                    std::move(pids));
      left = r.get<std::int64_t>(0, 0);
      if (left > 0) co_await pgq_test::pause(20ms);
    }
    CHECK(left == 0);
    pg::connection empty;
    co_await empty.close(asio::use_awaitable);  // an empty handle: at once, no error
  });
}

TEST_CASE("a cancelled close(use_awaitable) still closes and returns normally, at every hop",
          "[pg][connect]") {
  pgq_test::scratch_database db(false);
  pgq_test::run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    for (int hop = 0; hop < 4; ++hop) {
      INFO("cancelled after " << hop << " hops");
      auto conn = co_await pg::connect(ex, db.dsn());
      auto closing = [](pg::connection c) -> asio::awaitable<void> {
        co_await c.close(asio::use_awaitable);
      };
      auto failure = co_await pgq_test::cancelled_by(closing(conn), pgq_test::hops(hop),
                                                     asio::cancellation_type::terminal);
      CHECK_FALSE(failure);
      CHECK_FALSE(conn.is_open());
      CHECK(conn.backend_pid() == 0);
    }  // and the handle is destroyed right after
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

TEST_CASE("sessions talk UTF-8 whatever PGCLIENTENCODING or the conninfo asks for",
          "[pg][connect]") {
  // The library's strings (payloads, names, messages) are UTF-8: a session in another client
  // encoding stored "é" sent by a producer as the four bytes of "Ã©".
  pgq_test::scratch_database db(false);
  struct env_var {  // set for this test only
    env_var() { ::setenv("PGCLIENTENCODING", "LATIN1", 1); }
    ~env_var() { ::unsetenv("PGCLIENTENCODING"); }
  } latin1;
  for (const auto& conninfo :
       std::vector<std::string>{db.dsn(), db.dsn() + " client_encoding=LATIN1"}) {
    pgq_test::run_async([&]() -> asio::awaitable<void> {
      auto conn = co_await pg::connect(co_await asio::this_coro::executor, conninfo);
      auto r = co_await conn.query(
          "SELECT current_setting('client_encoding'), octet_length($1::text), $1::text",
          {std::string("\xc3\xa9")});
      CHECK(r.get<std::string>(0, 0) == "UTF8");
      CHECK(r.get<int>(0, 1) == 2);
      CHECK(r.get<std::string>(0, 2) == "\xc3\xa9");
    });
  }
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
