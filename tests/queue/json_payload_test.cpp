// Typed payloads (pgqueue/json.hpp) against a real server: values enqueued as JSON (alone, in
// a batch, in a transaction), payloads read back as types, the errors when a value or a payload
// does not convert, and a worker whose handler takes the payload converted.
#include <pgqueue/json.hpp>
#include <pgqueue/pgqueue.hpp>

#include <asio/experimental/awaitable_operators.hpp>

#include "support/async.hpp"
#include "support/expect_error.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"

namespace queue_json_payload_test {

using namespace pgq_test;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

struct order {
  std::int64_t id = 0;
  std::string customer;
  std::vector<std::string> items;
  double total = 0;
  bool operator==(const order&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id, customer, items, total)

// How the error messages spell the type (GCC's name for it).
const std::string order_type = "queue_json_payload_test::{anonymous}::order";

// A number that must be positive: its from_json throws an exception of its own.
struct positive {
  int n = 0;
};
void from_json(const nlohmann::json& j, positive& p) {
  p.n = j.get<int>();
  if (p.n <= 0) throw std::domain_error("not positive: " + std::to_string(p.n));
}

// A value whose to_json throws.
struct unsendable {};
void to_json(nlohmann::json&, const unsendable&) {
  throw std::runtime_error("cannot send this");
}

// Neither to nor from JSON.
struct opaque {};

static_assert(pgqueue::json_payload<order>);
static_assert(pgqueue::json_payload<nlohmann::json>);
static_assert(pgqueue::json_payload<std::vector<order>>);
static_assert(!pgqueue::json_payload<opaque>);

// The error payload_as<T> throws for `j` (or a test failure when it throws none).
template <class T>
pgqueue::error read_error(const pgqueue::job& j) {
  try {
    pgqueue::payload_as<T>(j);
  } catch (const pgqueue::error& e) {
    return e;
  }
  FAIL("no error");
  return pgqueue::error(pgqueue::errc::invalid_argument, "unreachable");
}

// Returns once `sql` answers `expected` (bounded: the caller's checks fail otherwise).
asio::awaitable<void> until_scalar(std::string dsn, std::string sql, std::string expected) {
  session s(dsn);
  co_await eventually([&] { return s.scalar(sql) == expected; });
}

// Returns once the jobs in id order have the states `expected` ("done,dead").
asio::awaitable<void> until_states(std::string dsn, std::string expected) {
  return until_scalar(std::move(dsn), "SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs",
                      std::move(expected));
}

asio::awaitable<pgqueue::pool> open_pool(queue_fixture& f) {
  auto ex = co_await asio::this_coro::executor;
  co_return co_await pgqueue::pool::open(ex, f.db.dsn(), {.min_size = 1, .max_size = 4});
}

// What the pages' handlers sent: (to, subject).
std::vector<std::pair<std::string, std::string>> emailed;

asio::awaitable<void> send_email(std::string to, std::string subject) {
  emailed.emplace_back(std::move(to), std::move(subject));
  co_return;
}

// The pages' blocks, as the pages show them.
// clang-format off

// ---- README.md: typed payloads ----
struct email {
  std::string to, subject;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(email, to, subject)

asio::awaitable<void> welcome(pgqueue::queue& q) {
  email hello{"a@example.com", "Welcome"};
  co_await pgqueue::enqueue_json(q, hello);  // {"to": "a@example.com", "subject": "Welcome"}
  pgqueue::worker w(q, pgqueue::with_payload<email>(
      [](const pgqueue::job&, email e) -> asio::awaitable<void> {
        co_await send_email(e.to, e.subject);  // only payloads that convert get here
      }));
  co_await w.run();
}

// ---- docs/cpp-api.md: typed payloads ----
asio::awaitable<void> typed_tour(pgqueue::pool& pool, pgqueue::queue& q) {
  std::vector<email> batch{{"a@example.com", "Hi"}, {"b@example.com", "Hi"}};
  std::vector<std::int64_t> ids = co_await pgqueue::enqueue_json_batch(q, batch);  // one round trip
  nlohmann::json note = {{"to", "c@example.com"}};  // any nlohmann::json; this one has no subject
  co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
    co_await pgqueue::enqueue_json(q, tx, note, {.priority = 1});  // exists if and only if tx commits
  });
  pgqueue::lease l = co_await q.claim();                               // the note: priority 1
  nlohmann::json any = pgqueue::payload_as<nlohmann::json>(l.job());  // every payload converts
  std::optional<email> e;
  std::string reason;
  try {
    e = pgqueue::payload_as<email>(l.job());
  } catch (const pgqueue::error& failed) {  // code(): pgqueue::pg::errc::conversion_failed
    reason = failed.what();  // "job 3: the payload does not convert to email: [json.exception..."
  }
  if (!e) co_await l.nack(reason);  // what a with_payload<email> handler's worker does
}

// clang-format on

}  // namespace

TEST_CASE("a struct goes in with enqueue_json and comes back with payload_as", "[json_payload]") {
  queue_fixture f;
  const order sent{7, "Zoë", {"tea", "cake"}, 12.5};
  std::int64_t id = 0;
  order got;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await pgqueue::enqueue_json(q, sent, {.priority = 3, .max_attempts = 2});
    auto l = co_await q.claim();
    CHECK(l.job().id == id);
    got = pgqueue::payload_as<order>(l.job());
    co_await l.ack();
  });
  CHECK(got == sent);
  session s(f.db.dsn());
  const auto row = read_job(s, id);
  CHECK(row.payload == R"({"id": 7, "items": ["tea", "cake"], "total": 12.5, "customer": "Zoë"})");
  CHECK(row.priority == 3);
  CHECK(row.max_attempts == 2);
  CHECK(row.state == "done");
}

TEST_CASE("nlohmann::json values go in and come back as they are", "[json_payload]") {
  queue_fixture f;
  const nlohmann::json sent = {{"n", 1}, {"big", 9007199254740993}, {"list", {1, "two", nullptr}}};
  nlohmann::json got;
  std::int64_t id = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    id = co_await pgqueue::enqueue_json(q, sent);
    auto l = co_await q.claim();
    got = pgqueue::payload_as<nlohmann::json>(l.job());
    co_await l.ack();
  });
  CHECK(got == sent);
  session s(f.db.dsn());
  CHECK(read_job(s, id).payload ==
        R"({"n": 1, "big": 9007199254740993, "list": [1, "two", null]})");
}

TEST_CASE("enqueue_json_batch adds one job per value, in order, with keys", "[json_payload]") {
  queue_fixture f;
  const std::vector<order> sent{{1, "a", {}, 1}, {2, "b", {"x"}, 2}, {3, "c", {"y", "z"}, 3}};
  std::vector<std::int64_t> ids, again, none;
  std::vector<order> got;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    std::vector<std::optional<std::string>> keys{"k1", std::nullopt, "k3"};
    ids = co_await pgqueue::enqueue_json_batch(q, sent, {.priority = 2}, keys);
    // The same key again: that job's id, nothing added.
    std::vector<std::optional<std::string>> k3{"k3"};
    std::vector<order> one{{9, "other", {}, 0}};
    again = co_await pgqueue::enqueue_json_batch(q, one, {}, k3);
    std::vector<order> empty;
    none = co_await pgqueue::enqueue_json_batch(q, empty);
    auto leases = co_await q.claim_batch(10);
    for (auto& l : leases) got.push_back(pgqueue::payload_as<order>(l.job()));
    std::size_t acked = co_await pgqueue::ack_batch(leases);
    CHECK(acked == 3);
  });
  REQUIRE(ids.size() == 3);
  CHECK(ids[0] < ids[1]);
  CHECK(ids[1] < ids[2]);
  CHECK(again == std::vector<std::int64_t>{ids[2]});
  CHECK(none.empty());
  CHECK(got == sent);  // claimed in id order (same priority)
  session s(f.db.dsn());
  CHECK(count_jobs(s, "done", "q") == 3);
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 3);
  CHECK(read_job(s, ids[0]).idempotency_key == "k1");
  CHECK(read_job(s, ids[1]).idempotency_key == std::nullopt);
  CHECK(read_job(s, ids[1]).priority == 2);
}

TEST_CASE("enqueue_json inside a transaction: the jobs exist if and only if it commits",
          "[json_payload]") {
  queue_fixture f;
  std::int64_t committed = 0;
  std::vector<std::int64_t> committed_batch;
  bool rolled_back = false;
  run_async([&]() -> asio::awaitable<void> {
    auto pool = co_await open_pool(f);
    auto q = co_await pgqueue::queue::open(pool, "q");
    const order one{1, "a", {}, 1};
    const std::vector<order> two{{2, "b", {}, 2}, {3, "c", {}, 3}};
    co_await pgqueue::in_transaction(pool, [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
      committed = co_await pgqueue::enqueue_json(q, tx, one, {.priority = 1});
      committed_batch = co_await pgqueue::enqueue_json_batch(q, tx, two);
    });
    try {
      co_await pgqueue::in_transaction(pool,
                                       [&](pgqueue::transaction& tx) -> asio::awaitable<void> {
                                         co_await pgqueue::enqueue_json(q, tx, one);
                                         co_await pgqueue::enqueue_json_batch(q, tx, two);
                                         throw std::runtime_error("roll back");
                                       });
    } catch (const std::runtime_error& e) {
      rolled_back = std::string(e.what()) == "roll back";
    }
    pool.close();
  });
  CHECK(rolled_back);
  session s(f.db.dsn());
  // Only the committed transaction's three jobs.
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 3);
  CHECK(read_job(s, committed).payload ==
        R"({"id": 1, "items": [], "total": 1.0, "customer": "a"})");
  CHECK(read_job(s, committed).priority == 1);
  REQUIRE(committed_batch.size() == 2);
  CHECK(read_job(s, committed_batch[1]).payload ==
        R"({"id": 3, "items": [], "total": 3.0, "customer": "c"})");
}

TEST_CASE("a value that does not convert to JSON is refused at the co_await, nothing sent",
          "[json_payload]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    const std::string not_utf8 = "\xff";
    // The call returns; the error comes at the co_await, like the queue's own.
    auto op = pgqueue::enqueue_json(q, not_utf8);
    auto e = co_await expect_error(std::move(op));
    CHECK(e.code() == pgqueue::errc::invalid_argument);
    CHECK(std::string(e.what()) ==
          "the value does not convert to JSON; nothing was sent: "
          "[json.exception.type_error.316] invalid UTF-8 byte at index 0: 0xFF");

    const unsendable bad;
    e = co_await expect_error(pgqueue::enqueue_json(q, bad));
    CHECK(e.code() == pgqueue::errc::invalid_argument);
    CHECK(std::string(e.what()) ==
          "the value does not convert to JSON; nothing was sent: cannot send this");

    const std::vector<std::string> batch{"fine", "\xc3"};
    e = co_await expect_error(pgqueue::enqueue_json_batch(q, batch));
    CHECK(e.code() == pgqueue::errc::invalid_argument);
    CHECK(std::string(e.what()) ==
          "value 1 of the batch does not convert to JSON; nothing was sent: "
          "[json.exception.type_error.316] incomplete UTF-8 string; last byte: 0xC3");
  });
  session s(f.db.dsn());
  CHECK(s.integer("SELECT count(*) FROM pgqueue.jobs") == 0);
}

TEST_CASE("a payload that does not convert throws conversion_failed naming job, type and reason",
          "[json_payload]") {
  queue_fixture f;
  session s(f.db.dsn());
  const auto wrong_type = s.integer(R"(SELECT pgqueue.enqueue('q', '{"id": "seven"}'))");
  const auto missing =
      s.integer(R"(SELECT pgqueue.enqueue('q', '{"id": 1, "items": [], "total": 0}'))");
  const auto negative = s.integer(R"(SELECT pgqueue.enqueue('q', '-4'))");
  std::vector<pgqueue::job> jobs;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    auto leases = co_await q.claim_batch(3);
    for (auto& l : leases) jobs.push_back(l.job());
    co_await pgqueue::ack_batch(leases);
  });
  REQUIRE(jobs.size() == 3);
  REQUIRE(jobs[0].id == wrong_type);
  REQUIRE(jobs[1].id == missing);
  REQUIRE(jobs[2].id == negative);

  auto e = read_error<order>(jobs[0]);
  CHECK(e.code() == pgqueue::pg::errc::conversion_failed);
  CHECK(std::string(e.what()) ==
        "job " + std::to_string(wrong_type) + ": the payload does not convert to " + order_type +
            ": [json.exception.type_error.302] type must be number, but is string");

  e = read_error<order>(jobs[1]);
  CHECK(e.code() == pgqueue::pg::errc::conversion_failed);
  CHECK(std::string(e.what()) ==
        "job " + std::to_string(missing) + ": the payload does not convert to " + order_type +
            ": [json.exception.out_of_range.403] key 'customer' not found");

  // A from_json's own exception, and a standard type.
  e = read_error<positive>(jobs[2]);
  CHECK(e.code() == pgqueue::pg::errc::conversion_failed);
  CHECK(std::string(e.what()) ==
        "job " + std::to_string(negative) +
            ": the payload does not convert to queue_json_payload_test::{anonymous}::positive: "
            "not positive: -4");
  CHECK(pgqueue::payload_as<int>(jobs[2]) == -4);
  e = read_error<std::string>(jobs[2]);
  CHECK(std::string(e.what()) == "job " + std::to_string(negative) +
                                     ": the payload does not convert to std::__cxx11::basic_string"
                                     "<char>: [json.exception.type_error.302] type must be "
                                     "string, but is number");

  // A job made by hand whose payload is not JSON at all.
  pgqueue::job by_hand;
  by_hand.id = 5;
  by_hand.payload = "{not json";
  e = read_error<nlohmann::json>(by_hand);
  CHECK(e.code() == pgqueue::pg::errc::conversion_failed);
  CHECK(std::string(e.what()) ==
        "job 5: the payload does not convert to nlohmann::json: "
        "[json.exception.parse_error.101] parse error at line 1, column 3: syntax error while "
        "parsing object key - invalid literal; last read: '{no'; expected string literal");
}

TEST_CASE("with_payload: a worker acks a job that converts and nacks one that does not",
          "[json_payload]") {
  queue_fixture f;
  session s(f.db.dsn());
  s.query("SELECT pgqueue.set_retry_backoff('q', '0', '0')");  // retried at once
  const order good{1, "a", {"x"}, 4.5};
  std::int64_t good_id = 0, bad_id = 0;
  std::vector<order> handled;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    good_id = co_await pgqueue::enqueue_json(q, good);
    bad_id = co_await q.enqueue(R"({"id": "seven"})", {.max_attempts = 3});
    pgqueue::worker w(
        q,
        pgqueue::with_payload<order>([&](const pgqueue::job& j, order o) -> asio::awaitable<void> {
          CHECK(j.id == good_id);
          handled.push_back(std::move(o));
          co_return;
        }),
        {.concurrency = 2});
    co_await (w.run() || until_states(f.db.dsn(), "done,dead"));
    stats = w.stats();
  });
  CHECK(handled == std::vector<order>{good});
  CHECK(stats.acked == 1);
  CHECK(stats.failed == 3);  // the bad payload at each of its attempts
  const auto ok = read_job(s, good_id);
  CHECK(ok.state == "done");
  CHECK(ok.attempts == 1);
  CHECK(ok.last_error == std::nullopt);
  const auto bad = read_job(s, bad_id);
  CHECK(bad.state == "dead");
  CHECK(bad.attempts == 3);
  CHECK(bad.last_error == "job " + std::to_string(bad_id) + ": the payload does not convert to " +
                              order_type +
                              ": [json.exception.type_error.302] type must be number, but is "
                              "string");
}

TEST_CASE("with_payload: a lease handler gets the lease and the payload", "[json_payload]") {
  queue_fixture f;
  std::vector<order> handled;
  std::int64_t id = 0;
  pgqueue::worker_stats stats;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    const order sent{2, "b", {}, 0};
    id = co_await pgqueue::enqueue_json(q, sent);
    pgqueue::worker w(q, pgqueue::with_payload<order>(
                             [&](pgqueue::lease& l, const order& o) -> asio::awaitable<void> {
                               handled.push_back(o);
                               co_await l.nack("handled by hand: " + o.customer);
                             }));
    co_await (w.run() || until_scalar(f.db.dsn(), "SELECT last_error FROM pgqueue.jobs",
                                      "handled by hand: b"));
    stats = w.stats();
  });
  CHECK(handled == std::vector<order>{{2, "b", {}, 0}});
  CHECK(stats.failed == 1);
  session s(f.db.dsn());
  const auto row = read_job(s, id);
  CHECK(row.state == "ready");  // retried after the back-off (a second at least)
  CHECK(row.attempts == 1);
  CHECK(row.last_error == "handled by hand: b");
}

TEST_CASE("with_payload: a transactional handler writes with the payload; a bad one rolls back",
          "[json_payload]") {
  queue_fixture f;
  session s(f.db.dsn());
  s.query("CREATE TABLE effects (job bigint PRIMARY KEY, customer text)");
  std::int64_t good_id = 0, bad_id = 0;
  pgqueue::worker_stats stats;
  int runs = 0;
  run_async([&]() -> asio::awaitable<void> {
    auto pool = co_await open_pool(f);
    auto q = co_await pgqueue::queue::open(pool, "q");
    const order good{3, "c", {}, 0};
    good_id = co_await pgqueue::enqueue_json(q, good);
    bad_id = co_await q.enqueue(R"({"id": 3})", {.max_attempts = 1});
    pgqueue::worker w(
        q,
        pgqueue::with_payload<order>(
            [&](const pgqueue::job& j, pgqueue::transaction& tx, order o) -> asio::awaitable<void> {
              ++runs;
              co_await tx.query("INSERT INTO effects VALUES ($1, $2)", {j.id, o.customer});
            }),
        {.concurrency = 2});
    co_await (w.run() || until_states(f.db.dsn(), "done,dead"));
    stats = w.stats();
    pool.close();
  });
  CHECK(runs == 1);
  CHECK(stats.acked == 1);
  CHECK(stats.failed == 1);
  CHECK(s.integer("SELECT count(*) FROM effects") == 1);
  CHECK(*s.scalar("SELECT customer FROM effects WHERE job = $1", {std::to_string(good_id)}) == "c");
  const auto bad = read_job(s, bad_id);
  CHECK(bad.state == "dead");
  CHECK(bad.attempts == 1);
  CHECK(bad.last_error == "job " + std::to_string(bad_id) + ": the payload does not convert to " +
                              order_type +
                              ": [json.exception.out_of_range.403] key 'customer' "
                              "not found");
}

TEST_CASE("the README's typed payloads: a worker sends the e-mail and kills a bad payload",
          "[json_payload][docs]") {
  queue_fixture f;
  session s(f.db.dsn());
  const auto bad = s.integer(
      R"(SELECT pgqueue.enqueue('emails', '{"to": "x@example.com"}', p_max_attempts => 1))");
  emailed = {};
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "emails"};
    co_await (welcome(q) || until_states(f.db.dsn(), "dead,done"));
  });
  CHECK(emailed == std::vector<std::pair<std::string, std::string>>{{"a@example.com", "Welcome"}});
  CHECK(*s.scalar("SELECT payload::text FROM pgqueue.jobs WHERE state = 'done'") ==
        R"({"to": "a@example.com", "subject": "Welcome"})");
  const auto row = read_job(s, bad);
  CHECK(row.state == "dead");
  CHECK(row.attempts == 1);
  CHECK(row.last_error == "job " + std::to_string(bad) +
                              ": the payload does not convert to queue_json_payload_test::"
                              "{anonymous}::email: [json.exception.out_of_range.403] key "
                              "'subject' not found");
}

TEST_CASE("the C++ API page's typed tour runs", "[json_payload][docs]") {
  queue_fixture f;
  run_async([&]() -> asio::awaitable<void> {
    auto pool = co_await open_pool(f);
    auto q = co_await pgqueue::queue::open(pool, "q");
    co_await typed_tour(pool, q);
    pool.close();
  });
  session s(f.db.dsn());
  CHECK(*s.scalar("SELECT string_agg(state, ',' ORDER BY id) FROM pgqueue.jobs") ==
        "ready,ready,ready");
  CHECK(read_job(s, 1).payload == R"({"to": "a@example.com", "subject": "Hi"})");
  CHECK(read_job(s, 2).payload == R"({"to": "b@example.com", "subject": "Hi"})");
  const auto note = read_job(s, 3);
  CHECK(note.payload == R"({"to": "c@example.com"})");
  CHECK(note.priority == 1);
  CHECK(note.attempts == 1);
  CHECK(note.last_error ==
        "job 3: the payload does not convert to queue_json_payload_test::{anonymous}::email: "
        "[json.exception.out_of_range.403] key 'subject' not found");
}

}  // namespace queue_json_payload_test
