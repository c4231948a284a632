// What losing a session does to the connection, without I/O.
#pragma once

#include <string>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

/// The connection's answer to a lost session: reconnect (unsent requests and subscriptions
/// wait for the new session), or end for good; and what the error message adds to say which.
struct session_loss {
  bool reconnect = false;
  std::string note;
};

/// `code` says why the session ended; `reconnect_on` is the connect option; `was_open` is false
/// while the connection was already reconnecting (or never connected); `in_transaction` whether
/// the session was inside a transaction block, which a new session could not continue: its
/// later statements would run outside it.
inline session_loss decide_loss(errc code, bool reconnect_on, bool was_open, bool in_transaction) {
  const bool dropped = code == errc::connection_lost || code == errc::statement_timeout;
  if (!dropped || !reconnect_on) return {};
  if (in_transaction)
    return {false, "\n(not reconnected: the session was inside a transaction block)"};
  if (!was_open) return {};
  return {true, "\n(reconnecting)"};
}

}  // namespace pgqueue::pg::detail
