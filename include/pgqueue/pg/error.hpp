// Error reporting for the pgqueue::pg layer: one error_code category for client-side failures and
// one exception type that also carries the server's diagnostic fields.
#pragma once

#include <memory>
#include <string>
#include <system_error>
#include <utility>

namespace pgqueue::pg {

/// Client-side failure conditions. Server-reported failures use `errc::server_error` and carry the
/// SQLSTATE and message fields in `pg::error`.
enum class errc {
  connect_failed = 1,  ///< libpq could not establish the connection.
  connect_timeout,     ///< The connect deadline in `connect_options` passed.
  connection_lost,     ///< The server or network dropped an established connection.
  closed,              ///< The connection (or subscription) was closed by this process.
  server_error,        ///< The server rejected a statement; see `error::sqlstate()`.
  protocol_error,      ///< libpq reported a state this layer does not handle (e.g. COPY).
  invalid_argument,    ///< A value cannot be sent as given (NUL byte, bad channel name, ...).
  unexpected_null,     ///< A NULL column was read into a non-optional type.
  conversion_failed,   ///< A column's text could not be parsed as the requested type.
  no_such_column,      ///< No column of the result has the requested name.
  out_of_range,        ///< A row or column index lies outside the result.
  statement_timeout,   ///< No answer within `connect_options::statement_timeout` (+1 s).
  pool_timeout,        ///< No pooled session came free within `pool_options::acquire_timeout`.
  commit_unknown,      ///< The session dropped while COMMIT was in flight: it may have committed.
};

}  // namespace pgqueue::pg

template <>
struct std::is_error_code_enum<pgqueue::pg::errc> : std::true_type {};

namespace pgqueue::pg {

/// The category of `errc`; a stateless singleton, safe to compare by address.
inline const std::error_category& category() noexcept {
  class category_impl final : public std::error_category {
   public:
    const char* name() const noexcept override { return "pgqueue.pg"; }
    std::string message(int value) const override {
      switch (static_cast<errc>(value)) {
        case errc::connect_failed:
          return "could not connect to server";
        case errc::connect_timeout:
          return "timed out connecting to server";
        case errc::connection_lost:
          return "connection to server lost";
        case errc::closed:
          return "connection closed";
        case errc::server_error:
          return "server reported an error";
        case errc::protocol_error:
          return "unsupported protocol state";
        case errc::invalid_argument:
          return "invalid argument";
        case errc::unexpected_null:
          return "unexpected NULL value";
        case errc::conversion_failed:
          return "value conversion failed";
        case errc::no_such_column:
          return "no such column";
        case errc::out_of_range:
          return "row or column index out of range";
        case errc::statement_timeout:
          return "statement timed out waiting for the server";
        case errc::pool_timeout:
          return "timed out waiting for a pooled session";
        case errc::commit_unknown:
          return "connection lost during COMMIT: outcome unknown";
      }
      return "unknown pgqueue.pg error";
    }
  };
  static const category_impl instance;
  return instance;
}

/// Makes `errc` values usable as `std::error_code` (found by ADL).
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

/// Diagnostic fields a server error carries (from PQresultErrorField). Empty when absent.
struct server_diagnostics {
  std::string severity;  ///< e.g. "ERROR", "FATAL" (localised like psql shows it).
  std::string sqlstate;  ///< Five-character SQLSTATE, e.g. "22P02".
  std::string message;   ///< Primary message.
  std::string detail;    ///< Optional DETAIL line.
  std::string hint;      ///< Optional HINT line.
};

/// The one exception type of this layer. `code()` says what kind of failure it is (an `errc`, or
/// `asio::error::operation_aborted` for cancelled waits); server errors also expose their SQLSTATE
/// and fields. `what()` reads like psql for server errors ("ERROR:  ...\nDETAIL:  ...") and is
/// the plain client-side message otherwise. Copying is cheap and does not throw.
class error : public std::system_error {
 public:
  /// A client-side failure with a human-readable explanation.
  error(std::error_code code, std::string message)
      : std::system_error(code), data_(std::make_shared<data>()) {
    data_->text = message;
    data_->diag.message = std::move(message);
  }

  /// A server-reported failure (`code()` is `errc::server_error` unless given otherwise).
  explicit error(server_diagnostics diag, std::error_code code = errc::server_error)
      : std::system_error(code), data_(std::make_shared<data>()) {
    data_->text = format(diag);
    data_->diag = std::move(diag);
  }

  const char* what() const noexcept override { return data_->text.c_str(); }
  /// SQLSTATE of a server error; empty for client-side failures.
  const std::string& sqlstate() const noexcept { return data_->diag.sqlstate; }
  /// Severity of a server error ("ERROR", "FATAL"...); empty for client-side failures.
  const std::string& severity() const noexcept { return data_->diag.severity; }
  /// Primary message without severity prefix.
  const std::string& message() const noexcept { return data_->diag.message; }
  /// Server DETAIL field, if any.
  const std::string& detail() const noexcept { return data_->diag.detail; }
  /// Server HINT field, if any.
  const std::string& hint() const noexcept { return data_->diag.hint; }

 private:
  struct data {
    server_diagnostics diag;
    std::string text;
  };

  static std::string format(const server_diagnostics& d) {
    std::string out = (d.severity.empty() ? std::string("ERROR") : d.severity) + ":  " + d.message;
    if (!d.detail.empty()) out += "\nDETAIL:  " + d.detail;
    if (!d.hint.empty()) out += "\nHINT:  " + d.hint;
    return out;
  }

  // Shared so that copying an exception (which std::exception_ptr may do) cannot throw.
  std::shared_ptr<data> data_;
};

}  // namespace pgqueue::pg
