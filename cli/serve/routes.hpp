// The dashboard's URLs: which method and path does what, and the headers every answer
// carries. GET / (the page), /app.js, /app.css, /api/dashboard (the page's data, JSON),
// /metrics (Prometheus); POST /api/pause, /api/resume, /api/retry, /api/cancel (403 unless
// started with --allow-actions, and then only with the page's token). 404 for other paths,
// 405 for other methods.
#pragma once

#include <memory>
#include <string>

#include <asio/awaitable.hpp>
#include <pgqueue/pgqueue.hpp>

#include "http.hpp"
#include "sampler.hpp"

namespace pgqueue_cli::dashboard {

struct route_options {
  bool allow_actions = false;
  bool loopback_only = true;  ///< refuse a Host that is not a loopback name (request_guard)
  std::string token;          ///< the page's anti-forgery token (token.hpp)
};

class routes {
 public:
  routes(pgqueue::database db, std::shared_ptr<const sampler> rates, route_options options)
      : db_(std::move(db)), rates_(std::move(rates)), options_(std::move(options)) {}

  asio::awaitable<http_response> handle(const http_request& request) const;

 private:
  asio::awaitable<http_response> route(const http_request& request) const;

  mutable pgqueue::database db_;  // a handle: copies share the session
  std::shared_ptr<const sampler> rates_;
  route_options options_;
};

}  // namespace pgqueue_cli::dashboard
