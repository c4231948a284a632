// A multi-threaded io_context: the connection serialises its own work on a strand, and the
// application keeps its coroutines on a strand of its own.
#include <asio/strand.hpp>
#include <asio/use_future.hpp>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include "pg_test_util.hpp"
#include "pgqueue/pg/connection.hpp"
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

}  // namespace pg_threads_test
