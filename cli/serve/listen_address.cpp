#include "listen_address.hpp"

#include <charconv>

#include "../context.hpp"
#include "../output.hpp"

namespace pgqueue_cli::dashboard {

asio::ip::tcp::endpoint parse_listen_address(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return usage_error("--listen '" + printable(text) + "': " + why +
                       " (HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw bad("no port");
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size() ||
      port > 65535) {
    throw bad("not a port");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    throw bad("an IPv6 address goes in brackets");
  }
  if (host == "localhost") host = "127.0.0.1";
  asio::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) throw bad("not an IP address");
  return {address, static_cast<unsigned short>(port)};
}

void check_reachability(const asio::ip::tcp::endpoint& endpoint, bool allow_remote) {
  if (endpoint.address().is_loopback() || allow_remote) return;
  throw usage_error("--listen " + endpoint.address().to_string() +
                    " is reachable from other machines: the dashboard shows payloads and "
                    "errors to whoever connects. Listen on 127.0.0.1 (or [::1]), or add "
                    "--allow-remote if that is what you want");
}

std::string url_of(const asio::ip::tcp::endpoint& endpoint) {
  const auto a = endpoint.address();
  const std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return "http://" + host + ":" + std::to_string(endpoint.port()) + "/";
}

}  // namespace pgqueue_cli::dashboard
