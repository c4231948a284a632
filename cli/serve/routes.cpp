#include "routes.hpp"

#include <array>

#include "actions.hpp"
#include "assets.hpp"
#include "dashboard_data.hpp"
#include "request_guard.hpp"

namespace pgqueue_cli::dashboard {

namespace {

// What every answer carries: nothing cached (the numbers change; the page has a token), no
// scripts, styles or frames but the dashboard's own files (so that text which escaped the
// page's escaping still could not run), no MIME sniffing, no framing (a framed page could be
// clicked through), no referrer.
void add_security_headers(http_response& r) {
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; "
                         "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                         "form-action 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

http_response refusal(int status, const std::string& message) {
  nlohmann::json body{{"error", message}};
  return http_response::json(status, body);
}

http_response wrong_method(const char* allowed) {
  auto r = refusal(405, "method not allowed (" + std::string(allowed) + " only)");
  r.headers.emplace_back("Allow", allowed);
  return r;
}

constexpr std::array<const char*, 4> action_names{"pause", "resume", "retry", "cancel"};

}  // namespace

asio::awaitable<http_response> routes::handle(const http_request& request) const {
  http_response response;
  if (auto why = refuse_host(request, options_.loopback_only)) {
    response = refusal(403, *why);
  } else {
    response = co_await route(request);
  }
  add_security_headers(response);
  co_return response;
}

asio::awaitable<http_response> routes::route(const http_request& request) const {
  const auto& path = request.path;
  const bool get = request.method == "GET";
  if (path == "/" || path == "/index.html") {
    if (!get) co_return wrong_method("GET");
    co_return http_response{200,
                            "text/html; charset=utf-8",
                            page_html(options_.allow_actions ? options_.token : ""),
                            {},
                            false};
  }
  if (path == "/app.js") {
    if (!get) co_return wrong_method("GET");
    co_return http_response{200, "text/javascript; charset=utf-8", std::string(app_js), {}, false};
  }
  if (path == "/app.css") {
    if (!get) co_return wrong_method("GET");
    co_return http_response{200, "text/css; charset=utf-8", std::string(app_css), {}, false};
  }
  if (path == "/api/dashboard") {
    if (!get) co_return wrong_method("GET");
    auto data = co_await read_dashboard(db_, *rates_, options_.allow_actions);
    co_return http_response::json(200, data);
  }
  if (path == "/metrics") {
    if (!get) co_return wrong_method("GET");
    const auto rows = co_await read_summary(db_);
    std::string text;
    write_metrics(text, rows);
    co_return http_response{
        200, "text/plain; version=0.0.4; charset=utf-8", std::move(text), {}, false};
  }
  for (const char* name : action_names) {
    if (path != std::string("/api/") + name) continue;
    if (request.method != "POST") co_return wrong_method("POST");
    if (!options_.allow_actions) {
      co_return refusal(403, "read-only: start pgqueue serve with --allow-actions to " +
                                 std::string(name) + " from the dashboard");
    }
    if (auto why = refuse_action(request, options_.token)) co_return refusal(403, *why);
    const std::string action = name;
    auto answer = co_await run_action(db_, action, request.body);
    co_return answer;
  }
  co_return refusal(404, "no such page: " + path);
}

}  // namespace pgqueue_cli::dashboard
