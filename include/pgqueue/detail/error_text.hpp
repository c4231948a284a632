// Error text that the server will store whatever it contains (placeholder; see worker-fixes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace pgqueue::detail {

/// `text` made safe to store as a job's error: invalid UTF-8 and control bytes other than \n
/// and \t become '?', cut to at most 2000 bytes at a character boundary.
inline std::string clean_error_text(std::string_view text) {
  constexpr std::size_t limit = 2000;
  std::string out;
  out.reserve(std::min(text.size(), limit));
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
    }
    bool ok = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (ok && len >= 3) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xE0 && c1 < 0xA0) ok = false;   // overlong
      if (c == 0xED && c1 >= 0xA0) ok = false;  // surrogate
      if (c == 0xF0 && c1 < 0x90) ok = false;   // overlong
      if (c == 0xF4 && c1 >= 0x90) ok = false;  // beyond U+10FFFF
    }
    if (!ok) len = 1;
    if (out.size() + (ok ? len : 1) > limit) break;
    if (!ok || (len == 1 && (c < 0x20 || c == 0x7F) && c != '\n' && c != '\t')) {
      out.push_back('?');
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace pgqueue::detail
