// Running pgbench (the raw-SQL references) and the memory scenario's child processes: spawn,
// wait, collect the output. Blocking by design: nothing else runs meanwhile.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "context.hpp"

extern char** environ;

namespace bench {

struct process_result {
  int exit_code = -1;
  std::string output;  ///< stdout (and stderr, see run_process)
};

/// Runs `argv` (no shell) and returns its exit code and output (stdout, and stderr unless
/// `stderr_to_ours`: then the child's stderr is this process's, e.g. for progress lines).
inline process_result run_process(const std::vector<std::string>& argv,
                                  bool stderr_to_ours = false) {
  char out_path[] = "/tmp/pgqueue-bench-out-XXXXXX";
  const int fd = mkstemp(out_path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  if (!stderr_to_ours) posix_spawn_file_actions_adddup2(&actions, fd, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  process_result out;
  if (rc == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::ifstream f(out_path);
  std::stringstream text;
  text << f.rdbuf();
  out.output = text.str();
  std::remove(out_path);
  if (rc != 0) throw std::runtime_error("cannot run " + argv[0]);
  return out;
}

struct pgbench_result {
  int exit_code = -1;
  long transactions = 0;  ///< "number of transactions actually processed"
  double tps = 0;         ///< "tps = ... (without initial connection time)"
  std::string output;
};

/// Runs `script` (pgbench script text) with `clients` connections for `seconds` against `dsn`.
inline pgbench_result run_pgbench(const options& opt, const std::string& dsn,
                                  const std::string& script, int clients, int seconds) {
  char path[] = "/tmp/pgqueue-bench-XXXXXX.sql";
  const int fd = mkstemps(path, 4);
  if (fd < 0) throw std::runtime_error("mkstemps failed");
  if (write(fd, script.data(), script.size()) != static_cast<ssize_t>(script.size())) {
    close(fd);
    throw std::runtime_error("cannot write the pgbench script");
  }
  close(fd);
  auto p = run_process({opt.pgbench, "-n", "-c", std::to_string(clients), "-j",
                        std::to_string(std::min(clients, 2)), "-T", std::to_string(seconds), "-f",
                        path, dsn});
  std::remove(path);
  pgbench_result r;
  r.exit_code = p.exit_code;
  r.output = p.output;
  std::istringstream lines(p.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("number of transactions actually processed: ", 0) == 0) {
      r.transactions = std::atol(line.c_str() + 43);
    } else if (line.rfind("tps = ", 0) == 0) {
      r.tps = std::atof(line.c_str() + 6);
    }
  }
  return r;
}

}  // namespace bench
