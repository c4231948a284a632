// Who may use the dashboard, checked before any route runs. Two attacks a browser can be made
// to carry out against a dashboard on localhost:
// - DNS rebinding: a site whose name resolves to 127.0.0.1 reads the page (and its token) as
//   its own origin. A loopback dashboard therefore answers only requests whose Host is a
//   loopback name or address.
// - Cross-site requests: a site's page posts to the dashboard. Actions need the token (which
//   that page cannot read), and an Origin or Sec-Fetch-Site, when the browser sends one,
//   must say the request comes from the dashboard's own page.
#pragma once

#include <optional>
#include <string>

#include "http.hpp"

namespace pgqueue_cli::dashboard {

/// Why a request must be refused (403) whatever it asks for, or nothing: its Host is not a
/// loopback name while `loopback_only`.
std::optional<std::string> refuse_host(const http_request& request, bool loopback_only);

/// Why an action request must be refused (403), or nothing: a foreign Origin or
/// Sec-Fetch-Site, a missing or wrong X-PGQueue-Token, a body not sent as application/json.
std::optional<std::string> refuse_action(const http_request& request, const std::string& token);

}  // namespace pgqueue_cli::dashboard
