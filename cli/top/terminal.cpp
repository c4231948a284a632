#include "terminal.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>

#include "render.hpp"

namespace pgqueue_cli::top_view {

std::optional<screen_size> size_of(int fd) {
  winsize w{};
  if (::ioctl(fd, TIOCGWINSZ, &w) != 0 || w.ws_col == 0 || w.ws_row == 0) return std::nullopt;
  return screen_size{w.ws_col, w.ws_row};
}

full_screen::full_screen() {
  std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;  // alternate screen, cursor hidden
}

full_screen::~full_screen() {
  std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;  // cursor shown, normal screen back
}

void full_screen::draw(const std::vector<std::string>& lines) const {
  const auto size = size_of(STDOUT_FILENO).value_or(screen_size{});
  std::string out = "\x1b[H\x1b[2J";  // home, clear
  std::size_t shown = lines.size();
  if (shown > size.rows) shown = size.rows - 1;  // the last row says what did not fit
  for (std::size_t i = 0; i < shown; ++i) {
    out += fit(lines[i], size.columns);
    if (i + 1 < lines.size()) out += "\r\n";
  }
  if (shown < lines.size()) {
    out += fit("... " + std::to_string(lines.size() - shown) + " more", size.columns);
  }
  std::cout << out << std::flush;
}

raw_keys::raw_keys(int fd) : fd_(fd), flags_(::fcntl(fd, F_GETFL)) {
  termios t{};
  if (::tcgetattr(fd, &t) != 0) return;
  saved_ = t;
  t.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  ::tcsetattr(fd, TCSANOW, &t);
}

raw_keys::~raw_keys() {
  if (saved_) ::tcsetattr(fd_, TCSANOW, &*saved_);
  if (flags_ != -1) ::fcntl(fd_, F_SETFL, flags_);
}

}  // namespace pgqueue_cli::top_view
