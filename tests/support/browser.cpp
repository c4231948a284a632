#include "support/browser.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace pgq_test {

namespace {

std::string make_profile_directory() {
  std::string pattern = (std::filesystem::temp_directory_path() / "pgqueue-chromium-XXXXXX");
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot make a profile directory");
  return pattern;
}

std::string chromium_path() {
  const char* given = std::getenv("PGQUEUE_TEST_CHROMIUM");
  std::string path = given && *given ? given : "/usr/bin/chromium";
  if (::access(path.c_str(), X_OK) != 0) {
    throw std::runtime_error(path + " is missing: install chromium (scripts/lib.sh lists it)");
  }
  return path;
}

}  // namespace

headless_browser::headless_browser()
    : profile_(make_profile_directory()), child_([&] {
        // The browser's own chatter (D-Bus, GPU probes) goes to a log in the profile.
        const int log = ::open((profile_ + "/chromium.log").c_str(),
                               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        spawn_options options;
        options.fds = {{to_browser_.fd[0], 3}, {from_browser_.fd[1], 4}, {log, 1}, {log, 2}};
        // Its temporary files too (a singleton socket directory, which it leaves behind when
        // killed: two per test run in /tmp before), so that removing the profile removes them.
        options.env = {"TMPDIR=" + profile_};
        options.own_group = true;
        child_process c(
            chromium_path(),
            {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", "--user-data-dir=" + profile_, "--no-first-run",
             "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-sync", "--window-size=1280,900",
             "about:blank"},
            options);
        ::close(log);
        return c;
      }()) {
  to_browser_.close_end(0);
  from_browser_.close_end(1);
  auto target = call("Target.createTarget", {{"url", "about:blank"}}, std::chrono::seconds(20));
  auto attached =
      call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}});
  session_ = attached["sessionId"].get<std::string>();
  call("Page.enable");
  call("Runtime.enable");
}

headless_browser::~headless_browser() {
  child_.kill();  // the browser's whole process group, before its profile goes
  std::error_code ignored;
  std::filesystem::remove_all(profile_, ignored);
}

void headless_browser::send(const nlohmann::json& message) {
  const auto text = message.dump() + '\0';
  for (std::size_t sent = 0; sent < text.size();) {
    const auto n = ::write(to_browser_.fd[1], text.data() + sent, text.size() - sent);
    if (n <= 0) throw std::runtime_error("chromium closed its DevTools pipe");
    sent += static_cast<std::size_t>(n);
  }
}

nlohmann::json headless_browser::receive(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto end = buffer_.find('\0');
    if (end != std::string::npos) {
      auto message = nlohmann::json::parse(buffer_.substr(0, end));
      buffer_.erase(0, end + 1);
      if (!message.contains("id")) note_event(message);
      return message;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("chromium did not answer in time");
    pollfd p{from_browser_.fd[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[65536];
    const auto n = ::read(from_browser_.fd[0], chunk, sizeof chunk);
    if (n <= 0) throw std::runtime_error("chromium ended (see its log in " + profile_ + ")");
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

void headless_browser::note_event(const nlohmann::json& event) {
  const auto method = event.value("method", "");
  if (method == "Page.javascriptDialogOpening") {
    page_errors_.push_back("dialog: " + event["params"].value("message", ""));
    send({{"id", next_id_++},
          {"sessionId", session_},
          {"method", "Page.handleJavaScriptDialog"},
          {"params", {{"accept", false}}}});
  } else if (method == "Runtime.exceptionThrown") {
    page_errors_.push_back("exception: " + event["params"]["exceptionDetails"].dump());
  }
  events_.push_back(event);
}

nlohmann::json headless_browser::call(const std::string& method, nlohmann::json params,
                                      std::chrono::milliseconds limit) {
  const int id = next_id_++;
  nlohmann::json message{{"id", id}, {"method", method}, {"params", std::move(params)}};
  if (!session_.empty()) message["sessionId"] = session_;
  send(message);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto answer = receive(deadline);
    if (!answer.contains("id") || answer["id"] != id) continue;  // an event, or a dialog's answer
    if (answer.contains("error")) {
      throw std::runtime_error(method + " failed: " + answer["error"].dump());
    }
    return answer["result"];
  }
}

void headless_browser::open(const std::string& url) {
  events_.clear();
  call("Page.navigate", {{"url", url}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    for (const auto& e : events_) {
      if (e.value("method", "") == "Page.loadEventFired") return;
    }
    events_.clear();
    receive(deadline);
  }
}

nlohmann::json headless_browser::evaluate(const std::string& expression) {
  auto r = call("Runtime.evaluate",
                {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}},
                std::chrono::seconds(20));
  if (r.contains("exceptionDetails")) {
    throw std::runtime_error("the page threw: " + r["exceptionDetails"].dump());
  }
  return r["result"].value("value", nlohmann::json());
}

nlohmann::json headless_browser::wait_for(const std::string& expression,
                                          std::chrono::milliseconds limit) {
  // A promise in the page: checks every 50 ms, fails after `limit`.
  return evaluate("new Promise((resolve, reject) => { const until = Date.now() + " +
                  std::to_string(limit.count()) + "; (function check() { let v; try { v = (" +
                  expression +
                  "); } catch (e) { v = undefined; } if (v) resolve(v); else if (Date.now() > "
                  "until) reject(new Error('timed out waiting for: ' + " +
                  nlohmann::json(expression).dump() + ")); else setTimeout(check, 50); })(); })");
}

}  // namespace pgq_test
