// Progress lines on stderr ("[  12.3s] drain     ..."), so a long run shows what it is doing.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace bench {

inline std::chrono::steady_clock::time_point bench_start() {
  static const auto start = std::chrono::steady_clock::now();
  return start;
}

/// Prints one progress line to stderr, stamped with the time since the run started.
inline void say(const std::string& scenario, const std::string& what) {
  const double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start()).count();
  std::fprintf(stderr, "[%6.1fs] %-9s %s\n", t, scenario.c_str(), what.c_str());
  std::fflush(stderr);
}

}  // namespace bench
