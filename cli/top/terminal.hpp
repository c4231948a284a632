// The terminal `pgqueue top` draws on, with plain ANSI escapes (no curses: one alternate
// screen, a clear and a cursor move per frame are all it needs). Each class restores what it
// changed in its destructor, so the shell gets its screen and its line editing back however
// the command ends: 'q', a signal caught by the command, or an error.
#pragma once

#include <termios.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace pgqueue_cli::top_view {

struct screen_size {
  std::size_t columns = 80, rows = 24;
};

/// The size of the terminal on `fd` (TIOCGWINSZ); none when it is not one or does not say.
std::optional<screen_size> size_of(int fd);

/// Full-screen output on stdout: the alternate screen with the cursor hidden while it lives;
/// the screen and the cursor are put back in its destructor.
class full_screen {
 public:
  full_screen();
  ~full_screen();
  full_screen(const full_screen&) = delete;
  full_screen& operator=(const full_screen&) = delete;

  /// Clears the screen and writes `lines` from the top, each cut to the width, as many as fit
  /// (the last line says how many more there were).
  void draw(const std::vector<std::string>& lines) const;
};

/// Keys one at a time from the terminal on `fd`: non-canonical mode without echo (signals
/// still work: Ctrl-C is SIGINT) while it lives. Its destructor restores the terminal's modes
/// and the file status flags (an event loop may make the descriptor non-blocking, which would
/// otherwise leave the shell reading a non-blocking terminal).
class raw_keys {
 public:
  explicit raw_keys(int fd);
  ~raw_keys();
  raw_keys(const raw_keys&) = delete;
  raw_keys& operator=(const raw_keys&) = delete;

 private:
  int fd_;
  int flags_ = -1;
  std::optional<termios> saved_;
};

}  // namespace pgqueue_cli::top_view
