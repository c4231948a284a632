// `pgqueue serve` as a test runs it: started on a port the system picks (--listen
// 127.0.0.1:0), its address read from the line it prints, and killed when the test ends
// (failed or not). With the sample jobs the dashboard's tests and screenshot share.
#pragma once

#include <string>
#include <vector>

#include "support/pipe.hpp"
#include "support/process.hpp"
#include "support/session.hpp"

namespace pgq_test {

class serve_process {
 public:
  // Starts `tool` serve --listen `listen` `args` with PGQUEUE_DSN=`dsn`, and waits up to
  // 10 s for "listening on URL" on its stdout. Throws std::runtime_error when that does not
  // come (the process is killed then).
  serve_process(const std::string& tool, const std::string& dsn,
                const std::vector<std::string>& args = {},
                const std::string& listen = "127.0.0.1:0");

  const std::string& url() const { return url_; }  // "http://127.0.0.1:PORT/"
  int port() const { return port_; }
  child_process& process() { return child_; }

 private:
  pipe_pair out_;
  child_process child_;
  std::string url_;
  int port_ = 0;
};

// Loads tests/fixtures/dashboard_jobs.sql: jobs in every state in three queues (mail,
// reports paused, and one named <img src=x onerror=alert(1)>); the file says which.
void load_dashboard_jobs(session& s);

// The queue named with HTML in the sample jobs.
inline const std::string html_queue = "<img src=x onerror=alert(1)>";

}  // namespace pgq_test
