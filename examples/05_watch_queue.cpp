// 05: watching a queue.
//
// next_notification() waits until jobs become claimable in a queue (LISTEN/NOTIFY underneath),
// e.g. for a dashboard or to wake something up. Here a producer with a connection of its own
// enqueues a job, then a batch, then a job scheduled for later, while a watcher prints what it
// is told. Notifications are hints: one per transaction however many jobs it added, nothing
// announces the moment a scheduled job falls due, and they can be lost while disconnected. So
// the watcher also looks by itself when nothing arrived for a while.
//
//   05_watch_queue "<conninfo>"      (or set PGQUEUE_DSN)
#include <chrono>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

asio::awaitable<void> pause(std::chrono::milliseconds how_long) {
  asio::steady_timer timer(co_await asio::this_coro::executor, how_long);
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<void> produce(pgqueue::queue q, bool& done) {
  co_await pause(200ms);  // gives the watcher time to start listening
  co_await q.enqueue(R"({"step": 1})");
  std::printf("producer: enqueued 1 job\n");
  co_await pause(300ms);
  // (Built before the co_await: GCC 12 cannot compile a braced list of strings inside one.)
  std::vector<std::string> batch(3, R"({"step": 2})");
  co_await q.enqueue_batch(batch);
  std::printf("producer: enqueued a batch of 3 jobs\n");
  co_await pause(300ms);
  co_await q.enqueue(R"({"step": 3})",
                     {.run_after = std::chrono::system_clock::now() + 600ms});
  std::printf("producer: enqueued 1 job due in 600 ms\n");
  co_await pause(1s);
  done = true;
}

asio::awaitable<void> watch(pgqueue::queue q, const bool& done) {
  const auto start = std::chrono::steady_clock::now();
  while (!done) {
    // Wait for a notification, but for 400 ms at most (whichever comes first wins; the other
    // is cancelled, and a notification arriving later is kept for the next call).
    asio::steady_timer timeout(co_await asio::this_coro::executor, 400ms);
    auto got = co_await (q.next_notification() || timeout.async_wait(asio::use_awaitable));
    std::printf("%5.2f s  watcher: ", example::seconds_since(start));
    if (auto* n = std::get_if<pgqueue::notification>(&got)) {
      // The payload is the queue name; backend_pid is the session that sent it.
      std::printf("notified (from session %d)", n->backend_pid);
    } else {
      std::printf("no notification for 400 ms");
    }
    auto r = co_await q.db().query(
        "SELECT count(*) FILTER (WHERE run_after <= now()), count(*) FROM pgqueue.jobs "
        "WHERE queue = $1 AND state = 'ready'",
        {q.name()});
    std::printf(", %lld job(s) claimable, %lld ready in all\n",
                static_cast<long long>(r.get<std::int64_t>(0, 0)),
                static_cast<long long>(r.get<std::int64_t>(0, 1)));
  }
}

asio::awaitable<void> watch_queue(std::string dsn) {
  auto ex = co_await asio::this_coro::executor;
  auto watcher_db = co_await pgqueue::connect(ex, dsn);
  co_await pgqueue::migrate(watcher_db);
  auto producer_db = co_await pgqueue::connect(ex, dsn);
  std::printf("producer session %d, watcher session %d\n", producer_db.backend_pid(),
              watcher_db.backend_pid());

  // Two handles on the same queue, one per connection.
  const auto name = example::fresh_queue_name("uploads");
  pgqueue::queue watched{watcher_db, name};
  pgqueue::queue producer{producer_db, name};
  bool done = false;
  co_await (watch(watched, done) && produce(producer, done));
}

}  // namespace

int main(int argc, char** argv) { return example::run(argc, argv, watch_queue); }
