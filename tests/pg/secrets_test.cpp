// Passwords in a conninfo never reach an error message: end to end against a server that
// asks for a password (scram-sha-256 over TLS), in key=value and URI form, and in the
// scrubber itself for spellings libpq may echo.
#include <string>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/detail/secrets.hpp"
#include "support/role.hpp"
#include "support/server.hpp"
#include "support/tls_cluster.hpp"

namespace pg_secrets_test {

using namespace pgq_pg_test;

namespace {

std::string connect_user(const std::string& conninfo) {
  return pgq_test::run_async([&]() -> asio::awaitable<std::string> {
    auto conn = co_await pg::connect(co_await asio::this_coro::executor, conninfo);
    auto r = co_await conn.query("SELECT current_user");
    co_return r.get<std::string>(0, 0);
  });
}

// `what` carries none of the spellings of a password.
void check_no_secret(const std::string& what, const std::vector<std::string>& spellings) {
  for (const auto& s : spellings) {
    INFO(what);
    CHECK_THAT(what, !Catch::Contains(s));
  }
}

// A URI for `role` with password `encoded` (already percent-encoded) on the TLS cluster.
std::string uri(const pgq_test::tls_cluster& c, const std::string& role,
                const std::string& encoded) {
  return "postgresql://" + role + ":" + encoded + "@localhost:" + std::to_string(c.port()) +
         "/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=" + c.ca_file();
}

}  // namespace

TEST_CASE("a wrong password is refused without being echoed", "[pg][secrets]") {
  auto& c = pgq_test::tls_cluster::shared();
  // Quotes, a backslash, '@' and a space: every way a conninfo spells it differs.
  const std::string password = "Right'Pw\\ @42";
  pgq_test::scoped_role role(c.admin_dsn(), "pw", password);
  const std::string base = c.tcp_dsn() + " user=" + role.name();

  // The right password works in both forms (so the failures below are about the password).
  CHECK(connect_user(base + " password='Right\\'Pw\\\\ @42'") == role.name());
  CHECK(connect_user(uri(c, role.name(), "Right%27Pw%5C%20%4042")) == role.name());

  const std::vector<std::string> wrong = {"Wr0ng'Secret\\ @x", "Wr0ng%27Secret%5C%20%40x",
                                          "Wr0ng\\'Secret\\\\ @x", "Wr0ng"};
  for (const auto& conninfo :
       {base + " password='Wr0ng\\'Secret\\\\ @x'", uri(c, role.name(), "Wr0ng%27Secret%5C%20%40x"),
        uri(c, role.name(), "x") + "&password=Wr0ng%27Secret%5C%20%40x"}) {
    INFO(conninfo);
    auto e = connect_error(conninfo);
    CHECK(e.code() == pg::errc::connect_failed);
    CHECK_THAT(e.what(), Catch::Contains("password authentication failed for user"));
    check_no_secret(e.what(), wrong);
    check_no_secret(e.message(), wrong);
  }
}

TEST_CASE("a password is masked when libpq quotes a malformed conninfo", "[pg][secrets]") {
  auto& c = pgq_test::tls_cluster::shared();
  const std::vector<std::string> malformed = {
      c.tcp_dsn() + " password Wr0ngSecret", c.tcp_dsn() + " password='Wr0ngSecret",
      "postgresql://u:Wr0ngSecret@localhost:notaport/x",
      "postgresql://u:Wr0ngSecret@localhost/x?nosuchoption=1",
      c.tcp_dsn() + " password=Wr0ngSecret sslmode=bogus"};
  for (const auto& conninfo : malformed) {
    INFO(conninfo);
    auto e = connect_error(conninfo);
    CHECK(e.code() == pg::errc::connect_failed);
    check_no_secret(e.what(), {"Wr0ngSecret", "Wr0ng"});
  }
}

TEST_CASE("the scrubber masks the longest spelling first", "[pg][secrets]") {
  // The userinfo says "pwlong", the query parameter (which libpq uses) "pw": masking "pw"
  // first would leave "********long" in a message quoting the URI.
  pgqueue::pg::detail::secret_scrubber s("postgresql://u:pwlong@h/x?password=pw");
  CHECK(s.scrub("at pwlong and pw") == "at ******** and ********");
  // sslpassword (a client key's passphrase) is as secret as password.
  pgqueue::pg::detail::secret_scrubber k("host=h sslpassword=KeyPass");
  CHECK(k.scrub("KeyPass") == "********");
}

}  // namespace pg_secrets_test
