// A child process for multi-process tests: started with posix_spawn, signalled and reaped with
// bounded waits, and killed in the destructor if it is still running, so a failing test never
// leaves processes behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pgq_test {

// How to start a child beyond its arguments.
struct spawn_options {
  std::vector<std::string> env;  // "NAME=value" laid over this process's environment
                                 // (environment_with, support/command.hpp)
  // Descriptors the child gets: {this process's fd, the child's fd} (e.g. {pipe_end, 1} for
  // its stdout). Others are inherited as they are (the test's stdout and stderr).
  std::vector<std::pair<int, int>> fds;
  // Its own process group, killed whole in the destructor: for programs that start helpers
  // of their own (a browser).
  bool own_group = false;
};

class child_process {
 public:
  // Starts `path` with `args` (argv[0] is `path`); stdout and stderr are inherited, so the
  // child's output lands in the test's log. Throws std::runtime_error when it cannot start.
  child_process(const std::string& path, const std::vector<std::string>& args);
  child_process(const std::string& path, const std::vector<std::string>& args,
                const spawn_options& options);
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  // Kills it (and its group, with own_group) and reaps it; what the destructor does.
  void kill() noexcept { reap_or_kill(); }
  // Sends `sig` (no-op once the child has been reaped).
  void signal(int sig);
  // Waits up to `limit` for the child to end and returns its wait status (see WIFEXITED,
  // WTERMSIG), or nothing when it is still running. The status is kept for later calls.
  std::optional<int> wait(std::chrono::milliseconds limit);

 private:
  void reap_or_kill() noexcept;

  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<int> status_;
};

}  // namespace pgq_test
