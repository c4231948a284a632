#include "support/serve_process.hpp"

#include <poll.h>

#include <chrono>
#include <stdexcept>

#include "support/database.hpp"

namespace pgq_test {

namespace {

// The first line `fd` gives within `limit`, without its newline; throws when none comes.
std::string read_line(int fd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("no line within the time: '" + line + "'");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c = 0;
    const auto n = ::read(fd, &c, 1);  // a byte at a time: nothing read past the line
    if (n <= 0) throw std::runtime_error("output ended before a line: '" + line + "'");
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace

serve_process::serve_process(const std::string& tool, const std::string& dsn,
                             const std::vector<std::string>& args, const std::string& listen)
    : child_([&] {
        std::vector<std::string> argv{"serve", "--listen", listen};
        argv.insert(argv.end(), args.begin(), args.end());
        spawn_options options;
        options.env = {"PGQUEUE_DSN=" + dsn};
        options.fds = {{out_.fd[1], 1}};
        return child_process(tool, argv, options);
      }()) {
  out_.close_end(1);
  const auto line = read_line(out_.fd[0], std::chrono::seconds(10));
  const std::string prefix = "listening on http://";
  if (line.rfind(prefix, 0) != 0 || line.back() != '/') {
    throw std::runtime_error("pgqueue serve said: " + line);
  }
  url_ = line.substr(std::string("listening on ").size());
  port_ = std::stoi(line.substr(line.rfind(':') + 1));
}

void load_dashboard_jobs(session& s) {
  s.script(read_file(std::string(PGQUEUE_SOURCE_ROOT) + "/tests/fixtures/dashboard_jobs.sql"));
}

}  // namespace pgq_test
