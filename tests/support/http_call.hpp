// A plain HTTP/1.1 client for tests of `pgqueue serve`: sends bytes as given (so a test can
// send what a browser would not: an oversized head, a forged Origin, half a request) and
// reads the answer. Blocking, bounded.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pgq_test {

struct http_reply {
  int status = 0;                              // 0: no answer (the server closed first)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// Sends `raw` to 127.0.0.1:`port` and reads until the server closes the connection or
// `limit` passes; returns all that came. `after_first_reply`, when given, runs once a whole
// response has come, with the connection still open.
std::string http_exchange_raw(int port, const std::string& raw,
                              std::chrono::milliseconds limit = std::chrono::seconds(10),
                              const std::function<void()>& after_first_reply = {});

// As http_exchange_raw; the first response in what came.
http_reply http_exchange(int port, const std::string& raw,
                         std::chrono::milliseconds limit = std::chrono::seconds(10));

// The responses in `data` (a keep-alive connection's answers, one after another).
std::vector<http_reply> parse_replies(const std::string& data);

// `method` `path` with Host 127.0.0.1:`port`, `headers` ("Name: value"), `body` (with its
// Content-Length) and Connection: close.
http_reply http_call(int port, const std::string& method, const std::string& path,
                     const std::vector<std::string>& headers = {}, const std::string& body = "");

}  // namespace pgq_test
