// Where `pgqueue serve` listens: --listen HOST:PORT parsed into an endpoint, and the rule that
// keeps the dashboard on this machine unless told otherwise (--allow-remote).
#pragma once

#include <string>

#include <asio/ip/tcp.hpp>

namespace pgqueue_cli::dashboard {

/// `text` as an endpoint: an IPv4 address, `[IPv6]`, or `localhost` (127.0.0.1), then ':' and
/// a port (0: one the system picks). Names other than localhost are refused: the address
/// decides who can reach the dashboard, so it is given, not looked up. Throws usage_error.
asio::ip::tcp::endpoint parse_listen_address(const std::string& text);

/// Refuses (usage_error) an address that is not loopback unless `allow_remote`: the dashboard
/// shows payloads and errors, and with --allow-actions changes queues.
void check_reachability(const asio::ip::tcp::endpoint& endpoint, bool allow_remote);

/// The dashboard's address as a URL: "http://127.0.0.1:8080/", "http://[::1]:8080/".
std::string url_of(const asio::ip::tcp::endpoint& endpoint);

}  // namespace pgqueue_cli::dashboard
