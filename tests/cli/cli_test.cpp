// The pgqueue command against a real server: each subcommand's output (text and --json), its
// exit code, and what it changed, read back from the jobs table.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/command.hpp"
#include "support/pipe.hpp"
#include "support/process.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"
#include "support/tool.hpp"
#include "support/wait.hpp"

namespace cli_test {

using namespace pgq_test;

namespace {

std::string state_of(session& s, std::int64_t id) {
  return read_job(s, id).state;
}

}  // namespace

TEST_CASE("migrate installs, reports up to date, and --check says whether an upgrade is pending",
          "[cli]") {
  scratch_database db(false);
  auto check = tool(db, {"migrate", "--check"});
  INFO(check.err);
  CHECK(check.exit_code == 1);
  CHECK(check.out.starts_with("upgrade pending: installed version 0"));
  auto first = tool(db, {"migrate"});
  CHECK(first.exit_code == 0);
  CHECK(first.out.starts_with("migrated: version 0 -> "));
  auto again = tool(db, {"--json", "migrate", "--check"});
  CHECK(again.exit_code == 0);
  auto j = nlohmann::json::parse(again.out);
  CHECK(j["pending"] == false);
  CHECK(j["installed"] == j["available"]);
}

TEST_CASE("migrate that waited for another install reports it found the schema up to date",
          "[cli]") {
  // (Runs at once each printed "migrated: version 0 -> N": they read the version before the
  // lock the install serialises on, and the first to get it did the work.)
  scratch_database db(false);
  session admin(db.dsn());
  const std::string lock = "8100266002545501541";  // sql/pgqueue.sql's
  admin.query("SELECT pg_advisory_lock($1)", {lock});
  piped_tool a(db, {"migrate"});
  piped_tool b(db, {"migrate"});
  a.close_input();
  b.close_input();
  CHECK(wait_until(
      [&] {
        return admin.integer(
                   "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
                   "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                   {db.name()}) == 2;
      },
      std::chrono::seconds(10)));
  admin.script(read_file(schema_file()));  // the other install, holding the lock meanwhile
  admin.query("SELECT pg_advisory_unlock($1)", {lock});
  const std::string up_to_date =
      "up to date: version " +
      admin.scalar("SELECT max(version) FROM pgqueue.schema_version").value() + "\n";
  for (auto* t : {&a, &b}) {
    CHECK(t->exit_code(std::chrono::seconds(30)) == 0);
    CHECK(t->output() == up_to_date);
  }
}

TEST_CASE("enqueue: one job with options, then newline-delimited JSON from stdin in batches",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  auto one = tool(db, {"enqueue", "emails", R"({"to":"a@example.com"})", "--priority", "7",
                       "--max-attempts", "2", "--key", "k1", "--delay", "1 hour"});
  REQUIRE(one.exit_code == 0);
  const auto id = std::stoll(one.out);
  auto job = read_job(admin, id);
  CHECK(job.queue == "emails");
  CHECK(job.priority == 7);
  CHECK(job.max_attempts == 2);
  CHECK(job.run_after_in > 3500);  // --delay '1 hour'
  CHECK(job.run_after_in <= 3600);
  auto same = tool(db, {"enqueue", "emails", "{}", "--key", "k1"});
  CHECK(std::stoll(same.out) == id);  // the idempotency key

  std::string lines;
  for (int i = 0; i < 25; ++i) lines += "{\"n\": " + std::to_string(i) + "}\n\n";
  auto many = tool(db, {"--json", "enqueue", "bulk", "--batch-size", "10"}, lines);
  REQUIRE(many.exit_code == 0);
  auto j = nlohmann::json::parse(many.out);
  CHECK(j["enqueued"] == 25);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'bulk'") == 25);
  CHECK(admin.integer("SELECT count(DISTINCT payload->>'n') FROM pgqueue.jobs "
                      "WHERE queue = 'bulk'") == 25);
}

TEST_CASE(
    "enqueue from stdin stops at a line that is not JSON: everything before it is in, "
    "nothing after",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  auto r = tool(db, {"enqueue", "bulk", "--batch-size", "2"}, "{}\n{}\n{}\n{oops\n{}\n");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("line 4 is not JSON") != std::string::npos);
  CHECK(r.err.find("stopped there: lines 1-3 were enqueued (3 jobs, ids ") != std::string::npos);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'bulk'") == 3);
  // Within one batch (JSON is checked when the server refuses the batch): the lines before it
  // go in as a batch of their own.
  auto in_batch = tool(db, {"enqueue", "one_batch"}, "{}\n[1]\nnope\n{}\n");
  CHECK(in_batch.exit_code == 2);
  CHECK(in_batch.err.find("line 3 is not JSON; stopped there: lines 1-2 were enqueued") !=
        std::string::npos);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'one_batch'") == 2);
  // A last line without a newline is a line.
  auto unterminated = tool(db, {"enqueue", "last"}, "{}\n{\"last\": true}");
  CHECK(unterminated.exit_code == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'last' "
                      "AND payload = '{\"last\": true}'") == 1);
}

TEST_CASE(
    "enqueue from stdin names a line the server refuses: everything before it is in, "
    "nothing after",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  std::string lines;
  for (int i = 1; i <= 7; ++i) lines += "{\"n\": " + std::to_string(i) + "}\n";
  lines += "{\"a\": \"\\u0000\"}\n{\"n\": 9}\n";  // jsonb cannot hold \u0000: 22P05
  auto r = tool(db, {"--json", "enqueue", "bulk", "--batch-size", "5"}, lines);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("line 8 was refused") != std::string::npos);
  CHECK(r.err.find("22P05") != std::string::npos);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["enqueued"] == 7);
  CHECK(j["through_line"] == 7);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'bulk'") == 7);
  CHECK(admin.integer("SELECT max((payload->>'n')::int) FROM pgqueue.jobs") == 7);
}

TEST_CASE("a signal while reading stdin enqueues what was read, says so and exits 4", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  // Three lines, then stdin stays open (a sleep that outlives the test by at most 20 s, its
  // stderr closed so that nothing waits for it): the tool waits for more with one line in its
  // batch.
  const std::string script = std::string("exec ") + PGQUEUE_TOOL + " --dsn '" + db.dsn() +
                             "' enqueue q --batch-size 2 --flush-after 600000 < <(printf "
                             "'{}\\n{}\\n{}\\n'; exec sleep 20 2>/dev/null)";
  child_process tool_process("/bin/bash", {"-c", script});
  for (int i = 0; i < 500 && count_jobs(admin, "ready", "q") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(count_jobs(admin, "ready", "q") == 2);  // the first batch
  // The third line is in the pipe already: give the tool a moment to take it and block.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  tool_process.signal(SIGTERM);
  const auto status = tool_process.wait(std::chrono::seconds(10));
  REQUIRE(status);
  REQUIRE(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 4);
  CHECK(count_jobs(admin, "ready", "q") == 3);
}

TEST_CASE("enqueue from a stdin that stays open sends a partial batch --flush-after its first line",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  piped_tool tool_process(db, {"enqueue", "q", "--flush-after", "50"});
  const auto jobs_become = [&](std::int64_t n) {
    return wait_until([&] { return count_jobs(admin, "ready", "q") >= n; },
                      std::chrono::seconds(10)) &&
           count_jobs(admin, "ready", "q") == n;
  };
  // Two whole lines and the start of a third: the two go in while the batch of 1000 is far
  // from full and stdin stays open; the third waits for its newline.
  tool_process.write("{\"n\": 1}\n{\"n\": 2}\n{\"n\":");
  CHECK(jobs_become(2));
  tool_process.write(" 3}\n");
  CHECK(jobs_become(3));
  tool_process.close_input();
  CHECK(tool_process.exit_code(std::chrono::seconds(10)) == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = 'q'") == 3);
  CHECK(admin.integer("SELECT sum((payload->>'n')::int) FROM pgqueue.jobs") == 6);
}

TEST_CASE(
    "enqueue from stdin blames the first refused line, found by halves, whatever refused it "
    "(a NUL byte, nesting too deep, a number the client's JSON check would not take)",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const auto count = [&](const char* queue) {
    return admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE queue = $1", {queue});
  };
  // The client refuses a NUL byte before sending: the batch fails whole, the two lines before
  // it go in by halves.
  const std::string with_nul = std::string("{\"a\":1}\n{\"a\":2}\n{\"a\":3}") + '\0' + "\n{}\n";
  auto nul = tool(db, {"enqueue", "nul"}, with_nul);
  CHECK(nul.exit_code == 2);
  CHECK(nul.err.find("line 3 ") != std::string::npos);
  CHECK(nul.err.find("stopped there: lines 1-2 were enqueued (2 jobs, ids ") != std::string::npos);
  CHECK(count("nul") == 2);
  // 1e400 is JSON to PostgreSQL (a numeric) but not to the client's check: the line blamed is
  // the one the server refuses.
  auto big = tool(db, {"enqueue", "big"}, "1e400\n{\"a\":1}\nnope\n{}\n");
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("line 3 is not JSON; stopped there: lines 1-2 were enqueued") !=
        std::string::npos);
  CHECK(count("big") == 2);
  // Nesting past the server's stack depth (54001) is the line's fault, not the server's.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto nested = tool(db, {"enqueue", "deep"}, "{\"a\":1}\n" + deep + "\n{}\n");
  CHECK(nested.exit_code == 2);
  CHECK(nested.err.find("line 2 was refused") != std::string::npos);
  CHECK(nested.err.find("54001") != std::string::npos);
  CHECK(nested.err.find("line 1 was enqueued (1 job, id ") != std::string::npos);
  CHECK(count("deep") == 1);
}

TEST_CASE(
    "enqueue from stdin: a closed stdin is empty, an unreadable one is an error, a bad "
    "queue name is refused before any line comes",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const std::string tool_at = std::string("exec ") + PGQUEUE_TOOL + " --dsn '" + db.dsn() + "'";
  auto closed = run_command({"/bin/bash", "-c", tool_at + " enqueue q <&-"});
  CHECK(closed.exit_code == 0);
  CHECK(closed.out == "enqueued 0 jobs (stdin had no lines)\n");
  auto directory = run_command({"/bin/bash", "-c", tool_at + " enqueue q < /"});
  CHECK(directory.exit_code == 2);
  CHECK(directory.err.find("stdin could not be read before line 1: Is a directory") !=
        std::string::npos);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") == 0);
  // Nothing is written: the name alone ends it.
  piped_tool bad_name(db, {"enqueue", "bad\tq"});
  CHECK(bad_name.exit_code(std::chrono::seconds(10)) == 2);
  CHECK(bad_name.errors().find("invalid queue name") != std::string::npos);
  auto bad_name_json = tool(db, {"--json", "enqueue", "bad\tq"});
  CHECK(bad_name_json.exit_code == 2);
  CHECK(nlohmann::json::parse(bad_name_json.out)["error"].get<std::string>().find(
            "invalid queue name") != std::string::npos);
}

TEST_CASE("enqueue from stdin that fails at the server says which lines are in and which may be",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  piped_tool tool_process(db, {"enqueue", "q", "--flush-after", "0"});
  tool_process.write("{\"n\": 1}\n");
  REQUIRE(
      wait_until([&] { return count_jobs(admin, "ready", "q") == 1; }, std::chrono::seconds(10)));
  const auto id = admin.integer("SELECT id FROM pgqueue.jobs");
  admin.query("DROP SCHEMA pgqueue CASCADE");  // the next batch fails, not for its input
  tool_process.write("{\"n\": 2}\n");
  CHECK(tool_process.exit_code(std::chrono::seconds(10)) == 3);
  const auto err = tool_process.errors();
  INFO(err);
  // The server answered with an error: the batch was rolled back (not "may or may not").
  CHECK(err.find("(SQLSTATE 3F000); line 2 was not enqueued (the server refused its batch); line "
                 "1 was enqueued (1 job, id " +
                 std::to_string(id) + "), nothing after") != std::string::npos);
}

TEST_CASE("a second signal while a batch waits at the server ends enqueue at once, and says so",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn()), locker(db.dsn());
  locker.query("BEGIN");
  locker.query("LOCK TABLE pgqueue.jobs");
  piped_tool tool_process(db, {"--json", "enqueue", "q", "--flush-after", "0"});
  tool_process.write("{}\n");
  REQUIRE(wait_until(
      [&] {
        return admin.integer(
                   "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                   "current_database() AND wait_event_type = 'Lock'") == 1;
      },
      std::chrono::seconds(10)));
  // Signals do not queue: send one every 50 ms until it ends; the first makes it stop reading,
  // a later one ends it while its batch is still waiting for the lock.
  std::optional<int> code;
  for (int i = 0; i < 100 && !code; ++i) {
    tool_process.process().signal(SIGTERM);
    code = tool_process.exit_code(std::chrono::milliseconds(50));
  }
  CHECK(code == 4);
  const std::string message =
      "interrupted twice while line 1 was at the server: it may or may not be in; nothing was "
      "enqueued, nothing after";
  CHECK(tool_process.errors() == "pgqueue enqueue: " + message + "\n");
  CHECK(tool_process.output() == nlohmann::json{{"enqueued", 0}, {"error", message}}.dump() + "\n");
  locker.query("ROLLBACK");
}

TEST_CASE("errors: a bad queue name, a bad delay, bad arguments; each with its exit code",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  // Input the server refuses is bad input (2), with its SQLSTATE.
  auto bad_name = tool(db, {"enqueue", "", "{}"});
  CHECK(bad_name.exit_code == 2);
  CHECK(bad_name.err.find("22023") != std::string::npos);
  auto bad_delay = tool(db, {"enqueue", "q", "{}", "--delay", "soon"});
  CHECK(bad_delay.exit_code == 2);
  CHECK(bad_delay.err.find("22007") != std::string::npos);
  auto bad_json = tool(db, {"enqueue", "q", "{nope"});
  CHECK(bad_json.exit_code == 2);
  CHECK(bad_json.err.find("22P02") != std::string::npos);
  auto huge_id = tool(db, {"job", "99999999999999999999"});
  CHECK(huge_id.exit_code == 2);
  CHECK(huge_id.err.find("not a job id") != std::string::npos);
  auto usage = tool(db, {"enqueue"});
  CHECK(usage.exit_code == 2);
  auto unknown = tool(db, {"frobnicate"});
  CHECK(unknown.exit_code == 2);
  auto state = tool(db, {"jobs", "q", "--state", "lost"});
  CHECK(state.exit_code == 2);
  CHECK(state.err.find("--state must be") != std::string::npos);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") == 0);
  auto nowhere = run_command({PGQUEUE_TOOL, "--dsn", "host=/nonexistent-dir", "queues"});
  CHECK(nowhere.exit_code == 3);
  auto help = tool(db, {"enqueue", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--run-after") != std::string::npos);
}

TEST_CASE("queues shows each queue's states; jobs and job show dead jobs with their errors",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const auto ready = enqueue(admin, "mail");
  admin.scalar("SELECT pgqueue.enqueue('mail', '{}', p_run_after => now() + interval '1 day')");
  const auto failing = enqueue(admin, "mail");
  admin.script("UPDATE pgqueue.jobs SET max_attempts = 1 WHERE id = " + std::to_string(failing));
  auto held = claim(admin, "mail", "w1", 1);
  REQUIRE(held.size() == 1);
  REQUIRE(held[0].id == ready);  // the older one first
  held = claim(admin, "mail", "w1", 1);
  REQUIRE(held.size() == 1);
  admin.scalar("SELECT pgqueue.nack($1, 'w1', 'smtp said no', NULL, $2)",
               {std::to_string(failing), std::to_string(held[0].lease_token)});
  CHECK(state_of(admin, failing) == "dead");

  auto q = tool(db, {"--json", "queues"});
  REQUIRE(q.exit_code == 0);
  auto rows = nlohmann::json::parse(q.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["queue"] == "mail");
  CHECK(rows[0]["ready"] == 0);
  CHECK(rows[0]["scheduled"] == 1);
  CHECK(rows[0]["claimed"] == 1);
  CHECK(rows[0]["dead"] == 1);
  CHECK(rows[0]["done"] == 0);
  CHECK(rows[0]["paused"] == false);
  auto text = tool(db, {"depth"});
  CHECK(text.out.starts_with("queue  paused  ready  scheduled  claimed  dead"));

  auto dead = tool(db, {"--json", "jobs", "mail", "--state", "dead"});
  auto list = nlohmann::json::parse(dead.out);
  REQUIRE(list.size() == 1);
  CHECK(list[0]["id"] == failing);
  CHECK(list[0]["last_error"] == "smtp said no");
  auto one = tool(db, {"job", std::to_string(failing)});
  CHECK(one.exit_code == 0);
  CHECK(one.out.find("state:            dead") != std::string::npos);
  CHECK(one.out.find("last_error:       smtp said no") != std::string::npos);
  CHECK(one.out.find("errors:\n  attempt 1 at ") != std::string::npos);
  CHECK(one.out.find(" by w1: smtp said no\n") != std::string::npos);
  auto one_json = nlohmann::json::parse(tool(db, {"--json", "job", std::to_string(failing)}).out);
  CHECK(one_json["id"] == failing);
  CHECK(one_json["payload"] == nlohmann::json::object());
  CHECK(one_json["errors"].size() == 1);
  CHECK(one_json["errors"][0]["error"] == "smtp said no");
  CHECK(one_json["errors"][0]["attempt"] == 1);
  auto none = tool(db, {"job", "999999"});
  CHECK(none.exit_code == 1);
}

TEST_CASE("enqueue --after: jobs that wait; queues, jobs --state waiting and job show them",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const auto p1 = enqueue(admin, "build");
  const auto p2 = enqueue(admin, "build");
  auto one = tool(
      db, {"enqueue", "deploy", "{}", "--after", std::to_string(p1) + "," + std::to_string(p2)});
  REQUIRE(one.exit_code == 0);
  const auto child = std::stoll(one.out);
  CHECK(state_of(admin, child) == "waiting");
  auto many = tool(db, {"--json", "enqueue", "deploy", "--after", std::to_string(p1)},
                   "{\"n\": 1}\n{\"n\": 2}\n");
  REQUIRE(many.exit_code == 0);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'waiting'") == 3);
  auto unknown = tool(db, {"enqueue", "deploy", "{}", "--after", "999999"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("dependency 999999 does not exist") != std::string::npos);
  for (const char* bad : {"", "0x10", "+5", "99999999999999999999"}) {
    auto refused = tool(db, {"enqueue", "deploy", "{}", "--after", bad});
    INFO(bad);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("a job id is a decimal number") != std::string::npos);
  }
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'waiting'") == 3);

  auto q = nlohmann::json::parse(tool(db, {"--json", "queues"}).out);
  REQUIRE(q.size() == 2);
  CHECK(q[1]["queue"] == "deploy");
  CHECK(q[1]["waiting"] == 3);
  CHECK(q[1]["ready"] == 0);
  auto list =
      nlohmann::json::parse(tool(db, {"--json", "jobs", "deploy", "--state", "waiting"}).out);
  CHECK(list.size() == 3);
  auto text = tool(db, {"job", std::to_string(child)});
  CHECK(text.out.find("state:            waiting\n") != std::string::npos);
  CHECK(text.out.find("waits_for:        " + std::to_string(p1) + " (ready), " +
                      std::to_string(p2) + " (ready)\n") != std::string::npos);
  auto json = nlohmann::json::parse(tool(db, {"--json", "job", std::to_string(child)}).out);
  REQUIRE(json["waits_for"].size() == 2);
  CHECK(json["waits_for"][0]["id"] == p1);
  CHECK(json["waits_for"][1]["state"] == "ready");
  auto parent = tool(db, {"job", std::to_string(p1)});
  CHECK(parent.out.find("waits_for:        -\n") != std::string::npos);
}

TEST_CASE("text output escapes control characters a worker or an error may carry", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const auto id = enqueue(admin, "q");
  auto c = claim(admin, "q", "w\x1b[31m");
  REQUIRE(c.size() == 1);
  admin.scalar("SELECT pgqueue.nack($1, $2, $3, NULL, $4)",
               {std::to_string(id), "w\x1b[31m", "line one\nfake: line\x1b[2J",
                std::to_string(c[0].lease_token)});
  auto one = tool(db, {"job", std::to_string(id)});
  CHECK(one.out.find('\x1b') == std::string::npos);
  CHECK(one.out.find("last_error:       line one\\nfake: line\\x1b[2J\n") != std::string::npos);
  CHECK(one.out.find(" by w\\x1b[31m: line one\\n") != std::string::npos);
  auto list = tool(db, {"jobs", "q", "--state", "ready"});
  CHECK(list.out.find('\x1b') == std::string::npos);
  CHECK(std::count(list.out.begin(), list.out.end(), '\n') == 2);  // header and one row
}

TEST_CASE("retry makes dead jobs ready, cancel cancels ready ones, gc deletes old ones", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  const auto a = enqueue(admin, "q"), b = enqueue(admin, "q");
  admin.script(
      "UPDATE pgqueue.jobs SET state = 'dead', finished_at = now() - interval '2 days' "
      "WHERE id IN (" +
      std::to_string(a) + ", " + std::to_string(b) + ")");
  auto one = tool(db, {"retry", "q", std::to_string(a)});
  CHECK(one.exit_code == 0);
  CHECK(one.out == "retried 1 dead job of q\n");
  CHECK(state_of(admin, a) == "ready");
  CHECK(state_of(admin, b) == "dead");
  auto nothing = tool(db, {"retry", "q", std::to_string(a)});  // not dead any more
  CHECK(nothing.exit_code == 1);

  auto cancelled = tool(db, {"--json", "cancel", std::to_string(a), std::to_string(b)});
  CHECK(cancelled.exit_code == 1);  // b is dead, not ready
  auto j = nlohmann::json::parse(cancelled.out);
  CHECK(j["cancelled"] == nlohmann::json::array({a}));
  CHECK(j["not_cancelled"] == nlohmann::json::array({b}));
  CHECK(state_of(admin, a) == "cancelled");

  auto gc = tool(db, {"gc", "--retain-dead", "1 day"});
  CHECK(gc.exit_code == 0);
  CHECK(gc.out == "deleted 0 done or cancelled and 1 dead jobs\n");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE id = $1", {std::to_string(b)}) == 0);
}

TEST_CASE("pause stops a queue handing out jobs, resume starts it again; queues shows which",
          "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  // A queue the database does not know is most likely a typo: refused, unless --force.
  auto unknown = tool(db, {"pause", "mail"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err ==
        "pgqueue: no queue named 'mail' (it has no jobs, no counters and no "
        "schedule); nothing done\n");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.paused_queues") == 0);
  CHECK(tool(db, {"retry", "mial"}).exit_code == 2);
  auto paused = tool(db, {"pause", "mail", "--force"});
  CHECK(paused.exit_code == 0);
  CHECK(paused.out == "mail paused\n");
  CHECK(tool(db, {"pause", "mail"}).out == "mail was paused already\n");  // known: paused
  const auto id = enqueue(admin, "mail");
  CHECK(claim(admin, "mail", "w").empty());
  auto rows = nlohmann::json::parse(tool(db, {"--json", "queues"}).out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["paused"] == true);
  CHECK(rows[0]["ready"] == 1);
  auto resumed = tool(db, {"--json", "resume", "mail"});
  CHECK(nlohmann::json::parse(resumed.out)["changed"] == true);
  auto c = claim(admin, "mail", "w");
  REQUIRE(c.size() == 1);
  CHECK(c[0].id == id);
  CHECK(tool(db, {"resume", "mail"}).out == "mail was not paused\n");
}

TEST_CASE("an operator command run as a role without it names the function refused", "[cli]") {
  // (Its check that the queue exists read a table such a role may not read, and named that.)
  scratch_database db(true);
  session admin(db.dsn());
  admin.script("CREATE ROLE cli_worker LOGIN; SELECT pgqueue.grant_worker('cli_worker')");
  admin.query("SELECT pgqueue.enqueue('mail', '{}')");
  auto r = tool(db, {"--dsn", db.dsn() + " user=cli_worker", "pause", "mail"});
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("42501") != std::string::npos);
  CHECK(r.err.find("function pause") != std::string::npos);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.paused_queues") == 0);
  admin.script("DROP OWNED BY cli_worker; DROP ROLE cli_worker");
}

TEST_CASE("grant-producer lets a role enqueue and nothing more", "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  admin.script("CREATE ROLE cli_producer LOGIN");
  auto r = tool(db, {"grant-producer", "cli_producer"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "granted producer access to cli_producer\n");
  CHECK(admin.integer(
            "SELECT has_function_privilege('cli_producer', "
            "'pgqueue.enqueue(text, jsonb, text, int, timestamptz, int, boolean, bigint[])', "
            "'EXECUTE')::int") == 1);
  CHECK(admin.integer("SELECT has_function_privilege('cli_producer', "
                      "'pgqueue.claim_batch(text, text, int, interval)', 'EXECUTE')::int") == 0);
  auto missing = tool(db, {"grant-worker", "no_such_role"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("42704") != std::string::npos);
  admin.script("DROP OWNED BY cli_producer; DROP ROLE cli_producer");
}

}  // namespace cli_test

namespace cli_test {

TEST_CASE(
    "schedule declares a periodic job idempotently, schedules lists it, unschedule "
    "removes it; a bad expression changes nothing",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  auto first = tool(db, {"schedule", "nightly", "reports", "30 2 * * *", R"({"kind":"daily"})",
                         "--time-zone", "Europe/Berlin", "--catch-up", "skip"});
  INFO(first.err);
  CHECK(first.exit_code == 0);
  CHECK(first.out.starts_with("scheduled nightly, next at "));
  auto again =
      tool(db, {"--json", "schedule", "nightly", "reports", "30 2 * * *", R"({"kind":"daily"})",
                "--time-zone", "Europe/Berlin", "--catch-up", "skip"});
  CHECK(again.exit_code == 0);
  CHECK(nlohmann::json::parse(again.out)["changed"] == false);
  CHECK(*admin.scalar("SELECT concat_ws(' ', queue, cron, time_zone, catch_up, payload) "
                      "FROM pgqueue.schedules") ==
        "reports 30 2 * * * Europe/Berlin skip {\"kind\": \"daily\"}");

  auto list = tool(db, {"--json", "schedules"});
  CHECK(list.exit_code == 0);
  const auto rows = nlohmann::json::parse(list.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["name"] == "nightly");
  CHECK(rows[0]["payload"]["kind"] == "daily");

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"schedule", "x", "q", "61 * * * *"},
        std::vector<std::string>{"schedule", "x", "q", "* * * * *", "{nope"},
        std::vector<std::string>{"schedule", "x", "q", "* * * * *", "--time-zone", "Mars/Base"},
        std::vector<std::string>{"schedule", "x", "q", "* * * * *", "--catch-up", "all"}}) {
    auto refused = tool(db, bad);
    INFO(refused.err);
    CHECK(refused.exit_code == 2);
  }
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.schedules") == 1);

  CHECK(tool(db, {"unschedule", "nightly"}).exit_code == 0);
  CHECK(tool(db, {"unschedule", "nightly"}).exit_code == 1);
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.schedules") == 0);
}

TEST_CASE(
    "limit sets a queue's limits idempotently, limits lists them, --none removes them; "
    "bad limits change nothing",
    "[cli]") {
  scratch_database db(true);
  session admin(db.dsn());
  auto set = tool(db, {"limit", "mail", "--concurrency", "3", "--rate", "50", "--per", "1 minute",
                       "--burst", "5"});
  INFO(set.err);
  CHECK(set.exit_code == 0);
  CHECK(set.out == "limited mail\n");
  auto again = tool(db, {"--json", "limit", "mail", "--concurrency", "3", "--rate", "50", "--per",
                         "1 minute", "--burst", "5"});
  CHECK(again.exit_code == 0);
  CHECK(nlohmann::json::parse(again.out)["changed"] == false);
  CHECK(*admin.scalar("SELECT concat_ws(' ', max_claimed, rate, rate_period, burst) "
                      "FROM pgqueue.queue_limits") == "3 50 00:01:00 5");

  auto list = tool(db, {"--json", "limits"});
  CHECK(list.exit_code == 0);
  const auto rows = nlohmann::json::parse(list.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["queue"] == "mail");
  CHECK(rows[0]["max_claimed"] == 3);
  CHECK(rows[0]["claimed"] == 0);
  CHECK(rows[0]["tokens"] == 5.0);
  auto text = tool(db, {"limits"});
  CHECK(
      text.out.starts_with("queue  max_claimed  claimed  rate  per       burst  tokens\n"
                           "mail   3            0        50    00:01:00  5      5.00"));

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"limit", "mail"},
        std::vector<std::string>{"limit", "mail", "--concurrency", "0"},
        std::vector<std::string>{"limit", "mail", "--rate", "5", "--per", "soon"},
        std::vector<std::string>{"limit", "mail", "--rate", "5", "--per", "-1 second"},
        std::vector<std::string>{"limit", "mail", "--concurrency", "2", "--burst", "3"},
        std::vector<std::string>{"limit", "mail", "--none", "--concurrency", "2"},
        std::vector<std::string>{"limit", "", "--concurrency", "2"}}) {
    auto refused = tool(db, bad);
    INFO(refused.err);
    CHECK(refused.exit_code == 2);
  }
  CHECK(*admin.scalar("SELECT concat_ws(' ', max_claimed, rate) FROM pgqueue.queue_limits") ==
        "3 50");

  auto removed = tool(db, {"limit", "mail", "--none"});
  CHECK(removed.out == "removed the limits of mail\n");
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.queue_limits") == 0);
}

}  // namespace cli_test
