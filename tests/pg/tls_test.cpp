// TLS: verify-full against a server whose certificate a test CA signed, and the refusal when
// the host name does not match the certificate.
#include <string>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "support/server.hpp"
#include "support/tls_cluster.hpp"

namespace pg_tls_test {

using namespace pgq_pg_test;

TEST_CASE("verify-full connects over TLS to a server with a certificate for its host name",
          "[pg][tls]") {
  const auto dsn = pgq_test::tls_cluster::shared().tcp_dsn("localhost", "verify-full");
  auto [ssl, version] = pgq_test::run_async([&]() -> asio::awaitable<std::pair<bool, std::string>> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, dsn);
    auto r =
        co_await conn.query("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    co_return std::pair{r.get<bool>(0, 0), r.get<std::string>(0, 1)};
  });
  CHECK(ssl);
  CHECK_THAT(version, Catch::StartsWith("TLSv1."));
}

TEST_CASE("verify-full refuses a server whose certificate names another host", "[pg][tls]") {
  const auto dsn = pgq_test::tls_cluster::shared().tcp_dsn("wrong.invalid", "verify-full");
  auto e = connect_error(dsn);
  CHECK(e.code() == pg::errc::connect_failed);
  CHECK_THAT(e.what(), Catch::Contains("does not match host name \"wrong.invalid\""));
}

TEST_CASE("verify-ca refuses a server signed by a CA it does not trust", "[pg][tls]") {
  // The server's own certificate as the only trusted root: it is not a CA, so the chain fails.
  auto& c = pgq_test::tls_cluster::shared();
  auto dsn = c.tcp_dsn("localhost", "verify-ca") + " sslrootcert=" + c.server_cert_file();
  auto e = connect_error(dsn);
  CHECK(e.code() == pg::errc::connect_failed);
  CHECK_THAT(e.what(), Catch::Contains("certificate verify failed"));
}

}  // namespace pg_tls_test
