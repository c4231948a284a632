// pgqueue serve's page in a real browser (headless Chromium, driven over the DevTools
// protocol: support/browser.hpp): the page's own script fetches the data and builds the
// tables, and the test reads what it shows, then clicks its buttons and checks the database.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "support/browser.hpp"
#include "support/serve_process.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/wait.hpp"

namespace browser_test {

using namespace pgq_test;

namespace {

// The queues table as the page shows it: one object per row, keyed by column (data-col),
// once the page has rendered `rows` rows.
nlohmann::json queue_table(headless_browser& b, int rows) {
  return b.wait_for(
      "document.querySelectorAll('#queues tbody tr').length === " + std::to_string(rows) +
      " && [...document.querySelectorAll('#queues tbody tr')].map(tr => Object.fromEntries("
      "[...tr.cells].map(td => [td.dataset.col, td.textContent])))");
}

// The row of `queue` in `table`.
nlohmann::json row_of(const nlohmann::json& table, const std::string& queue) {
  for (const auto& row : table) {
    if (row["queue"] == queue) return row;
  }
  FAIL("no row for queue " << queue << " in " << table.dump());
  return {};
}

// JavaScript: `expression` about `row`, the row of table `table` whose `col` cell reads
// `text` (false when there is no such row).
std::string in_row(const std::string& table, const std::string& col, const std::string& text,
                   const std::string& expression) {
  return "(() => { const row = [...document.querySelectorAll('#" + table +
         " tbody tr')].find(tr => tr.querySelector('[data-col=\"" + col +
         "\"]').textContent === " + nlohmann::json(text).dump() + "); return !!row && (" +
         expression + "); })()";
}

// JavaScript: clicks the button `action` in that row, as a user would; false when it has none.
std::string click(const std::string& table, const std::string& col, const std::string& text,
                  const std::string& action) {
  return in_row(table, col, text,
                "(b => !!b && (b.click(), true))(row.querySelector('button[data-action=\"" +
                    action + "\"]'))");
}

bool paused(session& admin, const std::string& queue) {
  return admin.integer("SELECT count(*) FROM pgqueue.paused_queues WHERE queue = $1", {queue}) == 1;
}

}  // namespace

TEST_CASE("the page shows each queue's states, dead jobs' errors, and HTML in data as text",
          "[dashboard][browser]") {
  scratch_database db(true);
  session admin(db.dsn());
  load_dashboard_jobs(admin);
  serve_process serve(PGQUEUE_TOOL, db.dsn());
  headless_browser browser;
  browser.open(serve.url());

  const auto table = queue_table(browser, 3);
  const auto mail = row_of(table, "mail");
  CHECK(mail["state"] == "running");
  CHECK(mail["ready"] == "2");
  CHECK(mail["scheduled"] == "1");
  CHECK(mail["claimed"] == "1");
  CHECK(mail["dead"] == "1");
  CHECK(mail["cancelled"] == "1");
  CHECK(mail["done"] == "3");
  CHECK(mail["waiting"] == "0");
  CHECK(row_of(table, "reports")["state"] == "paused");
  CHECK(row_of(table, "reports")["waiting"] == "1");
  // The queue named <img src=x onerror=alert(1)> is a row whose name cell reads exactly that.
  const auto html = row_of(table, html_queue);
  CHECK(html["ready"] == "1");
  CHECK(html["dead"] == "1");

  // Dead jobs: the last error, and the history behind it.
  const auto dead = browser.wait_for(
      "document.querySelectorAll('#dead tbody tr').length === 2 && "
      "[...document.querySelectorAll('#dead tbody tr')].map(tr => ({"
      "queue: tr.querySelector('[data-col=queue]').textContent, "
      "last: tr.querySelector('.last-error').textContent, "
      "history: [...tr.querySelectorAll('.history li')].map(li => li.textContent)}))");
  nlohmann::json mail_dead, html_dead;
  for (const auto& d : dead) (d["queue"] == "mail" ? mail_dead : html_dead) = d;
  CHECK(mail_dead["last"] == "550 <b>mailbox</b> unavailable");
  REQUIRE(mail_dead["history"].size() == 2);
  CHECK(mail_dead["history"][0].get<std::string>().find("by worker-1: smtp: connection refused") !=
        std::string::npos);
  CHECK(html_dead["queue"] == html_queue);
  CHECK(html_dead["last"] == "<script>alert(3)</script>");

  // The next jobs: the payload with a script in it is text too.
  const auto payloads = browser.wait_for(
      "document.querySelectorAll('#next tbody tr').length > 0 && "
      "[...document.querySelectorAll('#next [data-col=payload]')].map(td => td.textContent)");
  CHECK(std::find(payloads.begin(), payloads.end(), R"({"to": "<script>alert(2)</script>"})") !=
        payloads.end());

  // Nothing in the data became markup: no image, no bold, no script but the page's own; no
  // dialog opened, no script error.
  const auto elements = browser.evaluate(
      "({img: document.querySelectorAll('img').length, b: document.querySelectorAll('b').length, "
      "scripts: [...document.scripts].map(s => s.getAttribute('src')), "
      "buttons: document.querySelectorAll('button').length, "
      "mode: document.getElementById('mode').textContent})");
  CHECK(elements["img"] == 0);
  CHECK(elements["b"] == 0);
  CHECK(elements["scripts"] == nlohmann::json::array({"/app.js"}));
  CHECK(elements["buttons"] == 0);  // read-only: no buttons
  CHECK(elements["mode"] == "read-only");
  CHECK(browser.page_errors().empty());
}

TEST_CASE("with --allow-actions, the page's buttons pause, resume, retry and cancel",
          "[dashboard][browser]") {
  scratch_database db(true);
  session admin(db.dsn());
  load_dashboard_jobs(admin);
  serve_process serve(PGQUEUE_TOOL, db.dsn(), {"--allow-actions"});
  headless_browser browser;
  browser.open(serve.url());
  queue_table(browser, 3);
  const auto limit = std::chrono::seconds(5);

  // pause: the database says so, then the page (its row, and a resume button instead).
  REQUIRE(browser.evaluate(click("queues", "queue", "mail", "pause")) == true);
  CHECK(wait_until([&] { return paused(admin, "mail"); }, limit));
  CHECK(browser.wait_for(in_row("queues", "queue", "mail",
                                "row.querySelector('[data-col=state]').textContent === 'paused' "
                                "&& !!row.querySelector('button[data-action=resume]')")) == true);
  REQUIRE(browser.evaluate(click("queues", "queue", "mail", "resume")) == true);
  CHECK(wait_until([&] { return !paused(admin, "mail"); }, limit));

  // The HTML-named queue's button acts on that queue, by its exact name.
  REQUIRE(browser.evaluate(click("queues", "queue", html_queue, "pause")) == true);
  CHECK(wait_until([&] { return paused(admin, html_queue); }, limit));

  // retry on the mail queue's dead job: ready again, the other dead job untouched.
  const auto dead =
      admin.integer("SELECT id FROM pgqueue.jobs WHERE state = 'dead' AND queue = 'mail'");
  REQUIRE(browser.evaluate(click("dead", "id", std::to_string(dead), "retry")) == true);
  CHECK(wait_until([&] { return read_job(admin, dead).state == "ready"; }, limit));
  CHECK(count_jobs(admin, "dead") == 1);

  // cancel on reports' ready job.
  const auto ready =
      admin.integer("SELECT id FROM pgqueue.jobs WHERE queue = 'reports' AND state = 'ready'");
  REQUIRE(browser.evaluate(click("next", "id", std::to_string(ready), "cancel")) == true);
  CHECK(wait_until([&] { return read_job(admin, ready).state == "cancelled"; }, limit));

  // The page said what each did, and nothing went wrong in it.
  CHECK(browser.wait_for("document.getElementById('status').textContent.includes('cancelled') "
                         "&& document.getElementById('status').textContent") ==
        "job " + std::to_string(ready) + " cancelled");
  CHECK(browser.page_errors().empty());
}

}  // namespace browser_test
