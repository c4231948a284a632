// A scratch database with the schema installed and helpers to connect queues to it.
#pragma once

#include <string>

#include <pgqueue/pgqueue.hpp>

#include "support/server.hpp"

namespace pgq_test {

struct queue_fixture {
  scratch_database db{true};

  // A new connection to the fixture's database.
  asio::awaitable<pgqueue::database> connect() {
    co_return co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
  }
};

}  // namespace pgq_test
