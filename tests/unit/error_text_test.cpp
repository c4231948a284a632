// detail::clean_error_text: what the worker stores as a failed job's last_error; and
// detail::is_utf8, which judges text by the same rules.
#include <string>

#include <catch2/catch.hpp>
#include <pgqueue/detail/error_text.hpp>

namespace unit_error_text_test {

using pgqueue::detail::clean_error_text;
using pgqueue::detail::is_utf8;
using namespace std::string_literals;

TEST_CASE("valid UTF-8, tabs and newlines are kept as they are", "[error_text]") {
  // 2, 3 and 4-byte sequences at the edges of their ranges: U+0080, U+07FF, U+0800, U+D7FF,
  // U+E000, U+FFFF, U+10000, U+10FFFF.
  const std::string edges =
      "\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF\xF0\x90\x80\x80"
      "\xF4\x8F\xBF\xBF";
  CHECK(clean_error_text(edges) == edges);
  CHECK(clean_error_text("smtp timeout: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\n\tline 2") ==
        "smtp timeout: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\n\tline 2");
  CHECK(clean_error_text("") == "");
  CHECK(clean_error_text("DEL \x7F stays") == "DEL \x7F stays");
}

TEST_CASE("NUL and other C0 control bytes become '?'", "[error_text]") {
  CHECK(clean_error_text("a\0b"s) == "a?b");
  CHECK(clean_error_text("\x01\x1F\r\x1B[31m") == "????[31m");
}

TEST_CASE("each byte of an ill-formed sequence becomes '?'", "[error_text]") {
  CHECK(clean_error_text("bad \xFF\xFE utf8") == "bad ?? utf8");
  // Overlong encodings: '/' as 2 bytes, U+0000 as 2 bytes, '/' as 3 and 4 bytes.
  CHECK(clean_error_text("\xC0\xAF|\xC1\x80|\xE0\x80\xAF|\xF0\x80\x80\xAF") == "??|??|???|????");
  // Surrogates U+D800 and U+DFFF (CESU-8 style), and a code point above U+10FFFF.
  CHECK(clean_error_text("\xED\xA0\x80|\xED\xBF\xBF|\xF4\x90\x80\x80|\xF5\x80") ==
        "???|???|????|??");
  // Truncated sequences: at the end, and cut short by ASCII.
  CHECK(clean_error_text("x\xE2\x82") == "x??");
  CHECK(clean_error_text("\xF0\x9F\x98z\xC3") == "???z?");
  // Lone continuation bytes.
  CHECK(clean_error_text("\x80\xBF") == "??");
}

TEST_CASE("long text is cut to the limit at a character boundary", "[error_text]") {
  CHECK(clean_error_text(std::string(5000, 'a')) == std::string(2000, 'a'));
  CHECK(clean_error_text(std::string(2000, 'a')) == std::string(2000, 'a'));
  // 1999 ASCII bytes then a 2-byte character: it does not fit, so 1999 bytes remain.
  CHECK(clean_error_text(std::string(1999, 'a') + "\xC3\xA9" + "tail") == std::string(1999, 'a'));
  // Smaller limits: a 4-byte character is kept whole or not at all.
  CHECK(clean_error_text("ab\xF0\x9F\x98\x80", 5) == "ab");
  CHECK(clean_error_text("ab\xF0\x9F\x98\x80", 6) == "ab\xF0\x9F\x98\x80");
  CHECK(clean_error_text("ab\xFF\xFF", 3) == "ab?");
  // 100 kB of a 2-byte character: 1000 of them.
  std::string e_acute;
  for (int i = 0; i < 50000; ++i) e_acute += "\xC3\xA9";
  const auto cut = clean_error_text(e_acute);
  CHECK(cut.size() == 2000);
  CHECK(cut == e_acute.substr(0, 2000));
}

TEST_CASE("is_utf8 judges by the same rules; control bytes are well-formed", "[error_text]") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("plain ASCII \x01 with controls\0"s));
  CHECK(is_utf8("\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"));
  for (const char* bad : {"\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "x\xE2\x82",
                          "\x80", "caf\xC3\x28"}) {
    INFO(bad);
    CHECK_FALSE(is_utf8(bad));
  }
}

}  // namespace unit_error_text_test
