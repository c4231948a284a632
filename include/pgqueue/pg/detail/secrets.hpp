// Keeps passwords from connection strings out of error messages.
#pragma once

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace pgqueue::pg::detail {

/// Remembers every spelling of the password in a conninfo string and masks it in messages.
/// libpq itself can echo parts of a malformed conninfo (e.g. `missing "=" after "..."`), so when
/// the string does not parse, every token that could be a password is treated as one.
class secret_scrubber {
 public:
  secret_scrubber() = default;

  explicit secret_scrubber(std::string_view conninfo);

  /// `text` with every known secret replaced by "********".
  std::string scrub(std::string text) const;

 private:
  void add(std::string_view s) {
    if (!s.empty()) secrets_.emplace_back(s);
  }

  // `password=value`, `password = 'quoted value'`, `password value` (malformed) and the URI
  // query form `password=value&...`.
  void scan_keyword_values(std::string_view s);

  // postgresql://user:secret@host/...
  void scan_uri_userinfo(std::string_view s);

  static std::size_t find_ci(std::string_view hay, std::string_view needle, std::size_t from);

  std::vector<std::string> secrets_;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/impl/secrets.ipp"
#endif
