// 08: a periodic job: a schedule declared at start-up, fired every second by the workers.
//
// The program declares a schedule "every second" (declaring it again, as every instance of a
// program would at start-up, changes nothing), runs a worker over its queue for about four
// seconds, and prints each run with the second it was fired for. A second worker, as another
// process would, does not double any slot: the schedule's row and the job's key make each slot
// fire once. Last, the schedule is removed.
//
//   08_periodic_job "<conninfo>"      (or set PGQUEUE_DSN)
#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include <asio/experimental/awaitable_operators.hpp>
#include <asio/steady_timer.hpp>
#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

using namespace std::chrono_literals;

namespace {

asio::awaitable<void> periodic_job(std::string dsn) {
  auto ex = co_await asio::this_coro::executor;
  auto db = co_await pgqueue::connect(ex, dsn);
  co_await pgqueue::migrate(db);
  const auto queue_name = example::fresh_queue_name("heartbeats");

  // Any process may declare it; the first declaration creates it, later ones change nothing.
  pgqueue::schedule every_second{.name = queue_name,
                                 .queue = queue_name,
                                 .cron = "@every 1 second",
                                 .payload = R"({"task": "ping"})"};
  const bool created = co_await pgqueue::declare_schedule(db, every_second);
  const bool again = co_await pgqueue::declare_schedule(db, every_second);
  std::printf("schedule %s: declared (%s), declared again (%s)\n", queue_name.c_str(),
              created ? "created" : "unchanged", again ? "changed" : "unchanged");

  // Two workers, as two processes would run: the slots are shared out, never doubled. Claims
  // fire due slots; an idle worker wakes for its queue's next slot.
  std::set<std::int64_t> seen;
  int runs = 0;
  const auto start = std::chrono::steady_clock::now();
  auto handler = [&](const pgqueue::job& j) -> asio::awaitable<void> {
    ++runs;
    seen.insert(j.id);
    std::printf("%5.2f s  job %lld %s, due %lld ms before it started\n",
                example::seconds_since(start), static_cast<long long>(j.id), j.payload.c_str(),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(j.claimed_at - j.due_at)
                        .count()));
    co_return;
  };
  pgqueue::queue q1{db, queue_name}, q2{co_await pgqueue::connect(ex, dsn), queue_name};
  pgqueue::worker w1(q1, handler), w2(q2, handler);
  asio::steady_timer four_seconds(ex, 4s);
  using namespace asio::experimental::awaitable_operators;
  co_await ((w1.run() && w2.run()) || four_seconds.async_wait(asio::use_awaitable));

  std::printf("%d runs of %zu distinct jobs in about four seconds\n", runs, seen.size());
  co_await pgqueue::remove_schedule(db, queue_name);
  if (runs < 3 || runs != static_cast<int>(seen.size())) {
    throw std::runtime_error("expected a run per second, each job once");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return example::run(argc, argv, periodic_job);
}
