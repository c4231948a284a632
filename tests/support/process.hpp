// A child process for multi-process tests: started with posix_spawn, signalled and reaped with
// bounded waits, and killed in the destructor if it is still running, so a failing test never
// leaves processes behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pgq_test {

class child_process {
 public:
  // Starts `path` with `args` (argv[0] is `path`); stdout and stderr are inherited, so the
  // child's output lands in the test's log. Throws std::runtime_error when it cannot start.
  child_process(const std::string& path, const std::vector<std::string>& args);
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` (no-op once the child has been reaped).
  void signal(int sig);
  // Waits up to `limit` for the child to end and returns its wait status (see WIFEXITED,
  // WTERMSIG), or nothing when it is still running. The status is kept for later calls.
  std::optional<int> wait(std::chrono::milliseconds limit);

 private:
  void reap_or_kill() noexcept;

  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace pgq_test
