// A multi-threaded io_context: the connection serialises its own work on a strand, and the
// application keeps its coroutines on a strand of its own.
#include <asio/strand.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
#include "pgqueue/pg/pool.hpp"
#include "support/async.hpp"
#include "support/server.hpp"

namespace pg_threads_test {

using namespace pgq_pg_test;

TEST_CASE("a connection is safe on a multi-threaded io_context", "[pg][threads]") {
  pgq_test::scratch_database db(false);
  asio::io_context io(2);
  auto app = asio::make_strand(io);
  // Named: a coroutine lambda's captures live in the closure, which must outlive the coroutine.
  auto body = [&]() -> asio::awaitable<std::int64_t> {
    // Connections get the plain io_context executor: they make their own strands.
    auto listener = co_await pg::connect(io.get_executor(), db.dsn());
    auto sender = co_await pg::connect(io.get_executor(), db.dsn());
    auto sub = co_await listener.subscribe("mt");
    std::vector<asio::awaitable<pg::result>> ops;
    for (std::int64_t i = 0; i < 100; ++i) {
      ops.push_back((i % 2 ? listener : sender).query("SELECT $1::int8", pg::params{i}));
    }
    auto outcomes = co_await gather(std::move(ops));
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < 100; ++i) {
      if (outcomes[i].value && outcomes[i].value->get<std::int64_t>(0, 0) == i) sum += i;
    }
    co_await sender.query("SELECT pg_notify('mt', 'across threads')");
    auto n = co_await sub.next();
    if (n.payload != "across threads") sum = -1;
    co_return sum;
  };
  auto done = asio::co_spawn(app, body(), asio::use_future);

  // Both threads return only once every connection has closed itself (no leaked work).
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back([&] { io.run_for(30s); });
  for (auto& t : threads) t.join();
  CHECK(since(start) < 30s);
  REQUIRE(done.wait_for(0s) == std::future_status::ready);
  CHECK(done.get() == 4950);
}

TEST_CASE("a pool is safe on a multi-threaded io_context", "[pg][threads][pool]") {
  pgq_test::scratch_database db(false);
  asio::io_context io(4);
  pg::pool_options o;
  o.min_size = 1;
  o.max_size = 3;
  o.idle_timeout = 20ms;  // the reaper runs meanwhile
  std::atomic<int> done{0}, wrong{0};
  // Eight coroutines, each on a strand of its own, take turns on three sessions.
  auto body = [&]() -> asio::awaitable<void> {
    auto p = co_await pg::pool::open(io.get_executor(), db.dsn(), o);
    auto one = [&](int k) -> asio::awaitable<void> {
      for (int i = 0; i < 25; ++i) {
        auto c = co_await p.acquire();
        auto r = co_await c->query("SELECT $1::int4", pg::params{k * 100 + i});
        if (r.get<int>(0, 0) != k * 100 + i) ++wrong;
      }
      ++done;
    };
    for (int k = 0; k < 8; ++k) asio::co_spawn(asio::make_strand(io), one(k), asio::detached);
    while (done.load() < 8) co_await pgq_test::pause(5ms);
    if (p.stats().size > 3) ++wrong;
    p.close();
  };
  auto finished = asio::co_spawn(asio::make_strand(io), body(), asio::use_future);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run_for(30s); });
  for (auto& t : threads) t.join();
  REQUIRE(finished.wait_for(0s) == std::future_status::ready);
  finished.get();
  CHECK(done.load() == 8);
  CHECK(wrong.load() == 0);
}

}  // namespace pg_threads_test
