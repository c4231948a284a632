// Test fixtures shared by every suite: the throwaway PostgreSQL server, scratch databases and a
// bounded runner for coroutines. Tests include this instead of repeating set-up code.
#pragma once

#include <chrono>
#include <future>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

namespace pgq_test {

// The server every test talks to: `PGQUEUE_TEST_DSN` when set, otherwise a throwaway cluster
// (initdb into a temp directory, unix socket only) started on first use and removed at exit.
const std::string& server_dsn();

// Path of sql/pgqueue.sql in the source tree (the schema under test).
const std::string& schema_file();

// Reads a whole file; throws std::runtime_error when it cannot.
std::string read_file(const std::string& path);

// A fresh database on the test server, dropped (with its connections) in the destructor, so
// each test starts clean and leaves nothing behind. With `install_schema` the current
// sql/pgqueue.sql is installed (copied from a per-process template, so it is cheap).
class scratch_database {
 public:
  explicit scratch_database(bool install_schema = true);
  ~scratch_database();
  scratch_database(const scratch_database&) = delete;
  scratch_database& operator=(const scratch_database&) = delete;

  const std::string& name() const { return name_; }
  // A conninfo string for this database.
  const std::string& dsn() const { return dsn_; }

 private:
  std::string name_;
  std::string dsn_;
};

// Runs `factory()` (which returns an asio::awaitable) to completion on a fresh io_context and
// returns its value. A coroutine still running after `limit` fails the test instead of hanging.
template <class Factory>
auto run_async(Factory&& factory, std::chrono::seconds limit = std::chrono::seconds(60)) {
  asio::io_context io;
  auto fut = asio::co_spawn(io, std::forward<Factory>(factory)(), asio::use_future);
  io.run_for(limit);
  if (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    FAIL("coroutine did not finish within " << limit.count() << " s");
  }
  return fut.get();
}

}  // namespace pgq_test
