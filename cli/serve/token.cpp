#include "token.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pgqueue_cli::dashboard {

std::string make_token() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const auto n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("no random bytes for the token: ") +
                               std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  return token;
}

bool same_token(std::string_view given, std::string_view expected) {
  if (given.size() != expected.size()) return false;  // the length is no secret
  volatile unsigned char difference = 0;              // volatile: no early exit compiled in
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference = difference | static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return difference == 0;
}

}  // namespace pgqueue_cli::dashboard
