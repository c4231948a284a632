// Running the pgqueue command (cli/) on a scratch database, as a user would: through
// PGQUEUE_DSN. For the suites that define PGQUEUE_TOOL, the command's path (tests/cli).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/pipe.hpp"
#include "support/process.hpp"
#include "support/server.hpp"

#ifndef PGQUEUE_TOOL
#error "PGQUEUE_TOOL must name the pgqueue command (tests/cli/meson.build defines it)"
#endif

namespace pgq_test {

// What the tool needs in its environment to use `db`.
inline std::vector<std::string> tool_environment(const scratch_database& db) {
  return {"PGQUEUE_DSN=" + db.dsn()};
}

// Runs the tool with `args` on database `db`, `input` on its stdin.
inline command_result tool(const scratch_database& db, std::vector<std::string> args,
                           const std::string& input = "") {
  args.insert(args.begin(), PGQUEUE_TOOL);
  return run_command(args, input, tool_environment(db));
}

// The tool running on `db` with a pipe on its stdin that the test writes to when it likes (a
// slow producer, or one that never ends), and its stdout and stderr kept for the test (up to a
// pipe's buffer each: short messages).
class piped_tool {
 public:
  piped_tool(const scratch_database& db, std::vector<std::string> args) {
    spawn_options options;
    options.env = tool_environment(db);
    options.fds = {{input_.fd[0], 0}, {output_.fd[1], 1}, {errors_.fd[1], 2}};
    process_.emplace(PGQUEUE_TOOL, args, options);
    input_.close_end(0);
    output_.close_end(1);
    errors_.close_end(1);
  }

  // Writes `text` to its stdin (throws if it is not all taken: the tool has gone).
  void write(const std::string& text) {
    if (::write(input_.fd[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("the tool did not take its input");
    }
  }

  void close_input() { input_.close_end(1); }
  child_process& process() { return *process_; }

  // Waits up to `limit` for it to end: its exit code (-1: killed by a signal), or nothing.
  std::optional<int> exit_code(std::chrono::milliseconds limit) {
    const auto status = process_->wait(limit);
    if (!status) return std::nullopt;
    return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

  // What it wrote to stdout, and to stderr; only once it has ended.
  std::string output() { return read_all(output_.fd[0]); }
  std::string errors() { return read_all(errors_.fd[0]); }

 private:
  static std::string read_all(int fd) {
    std::string out;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) out.append(buffer, n);
    return out;
  }

  pipe_pair input_, output_, errors_;
  std::optional<child_process> process_;
};

}  // namespace pgq_test
