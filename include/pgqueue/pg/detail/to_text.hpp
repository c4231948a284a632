// Text-format encoding of parameter values, including PostgreSQL array literals.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

// libpq passes parameters as C strings, so a NUL byte would silently cut the value short.
inline void reject_nul(std::string_view text, std::string_view what) {
  if (text.find('\0') != std::string_view::npos) {
    throw error(errc::invalid_argument,
                std::string(what) + " contains a NUL byte, which PostgreSQL text cannot hold");
  }
}

inline std::string to_text(bool v) {
  return v ? "true" : "false";
}

template <std::integral T>
requires(!std::same_as<T, bool> && !std::same_as<T, char>) std::string to_text(T v) {
  return std::to_string(v);
}

template <std::floating_point T>
std::string to_text(T v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  // Shortest representation that parses back to the same value.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc{}) throw error(errc::invalid_argument, "cannot format floating-point value");
  return std::string(buf, end);
}

inline std::string to_text(std::string_view v) {
  return std::string(v);
}
inline std::string to_text(const char* v) {
  return std::string(v);
}
inline std::string to_text(const std::string& v) {
  return v;
}

/// Appends one array element, quoted so that commas, braces, quotes and spaces are literal.
inline void append_array_element(std::string& out, const std::optional<std::string>& element) {
  if (!element) {
    out += "NULL";
    return;
  }
  out += '"';
  for (char c : *element) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

template <class T>
std::optional<std::string> element_text(const T& v) {
  return to_text(v);
}

template <class T>
std::optional<std::string> element_text(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return to_text(*v);
}

/// One-dimensional array literal (`{"a","b",NULL}`) with every element quoted.
template <class T>
std::string to_array_literal(const std::vector<T>& values) {
  std::string out = "{";
  bool first = true;
  for (const auto& v : values) {
    if (!first) out += ',';
    first = false;
    append_array_element(out, element_text(v));
  }
  out += '}';
  return out;
}

}  // namespace pgqueue::pg::detail
