#include "support/session.hpp"

#include <poll.h>

#include <chrono>

namespace pgq_test {
namespace {

std::string field(const PGresult* res, int code) {
  const char* v = PQresultErrorField(res, code);
  return v ? v : "";
}

struct result_guard {
  PGresult* res;
  ~result_guard() { PQclear(res); }
};

}  // namespace

session::session(const std::string& dsn) : conn_(PQconnectdb(dsn.c_str())) {
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_);
    PQfinish(conn_);
    throw std::runtime_error("test session: cannot connect: " + msg);
  }
  PQclear(PQexec(conn_, "SET client_min_messages = warning"));
}

session::~session() {
  PQfinish(conn_);
}

std::vector<row> session::query(const std::string& sql, const std::vector<value>& params) {
  std::vector<const char*> raw;
  raw.reserve(params.size());
  for (const auto& p : params) raw.push_back(p ? p->c_str() : nullptr);
  result_guard g{PQexecParams(conn_, sql.c_str(), static_cast<int>(raw.size()), nullptr, raw.data(),
                              nullptr, nullptr, 0)};
  auto status = PQresultStatus(g.res);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    if (!g.res || field(g.res, PG_DIAG_SQLSTATE).empty())
      throw sql_error("", PQerrorMessage(conn_));
    throw sql_error(field(g.res, PG_DIAG_SQLSTATE), field(g.res, PG_DIAG_MESSAGE_PRIMARY));
  }
  std::vector<row> rows;
  for (int r = 0; r < PQntuples(g.res); ++r) {
    row out;
    for (int c = 0; c < PQnfields(g.res); ++c) {
      if (PQgetisnull(g.res, r, c))
        out.emplace_back(std::nullopt);
      else
        out.emplace_back(std::string(PQgetvalue(g.res, r, c), PQgetlength(g.res, r, c)));
    }
    rows.push_back(std::move(out));
  }
  return rows;
}

void session::script(const std::string& sql) {
  if (!PQsendQuery(conn_, sql.c_str())) throw sql_error("", PQerrorMessage(conn_));
  std::optional<sql_error> first;
  while (PGresult* res = PQgetResult(conn_)) {
    result_guard g{res};
    if (PQresultStatus(res) == PGRES_FATAL_ERROR && !first)
      first.emplace(field(res, PG_DIAG_SQLSTATE), field(res, PG_DIAG_MESSAGE_PRIMARY));
  }
  if (first) {
    // Like psql stopping on an error: do not leave the session inside the failed transaction.
    if (PQtransactionStatus(conn_) == PQTRANS_INERROR) PQclear(PQexec(conn_, "ROLLBACK"));
    throw *first;
  }
}

value session::scalar(const std::string& sql, const std::vector<value>& params) {
  auto rows = query(sql, params);
  if (rows.size() != 1 || rows[0].size() != 1)
    throw std::runtime_error("expected one value from: " + sql);
  return rows[0][0];
}

std::int64_t session::integer(const std::string& sql, const std::vector<value>& params) {
  auto v = scalar(sql, params);
  if (!v) throw std::runtime_error("NULL where an integer was expected: " + sql);
  return std::stoll(*v);
}

std::string session::error_of(const std::string& sql, const std::vector<value>& params) {
  try {
    query(sql, params);
  } catch (const sql_error& e) {
    return e.sqlstate;
  }
  return "";
}

std::string session::failure_of(const std::string& sql, const std::vector<value>& params) {
  try {
    query(sql, params);
  } catch (const sql_error& e) {
    return e.what();
  }
  return "";
}

std::optional<std::pair<std::string, std::string>> session::wait_notification(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    PQconsumeInput(conn_);
    if (PGnotify* n = PQnotifies(conn_)) {
      std::pair<std::string, std::string> out{n->relname, n->extra};
      PQfreemem(n);
      return out;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{PQsocket(conn_), POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(left.count()));
  }
}

job_row read_job(session& s, std::int64_t id) {
  auto rows = s.query(
      "SELECT id, queue, payload::text, state, priority, attempts, max_attempts, "
      "idempotency_key, last_error, claimed_by, coalesce(lease_until > now(), false), "
      "run_after <= now(), extract(epoch FROM run_after - now()) "
      "FROM pgqueue.jobs WHERE id = $1",
      {std::to_string(id)});
  if (rows.size() != 1) throw std::runtime_error("no job " + std::to_string(id));
  const auto& r = rows[0];
  job_row j;
  j.id = std::stoll(*r[0]);
  j.queue = *r[1];
  j.payload = *r[2];
  j.state = *r[3];
  j.priority = std::stoi(*r[4]);
  j.attempts = std::stoi(*r[5]);
  j.max_attempts = std::stoi(*r[6]);
  j.idempotency_key = r[7];
  j.last_error = r[8];
  j.claimed_by = r[9];
  j.lease_valid = *r[10] == "t";
  j.due = *r[11] == "t";
  j.run_after_in = std::stod(*r[12]);
  return j;
}

std::int64_t count_jobs(session& s, const std::string& state, const std::string& queue) {
  return s.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = $1 AND ($2 = '' OR queue = $2)",
                   {state, queue});
}

void lock_job_row(session& s, std::int64_t id) {
  s.query("BEGIN");
  s.query("SELECT FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", {std::to_string(id)});
}

bool waits_on_lock(session& watcher, int pid) {
  return watcher.integer(
             "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
             {std::to_string(pid)}) == 1;
}

}  // namespace pgq_test
