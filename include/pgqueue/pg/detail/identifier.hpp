// Quoting of identifiers (LISTEN channel names) for inclusion in SQL text.
#pragma once

#include <string>
#include <string_view>

#include "pgqueue/pg/detail/to_text.hpp"
#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg::detail {

// NAMEDATALEN - 1 on a default server build; longer names would be truncated by the server and
// then never match the name we route notifications by.
inline constexpr std::size_t max_identifier_bytes = 63;

/// `"name"` with embedded double quotes doubled; safe for any byte sequence without NUL.
inline std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

/// Throws `errc::invalid_argument` unless `channel` can be LISTENed to and matched exactly.
inline void validate_channel(std::string_view channel) {
  if (channel.empty()) throw error(errc::invalid_argument, "channel name must not be empty");
  if (channel.size() > max_identifier_bytes) {
    throw error(errc::invalid_argument,
                "channel name is " + std::to_string(channel.size()) +
                    " bytes; PostgreSQL truncates identifiers longer than " +
                    std::to_string(max_identifier_bytes) + " bytes");
  }
  reject_nul(channel, "channel name");
}

}  // namespace pgqueue::pg::detail
