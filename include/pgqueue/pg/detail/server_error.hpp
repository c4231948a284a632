// Conversion of libpq error results into pg::error.
#pragma once

#include <libpq-fe.h>

#include <string>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

inline std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

inline std::string field(const PGresult* res, int code) {
  const char* v = PQresultErrorField(res, code);
  return v ? v : "";
}

/// The diagnostics of an error (or notice) result.
inline server_diagnostics diagnostics_of(const PGresult* res) {
  server_diagnostics d;
  d.severity = field(res, PG_DIAG_SEVERITY);
  d.sqlstate = field(res, PG_DIAG_SQLSTATE);
  d.message = field(res, PG_DIAG_MESSAGE_PRIMARY);
  d.detail = field(res, PG_DIAG_MESSAGE_DETAIL);
  d.hint = field(res, PG_DIAG_MESSAGE_HINT);
  // Errors that libpq generates locally (e.g. a lost connection) only have the full message.
  if (d.message.empty()) d.message = trim_trailing_newlines(PQresultErrorMessage(res));
  return d;
}

inline error server_error_of(const PGresult* res) {
  return error(diagnostics_of(res));
}

}  // namespace pgqueue::pg::detail
