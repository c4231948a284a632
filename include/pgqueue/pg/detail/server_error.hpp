// Conversion of libpq error results into pg::error.
#pragma once

#include <libpq-fe.h>

#include <cstddef>
#include <string>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

inline std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Longest diagnostic field kept. The server quotes the offending input in some messages (a
// bad JSON token is quoted whole): a 10 MB payload must not become a 10 MB exception text.
inline constexpr std::size_t max_field_bytes = 1024;

/// `s` cut to `max_field_bytes` at a UTF-8 character boundary, saying how much was left out.
inline std::string bounded(std::string s) {
  if (s.size() <= max_field_bytes) return s;
  std::size_t cut = max_field_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  const auto omitted = s.size() - cut;
  s.resize(cut);
  return s + "... (" + std::to_string(omitted) + " more bytes)";
}

inline std::string field(const PGresult* res, int code) {
  const char* v = PQresultErrorField(res, code);
  return v ? bounded(v) : "";
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
  if (d.message.empty()) d.message = bounded(trim_trailing_newlines(PQresultErrorMessage(res)));
  return d;
}

inline error server_error_of(const PGresult* res) {
  return error(diagnostics_of(res));
}

}  // namespace pgqueue::pg::detail
