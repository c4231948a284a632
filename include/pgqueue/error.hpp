// Queue-level error conditions. Every failure pgqueue reports is a pgqueue::error (the same type
// as pg::error): server errors carry SQLSTATE and the server's message, client-side ones an
// error_code from pg::errc or from the queue-level pgqueue::errc below.
#pragma once

#include <string>
#include <system_error>

#include "pgqueue/pg/error.hpp"

namespace pgqueue {

/// Queue-level failures (client side).
enum class errc {
  lease_lost = 1,  ///< The job is no longer held by this lease (expired and taken back, or fenced).
  lease_finished,  ///< The lease was already acked, nacked or released.
  invalid_argument,  ///< An argument the queue API refuses before asking the server.
};

/// The exception type for every pgqueue failure.
using error = pg::error;

/// The category of `pgqueue::errc`.
inline const std::error_category& queue_category() noexcept {
  class category_impl final : public std::error_category {
   public:
    const char* name() const noexcept override { return "pgqueue"; }
    std::string message(int value) const override {
      switch (static_cast<errc>(value)) {
        case errc::lease_lost: return "lease lost";
        case errc::lease_finished: return "lease already finished";
        case errc::invalid_argument: return "invalid argument";
      }
      return "unknown pgqueue error";
    }
  };
  static const category_impl instance;
  return instance;
}

/// Makes `errc` values usable as `std::error_code` (found by ADL).
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), queue_category()};
}

}  // namespace pgqueue

template <>
struct std::is_error_code_enum<pgqueue::errc> : std::true_type {};
