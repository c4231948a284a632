#include "http.hpp"

#include <algorithm>
#include <charconv>

namespace pgqueue_cli::dashboard {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A token character (RFC 9110): what a method or a header name may consist of.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

parsed_head refuse(int status, std::string why) {
  auto r = http_response::text(status, std::move(why) + "\n");
  r.close = true;
  return {std::nullopt, 0, std::move(r)};
}

}  // namespace

std::optional<std::string> http_request::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return std::nullopt;
}

bool http_request::keep_alive() const {
  if (minor_version == 0) return false;
  auto c = header("connection");
  return !c || lower(*c).find("close") == std::string::npos;
}

http_response http_response::text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body), {}, false};
}

http_response http_response::json(int status, const nlohmann::json& body) {
  return {status,
          "application/json",
          body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          {},
          false};
}

std::optional<std::size_t> head_end(std::string_view buffer) {
  const auto at = buffer.find("\r\n\r\n");
  if (at == std::string_view::npos) return std::nullopt;
  return at + 4;
}

parsed_head parse_head(std::string_view head, const http_limits& limits) {
  http_request req;
  auto line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  // METHOD SP target SP HTTP/1.x
  const auto sp1 = line.find(' ');
  const auto sp2 = line.find(' ', sp1 == std::string_view::npos ? sp1 : sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) {
    return refuse(400, "malformed request line");
  }
  req.method = std::string(line.substr(0, sp1));
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto version = line.substr(sp2 + 1);
  if (!is_token(req.method) || target.empty() || target.front() != '/') {
    return refuse(400, "malformed request line");
  }
  if (version == "HTTP/1.1") {
    req.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    req.minor_version = 0;
  } else {
    return refuse(400, "only HTTP/1.0 and HTTP/1.1");
  }
  const auto q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));

  std::optional<std::size_t> length;
  std::size_t at = line_end + 2;
  while (at < head.size()) {
    const auto end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;  // the empty line: the head's end
    const auto field = head.substr(at, end - at);
    at = end + 2;
    const auto colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) {
      return refuse(400, "malformed header field");
    }
    auto name = lower(field.substr(0, colon));
    auto value = std::string(trim(field.substr(colon + 1)));
    if (name == "content-length") {
      std::size_t n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || p != value.data() + value.size() || (length && *length != n)) {
        return refuse(400, "bad Content-Length");
      }
      length = n;
    } else if (name == "transfer-encoding") {
      return refuse(501, "no transfer codings: send a Content-Length");
    }
    req.headers.emplace_back(std::move(name), std::move(value));
  }
  if (length && *length > limits.max_body) {
    return refuse(413, "body larger than " + std::to_string(limits.max_body) + " bytes");
  }
  return {std::move(req), length.value_or(0), std::nullopt};
}

std::string serialise(const http_response& r, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += keep_alive && !r.close ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  out += r.body;
  return out;
}

}  // namespace pgqueue_cli::dashboard
