// Test fixtures for coroutine suites: everything in database.hpp plus a bounded runner for
// coroutines. Tests include this instead of repeating set-up code.
#pragma once

#include <chrono>
#include <future>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "support/database.hpp"

namespace pgq_test {

// Runs `factory()` (which returns an asio::awaitable) to completion on a fresh io_context and
// returns its value. A coroutine still running after `limit` fails the test instead of hanging.
template <class Factory>
auto run_async(Factory&& factory, std::chrono::seconds limit = std::chrono::seconds(60)) {
  asio::io_context io;
  auto fut = asio::co_spawn(io, std::forward<Factory>(factory)(), asio::use_future);
  io.run_for(limit);
  // use_future may complete the promise from Asio's system executor just after run_for returns.
  if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    FAIL("coroutine did not finish within " << limit.count() << " s");
  }
  return fut.get();
}

}  // namespace pgq_test
