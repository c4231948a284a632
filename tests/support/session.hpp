// A blocking libpq session for test set-up and assertions. Tests use it to drive the SQL API
// directly and to read a job's row; the library under test never uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <libpq-fe.h>

namespace pgq_test {

using value = std::optional<std::string>;
using row = std::vector<value>;

// A statement failed on the server: carries the SQLSTATE so tests can assert which error.
struct sql_error : std::runtime_error {
  sql_error(std::string state, std::string msg)
      : std::runtime_error(state + ": " + msg),
        sqlstate(std::move(state)),
        message(std::move(msg)) {}
  std::string sqlstate;
  std::string message;
};

class session {
 public:
  explicit session(const std::string& dsn);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Runs one statement with text parameters (std::nullopt is NULL); returns all rows.
  std::vector<row> query(const std::string& sql, const std::vector<value>& params = {});
  // Runs several statements (simple protocol); throws on the first error.
  void script(const std::string& sql);
  // The single value of a one-row, one-column query (throws if there is not exactly one row).
  value scalar(const std::string& sql, const std::vector<value>& params = {});
  std::int64_t integer(const std::string& sql, const std::vector<value>& params = {});
  // Runs `sql` and returns the SQLSTATE it fails with, or "" when it succeeds.
  std::string error_of(const std::string& sql, const std::vector<value>& params = {});
  // The same, as "SQLSTATE: message" (the server's message).
  std::string failure_of(const std::string& sql, const std::vector<value>& params = {});
  // Waits up to `timeout_ms` for a NOTIFY on a channel this session LISTENs to; returns
  // (channel, payload) or nothing on timeout.
  std::optional<std::pair<std::string, std::string>> wait_notification(int timeout_ms);
  int backend_pid() const { return PQbackendPID(conn_); }
  PGconn* native() { return conn_; }

 private:
  PGconn* conn_;
};

// Whether backend `pid` waits for a lock (pg_stat_activity, read through `watcher`): a request
// it sent is certainly in flight, blocked.
bool waits_on_lock(session& watcher, int pid);

// A job's row as the tests look at it.
struct job_row {
  std::int64_t id = 0;
  std::string queue;
  std::string payload;
  std::string state;
  int priority = 0;
  int attempts = 0;
  int max_attempts = 0;
  value idempotency_key;
  value last_error;
  value claimed_by;
  bool lease_valid = false;  // lease_until > now()
  bool due = false;          // run_after <= now()
  double run_after_in = 0;   // seconds from now until run_after (negative when past)
};

// Reads pgqueue.jobs row `id`; throws if there is none.
job_row read_job(session& s, std::int64_t id);
// Counts pgqueue.jobs rows in `state` (all queues when queue is empty).
std::int64_t count_jobs(session& s, const std::string& state, const std::string& queue = "");
// Opens a transaction on `s` holding job `id`'s row lock (FOR UPDATE) until `s` commits or
// rolls back: what another transaction that updated the job holds.
void lock_job_row(session& s, std::int64_t id);

}  // namespace pgq_test
