// Out-of-line definitions of pgqueue/pg/detail/secrets.hpp: included at its end (header-only), or
// compiled once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/pg/detail/secrets.hpp"

namespace pgqueue::pg::detail {

PGQUEUE_DECL secret_scrubber::secret_scrubber(std::string_view conninfo) {
  std::string text(conninfo);
  char* err = nullptr;
  if (PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err)) {
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
      if (std::string_view(o->keyword) == "password" && o->val) add(o->val);
    }
    PQconninfoFree(opts);
  }
  if (err) PQfreemem(err);
  // Raw and encoded spellings as they appear in the string, in case libpq quotes them.
  scan_keyword_values(conninfo);
  scan_uri_userinfo(conninfo);
  // Longest first: masking a secret that is part of another would leave the rest showing.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

PGQUEUE_DECL std::string secret_scrubber::scrub(std::string text) const {
  for (const auto& s : secrets_) {
    for (auto pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos + 8)) {
      text.replace(pos, s.size(), "********");
    }
  }
  return text;
}

PGQUEUE_DECL void secret_scrubber::scan_keyword_values(std::string_view s) {
  static constexpr std::string_view key = "password";
  for (auto pos = find_ci(s, key, 0); pos != std::string_view::npos;
       pos = find_ci(s, key, pos + key.size())) {
    auto i = pos + key.size();
    while (i < s.size() && (std::isspace(static_cast<unsigned char>(s[i])) || s[i] == '=')) ++i;
    if (i >= s.size()) break;
    if (s[i] == '\'') {
      auto end = s.find('\'', i + 1);
      while (end != std::string_view::npos && s[end - 1] == '\\') end = s.find('\'', end + 1);
      add(s.substr(i + 1, end == std::string_view::npos ? std::string_view::npos : end - i - 1));
    } else {
      auto end = i;
      while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end])) && s[end] != '&') {
        ++end;
      }
      add(s.substr(i, end - i));
    }
  }
}

PGQUEUE_DECL void secret_scrubber::scan_uri_userinfo(std::string_view s) {
  auto scheme = s.find("://");
  if (scheme == std::string_view::npos) return;
  auto start = scheme + 3;
  auto at = s.find('@', start);
  auto slash = s.find('/', start);
  if (at == std::string_view::npos || (slash != std::string_view::npos && slash < at)) return;
  auto colon = s.find(':', start);
  if (colon == std::string_view::npos || colon > at) return;
  add(s.substr(colon + 1, at - colon - 1));
}

PGQUEUE_DECL std::size_t secret_scrubber::find_ci(std::string_view hay, std::string_view needle,
                                                  std::size_t from) {
  for (auto i = from; i + needle.size() <= hay.size(); ++i) {
    bool match = true;
    for (std::size_t j = 0; j < needle.size() && match; ++j) {
      match = std::tolower(static_cast<unsigned char>(hay[i + j])) == needle[j];
    }
    if (match) return i;
  }
  return std::string_view::npos;
}

}  // namespace pgqueue::pg::detail
