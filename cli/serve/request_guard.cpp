#include "request_guard.hpp"

#include <algorithm>

#include <asio/ip/address.hpp>

#include "token.hpp"

namespace pgqueue_cli::dashboard {

namespace {

// The host part of a Host header: "[::1]:8080" -> "::1", "localhost:80" -> "localhost".
std::string host_name(const std::string& host) {
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  return host.substr(0, host.find(':'));
}

bool loopback_name(const std::string& name) {
  if (name == "localhost") return true;
  asio::error_code error;
  const auto address = asio::ip::make_address(name, error);
  return !error && address.is_loopback();
}

}  // namespace

std::optional<std::string> refuse_host(const http_request& request, bool loopback_only) {
  if (!loopback_only) return std::nullopt;
  // Exactly one Host (HTTP/1.1 requires it; a second one could be read differently by a proxy
  // in front), and a loopback name in it.
  const auto hosts = std::count_if(request.headers.begin(), request.headers.end(),
                                   [](const auto& h) { return h.first == "host"; });
  if (hosts != 1) return "this dashboard needs exactly one Host header";
  const auto host = request.header("host");
  if (loopback_name(host_name(*host))) return std::nullopt;
  return "this dashboard answers only to localhost, 127.0.0.1 or [::1] (Host: " + *host + ")";
}

std::optional<std::string> refuse_action(const http_request& request, const std::string& token) {
  const auto origin = request.header("origin");
  const auto host = request.header("host");
  if (origin && (!host || *origin != "http://" + *host)) {
    return "the request comes from another site's page (Origin: " + *origin + ")";
  }
  const auto site = request.header("sec-fetch-site");
  if (site && *site != "same-origin") {
    return "the request comes from another site's page (Sec-Fetch-Site: " + *site + ")";
  }
  const auto given = request.header("x-pgqueue-token");
  if (!given || !same_token(*given, token)) {
    return "no valid X-PGQueue-Token: actions come from the dashboard's own page";
  }
  const auto type = request.header("content-type");
  if (!type || type->substr(0, type->find(';')) != "application/json") {
    return "the body must be sent as application/json";
  }
  return std::nullopt;
}

}  // namespace pgqueue_cli::dashboard
