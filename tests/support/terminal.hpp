// A program run on a pseudo-terminal, as a person runs it in a terminal emulator: for tests of
// full-screen and keyboard-driven commands (escape codes, keys without Enter, the terminal's
// modes put back). Bounded like run_command: a child still running at the end is killed.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pgq_test {

class terminal_process {
 public:
  // Starts argv[0] (a path) with argv on a new pseudo-terminal of `columns` x `rows` (its
  // stdin, stdout and stderr), `env` added to this process's environment as in run_command.
  terminal_process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                   unsigned short columns = 100, unsigned short rows = 30);
  ~terminal_process();
  terminal_process(const terminal_process&) = delete;
  terminal_process& operator=(const terminal_process&) = delete;

  // Reads what the program writes until output() holds `text` at or after offset `from`, or
  // `limit` passes; returns whether it appeared.
  bool read_until(const std::string& text, std::size_t from = 0,
                  std::chrono::milliseconds limit = std::chrono::seconds(20));
  // Everything the program wrote so far (the terminal turns "\n" into "\r\n").
  const std::string& output() const { return output_; }
  // Types `keys` (as bytes on the terminal's input).
  void type(const std::string& keys);
  void signal(int sig);
  // Reads the rest of the output and waits up to `limit` for the program to end; its exit
  // code, or nothing when it is still running or was killed by a signal.
  std::optional<int> wait(std::chrono::milliseconds limit = std::chrono::seconds(20));
  // The terminal's modes now (after the program ended: what it left behind).
  termios modes() const;

 private:
  enum class got { output, nothing, closed };
  // Reads what arrives within `ms`: some output, nothing, or that nothing has the terminal
  // open any more.
  got read_some(int ms);

  pid_t pid_ = -1;
  int master_ = -1;
  std::string output_;
  std::optional<int> status_;
};

}  // namespace pgq_test
