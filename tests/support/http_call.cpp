#include "support/http_call.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace pgq_test {

namespace {

struct socket_fd {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ~socket_fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::vector<http_reply> parse_replies(const std::string& data) {
  std::vector<http_reply> replies;
  std::size_t at = 0;
  while (at < data.size()) {
    const auto head_end = data.find("\r\n\r\n", at);
    if (head_end == std::string::npos) break;
    http_reply r;
    const auto line_end = data.find("\r\n", at);
    r.status = std::stoi(data.substr(at + 9, 3));  // "HTTP/1.1 200 OK"
    for (auto p = line_end + 2; p < head_end;) {
      const auto e = data.find("\r\n", p);
      const auto field = data.substr(p, e - p);
      const auto colon = field.find(':');
      r.headers[lower(field.substr(0, colon))] =
          field.substr(field.find_first_not_of(' ', colon + 1));
      p = e + 2;
    }
    const auto length =
        r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    r.body = data.substr(head_end + 4, length);
    at = head_end + 4 + length;
    replies.push_back(std::move(r));
  }
  return replies;
}

std::string http_exchange_raw(int port, const std::string& raw, std::chrono::milliseconds limit,
                              const std::function<void()>& after_first_reply) {
  socket_fd s;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    throw std::runtime_error("cannot connect to port " + std::to_string(port));
  }
  // Write what the server takes (it may close early: a refused oversized head).
  for (std::size_t sent = 0; sent < raw.size();) {
    const auto n = ::send(s.fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string data;
  bool called = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{s.fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[8192];
    const auto n = ::recv(s.fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;  // closed (or reset after a refusal)
    data.append(buffer, static_cast<std::size_t>(n));
    if (after_first_reply && !called && !parse_replies(data).empty()) {
      called = true;
      after_first_reply();
    }
  }
  return data;
}

http_reply http_exchange(int port, const std::string& raw, std::chrono::milliseconds limit) {
  auto replies = parse_replies(http_exchange_raw(port, raw, limit));
  return replies.empty() ? http_reply{} : replies.front();
}

http_reply http_call(int port, const std::string& method, const std::string& path,
                     const std::vector<std::string>& headers, const std::string& body) {
  std::string raw = method + " " + path + " HTTP/1.1\r\n";
  bool has_host = false;
  for (const auto& h : headers) {
    raw += h + "\r\n";
    has_host = has_host || lower(h).rfind("host:", 0) == 0;
  }
  if (!has_host) raw += "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
  if (!body.empty() || method == "POST") {
    raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  raw += "Connection: close\r\n\r\n" + body;
  return http_exchange(port, raw);
}

}  // namespace pgq_test
