// Range checks of option values, shared by the pg and queue layers: a value outside its
// documented range is refused when the options are handed over, before it can overflow clock
// arithmetic (steady_clock counts int64 nanoseconds: about 292 years) or make a loop spin.
#pragma once

#include <chrono>
#include <cstdint>
#include <ratio>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

/// `d` as "<count> ms" (or "us" for microseconds), for error messages.
template <class Rep, class Period>
std::string duration_text(std::chrono::duration<Rep, Period> d) {
  static_assert(std::is_same_v<Period, std::milli> || std::is_same_v<Period, std::micro>,
                "options are in milliseconds or microseconds");
  return std::to_string(d.count()) + (std::is_same_v<Period, std::milli> ? " ms" : " us");
}

/// Throws `error(code, ...)` naming the option, its range and the value unless `lo <= value <=
/// hi`. No allocation unless it throws.
template <class Rep, class Period>
void check_between(std::error_code code, std::string_view name,
                   std::chrono::duration<Rep, Period> value, std::chrono::duration<Rep, Period> lo,
                   std::chrono::duration<Rep, Period> hi) {
  if (value >= lo && value <= hi) return;
  throw error(code, std::string(name) + " must be between " + duration_text(lo) + " and " +
                        duration_text(hi) + "; got " + duration_text(value));
}

/// As above, for counts.
inline void check_between(std::error_code code, std::string_view name, std::int64_t value,
                          std::int64_t lo, std::int64_t hi) {
  if (value >= lo && value <= hi) return;
  throw error(code, std::string(name) + " must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi) + "; got " + std::to_string(value));
}

}  // namespace pgqueue::pg::detail
