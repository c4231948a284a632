// Parsing of PostgreSQL text-format column values into C++ types.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace pgqueue::pg::detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// Parses `text` as T; returns nullopt when it does not hold a valid T (never throws, so callers
/// can build an error message that names the column).
template <class T>
std::optional<T> parse_text(std::string_view text) {
  if constexpr (std::same_as<T, std::string>) {
    return std::string(text);
  } else if constexpr (std::same_as<T, std::string_view>) {
    return text;
  } else if constexpr (std::same_as<T, bool>) {
    // PostgreSQL prints booleans as t/f; the long forms come from casts to text.
    if (text == "t" || text == "true") return true;
    if (text == "f" || text == "false") return false;
    return std::nullopt;
  } else if constexpr (std::integral<T>) {
    T value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
  } else if constexpr (std::floating_point<T>) {
    if (text == "NaN") return std::numeric_limits<T>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<T>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<T>::infinity();
    T value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
  } else {
    static_assert(sizeof(T) == 0,
                  "pg::result::get supports integers, floating point, bool, std::string, "
                  "std::string_view and std::optional of those");
  }
}

}  // namespace pgqueue::pg::detail
