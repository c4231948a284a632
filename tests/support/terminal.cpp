#include "support/terminal.hpp"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "support/command.hpp"

namespace pgq_test {

terminal_process::terminal_process(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env, unsigned short columns,
                                   unsigned short rows) {
  // Everything the child needs is made before fork: after it, only exec.
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto environment = environment_with(env);
  for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  winsize size{};
  size.ws_col = columns;
  size.ws_row = rows;
  pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
  if (pid_ < 0) throw std::runtime_error(std::string("forkpty failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
}

terminal_process::~terminal_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (master_ >= 0) ::close(master_);
}

terminal_process::got terminal_process::read_some(int ms) {
  pollfd p{master_, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return got::nothing;
  char buffer[4096];
  const auto n = ::read(master_, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return got::nothing;
  if (n <= 0) return got::closed;  // EIO: nothing has the terminal open any more
  output_.append(buffer, static_cast<std::size_t>(n));
  return got::output;
}

bool terminal_process::read_until(const std::string& text, std::size_t from,
                                  std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (output_.find(text, from) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline || read_some(50) == got::closed) {
      return output_.find(text, from) != std::string::npos;
    }
  }
  return true;
}

void terminal_process::type(const std::string& keys) {
  if (::write(master_, keys.data(), keys.size()) != static_cast<ssize_t>(keys.size())) {
    throw std::runtime_error("cannot type on the terminal");
  }
}

void terminal_process::signal(int sig) {
  if (!status_) ::kill(pid_, sig);
}

std::optional<int> terminal_process::wait(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!status_ && std::chrono::steady_clock::now() < deadline) {
    read_some(50);
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
  }
  while (status_ && read_some(0) == got::output) {  // what it wrote last
  }
  if (!status_ || !WIFEXITED(*status_)) return std::nullopt;
  return WEXITSTATUS(*status_);
}

termios terminal_process::modes() const {
  termios t{};
  if (::tcgetattr(master_, &t) != 0) throw std::runtime_error("tcgetattr failed");
  return t;
}

}  // namespace pgq_test
