// 04: many jobs per round trip, and idempotency keys.
//
// enqueue_batch adds many jobs in one statement. An idempotency key makes an enqueue safe to
// repeat: while a job with that key exists in the queue, enqueueing the key again returns the
// existing job's id instead of adding a job. Then jobs are claimed in batches and acked.
//
//   04_batch_enqueue "<conninfo>"      (or set PGQUEUE_DSN)
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pgqueue/pgqueue.hpp>

#include "example.hpp"

namespace {

void print_ids(const char* what, const std::vector<std::int64_t>& ids) {
  std::printf("%s:", what);
  for (auto id : ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n");
}

// Each lease is acked on its own: one round trip each. (A pgqueue::worker acks the jobs that
// finish together with one pgqueue.ack_batch call.)
asio::awaitable<void> ack_all(std::vector<pgqueue::lease>& leases) {
  for (auto& lease : leases) {
    co_await lease.ack();
    std::printf("  acked job %lld %s\n", static_cast<long long>(lease.job().id),
                lease.job().payload.c_str());
  }
}

asio::awaitable<void> batch_enqueue(std::string dsn) {
  auto db = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
  co_await pgqueue::migrate(db);
  pgqueue::queue orders{db, example::fresh_queue_name("orders")};

  // Five orders, each keyed by its order number: one statement, one round trip. The ids come
  // back in input order.
  std::vector<std::string> payloads;
  std::vector<std::optional<std::string>> keys;
  for (int order = 1001; order <= 1005; ++order) {
    payloads.push_back(R"({"order": )" + std::to_string(order) + "}");
    keys.push_back("order-" + std::to_string(order));
  }
  auto ids = co_await orders.enqueue_batch(payloads, {}, keys);
  print_ids("orders 1001-1005 enqueued as jobs", ids);

  // Say the producer crashed and sends an overlapping batch again, with two new orders, one of
  // them twice, and a job without a key (std::nullopt), which is always added.
  payloads = {R"({"order": 1004})", R"({"order": 1005})", R"({"order": 1006})",
              R"({"order": 1006})", R"({"note": "no key"})"};
  keys = {"order-1004", "order-1005", "order-1006", "order-1006", std::nullopt};
  auto again = co_await orders.enqueue_batch(payloads, {}, keys);
  print_ids("orders 1004, 1005, 1006, 1006 and an unkeyed job", again);
  std::printf("  1004 and 1005 kept their jobs (%lld, %lld); both 1006 got job %lld\n",
              static_cast<long long>(again[0]), static_cast<long long>(again[1]),
              static_cast<long long>(again[2]));

  // Claim in batches: one round trip claims up to the given number of due jobs.
  // try_claim_batch returns at once (maybe empty); claim_batch waits for at least one job.
  auto batch = co_await orders.try_claim_batch(4);
  std::printf("try_claim_batch(4) claimed %zu jobs\n", batch.size());
  co_await ack_all(batch);
  batch = co_await orders.claim_batch(100);
  std::printf("claim_batch(100) claimed the remaining %zu\n", batch.size());
  co_await ack_all(batch);

  // The keys stay taken until gc deletes the finished jobs: enqueueing order 1001 again still
  // returns its (done) job rather than running the order twice.
  auto id = co_await orders.enqueue(R"({"order": 1001})", {.idempotency_key = "order-1001"});
  std::printf("order 1001 once more: job %lld, the one already done\n",
              static_cast<long long>(id));
}

}  // namespace

int main(int argc, char** argv) { return example::run(argc, argv, batch_enqueue); }
