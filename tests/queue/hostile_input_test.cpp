// Hostile input to every public C++ entry point: each bad value gets a clear error (the exact
// error code or SQLSTATE), nothing in pgqueue.jobs changes, and the connection stays usable.
// Values that are odd but valid (quotes and semicolons in names, extreme priorities, array
// syntax in keys) must round-trip exactly. Queue, worker and connect options are checked in
// hostile_options_test.cpp.
#include <climits>
#include <functional>
#include <random>

#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/role.hpp"
#include "support/server.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace queue_hostile_input_test {

using namespace pgq_test;
using namespace std::chrono_literals;

namespace {

// What a refused call must fail with: a client-side error code, or a server SQLSTATE.
struct expected {
  std::error_code code;
  std::string sqlstate;  // empty for client-side errors
};

expected client(pgqueue::errc e) {
  return {e, ""};
}
expected client(pgqueue::pg::errc e) {
  return {e, ""};
}
expected server(std::string sqlstate) {
  return {pgqueue::pg::errc::server_error, std::move(sqlstate)};
}

struct hostile_call {
  std::string what;
  std::function<asio::awaitable<void>(pgqueue::database&)> call;
  expected fails_with;
};

// Runs every call against one database: each must throw exactly what it says, leave the jobs
// table as it was, and leave the connection usable.
void check_refused(const std::vector<hostile_call>& calls) {
  scratch_database db;
  session s(db.dsn());
  enqueue(s, "q");
  enqueue(s, "q", "{}", std::string("k"));
  claim(s, "q", "other-worker");
  const auto before = jobs_digest(s);
  for (const auto& c : calls) {
    INFO(c.what);
    auto outcome = run_async([&]() -> asio::awaitable<std::optional<pgqueue::error>> {
      auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
      std::optional<pgqueue::error> failure;
      try {
        co_await c.call(conn);
      } catch (const pgqueue::error& e) {
        failure = e;
      }
      // The same connection still answers.
      auto r = co_await conn.query("SELECT 42");
      CHECK(r.get<int>(0, 0) == 42);
      co_return failure;
    });
    REQUIRE(outcome);
    CHECK(outcome->code() == c.fails_with.code);
    CHECK(outcome->sqlstate() == c.fails_with.sqlstate);
    // A refusal explains itself briefly: a 10 MB value is not echoed back.
    CHECK(std::string_view(outcome->what()).size() < 4096);
    CHECK(jobs_digest(s) == before);
  }
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, ' ');
  for (auto& c : s) c = static_cast<char>('!' + rng() % 90);
  return s;
}

const std::string ten_mb_invalid =
    "{\"k\": " + std::string(10 << 20, 'x') + "}";  // a 10 MB bad token
const std::string nul_text = std::string("a\0b", 3);
const std::string bad_utf8 = "caf\xc3\x28";  // a broken two-byte sequence

}  // namespace

TEST_CASE("hostile payloads are refused with their SQLSTATE", "[hostile]") {
  using q = pgqueue::queue;
  check_refused({
      {"empty payload", [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").enqueue(""); },
       server("22P02")},
      {"10 MB of invalid JSON",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").enqueue(ten_mb_invalid); },
       server("22P02")},
      {"JSON with \\u0000 (jsonb cannot hold it)",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").enqueue(R"({"a": "\u0000"})"); },
       server("22P05")},
      {"payload with a NUL byte",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("\"" + nul_text + "\"");
       },
       client(pgqueue::pg::errc::invalid_argument)},
      {"payload with invalid UTF-8",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("\"" + bad_utf8 + "\"");
       },
       server("22021")},
      {"a batch with one invalid payload adds none",
       [](auto& db) -> asio::awaitable<void> {
         std::vector<std::string> p{"{}", "{}", "{oops"};
         co_await q(db, "q").enqueue_batch(std::move(p));
       },
       server("22P02")},
      {"a batch with a NUL byte",
       [](auto& db) -> asio::awaitable<void> {
         std::vector<std::string> p{"{}", "\"" + nul_text + "\""};
         co_await q(db, "q").enqueue_batch(std::move(p));
       },
       client(pgqueue::pg::errc::invalid_argument)},
  });
}

TEST_CASE("hostile queue names are refused; odd but valid ones are just names", "[hostile]") {
  using q = pgqueue::queue;
  check_refused({
      {"empty name", [](auto& db) -> asio::awaitable<void> { co_await q(db, "").enqueue("{}"); },
       server("22023")},
      {"10 kB name",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, std::string(10240, 'n')).enqueue("{}");
       },
       server("22023")},
      {"256-byte name",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, std::string(256, 'n')).enqueue("{}");
       },
       server("22023")},
      {"name with a NUL byte",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, nul_text).enqueue("{}"); },
       client(pgqueue::pg::errc::invalid_argument)},
      {"name with a newline",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "a\nb").enqueue("{}"); },
       server("22023")},
      {"name with invalid UTF-8",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, bad_utf8).enqueue("{}"); },
       server("22021")},
      {"claim on a 10 kB name",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, std::string(10240, 'n')).try_claim();
       },
       server("22023")},
      {"waiting claim on a bad name",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "").claim(); }, server("22023")},
      {"watch on a bad name",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "tab\there").watch(); },
       server("22023")},
  });

  scratch_database db;
  session s(db.dsn());
  const std::vector<std::string> names = {"q'; DROP TABLE pgqueue.jobs; --",
                                          "\"quoted\"",
                                          "back\\slash",
                                          "ünïcødé ✓",
                                          std::string(255, 'x'),
                                          "$1",
                                          "%s%n"};
  auto ids = run_async([&]() -> asio::awaitable<std::vector<std::int64_t>> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    std::vector<std::int64_t> out;
    for (const auto& n : names) {
      pgqueue::queue q(conn, n);
      out.push_back(co_await q.enqueue("{}"));
      auto l = co_await q.try_claim();
      REQUIRE(l);
      CHECK(l->job().queue == n);
      co_await l->ack();
    }
    co_return out;
  });
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(read_job(s, ids[i]).queue == names[i]);
  CHECK(count_jobs(s, "done") == static_cast<std::int64_t>(names.size()));
}

TEST_CASE("hostile options are refused before or by the server", "[hostile]") {
  using q = pgqueue::queue;
  check_refused({
      {"max_attempts 0",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("{}", {.max_attempts = 0});
       },
       server("22023")},
      {"max_attempts INT_MIN",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("{}", {.max_attempts = INT_MIN});
       },
       server("22023")},
      {"idempotency key with a NUL byte",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("{}", {.idempotency_key = nul_text});
       },
       client(pgqueue::pg::errc::invalid_argument)},
      {"a 256-byte idempotency key",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("{}", {.idempotency_key = std::string(256, 'k')});
       },
       client(pgqueue::errc::invalid_argument)},
      {"a compressible 20 kB idempotency key (the server's index would take it)",
       [](auto& db) -> asio::awaitable<void> {
         co_await q(db, "q").enqueue("{}", {.idempotency_key = std::string(20480, 'k')});
       },
       client(pgqueue::errc::invalid_argument)},
      {"an incompressible 10 kB idempotency key (the server's index would refuse it)",
       [](auto& db) -> asio::awaitable<void> {
         const auto key = random_bytes(10240, 1);
         co_await q(db, "q").enqueue("{}", {.idempotency_key = key});
       },
       client(pgqueue::errc::invalid_argument)},
      {"a batch with one 256-byte key adds none",
       [](auto& db) -> asio::awaitable<void> {
         std::vector<std::string> p{"{}", "{}"};
         std::vector<std::optional<std::string>> k{"a", std::string(256, 'k')};
         co_await q(db, "q").enqueue_batch(std::move(p), {}, std::move(k));
       },
       client(pgqueue::errc::invalid_argument)},
      {"batch with idempotency_key instead of keys",
       [](auto& db) -> asio::awaitable<void> {
         std::vector<std::string> p{"{}"};
         co_await q(db, "q").enqueue_batch(std::move(p), {.idempotency_key = "k"});
       },
       client(pgqueue::errc::invalid_argument)},
      {"batch with fewer keys than payloads",
       [](auto& db) -> asio::awaitable<void> {
         std::vector<std::string> p{"{}", "{}"};
         std::vector<std::optional<std::string>> k{"a"};
         co_await q(db, "q").enqueue_batch(std::move(p), {}, std::move(k));
       },
       client(pgqueue::errc::invalid_argument)},
      {"claim batch of 0",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").try_claim_batch(0); },
       client(pgqueue::errc::invalid_argument)},
      {"claim batch of -1",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").try_claim_batch(-1); },
       client(pgqueue::errc::invalid_argument)},
      {"claim batch of INT_MAX",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").try_claim_batch(INT_MAX); },
       client(pgqueue::errc::invalid_argument)},
      {"waiting claim batch of 0",
       [](auto& db) -> asio::awaitable<void> { co_await q(db, "q").claim_batch(0); },
       client(pgqueue::errc::invalid_argument)},
  });
}

TEST_CASE("hostile nack arguments are refused and leave the lease usable", "[hostile]") {
  scratch_database db;
  session s(db.dsn());
  auto first = enqueue(s, "mine");
  auto second = enqueue(s, "mine");
  auto refused = run_async([&]() -> asio::awaitable<std::vector<pgqueue::error>> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    pgqueue::queue q(conn, "mine", {.worker_id = "hostile"});
    auto held = co_await q.try_claim_batch(2);
    REQUIRE(held.size() == 2);
    std::vector<pgqueue::error> out;
    // Refused before anything is sent: the lease is still ours and usable.
    const std::vector<std::pair<std::string, std::optional<std::chrono::milliseconds>>> bad = {
        {nul_text, std::nullopt},
        {"negative delay", -1ms},
        {"INT64_MAX delay", std::chrono::milliseconds::max()},
        {"past system_clock", std::chrono::hours(24 * 365 * 300)}};
    for (const auto& [reason, delay] : bad) {
      try {
        co_await held[0].nack(reason, delay);
      } catch (const pgqueue::error& e) {
        out.push_back(e);
      }
    }
    CHECK_FALSE(held[0].finished());
    auto r = co_await conn.query("SELECT 42");
    CHECK(r.get<int>(0, 0) == 42);
    // A 10 kB reason is kept, cut to 2000 characters.
    auto outcome = co_await held[0].nack(std::string(10240, 'r'), 1h);
    CHECK(outcome == pgqueue::nack_result::requeued);
    // Invalid UTF-8 (the server would refuse it with 22021) is stored as '?': the job is
    // requeued now rather than left claimed until its lease expires.
    const auto cleaned_outcome = co_await held[1].nack(bad_utf8, 1h);
    CHECK(cleaned_outcome == pgqueue::nack_result::requeued);
    try {
      co_await held[1].ack();
    } catch (const pgqueue::error& e) {
      out.push_back(e);
    }
    r = co_await conn.query("SELECT 42");
    CHECK(r.get<int>(0, 0) == 42);
    co_return out;
  });
  REQUIRE(refused.size() == 5);
  for (int i = 0; i < 4; ++i) CHECK(refused[i].code() == pgqueue::errc::invalid_argument);
  CHECK(refused[4].code() == pgqueue::errc::lease_finished);
  auto job = read_job(s, first);
  CHECK(job.state == "ready");
  CHECK(job.attempts == 1);
  CHECK(job.last_error->size() == 2000);
  auto cleaned = read_job(s, second);
  CHECK(cleaned.state == "ready");
  CHECK(cleaned.attempts == 1);
  CHECK(cleaned.last_error == "caf?(");
}

TEST_CASE("extreme but valid values round-trip exactly", "[hostile]") {
  scratch_database db;
  session s(db.dsn());
  const std::string longest_key(pgqueue::enqueue_options::max_idempotency_key_bytes, 'k');
  const std::vector<std::optional<std::string>> keys = {
      "NULL", "a,b", "{x}", "\"q\"", "back\\slash", " spaced ", "", std::nullopt, "ü", longest_key};
  auto ids = run_async([&]() -> asio::awaitable<std::vector<std::int64_t>> {
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, db.dsn());
    pgqueue::queue q(conn, "q");
    std::vector<std::int64_t> out;
    out.push_back(co_await q.enqueue("{}", {.priority = INT_MAX}));
    out.push_back(co_await q.enqueue("{}", {.priority = INT_MIN}));
    out.push_back(co_await q.enqueue("{}", {.max_attempts = INT_MAX}));
    out.push_back(
        co_await q.enqueue("{}", {.run_after = std::chrono::system_clock::time_point::max()}));
    // A 10 MB payload is fine (jsonb holds up to 255 MB).
    const std::string big = "\"" + std::string(10 << 20, 'p') + "\"";
    out.push_back(co_await q.enqueue(big));
    std::vector<std::string> payloads(keys.size(), "{}");
    auto batch = co_await q.enqueue_batch(std::move(payloads), {}, keys);
    out.insert(out.end(), batch.begin(), batch.end());
    co_return out;
  });
  REQUIRE(ids.size() == 5 + keys.size());
  CHECK(read_job(s, ids[0]).priority == INT_MAX);
  CHECK(read_job(s, ids[1]).priority == INT_MIN);
  CHECK(read_job(s, ids[2]).max_attempts == INT_MAX);
  CHECK_FALSE(read_job(s, ids[3]).due);
  CHECK(read_job(s, ids[4]).payload.size() == (10u << 20) + 2);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO(i);
    CHECK(read_job(s, ids[5 + i]).idempotency_key == keys[i]);
  }
}

TEST_CASE("hostile conninfo strings fail to connect with connect_failed", "[hostile]") {
  const std::vector<std::string> conninfos = {"host=/nonexistent dbname='unterminated",
                                              "nosuchkey=1",
                                              "postgresql://[::1",
                                              std::string(10240, '='),
                                              nul_text,
                                              "host=/nonexistent port=99999999999",
                                              "sslmode=bogus"};
  for (const auto& conninfo : conninfos) {
    INFO(conninfo.substr(0, 40));
    auto e = run_async([&]() -> asio::awaitable<std::optional<pgqueue::error>> {
      try {
        co_await pgqueue::connect(co_await asio::this_coro::executor, conninfo);
      } catch (const pgqueue::error& e) {
        co_return e;
      }
      co_return std::nullopt;
    });
    REQUIRE(e);
    if (conninfo == nul_text) {
      CHECK(e->code() == pgqueue::pg::errc::invalid_argument);
    } else {
      CHECK(e->code() == pgqueue::pg::errc::connect_failed);
    }
    CHECK(std::string_view(e->what()).size() < 4096);
  }
}

TEST_CASE("migrate refuses a role that does not own the schema, and a closed handle", "[hostile]") {
  scratch_database db;
  scoped_role stranger(db.dsn(), "stranger");
  session s(db.dsn());
  enqueue(s, "q");
  const auto before = jobs_digest(s);
  const auto dsn = stranger.dsn();
  auto errors = run_async([&]() -> asio::awaitable<std::vector<pgqueue::error>> {
    std::vector<pgqueue::error> out;
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
    try {
      co_await pgqueue::migrate(conn);
    } catch (const pgqueue::error& e) {
      out.push_back(e);
    }
    auto r = co_await conn.query("SELECT 42");
    CHECK(r.get<int>(0, 0) == 42);
    conn.close();
    try {
      co_await pgqueue::migrate(conn);
    } catch (const pgqueue::error& e) {
      out.push_back(e);
    }
    co_return out;
  });
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].sqlstate() == "42501");
  CHECK(errors[1].code() == pgqueue::pg::errc::closed);
  CHECK(jobs_digest(s) == before);
}

TEST_CASE("migrate cancelled while its script waits returns at once", "[hostile][cancel]") {
  // (It waited for the script to end before returning: 3.7 s behind an upgrade's lock.)
  scratch_database db;
  session holder(db.dsn());
  session watcher(db.dsn());
  holder.query("SELECT pg_advisory_lock(8100266002545501541)");  // another install, running
  const auto dsn = db.dsn();
  run_async([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
    auto cancel_once_waiting = [&]() -> asio::awaitable<void> {
      while (!waits_on_lock(watcher, conn.backend_pid())) co_await pause(5ms);
    };
    auto r = co_await (pgqueue::migrate(conn) || cancel_once_waiting());
    CHECK(r.index() == 1);
    CHECK(waits_on_lock(watcher, conn.backend_pid()));  // returned while the script still waits
    holder.query("SELECT pg_advisory_unlock(8100266002545501541)");
    auto one = co_await conn.query("SELECT 1");  // behind the script: usable again
    CHECK(one.get<int>(0, 0) == 1);
    CHECK_FALSE(conn.in_transaction());
  });
}

TEST_CASE("migrate cancelled at any step leaves a refused role's connection usable",
          "[hostile][cancel]") {
  scratch_database db;
  scoped_role stranger(db.dsn(), "stranger");
  const auto dsn = stranger.dsn();
  int cancelled = 0;
  for (int step = 0; step < 40; ++step) {
    run_async([&]() -> asio::awaitable<void> {
      using namespace asio::experimental::awaitable_operators;
      auto conn = co_await pgqueue::connect(co_await asio::this_coro::executor, dsn);
      // Cancelled after `step` executor hops, or (later steps) after a delay.
      auto trigger = [&]() -> asio::awaitable<void> {
        co_await hops(std::min(step, 20));
        if (step > 20) co_await pause(std::chrono::milliseconds(step - 20));
      };
      try {
        auto r = co_await (pgqueue::migrate(conn) || trigger());
        if (r.index() == 1) ++cancelled;
      } catch (const pgqueue::error& e) {
        CHECK(e.sqlstate() == "42501");  // refused before the cancel came
      }
      auto r = co_await conn.query("SELECT 42");
      CHECK(r.get<int>(0, 0) == 42);
    });
  }
  CHECK(cancelled > 0);
}

}  // namespace queue_hostile_input_test
