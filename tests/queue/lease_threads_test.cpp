// A lease lost while its handler waits on lost_slot(), on an io_context run by 4 threads
// (built under ThreadSanitizer in CI). The heartbeat runs on the connection's strand; the
// signal must fire on the executor that claimed the job, where the handler attaches to it.
#include <thread>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/strand.hpp>
#include <asio/use_future.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_lease_threads_test {

using namespace pgq_test;
using namespace std::chrono_literals;

TEST_CASE("a lost lease cancels the work bound to lost_slot(), across threads",
          "[queue][threads]") {
  scratch_database db;
  session admin(db.dsn());
  constexpr int jobs = 8;
  admin.query(
      "SELECT pgqueue.enqueue_batch('lost', array_agg('{}'::jsonb)) "
      "FROM generate_series(1, $1)",
      {std::to_string(jobs)});
  asio::io_context io(4);
  auto home = asio::make_strand(io);
  auto body = [&]() -> asio::awaitable<int> {
    auto conn = co_await pgqueue::connect(io.get_executor(), db.dsn());
    pgqueue::queue q(conn, "lost", {.worker_id = "w", .lease = 3s, .heartbeat_interval = 20ms});
    auto leases = co_await q.try_claim_batch(jobs);
    REQUIRE(leases.size() == jobs);
    // Someone else takes every job back (as the janitor would after a stall): the next
    // heartbeat of each lease is refused.
    admin.query("UPDATE pgqueue.jobs SET claimed_by = 'thief' WHERE queue = 'lost'");
    // A signal emitted before a handler is attached is not kept, so attach only to a lease not
    // yet lost: on this strand, lost() false means its signal has not been delivered yet.
    int lost = 0;
    for (auto& l : leases) {
      if (!l.lost()) {
        asio::steady_timer work(co_await asio::this_coro::executor, 20s);
        std::error_code ec;
        co_await work.async_wait(asio::bind_cancellation_slot(
            l.lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
        CHECK(ec == asio::error::operation_aborted);
      }
      if (l.lost()) ++lost;
    }
    co_return lost;
  };
  auto done = asio::co_spawn(home, body(), asio::use_future);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run_for(30s); });
  for (auto& t : threads) t.join();
  REQUIRE(done.wait_for(0s) == std::future_status::ready);
  CHECK(done.get() == jobs);
}

}  // namespace queue_lease_threads_test
