#include "support/process.hpp"

#include "support/command.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace pgq_test {

child_process::child_process(const std::string& path, const std::vector<std::string>& args)
    : child_process(path, args, spawn_options{}) {}

child_process::child_process(const std::string& path, const std::vector<std::string>& args,
                             const spawn_options& options)
    : own_group_(options.own_group) {
  std::vector<std::string> owned{path};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto environment = environment_with(options.env);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const auto& [from, to] : options.fds) posix_spawn_file_actions_adddup2(&actions, from, to);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (own_group_) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  const int rc =
      ::posix_spawn(&pid_, path.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + path + ": " + std::strerror(rc));
  }
}

child_process::child_process(child_process&& other) noexcept
    : pid_(other.pid_), own_group_(other.own_group_), status_(other.status_) {
  other.pid_ = -1;
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    reap_or_kill();
    pid_ = other.pid_;
    own_group_ = other.own_group_;
    status_ = other.status_;
    other.pid_ = -1;
  }
  return *this;
}

child_process::~child_process() {
  reap_or_kill();
}

void child_process::reap_or_kill() noexcept {
  // The group's other members too, whether or not its leader has ended.
  if (pid_ > 0 && own_group_) ::kill(-pid_, SIGKILL);
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

void child_process::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> child_process::wait(std::chrono::milliseconds limit) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (r < 0 && errno != EINTR) throw std::runtime_error("waitpid failed");
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    // Reaping has no event to wait on without a SIGCHLD handler; poll at a short interval.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace pgq_test
