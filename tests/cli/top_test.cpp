// pgqueue top: exact counts per queue in plain frames, rates from the growth of the totals
// between two readings (the second reading taken when the test presses space, so the growth
// is exactly what the test did in between), NDJSON frames, the full-screen mode on a
// pseudo-terminal (escape codes, width, 'q' and SIGTERM put the terminal back), and refused
// intervals.
#include <csignal>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/server.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/terminal.hpp"
#include "support/tool.hpp"

namespace top_test {

using namespace pgq_test;
using nlohmann::json;

namespace {

void ack(session& s, const claimed& c) {
  s.query("SELECT pgqueue.ack($1, $2, $3)",
          {std::to_string(c.id), "w", std::to_string(c.lease_token)});
}

void nack(session& s, const claimed& c) {
  s.query("SELECT pgqueue.nack($1, $2, 'failed', NULL, $3)",
          {std::to_string(c.id), "w", std::to_string(c.lease_token)});
}

// mail: 3 done, 1 dead, 1 claimed, 2 ready, 1 scheduled for tomorrow. reports: paused, one
// job due an hour ago (the longer lag: it sorts first), one waiting for mail's claimed job.
void fill_queues(session& s) {
  for (int i = 0; i < 3; ++i) enqueue(s, "mail");
  for (const auto& c : claim(s, "mail", "w", 3)) ack(s, c);
  s.query("SELECT pgqueue.enqueue('mail', '{}', p_max_attempts => 1)");
  for (const auto& c : claim(s, "mail", "w")) nack(s, c);
  const auto claimed_id = enqueue(s, "mail");
  REQUIRE(claim(s, "mail", "w").size() == 1);
  enqueue(s, "mail");
  enqueue(s, "mail");
  s.query("SELECT pgqueue.enqueue('mail', '{}', p_run_after => now() + interval '1 day')");
  s.query("SELECT pgqueue.pause('reports')");
  s.query("SELECT pgqueue.enqueue('reports', '{}', p_run_after => now() - interval '1 hour')");
  s.query("SELECT pgqueue.enqueue('reports', '{}', p_depends_on => ARRAY[$1::bigint])",
          {std::to_string(claimed_id)});
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (auto next = text.find(separator); next != std::string::npos;
       next = text.find(separator, at)) {
    parts.push_back(text.substr(at, next - at));
    at = next + separator.size();
  }
  parts.push_back(text.substr(at));
  return parts;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string without_returns(std::string text) {
  std::erase(text, '\r');
  return text;
}

// The queue named `name` in a JSON frame.
json queue_in(const json& frame, const std::string& name) {
  for (const auto& q : frame["queues"]) {
    if (q["queue"] == name) return q;
  }
  FAIL("no queue " << name << " in " << frame.dump());
  return {};
}

}  // namespace

TEST_CASE("top prints each queue's counts, paused and lag, sorted by lag; rates from frame 2",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  fill_queues(admin);
  auto r = tool(db, {"top", "--iterations", "2", "--interval", "0.2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);  // not a terminal: no escape codes
  const auto frames = split(r.out, "\n\n");        // frames apart by a blank line
  REQUIRE(frames.size() == 2);
  for (int i = 0; i < 2; ++i) {
    const auto lines = split(frames[i], "\n");
    REQUIRE(lines.size() == (i == 0 ? 5u : 6u));  // the last frame ends in a newline
    CHECK(lines[0].starts_with("pgqueue top  "));
    CHECK(lines[0].ends_with("  database " + db.name() + "  2 queues"));
    const std::string rates =
        i == 0 ? "- enqueued, - done, - failed" : "0.0 enqueued, 0.0 done, 0.0 failed";
    CHECK(lines[1] ==
          "jobs: 3 ready, 1 scheduled, 1 claimed, 1 dead, 3 done, 1 waiting; per second: " + rates);
    CHECK(words(lines[2]) == std::vector<std::string>{"queue", "ready", "scheduled", "claimed",
                                                      "dead", "done", "waiting", "paused", "oldest",
                                                      "lag", "enqueued/s", "done/s", "failed/s"});
    auto reports = words(lines[3]), mail = words(lines[4]);
    REQUIRE(reports.size() == 13);
    REQUIRE(mail.size() == 13);
    const std::string rate = i == 0 ? "-" : "0.0";
    CHECK(reports[0] == "reports");
    CHECK(std::vector(reports.begin() + 1, reports.begin() + 8) ==
          std::vector<std::string>{"1", "0", "0", "0", "0", "1", "yes"});
    CHECK(reports[9] == "1h00m");  // due an hour ago
    CHECK(mail[0] == "mail");
    CHECK(std::vector(mail.begin() + 1, mail.begin() + 8) ==
          std::vector<std::string>{"2", "1", "1", "1", "3", "0", "no"});
    CHECK(std::vector(mail.begin() + 10, mail.end()) == std::vector<std::string>{rate, rate, rate});
  }
  auto once = tool(db, {"top", "--once"});
  CHECK(once.exit_code == 0);
  CHECK(split(once.out, "\n").size() == 6);  // 5 lines, one frame
}

TEST_CASE("top --json: one object per frame with counts, totals, growth and rates", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  fill_queues(admin);
  auto r = tool(db, {"--json", "top", "--iterations", "2", "--interval", "0.2"});
  REQUIRE(r.exit_code == 0);
  const auto lines = split(r.out, "\n");
  REQUIRE(lines.size() == 3);  // two lines, then nothing after the last newline
  const auto first = json::parse(lines[0]), second = json::parse(lines[1]);
  CHECK(first["database"] == db.name());
  CHECK(first["seconds"].is_null());
  CHECK(second["seconds"].get<double>() >= 0.2);  // the next reading waits for the interval
  const auto mail = queue_in(second, "mail");
  CHECK(mail["ready"] == 2);
  CHECK(mail["scheduled"] == 1);
  CHECK(mail["claimed"] == 1);
  CHECK(mail["dead"] == 1);
  CHECK(mail["cancelled"] == 0);
  CHECK(mail["done"] == 3);
  CHECK(mail["waiting"] == 0);
  CHECK(mail["paused"] == false);
  CHECK(mail["enqueued_total"] == 8);
  CHECK(mail["done_total"] == 3);
  CHECK(mail["failed_total"] == 1);
  CHECK(mail["enqueued_delta"] == 0);
  CHECK(mail["enqueued_per_s"] == 0.0);
  CHECK(queue_in(first, "mail")["enqueued_delta"].is_null());
  CHECK(queue_in(first, "mail")["done_per_s"].is_null());
  const auto reports = queue_in(second, "reports");
  CHECK(reports["paused"] == true);
  CHECK(reports["lag_s"].get<double>() >= 3600);
  CHECK(reports["waiting"] == 1);
  CHECK(second["queues"][0]["queue"] == "reports");  // the longest lag first
  CHECK(second["totals"]["ready"] == 3);
  CHECK(second["totals"]["enqueued_total"] == 10);
  CHECK(second["totals"]["waiting"] == 1);
  CHECK(second["totals"]["lag_s"] == reports["lag_s"]);
}

TEST_CASE("top's rates: the totals' growth between two readings over the time between them",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  enqueue(admin, "mail");
  // On a terminal, space asks for the next reading at once: the second frame is taken when
  // the test has done its work, however long that took (the interval would be an hour).
  terminal_process t({PGQUEUE_TOOL, "--json", "top", "--iterations", "2", "--interval", "3600"},
                     tool_environment(db));
  REQUIRE(t.read_until("\r\n"));
  const auto first_end = t.output().find("\r\n");
  const auto first = json::parse(t.output().substr(0, first_end));
  CHECK(queue_in(first, "mail")["enqueued_total"] == 1);
  // In between: 5 more jobs in mail, 2 of them done and 1 failed once; 2 in a new queue.
  for (int i = 0; i < 5; ++i) enqueue(admin, "mail");
  const auto held = claim(admin, "mail", "w", 3);
  REQUIRE(held.size() == 3);
  ack(admin, held[0]);
  ack(admin, held[1]);
  nack(admin, held[2]);
  enqueue(admin, "fresh");
  enqueue(admin, "fresh");
  t.type(" ");
  REQUIRE(t.read_until("\r\n", first_end + 2));
  CHECK(t.wait() == 0);  // two frames, then it ends by itself
  const auto second = json::parse(t.output().substr(first_end + 2));
  const double seconds = second["seconds"].get<double>();
  REQUIRE(seconds > 0);
  const auto mail = queue_in(second, "mail");
  CHECK(mail["enqueued_delta"] == 5);
  CHECK(mail["done_delta"] == 2);
  CHECK(mail["failed_delta"] == 1);
  CHECK(mail["enqueued_per_s"].get<double>() == Approx(5 / seconds));
  CHECK(mail["done_per_s"].get<double>() == Approx(2 / seconds));
  CHECK(mail["failed_per_s"].get<double>() == Approx(1 / seconds));
  CHECK(queue_in(second, "fresh")["enqueued_delta"] == 2);  // new: grown from zero
  CHECK(second["totals"]["enqueued_delta"] == 7);
  CHECK(second["totals"]["done_delta"] == 2);
  CHECK(second["totals"]["failed_delta"] == 1);
}

TEST_CASE("top on a terminal: full screen cut to its width; q and SIGTERM give the terminal back",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  fill_queues(admin);
  enqueue(admin, std::string(60, 'x'));  // longer than a narrow screen
  const std::regex escape("\x1b\\[[0-9;?]*[A-Za-z]");
  for (const int how : {int{'q'}, SIGTERM}) {
    INFO((how == 'q' ? "q" : "SIGTERM"));
    terminal_process t({PGQUEUE_TOOL, "top"}, tool_environment(db), 50, 12);
    REQUIRE(t.read_until("mail"));  // the first frame is on the screen
    const auto modes = t.modes();
    CHECK((modes.c_lflag & (ICANON | ECHO)) == 0);  // keys one at a time, not echoed
    if (how == 'q') {
      t.type("q");
    } else {
      t.signal(SIGTERM);
    }
    CHECK(t.wait() == (how == 'q' ? 0 : 4));
    const auto& out = t.output();
    CHECK(out.starts_with("\x1b[?1049h\x1b[?25l"));  // alternate screen, cursor hidden
    CHECK(out.ends_with("\x1b[?25h\x1b[?1049l"));    // cursor and screen back
    const auto restored = t.modes();
    CHECK((restored.c_lflag & (ICANON | ECHO)) == (ICANON | ECHO));
    for (const auto& line : split(without_returns(std::regex_replace(out, escape, "")), "\n")) {
      CHECK(line.size() <= 50);
    }
    CHECK(out.find(std::string(31, 'x') + "~") != std::string::npos);  // the long name, cut
  }
}

TEST_CASE("top refuses an absurd --interval with exit 2 and changes nothing", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  fill_queues(admin);
  const auto before = jobs_digest(admin);
  for (const std::string bad : {"0", "0.05", "-1", "3601", "nan", "inf", "soon", ""}) {
    auto r = tool(db, {"top", "--interval", bad});
    INFO("--interval '" << bad << "': " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--interval") != std::string::npos);
  }
  auto both = tool(db, {"top", "--once", "--iterations", "2"});
  CHECK(both.exit_code == 2);
  CHECK(jobs_digest(admin) == before);
}

}  // namespace top_test
