// Running the pgqueue command (cli/) end to end from a scenario, as a user runs it: a process
// of its own, its stdin from a file, its output thrown away.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "server.hpp"

extern char** environ;

namespace bench {

/// The pgqueue command this build made (empty when it was built without the tool).
inline std::string tool_path() {
#ifdef PGQUEUE_BENCH_TOOL
  return PGQUEUE_BENCH_TOOL;
#else
  return "";
#endif
}

struct tool_run {
  int exit_code = -1;  ///< -1: killed by a signal
  double seconds = 0;  ///< from spawn to exit
};

/// Runs the tool with `args` (not argv[0]), stdin from `input` ("" for /dev/null), stdout and
/// stderr to /dev/null, and times it.
inline tool_run run_tool(const std::vector<std::string>& args, const std::string& input = "") {
  const std::string path = tool_path();
  if (path.empty()) throw std::runtime_error("built without the pgqueue command (-Dtool=false)");
  std::vector<char*> argv{const_cast<char*>(path.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, input.empty() ? "/dev/null" : input.c_str(),
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + path);
  int status = 0;
  ::waitpid(pid, &status, 0);
  tool_run out;
  out.seconds = seconds_since(start);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace bench
