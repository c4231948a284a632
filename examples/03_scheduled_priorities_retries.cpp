// 03: scheduled jobs, priorities, and retries that end in the dead-letter state.
//
// Four jobs go in: a low and an urgent one, a "flaky" one whose handler always fails, and a
// report scheduled one second ahead. Claimed by hand, they come out in this order: urgent,
// low, flaky (failing, retried with back-off until its attempts are used up: it ends dead),
// then the report once it falls due. Last, the dead job is inspected and put back with
// pgqueue.retry_dead.
//
//   03_scheduled_priorities_retries "<conninfo>"      (or set PGQUEUE_DSN)
#include <chrono>
#include <cstdio>
#include <string>

#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

using namespace std::chrono_literals;

namespace {

asio::awaitable<void> scheduled_priorities_retries(std::string dsn) {
  auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
  co_await pgqueue::migrate(db);
  pgqueue::queue q{db, example::fresh_queue_name("reports")};

  // Retries back off exponentially: base, 2 x base, 4 x base... up to max, +-25% jitter. The
  // default is 1 s up to 1 h; this queue retries faster. Plain SQL goes through db.query().
  co_await db.query("SELECT pgqueue.set_retry_backoff($1, '100 ms', '2 s')", {q.name()});

  const auto start = std::chrono::steady_clock::now();
  // Not claimable before run_after, whatever its priority.
  co_await q.enqueue(R"({"task": "report"})",
                     {.priority = 100, .run_after = std::chrono::system_clock::now() + 1s});
  co_await q.enqueue(R"({"task": "low"})");
  // Runs at most 3 times; after a third failure it ends `dead`.
  co_await q.enqueue(R"({"task": "flaky"})", {.max_attempts = 3});
  co_await q.enqueue(R"({"task": "urgent"})", {.priority = 10});
  std::printf("enqueued report (priority 100, due in 1 s), low, flaky (3 attempts), urgent "
              "(priority 10)\n");

  // Claim until all four are finished: done (acked) or dead (last attempt failed).
  for (int finished = 0; finished < 4;) {
    auto lease = co_await q.claim();  // waits for the next due job
    const auto& j = lease.job();
    std::printf("%5.2f s  claimed %-20s priority %3d, attempt %d of %d: ",
                example::seconds_since(start), j.payload.c_str(), j.priority, j.attempts,
                j.max_attempts);
    if (j.payload.find("flaky") != std::string::npos) {
      auto outcome = co_await lease.nack("flaky failed on attempt " + std::to_string(j.attempts));
      const bool dead = outcome == pgqueue::nack_result::dead;
      std::printf("failed, %s\n", dead ? "no attempts left: dead" : "retried after a back-off");
      if (dead) ++finished;
    } else {
      co_await lease.ack();
      std::printf("done\n");
      ++finished;
    }
  }

  // Dead jobs stay in pgqueue.jobs (until gc removes them) with the last error, so they can be
  // inspected, and put back once the cause is fixed.
  auto dead = co_await db.query(
      "SELECT id, payload::text, attempts, last_error FROM pgqueue.jobs "
      "WHERE queue = $1 AND state = 'dead' ORDER BY id",
      {q.name()});
  for (int i = 0; i < dead.rows(); ++i) {
    std::printf("dead job %lld %s after %d attempts, last_error: %s\n",
                static_cast<long long>(dead.get<std::int64_t>(i, 0)),
                dead.get<std::string>(i, 1).c_str(), dead.get<int>(i, 2),
                dead.get<std::string>(i, 3).c_str());
  }

  // retry_dead makes dead jobs ready again with fresh attempts: all of a queue's, or the ids
  // given as a second argument.
  auto revived = co_await db.query("SELECT pgqueue.retry_dead($1)", {q.name()});
  std::printf("retry_dead: %d job(s) ready again\n", revived.get<int>(0, 0));
  auto again = co_await q.claim();
  std::printf("claimed %s again: attempt %d of %d; this time it succeeds\n",
              again.job().payload.c_str(), again.job().attempts, again.job().max_attempts);
  co_await again.ack();
}

}  // namespace

int main(int argc, char** argv) { return example::run(argc, argv, scheduled_priorities_retries); }
