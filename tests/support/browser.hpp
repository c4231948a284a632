// A real browser for tests of web pages: headless Chromium driven through the DevTools
// protocol over --remote-debugging-pipe (JSON messages on its fds 3 and 4, no websocket, no
// port). Runs the page's own scripts; a test reads the DOM and clicks through Runtime.evaluate.
// Chromium missing or not starting fails the test (it is a test dependency, installed by CI).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/pipe.hpp"
#include "support/process.hpp"

namespace pgq_test {

class headless_browser {
 public:
  // Starts chromium (`PGQUEUE_TEST_CHROMIUM`, else /usr/bin/chromium) with a fresh profile in
  // a temporary directory, and opens a tab. Throws std::runtime_error when it cannot.
  headless_browser();
  // Kills the browser and every process it started, removes the profile.
  ~headless_browser();
  headless_browser(const headless_browser&) = delete;
  headless_browser& operator=(const headless_browser&) = delete;

  // Loads `url` in the tab and waits (up to 10 s) for its load event.
  void open(const std::string& url);

  // Runs `expression` in the page, awaits it when it is a promise, and returns its value
  // (JSON-serialisable values only). Throws std::runtime_error with the page's exception.
  nlohmann::json evaluate(const std::string& expression);

  // Re-evaluates `expression` in the page every 50 ms until it is truthy (up to `limit`) and
  // returns that value; throws when the time runs out. For what the page shows once its
  // script has fetched and rendered.
  nlohmann::json wait_for(const std::string& expression,
                          std::chrono::milliseconds limit = std::chrono::seconds(10));

  // What went wrong in the page so far: uncaught exceptions, and dialogs it opened (alert,
  // confirm: an injected script's favourite; each is dismissed at once).
  const std::vector<std::string>& page_errors() const { return page_errors_; }

 private:
  nlohmann::json call(const std::string& method, nlohmann::json params = nlohmann::json::object(),
                      std::chrono::milliseconds limit = std::chrono::seconds(10));
  void send(const nlohmann::json& message);
  // The next message (waiting up to `deadline`); events are noted as they pass.
  nlohmann::json receive(std::chrono::steady_clock::time_point deadline);
  void note_event(const nlohmann::json& event);

  std::string profile_;
  pipe_pair to_browser_, from_browser_;
  child_process child_;
  std::string buffer_;
  int next_id_ = 1;
  std::string session_;  // the tab's DevTools session
  std::vector<nlohmann::json> events_;
  std::vector<std::string> page_errors_;
};

}  // namespace pgq_test
