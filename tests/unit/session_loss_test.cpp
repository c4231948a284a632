// pg::detail::decide_loss: whether a lost session is replaced or ends the connection, for every
// cause, without a server.
#include <catch2/catch.hpp>
#include <pgqueue/pg/detail/session_loss.hpp>

namespace unit_session_loss_test {

using pgqueue::pg::errc;
using pgqueue::pg::detail::decide_loss;

TEST_CASE("a dropped session is replaced, with the message saying so", "[session_loss]") {
  for (auto code : {errc::connection_lost, errc::statement_timeout}) {
    const auto loss = decide_loss(code, true, true, false);
    CHECK(loss.reconnect);
    CHECK(loss.note == "\n(reconnecting)");
  }
}

TEST_CASE("a session lost inside a transaction block is not replaced", "[session_loss]") {
  const auto loss = decide_loss(errc::connection_lost, true, true, true);
  CHECK_FALSE(loss.reconnect);
  CHECK(loss.note == "\n(not reconnected: the session was inside a transaction block)");
}

TEST_CASE("without the reconnect option, or when closed or broken, the connection ends",
          "[session_loss]") {
  CHECK_FALSE(decide_loss(errc::connection_lost, false, true, false).reconnect);
  CHECK(decide_loss(errc::connection_lost, false, true, false).note.empty());
  // The application closed it. (A session in a state this layer does not handle, e.g. a COPY,
  // is given up as connection_lost: the connection replaces it like a dropped one.)
  CHECK_FALSE(decide_loss(errc::closed, true, true, false).reconnect);
  // Already reconnecting (e.g. close() meanwhile): nothing more to replace.
  CHECK_FALSE(decide_loss(errc::connection_lost, true, false, false).reconnect);
}

}  // namespace unit_session_loss_test
