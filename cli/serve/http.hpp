// The HTTP/1.1 messages of `pgqueue serve`: a request as the server read it, a response as a
// route builds it, and the parsing and writing between them and the bytes on the socket. No
// I/O here (http_server.cpp does it), so every limit is decided in one place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pgqueue_cli::dashboard {

/// What one request may be. Bounded so that a client cannot make the server hold much: a
/// head beyond `max_head` is refused with 431, a body beyond `max_body` with 413.
struct http_limits {
  std::size_t max_head = 16 * 1024;
  std::size_t max_body = 64 * 1024;
};

struct http_request {
  std::string method;  ///< as sent (methods are case-sensitive)
  std::string path;    ///< the target up to '?'
  std::string query;   ///< after '?', undecoded
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-cased
  std::string body;

  /// The value of header `name` (lower case), if sent.
  std::optional<std::string> header(std::string_view name) const;
  /// Whether the client keeps the connection open after this request (HTTP/1.1 unless
  /// `Connection: close`; HTTP/1.0 never, here).
  bool keep_alive() const;
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< besides the type and length
  bool close = false;  ///< end the connection after this response

  static http_response text(int status, std::string body);
  /// `body` as application/json. Text that is not UTF-8 (a database in another encoding) is
  /// replaced (U+FFFD) rather than refused.
  static http_response json(int status, const nlohmann::json& body);
};

/// Where the head of a request ends in `buffer` ("\r\n\r\n"): the offset just past it, or
/// nothing while it has not arrived.
std::optional<std::size_t> head_end(std::string_view buffer);

/// The outcome of parsing a head: a request without its body yet, or the response that
/// refuses it (400 malformed, 413 body too large, 501 a transfer coding; the connection is
/// closed after it).
struct parsed_head {
  std::optional<http_request> request;
  std::size_t content_length = 0;
  std::optional<http_response> refusal;
};

/// Parses `head` (request line and headers, up to and including the empty line).
parsed_head parse_head(std::string_view head, const http_limits& limits);

/// The bytes of `r` (status line, headers with Content-Length, body), for a request that
/// keeps the connection open when `keep_alive`.
std::string serialise(const http_response& r, bool keep_alive);

}  // namespace pgqueue_cli::dashboard
