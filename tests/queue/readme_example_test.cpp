// The README's example, compiled and run against a real server.
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_readme_example_test {

using namespace pgq_test;

namespace {

// ---- README example begins ----
asio::awaitable<void> example(asio::any_io_executor ex, std::string dsn) {
  auto db = co_await pgqueue::pg::connect(ex, dsn);  // shared handle, usable by many coroutines
  co_await pgqueue::migrate(db);                 // applies sql/pgqueue.sql
  pgqueue::queue q{db, "emails"};
  std::int64_t id = co_await q.enqueue(R"({"to":"a@example.com"})",
                                       {.idempotency_key = "welcome-42", .priority = 5});
  std::vector<std::string> payloads{R"({"n":1})", R"({"n":2})"};
  std::vector<std::int64_t> ids = co_await q.enqueue_batch(payloads);  // one round trip
  pgqueue::lease lease = co_await q.claim();  // waits until a job is claimable
  std::optional<pgqueue::lease> maybe = co_await q.try_claim();  // returns at once
  std::vector<pgqueue::lease> some = co_await q.claim_batch(64);
  CHECK(lease.job().id == id);  // priority 5 goes first
  CHECK(lease.job().payload == R"({"to": "a@example.com"})");
  co_await lease.ack();                                    // or co_await lease.nack("reason")
  co_await maybe->nack("smtp timeout");
  CHECK(some.size() == 1);
  co_await some[0].ack();
  pgqueue::notification n = co_await q.next_notification();  // a job became claimable
  CHECK(n.payload == "emails");
  CHECK(ids.size() == 2);
}
// ---- README example ends ----

}  // namespace

TEST_CASE("the README example runs", "[queue][readme]") {
  scratch_database db(false);
  run_async([&]() -> asio::awaitable<void> {
    // Another producer adds a job once the example waits for a notification.
    auto producer = [&]() -> asio::awaitable<void> {
      session s(db.dsn());
      while (s.integer("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND query LIKE 'LISTEN%' AND state = 'idle'") == 0) {
        co_await pause(std::chrono::milliseconds(10));
      }
      s.query("SELECT pgqueue.enqueue('emails', '{}')");
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (example(co_await asio::this_coro::executor, db.dsn()) && producer());
  });
}

}  // namespace queue_readme_example_test
