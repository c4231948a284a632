// Counting what the server ran: calls of pgqueue functions (track_functions must be on for the
// sessions counted, e.g. ALTER DATABASE ... SET track_functions = 'all'). A backend reports its
// counts when it exits, so count once the counted sessions (picked out by application_name)
// are gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "support/session.hpp"
#include "support/wait.hpp"

namespace pgq_test {

// Whether no session with `application_name` is connected to admin's database.
inline bool sessions_gone(session& admin, const std::string& application_name) {
  return admin.integer(
             "SELECT count(*) FROM pg_stat_activity "
             "WHERE datname = current_database() AND application_name = $1",
             {application_name}) == 0;
}

// Waits (bounded, 5 s) until the sessions with `application_name` have exited.
inline bool wait_for_sessions_gone(session& admin, const std::string& application_name) {
  return wait_until([&] { return sessions_gone(admin, application_name); }, std::chrono::seconds(5),
                    std::chrono::milliseconds(10));
}

// Calls of pgqueue.`function` by every session that has exited (or flushed its counters).
inline std::int64_t function_calls(session& admin, const std::string& function) {
  admin.query("SELECT pg_stat_clear_snapshot()");
  return admin.integer(
      "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
      "WHERE schemaname = 'pgqueue' AND funcname = $1",
      {function});
}

}  // namespace pgq_test
