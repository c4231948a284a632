// Options of pgqueue::pg::connect: deadlines and what happens when the server goes away.
#pragma once

#include <chrono>

namespace pgqueue::pg {

/// Settings of a connection. Trivially destructible (safe to build inside `co_await`).
///
/// Reconnecting is on by default: a long-lived process (a queue worker) must outlive a server
/// restart, failover or a killed backend. Requests already sent when the session drops fail with
/// `errc::connection_lost` (their outcome is unknown: the server may have run them); requests not
/// sent yet, and new ones, wait for the new session up to `reconnect_wait`; subscriptions are
/// re-LISTENed and receive a `notification` with `reconnected == true` (anything NOTIFYed while
/// the connection was down is lost). Session state does not carry over: SET, temporary tables,
/// prepared statements, session advisory locks. A session lost inside a transaction block (BEGIN
/// sent as its own statement) is never replaced, since the transaction's later statements would
/// run outside it: such a connection ends with `connection_lost` as if `reconnect` were false.
/// A session that a statement leaves in a state this layer cannot follow (a COPY) is given up
/// the same way, as if dropped; that statement fails with `errc::protocol_error`.
///
/// Every session (and every new one after a reconnect) runs READ COMMITTED by default, whatever
/// `default_transaction_isolation` the server, database, role, conninfo or PGOPTIONS gives: the
/// queue's functions need it (in REPEATABLE READ, concurrent claims fail with 40001). A
/// `transaction` still begins with the level it is given. A SET sent ahead of the session's
/// first request, no round trip; a `SET`, `RESET ALL` or `DISCARD ALL` of yours undoes it until
/// the session is replaced.
/// The same set-up sets `array_nulls` on, `extra_float_digits` 1 and, except in a SQL_ASCII
/// database (whose bytes are handed out as stored), `client_encoding` UTF8, whatever
/// `PGCLIENTENCODING` or the conninfo says: every string the library sends or reads is UTF-8.
///
/// `connect` refuses values outside the ranges given below with `errc::invalid_argument` before
/// it connects. Every duration is at most `max_duration`.
struct connect_options {
  /// The longest duration any option takes: 2147483647 ms (about 24.8 days), the largest
  /// `statement_timeout` the server accepts (an int of milliseconds); longer ones would only
  /// overflow clock arithmetic.
  static constexpr std::chrono::milliseconds max_duration{2147483647};

  /// Deadline for one connection attempt (all hosts, TLS and authentication included).
  /// 1 ms to `max_duration`.
  std::chrono::milliseconds connect_timeout{10000};
  /// Re-establish the session when the server or network drops it (false: the connection ends
  /// and every later request fails with `errc::connection_lost`).
  bool reconnect = true;
  /// Delay before the first reconnect attempt; it doubles per failed attempt up to
  /// `reconnect_max_backoff`, each delay drawn at random from its upper half. 0 (taken as
  /// 1 ms) to `reconnect_max_backoff`.
  std::chrono::milliseconds reconnect_initial_backoff{50};
  /// Longest delay between two reconnect attempts. `reconnect_initial_backoff` to
  /// `max_duration`.
  std::chrono::milliseconds reconnect_max_backoff{2000};
  /// How long a request waits for a new session while reconnecting before it fails with
  /// `errc::connection_lost`; zero fails such requests at once. 0 to `max_duration`.
  std::chrono::milliseconds reconnect_wait{10000};
  /// Zero: none. Otherwise sets the server's `statement_timeout` for the session (a statement
  /// running longer fails with SQLSTATE 57014 and the connection stays usable) and arms a
  /// client-side watchdog: if the server sends nothing for `statement_timeout` + 1 s while a
  /// request waits for its answer (a hung server or a silently dead network), the requests sent
  /// fail with `errc::statement_timeout` and the session is dropped and, with `reconnect`,
  /// replaced (the server may still finish them: PQcancel would block the thread, so the client
  /// does not ask it to stop). 0 to `max_duration`.
  std::chrono::milliseconds statement_timeout{0};
};

}  // namespace pgqueue::pg
