// A default worker id: host, process and a random suffix, so two processes never share one.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

namespace pgqueue::detail {

inline std::string default_worker_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(rd()));
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + suffix;
}

}  // namespace pgqueue::detail
