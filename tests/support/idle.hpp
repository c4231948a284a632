// Watching a claimer's backend from another session: whether it has gone idle.
#pragma once

#include <string>

#include "support/async.hpp"
#include "support/session.hpp"

namespace pgq_test {

// Whether backend `pid` is idle after running a statement that mentions `text`.
inline bool idle_after(session& admin, int pid, const std::string& text) {
  return admin.integer(
             "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'idle' AND "
             "query LIKE '%' || $2 || '%'",
             {std::to_string(pid), text}) == 1;
}

// Waits (bounded) until the claim or worker on backend `pid` is idle after asking what to
// wait for (pgqueue.wait_hint): it is then waiting for an event. False when it never is.
inline asio::awaitable<bool> waiting_for_event(session& admin, int pid) {
  return eventually([&admin, pid] { return idle_after(admin, pid, "wait_hint"); });
}

}  // namespace pgq_test
