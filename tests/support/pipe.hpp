// A pipe whose ends close with it (O_CLOEXEC: a child gets an end only through an explicit
// dup2), for tests that talk to child processes.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

namespace pgq_test {

struct pipe_pair {
  int fd[2] = {-1, -1};  // [0] the read end, [1] the write end
  pipe_pair() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  }
  ~pipe_pair() { close_both(); }
  pipe_pair(const pipe_pair&) = delete;
  pipe_pair& operator=(const pipe_pair&) = delete;
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  void close_both() {
    close_end(0);
    close_end(1);
  }
};

}  // namespace pgq_test
