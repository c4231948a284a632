// 01: enqueue and claim by hand.
//
// The smallest round trip through a queue, one call at a time: add jobs, claim them, and
// finish each claim with ack (done) or nack (failed, try again later).
//
//   01_enqueue_and_claim "<conninfo>"      (or set PGQUEUE_DSN)
#include <chrono>
#include <cstdio>
#include <string>

#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

using namespace std::chrono_literals;

namespace {

void print_job(const char* what, const pgqueue::job& j) {
  std::printf("%s job %lld: payload %s, priority %d, attempt %d of %d\n", what,
              static_cast<long long>(j.id), j.payload.c_str(), j.priority, j.attempts,
              j.max_attempts);
}

asio::awaitable<void> enqueue_and_claim(std::string dsn) {
  // One connection serves everything below. migrate() installs the pgqueue schema, or does
  // nothing when it is already there: run it at start-up.
  auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
  co_await pgqueue::migrate(db);

  // A queue handle is just a name on a connection (no round trip). The worker id is written
  // into each job this handle claims; by default it is host:pid:random.
  pgqueue::queue emails{db, example::fresh_queue_name("emails"), {.worker_id = "example-01"}};
  std::printf("queue '%s'\n", emails.name().c_str());

  // try_claim() never waits: on an empty queue it returns nothing at once.
  if (!co_await emails.try_claim()) std::printf("try_claim on the empty queue: nothing\n");

  // enqueue() takes JSON text and returns the new job's id. Higher priority is claimed first.
  auto first = co_await emails.enqueue(R"({"to": "ada@example.com"})");
  auto second = co_await emails.enqueue(R"({"to": "bob@example.com"})", {.priority = 10});
  std::printf("enqueued job %lld (priority 0) and job %lld (priority 10)\n",
              static_cast<long long>(first), static_cast<long long>(second));

  // A claim returns a lease: the job is ours until we ack, nack or release it (the lease
  // heartbeats by itself meanwhile). The priority-10 job comes first.
  if (auto lease = co_await emails.try_claim()) {
    print_job("try_claim got", lease->job());
    co_await lease->ack();  // done: it will not run again
    std::printf("  acked\n");
  }

  // claim() waits until a job is claimable (here one already is).
  auto lease = co_await emails.claim();
  print_job("claim got", lease.job());
  // nack() reports a failure; the reason is kept in the job's last_error. The job is retried
  // after the queue's back-off: about 1 s after the first failure, doubling each time (example
  // 03 tunes it). Only a job that used up its attempts ends `dead` instead.
  auto outcome = co_await lease.nack("smtp server busy");
  std::printf("  nacked: %s\n", outcome == pgqueue::nack_result::requeued ? "requeued" : "dead");

  // Until then the job is not claimable...
  if (!co_await emails.try_claim()) std::printf("try_claim right after the nack: nothing due\n");

  // ...and claim() sleeps until it falls due (it knows when the next job is due, and it
  // listens for new jobs), then takes it. The attempt counter went up.
  auto start = std::chrono::steady_clock::now();
  auto retry = co_await emails.claim();
  print_job("claim got", retry.job());
  std::printf("  after waiting %.1f s\n", example::seconds_since(start));
  co_await retry.ack();
  std::printf("  acked\n");

  // pgqueue.depth counts a queue's jobs per state; plain SQL goes through db.query().
  auto depth = co_await db.query("SELECT state, count FROM pgqueue.depth WHERE queue = $1",
                                 {emails.name()});
  for (int i = 0; i < depth.rows(); ++i) {
    std::printf("depth: %s %lld\n", depth.get<std::string>(i, 0).c_str(),
                static_cast<long long>(depth.get<std::int64_t>(i, 1)));
  }
}

}  // namespace

int main(int argc, char** argv) { return example::run(argc, argv, enqueue_and_claim); }
