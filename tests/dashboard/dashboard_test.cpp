// pgqueue serve over HTTP, as a script or an attacker would talk to it: what it reports
// (/metrics, /api/dashboard) for jobs in every state, which requests it refuses (read-only by
// default, the anti-forgery token, foreign origins and hosts, oversized or malformed
// requests) with nothing changed, and what the allowed actions change.
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "support/command.hpp"
#include "support/http_call.hpp"
#include "support/serve_process.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace dashboard_test {

using namespace pgq_test;

namespace {

// The page's anti-forgery token ("" when the page has none).
std::string token_of(const serve_process& serve) {
  const auto page = http_call(serve.port(), "GET", "/");
  REQUIRE(page.status == 200);
  std::smatch m;
  static const std::regex meta(R"re(<meta name="pgqueue-token" content="([0-9a-f]{64})">)re");
  return std::regex_search(page.body, m, meta) ? m[1].str() : "";
}

// A POST to an action endpoint as the page sends it, with `token` and extra `headers`.
http_reply post_action(const serve_process& serve, const std::string& action,
                       const nlohmann::json& body, const std::string& token,
                       std::vector<std::string> headers = {}) {
  headers.push_back("Content-Type: application/json");
  if (!token.empty()) headers.push_back("X-PGQueue-Token: " + token);
  return http_call(serve.port(), "POST", "/api/" + action, headers, body.dump());
}

// What the refused requests must not have changed: every job row, and the paused queues.
std::string everything(session& admin) {
  return jobs_digest(admin) + "|" +
         *admin.scalar(
             "SELECT coalesce(string_agg(queue, ',' ORDER BY queue), '') "
             "FROM pgqueue.paused_queues");
}

std::int64_t dead_job(session& admin, const std::string& queue) {
  return admin.integer("SELECT id FROM pgqueue.jobs WHERE state = 'dead' AND queue = $1", {queue});
}

}  // namespace

TEST_CASE("serve refuses a --listen address that is not loopback unless --allow-remote",
          "[dashboard]") {
  scratch_database db(true);
  const std::vector<std::string> env{"PGQUEUE_DSN=" + db.dsn()};
  auto remote = run_command({PGQUEUE_TOOL, "serve", "--listen", "0.0.0.0:0"}, "", env);
  CHECK(remote.exit_code == 2);
  CHECK(remote.err.find("reachable from other machines") != std::string::npos);
  CHECK(remote.err.find("--allow-remote") != std::string::npos);
  auto bad = run_command({PGQUEUE_TOOL, "serve", "--listen", "example.com:80"}, "", env);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("not an IP address") != std::string::npos);
  auto no_port = run_command({PGQUEUE_TOOL, "serve", "--listen", "127.0.0.1"}, "", env);
  CHECK(no_port.exit_code == 2);
  auto help = run_command({PGQUEUE_TOOL, "serve", "--help"}, "", env);
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--allow-actions") != std::string::npos);
  CHECK(help.out.find("--allow-remote") != std::string::npos);
  CHECK(help.out.find("--listen") != std::string::npos);
  // Told to, it listens on every address, and answers any Host.
  serve_process everywhere(PGQUEUE_TOOL, db.dsn(), {"--allow-remote"}, "0.0.0.0:0");
  CHECK(everywhere.url().starts_with("http://0.0.0.0:"));
  CHECK(http_call(everywhere.port(), "GET", "/", {"Host: queues.example:80"}).status == 200);
}

TEST_CASE("/metrics and /api/dashboard report every state of every queue", "[dashboard]") {
  scratch_database db(true);
  session admin(db.dsn());
  load_dashboard_jobs(admin);
  serve_process serve(PGQUEUE_TOOL, db.dsn());

  auto metrics = http_call(serve.port(), "GET", "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK(metrics.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics.body.find("pgqueue_queue_jobs{queue=\"mail\",state=\"dead\"} 1\n") !=
        std::string::npos);
  CHECK(metrics.body.find("pgqueue_queue_paused{queue=\"reports\"} 1\n") != std::string::npos);

  auto api = http_call(serve.port(), "GET", "/api/dashboard");
  REQUIRE(api.status == 200);
  CHECK(api.headers["content-type"] == "application/json");
  CHECK(api.headers["x-content-type-options"] == "nosniff");
  CHECK(api.headers["cache-control"] == "no-store");
  auto d = nlohmann::json::parse(api.body);
  CHECK(d["actions"] == false);
  REQUIRE(d["queues"].size() == 3);
  // By name: "<img ..." sorts before "mail" and "reports".
  const auto& html = d["queues"][0];
  const auto& mail = d["queues"][1];
  const auto& reports = d["queues"][2];
  CHECK(html["queue"] == html_queue);
  CHECK(html["ready"] == 1);
  CHECK(html["dead"] == 1);
  CHECK(mail["queue"] == "mail");
  CHECK(mail["paused"] == false);
  CHECK(mail["ready"] == 2);
  CHECK(mail["scheduled"] == 1);
  CHECK(mail["claimed"] == 1);
  CHECK(mail["dead"] == 1);
  CHECK(mail["cancelled"] == 1);
  CHECK(mail["waiting"] == 0);
  CHECK(mail["done"] == 3);
  CHECK(mail["oldest_ready_age_s"].is_number());
  CHECK(mail["lag_s"].is_number());
  CHECK(reports["paused"] == true);
  CHECK(reports["ready"] == 1);
  CHECK(reports["waiting"] == 1);

  REQUIRE(d["dead"].size() == 2);
  const auto mail_dead = d["dead"][0]["queue"] == "mail" ? d["dead"][0] : d["dead"][1];
  CHECK(mail_dead["id"] == dead_job(admin, "mail"));
  CHECK(mail_dead["last_error"] == "550 <b>mailbox</b> unavailable");
  REQUIRE(mail_dead["errors"].size() == 2);
  CHECK(mail_dead["errors"][0]["error"] == "smtp: connection refused");
  CHECK(mail_dead["errors"][0]["holder"] == "worker-1");
  CHECK(mail_dead["errors"][1]["error"] == "550 <b>mailbox</b> unavailable");
  CHECK(mail_dead["attempts"] == 2);

  // Next jobs: each queue's ready ones in claim order (mail: two due, then tomorrow's).
  std::vector<std::string> mail_next;
  for (const auto& j : d["next"]) {
    if (j["queue"] == "mail") mail_next.push_back(j["payload"].get<std::string>());
  }
  CHECK(mail_next == std::vector<std::string>{R"({"to": "<script>alert(2)</script>"})",
                                              R"({"to": "e@example.com"})",
                                              R"({"to": "f@example.com"})"});
}

TEST_CASE("read-only by default: no token in the page, actions answer 403 and change nothing",
          "[dashboard]") {
  scratch_database db(true);
  session admin(db.dsn());
  load_dashboard_jobs(admin);
  serve_process serve(PGQUEUE_TOOL, db.dsn());
  const auto before = everything(admin);
  CHECK(token_of(serve).empty());
  auto pause = post_action(serve, "pause", {{"queue", "mail"}}, "");
  CHECK(pause.status == 403);
  CHECK(pause.headers["content-type"] == "application/json");
  CHECK(nlohmann::json::parse(pause.body)["error"].get<std::string>().find("--allow-actions") !=
        std::string::npos);
  // Not even with a token made up to look right.
  CHECK(post_action(serve, "retry", {{"queue", "mail"}}, std::string(64, 'a')).status == 403);
  CHECK(post_action(serve, "cancel", {{"id", 1}}, "").status == 403);
  CHECK(post_action(serve, "resume", {{"queue", "reports"}}, "").status == 403);
  CHECK(everything(admin) == before);
  auto data = nlohmann::json::parse(http_call(serve.port(), "GET", "/api/dashboard").body);
  CHECK(data["actions"] == false);
}

TEST_CASE("with --allow-actions, an action needs the page's token from the page's own origin",
          "[dashboard]") {
  scratch_database db(true);
  session admin(db.dsn());
  load_dashboard_jobs(admin);
  serve_process serve(PGQUEUE_TOOL, db.dsn(), {"--allow-actions"});
  const auto token = token_of(serve);
  REQUIRE(token.size() == 64);
  const nlohmann::json pause_mail{{"queue", "mail"}};
  const auto before = everything(admin);

  SECTION("refused: nothing changes") {
    CHECK(post_action(serve, "pause", pause_mail, "").status == 403);
    auto wrong = token;
    wrong[10] = wrong[10] == '0' ? '1' : '0';
    CHECK(post_action(serve, "pause", pause_mail, wrong).status == 403);
    CHECK(post_action(serve, "pause", pause_mail, token.substr(0, 63)).status == 403);
    // Another site's page (a browser says so in Origin and Sec-Fetch-Site).
    CHECK(post_action(serve, "pause", pause_mail, token, {"Origin: http://evil.example"}).status ==
          403);
    CHECK(post_action(serve, "pause", pause_mail, token, {"Origin: null"}).status == 403);
    CHECK(post_action(serve, "pause", pause_mail, token, {"Sec-Fetch-Site: cross-site"}).status ==
          403);
    // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1. The page (and the
    // token in it) is refused too.
    CHECK(post_action(serve, "pause", pause_mail, token, {"Host: evil.example"}).status == 403);
    CHECK(http_call(serve.port(), "GET", "/", {"Host: evil.example:80"}).status == 403);
    // A second Host (which a proxy might read instead), or none (HTTP/1.0).
    CHECK(http_exchange(serve.port(),
                        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
              .status == 403);
    CHECK(http_exchange(serve.port(), "GET / HTTP/1.0\r\n\r\n").status == 403);
    // Not JSON: a form post (which needs no CORS preflight) is refused.
    CHECK(http_call(serve.port(), "POST", "/api/pause",
                    {"X-PGQueue-Token: " + token, "Content-Type: text/plain"}, pause_mail.dump())
              .status == 403);
    CHECK(everything(admin) == before);
  }

  SECTION("allowed: each action changes what it says") {
    const auto same_origin = "Origin: http://127.0.0.1:" + std::to_string(serve.port());
    auto paused = post_action(serve, "pause", pause_mail, token, {same_origin});
    REQUIRE(paused.status == 200);
    CHECK(nlohmann::json::parse(paused.body) ==
          nlohmann::json{{"queue", "mail"}, {"changed", true}});
    CHECK(admin.integer("SELECT count(*) FROM pgqueue.paused_queues WHERE queue = 'mail'") == 1);
    auto resumed = post_action(serve, "resume", {{"queue", "reports"}}, token,
                               {"Host: localhost:" + std::to_string(serve.port())});
    REQUIRE(resumed.status == 200);
    CHECK(admin.integer("SELECT count(*) FROM pgqueue.paused_queues WHERE queue = 'reports'") == 0);

    const auto dead = dead_job(admin, "mail");
    auto retried = post_action(serve, "retry", {{"queue", "mail"}, {"ids", {dead}}}, token);
    REQUIRE(retried.status == 200);
    CHECK(nlohmann::json::parse(retried.body)["retried"] == 1);
    CHECK(read_job(admin, dead).state == "ready");
    CHECK(read_job(admin, dead_job(admin, html_queue)).state == "dead");  // only the one named

    const auto ready =
        admin.integer("SELECT id FROM pgqueue.jobs WHERE queue = 'reports' AND state = 'ready'");
    auto cancelled = post_action(serve, "cancel", {{"id", ready}}, token);
    REQUIRE(cancelled.status == 200);
    CHECK(nlohmann::json::parse(cancelled.body)["cancelled"] == true);
    CHECK(read_job(admin, ready).state == "cancelled");

    // Bodies it cannot use: 400, and what the server refuses (an empty queue name) too.
    CHECK(post_action(serve, "pause", nlohmann::json::array(), token).status == 400);
    CHECK(post_action(serve, "pause", {{"queue", 5}}, token).status == 400);
    CHECK(post_action(serve, "cancel", {{"id", "1; DROP TABLE x"}}, token).status == 400);
    auto empty_name = post_action(serve, "pause", {{"queue", ""}}, token);
    CHECK(empty_name.status == 400);
    CHECK(empty_name.body.find("22023") != std::string::npos);
  }
}

TEST_CASE("HTTP: unknown paths, wrong methods, oversized and malformed requests, keep-alive",
          "[dashboard]") {
  scratch_database db(true);
  serve_process serve(PGQUEUE_TOOL, db.dsn(), {"--allow-actions"});
  CHECK(http_call(serve.port(), "GET", "/nope").status == 404);
  CHECK(http_call(serve.port(), "GET", "/api/dashboard/../../etc/passwd").status == 404);
  auto post_metrics = http_call(serve.port(), "POST", "/metrics");
  CHECK(post_metrics.status == 405);
  CHECK(post_metrics.headers["allow"] == "GET");
  auto get_pause = http_call(serve.port(), "GET", "/api/pause");
  CHECK(get_pause.status == 405);
  CHECK(get_pause.headers["allow"] == "POST");
  CHECK(http_call(serve.port(), "DELETE", "/").status == 405);

  // A head beyond 16 KiB: 431. A body beyond 64 KiB: 413, before it is read.
  CHECK(http_call(serve.port(), "GET", "/", {"X-Big: " + std::string(20000, 'x')}).status == 431);
  CHECK(http_exchange(serve.port(),
                      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(40000, 'x'))
            .status == 431);  // no end of head in sight
  CHECK(
      http_exchange(serve.port(),
                    "POST /api/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
          .status == 413);
  CHECK(http_exchange(serve.port(),
                      "POST /api/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            .status == 501);
  CHECK(http_exchange(serve.port(), "GARBAGE\r\n\r\n").status == 400);
  CHECK(http_exchange(serve.port(), "GET / HTTP/2.0\r\n\r\n").status == 400);
  CHECK(http_exchange(serve.port(),
                      "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            .status == 400);

  // Two requests on one connection, answered in order; then the server closes as asked.
  const std::string two =
      "GET /app.css HTTP/1.1\r\nHost: localhost\r\n\r\n"
      "GET /nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  auto replies = parse_replies(http_exchange_raw(serve.port(), two));
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].status == 200);
  CHECK(replies[0].headers["content-type"] == "text/css; charset=utf-8");
  CHECK(replies[0].headers["connection"] == "keep-alive");
  CHECK(replies[1].status == 404);
  CHECK(replies[1].headers["connection"] == "close");

  // Every answer carries the page's protections.
  auto page = http_call(serve.port(), "GET", "/");
  CHECK(page.headers["content-type"] == "text/html; charset=utf-8");
  CHECK(page.headers["content-security-policy"].find("script-src 'self'") != std::string::npos);
  CHECK(page.headers["x-frame-options"] == "DENY");
}

TEST_CASE("SIGTERM stops serve at once, with open connections, exit code 0", "[dashboard]") {
  scratch_database db(true);
  serve_process serve(PGQUEUE_TOOL, db.dsn());
  // SIGTERM while a kept-alive connection is open and idle: the server closes it and ends
  // (an idle connection would otherwise hold it up for 30 s).
  const auto started = std::chrono::steady_clock::now();
  auto replies = parse_replies(
      http_exchange_raw(serve.port(), "GET /app.js HTTP/1.1\r\nHost: localhost\r\n\r\n",
                        std::chrono::seconds(20), [&] { serve.process().signal(SIGTERM); }));
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].status == 200);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  const auto status = serve.process().wait(std::chrono::seconds(5));
  REQUIRE(status);
  REQUIRE(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

}  // namespace dashboard_test
