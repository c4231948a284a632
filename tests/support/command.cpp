#include "support/command.hpp"
#include "support/pipe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

extern char** environ;

namespace pgq_test {

std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> result;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    const auto name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || x.rfind(name, 0) == 0;
    if (!replaced) result.push_back(entry);
  }
  result.insert(result.end(), extra.begin(), extra.end());
  return result;
}

command_result run_command(const std::vector<std::string>& argv, const std::string& input,
                           const std::vector<std::string>& env, std::chrono::seconds limit) {
  ::signal(SIGPIPE, SIG_IGN);  // a program that stops reading its stdin must not end the test
  pipe_pair in, out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto environment = environment_with(env);
  for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);

  command_result result;
  std::size_t written = 0;
  if (input.empty()) in.close_end(1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool killed = false;
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd fds[3] = {{in.fd[1], POLLOUT, 0}, {out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
    if (::poll(fds, 3, 100) < 0) continue;
    if (in.fd[1] >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const auto n = ::write(in.fd[1], input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 || written == input.size()) in.close_end(1);  // a closed reader: stop writing
    }
    for (int i = 1; i < 3; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& p = i == 1 ? out : err;
      char buffer[4096];
      const auto n = ::read(p.fd[0], buffer, sizeof buffer);
      if (n <= 0) {
        p.close_end(0);
      } else {
        (i == 1 ? result.out : result.err).append(buffer, static_cast<std::size_t>(n));
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = !killed && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace pgq_test
