// pgqueue::queue against a real server: enqueue errors, names, notifications, waiting claims.
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/server.hpp"
#include "support/session.hpp"

namespace queue_queue_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// Like queue_fixture, but migrates through the library (so every test also covers migrate).
struct fixture {
  scratch_database db{false};
  asio::awaitable<pgqueue::database> connect() {
    auto c = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    co_await pgqueue::migrate(c);
    co_return c;
  }
};

// Whether a notification for `q` arrives within `limit` (the first call subscribes).
asio::awaitable<bool> notified_within(pgqueue::queue& q, std::chrono::milliseconds limit) {
  asio::steady_timer t(co_await asio::this_coro::executor, limit);
  auto r = co_await (q.next_notification() || t.async_wait(asio::use_awaitable));
  co_return r.index() == 0;
}

// A watcher of `name` and a producer (wake_interval 50 ms) whose first enqueue (`first`, id
// `first_id`) was announced and whose interval has passed: its next due enqueue carries the
// queue's wake-up in its own transaction.
struct carrier {
  pgqueue::queue watcher, producer;
  std::int64_t first_id;
};

asio::awaitable<carrier> carrier_after_first(fixture& f, const std::string& name,
                                             pgqueue::enqueue_options first) {
  auto ex = co_await asio::this_coro::executor;
  pgqueue::queue watcher{co_await f.connect(), name};
  pgqueue::queue producer{co_await pgqueue::connect(ex, f.db.dsn()), name, {.wake_interval = 50ms}};
  co_await watcher.watch();
  const auto first_id = co_await producer.enqueue("{}", first);
  auto n = co_await watcher.next_notification();
  CHECK(n.payload == name);
  co_await pause(100ms);  // past the wake interval
  co_return carrier{watcher, producer, first_id};
}

}  // namespace

TEST_CASE("invalid JSON is refused with SQLSTATE 22P02 and nothing is added", "[queue]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    try {
      co_await q.enqueue("{not json");
      FAIL("no error");
    } catch (const pgqueue::error& e) {
      CHECK(e.sqlstate() == "22P02");
      CHECK_THAT(e.what(), Catch::Contains("invalid input syntax for type json"));
    }
    // The connection is still usable.
    // (co_await stays out of Catch's macros: they may evaluate their argument more than once.)
    auto id = co_await q.enqueue("{}");
    CHECK(id > 0);
  });
  session s(f.db.dsn());
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 1);
}

TEST_CASE("a bad queue name is refused with 22023", "[queue]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), ""};
    try {
      co_await q.enqueue("{}");
      FAIL("no error");
    } catch (const pgqueue::error& e) {
      CHECK(e.sqlstate() == "22023");
    }
  });
}

TEST_CASE("a name with quotes, spaces, unicode and 100 bytes works end to end", "[queue]") {
  fixture f;
  std::string name = "it's \"q\"; LISTEN x; -- ünï ✓ ";
  name += std::string(100 - name.size(), 'z');
  REQUIRE(name.size() == 100);
  run_async([&]() -> asio::awaitable<void> {
    auto db = co_await f.connect();
    auto producer = co_await pgqueue::connect(co_await asio::this_coro::executor, f.db.dsn());
    pgqueue::queue q{db, name};
    pgqueue::queue p{producer, name};
    // Subscribe (the first call does) and see that nothing is pending yet.
    const bool pending = co_await notified_within(q, 50ms);
    CHECK_FALSE(pending);
    auto id = co_await p.enqueue(R"({"x":1})");
    auto l = co_await q.claim();
    CHECK(l.job().id == id);
    CHECK(l.job().queue == name);
    co_await l.ack();
    auto n = co_await q.next_notification();
    CHECK(n.payload == name);
  });
}

TEST_CASE("next_notification wakes on an enqueue from another connection", "[queue][notify]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue watcher{co_await f.connect(), "jobs"};
    pgqueue::queue producer{co_await pgqueue::connect(ex, f.db.dsn()), "jobs"};
    pgqueue::queue other{producer.db(), "other"};
    co_await watcher.watch();      // listening from here on
    co_await other.enqueue("{}");  // another queue: not ours
    const bool other_woke = co_await notified_within(watcher, 300ms);
    CHECK_FALSE(other_woke);
    // A job due later wakes listeners too: an idle claim learns its due time.
    co_await producer.enqueue("{}", {.run_after = std::chrono::system_clock::now() + 1h});
    auto n = co_await watcher.next_notification();
    CHECK(n.payload == "jobs");
    co_await producer.enqueue("{}");
    n = co_await watcher.next_notification();
    CHECK(n.payload == "jobs");
  });
}

TEST_CASE("wake-ups fold across handles and connections; the last enqueue is still announced",
          "[queue][notify]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue watcher{co_await f.connect(), "flood"};
    const pgqueue::queue_options slow_wakes{.wake_interval = 1s};
    pgqueue::queue p1{co_await pgqueue::connect(ex, f.db.dsn()), "flood", slow_wakes};
    pgqueue::queue p2{co_await pgqueue::connect(ex, f.db.dsn()), "flood", slow_wakes};
    co_await watcher.watch();
    // The first enqueue is announced at once; the two that follow within the interval, from
    // another connection, share one more wake-up sent when the interval has passed.
    co_await p1.enqueue("{}");
    co_await p2.enqueue("{}");
    co_await p2.enqueue("{}");
    auto first = co_await watcher.next_notification();
    const auto t1 = std::chrono::steady_clock::now();
    auto second = co_await watcher.next_notification();
    const auto gap = std::chrono::steady_clock::now() - t1;
    CHECK(first.payload == "flood");
    CHECK(second.payload == "flood");
    CHECK(gap >= 800ms);
    const bool third = co_await notified_within(watcher, 1500ms);
    CHECK_FALSE(third);  // nothing more: three jobs, two wake-ups
  });
}

TEST_CASE("an enqueue that carries the wake-up announces even when its key already existed",
          "[queue][notify]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto c = co_await carrier_after_first(f, "keys", {.idempotency_key = "k"});
    const auto again = co_await c.producer.enqueue("{}", {.idempotency_key = "k"});
    CHECK(again == c.first_id);
    const bool announced = co_await notified_within(c.watcher, 5s);
    CHECK(announced);
  });
}

TEST_CASE("a carrying enqueue that fails hands its wake-up to a separate one", "[queue][notify]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto c = co_await carrier_after_first(f, "bad", {});
    // The failed enqueue would have carried the wake-up for whatever committed before it.
    std::string sqlstate;
    try {
      co_await c.producer.enqueue("{not json");
    } catch (const pgqueue::error& e) {
      sqlstate = e.sqlstate();
    }
    CHECK(sqlstate == "22P02");
    const bool announced = co_await notified_within(c.watcher, 5s);
    CHECK(announced);
  });
  session s(f.db.dsn());
  CHECK(count_jobs(s, "ready", "bad") == 1);
}

TEST_CASE("claim() waits for a job and wakes when one is enqueued", "[queue][claim]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    // A long poll interval: only the notification can wake the claim in time.
    pgqueue::queue q{co_await f.connect(), "q", {.poll_interval = 60s}};
    pgqueue::queue producer{co_await pgqueue::connect(ex, f.db.dsn()), "q"};
    std::optional<std::int64_t> got, id;
    auto claimer = [&]() -> asio::awaitable<void> {
      auto l = co_await q.claim();
      got = l.job().id;
      co_await l.ack();
    };
    auto start = std::chrono::steady_clock::now();
    auto later_producer = [&]() -> asio::awaitable<void> {
      co_await pause(100ms);
      CHECK_FALSE(got);  // still waiting: the queue was empty
      start = std::chrono::steady_clock::now();
      id = co_await producer.enqueue("{}");
    };
    co_await (claimer() && later_producer());
    CHECK(got == id);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  });
}

TEST_CASE("claim() wakes when a scheduled job falls due", "[queue][claim]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q", {.poll_interval = 60s}};
    auto id = co_await q.enqueue("{}", {.run_after = std::chrono::system_clock::now() + 300ms});
    auto l = co_await q.claim();
    CHECK(l.job().id == id);
    co_await l.ack();
  });
}

TEST_CASE("a cancelled claim() returns promptly and leaves everything usable", "[queue][claim]") {
  fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    pgqueue::queue q{co_await f.connect(), "q"};
    asio::steady_timer t(ex, 100ms);
    auto start = std::chrono::steady_clock::now();
    auto r = co_await (q.claim() || t.async_wait(asio::use_awaitable));
    CHECK(r.index() == 1);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    auto id = co_await q.enqueue("{}");
    auto l = co_await q.try_claim();
    REQUIRE(l);
    CHECK(l->job().id == id);
    co_await l->ack();
  });
  session s(f.db.dsn());
  CHECK(count_jobs(s, "claimed") == 0);
  CHECK(count_jobs(s, "done") == 1);
}

TEST_CASE("enqueue options and batch enqueue reach the server", "[queue]") {
  fixture f;
  std::vector<std::int64_t> ids;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    // Named vectors: GCC 12 cannot keep an initializer_list alive across co_await.
    std::vector<std::string> payloads{R"({"i":0})", R"({"i":1})", R"({"i":2})"};
    std::vector<std::optional<std::string>> keys{std::nullopt, "k", "k"};
    ids = co_await q.enqueue_batch(payloads, {.priority = 3}, keys);
    auto again = co_await q.enqueue("{}", {.idempotency_key = "k", .max_attempts = 2});
    CHECK(again == ids[1]);
  });
  REQUIRE(ids.size() == 3);
  CHECK(ids[1] == ids[2]);
  session s(f.db.dsn());
  CHECK(read_job(s, ids[0]).priority == 3);
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 2);
}

}  // namespace queue_queue_test
