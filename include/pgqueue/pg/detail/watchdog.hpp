// statement_timeout's client-side deadline, without I/O: when a connection whose server has
// sent nothing gives up on it.
#pragma once

#include <chrono>

namespace pgqueue::pg::detail {

/// How long the server may stay silent while answers are due: statement_timeout and a second
/// more, so that the server's own statement_timeout (an error, the session kept) fires first
/// while the server is alive.
inline std::chrono::milliseconds watchdog_limit(std::chrono::milliseconds statement_timeout) {
  return statement_timeout + std::chrono::seconds(1);
}

/// The watchdog's verdict at `now`.
struct watchdog_check {
  enum class verdict {
    off,      ///< no statement_timeout, the session is not open, or no answer is due
    wait,     ///< answers are due: check again at `at`
    expired,  ///< nothing came for the limit while answers were due: drop the session
  };
  verdict what;
  std::chrono::steady_clock::time_point at{};
};

/// `progress_at`: the last answer received, or the first request sent into an idle pipeline.
inline watchdog_check check_watchdog(std::chrono::milliseconds statement_timeout, bool open,
                                     bool answers_due,
                                     std::chrono::steady_clock::time_point progress_at,
                                     std::chrono::steady_clock::time_point now) {
  if (statement_timeout.count() <= 0 || !open || !answers_due) {
    return {watchdog_check::verdict::off};
  }
  const auto at = progress_at + watchdog_limit(statement_timeout);
  return {now < at ? watchdog_check::verdict::wait : watchdog_check::verdict::expired, at};
}

}  // namespace pgqueue::pg::detail
