// Text from outside (an exception's what(), a worker id): checked, or made safe to store in
// a text column.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace pgqueue::detail {

/// Most bytes of error text the worker stores (the server keeps at most 2000 characters).
inline constexpr std::size_t max_error_text = 2000;

/// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF) starting at `s[i]`, or 0 when none starts there.
inline std::size_t utf8_sequence_at(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto in = [&](std::size_t k, unsigned lo, unsigned hi) {
    return k < s.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned b = byte(i);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return in(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    // The second byte's range excludes overlong forms (E0) and surrogates (ED).
    const unsigned lo = b == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = b == 0xED ? 0x9F : 0xBF;
    return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    // Overlong forms (F0) and code points above U+10FFFF (F4) are excluded likewise.
    const unsigned lo = b == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = b == 0xF4 ? 0x8F : 0xBF;
    return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;  // a continuation byte, C0/C1 (overlong), or F5..FF
}

/// Whether all of `text` is well-formed UTF-8 (as utf8_sequence_at judges it). Linear.
inline bool is_utf8(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_at(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// `text` as something any server accepts in a text column: each byte that is not part of a
/// well-formed UTF-8 sequence, and each C0 control byte but \t and \n (NUL included), becomes
/// '?' (ASCII, so it converts to any server encoding); the result is cut to at most `limit`
/// bytes at a character boundary. Reads only as much of `text` as it keeps. Never fails
/// (beyond std::bad_alloc).
inline std::string clean_error_text(std::string_view text, std::size_t limit = max_error_text) {
  std::string out;
  out.reserve(std::min(text.size(), limit));
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_sequence_at(text, i);
    const std::size_t keep = n == 0 ? 1 : n;
    if (out.size() + keep > limit) break;
    const auto b = static_cast<unsigned char>(text[i]);
    if (n == 0 || (b < 0x20 && b != '\t' && b != '\n')) {
      out += '?';
      i += 1;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace pgqueue::detail
