// pgqueue::as_tuple: failures as values (lease_lost, a server error, a cancel), results as
// before, anything that is not a std::system_error still thrown.
#include <stdexcept>

#include <pgqueue/as_tuple.hpp>
#include <pgqueue/pgqueue.hpp>

#include "support/async.hpp"
#include "support/queue_fixture.hpp"
#include "support/session.hpp"
#include "support/sql_api.hpp"

namespace queue_as_tuple_test {

using namespace pgq_test;
using namespace std::chrono_literals;

asio::awaitable<int> throws_runtime_error() {
  co_await hops(1);
  throw std::runtime_error("not a system_error");
}

// docs/cpp-api.md, "Errors as values": acks `l`, then takes the next job unless `l` was lost.
asio::awaitable<std::optional<pgqueue::lease>> ack_then_next(pgqueue::queue& q, pgqueue::lease& l) {
  auto [ec] = co_await pgqueue::as_tuple(l.ack());
  if (ec == pgqueue::errc::lease_lost) co_return std::nullopt;  // someone else holds the job now
  auto [claim_ec, next] = co_await pgqueue::as_tuple(q.try_claim());
  if (claim_ec) throw std::system_error(claim_ec);
  co_return std::move(next);
}

TEST_CASE("as_tuple: the docs' example goes on after an ack and stops after a lost lease",
          "[as_tuple]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 120s, .heartbeat_interval = 60s}};
    const auto first = co_await q.enqueue("{}");
    const auto second = co_await q.enqueue("{}");
    const auto third = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    auto next = co_await ack_then_next(q, l);
    REQUIRE(next.has_value());
    CHECK(next->job().id == second);
    CHECK(take_back(admin, second) == 1);  // lost: the janitor took it back
    auto after_lost = co_await ack_then_next(q, *next);
    CHECK_FALSE(after_lost.has_value());
    CHECK(read_job(admin, first).state == "done");
    CHECK(read_job(admin, third).state == "ready");
  });
}

TEST_CASE("as_tuple: results come back with an empty error code", "[as_tuple]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t id = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    auto [enqueue_ec, enqueued] = co_await pgqueue::as_tuple(q.enqueue(R"({"n": 1})"));
    CHECK_FALSE(enqueue_ec);
    id = enqueued;
    auto [claim_ec, l] = co_await pgqueue::as_tuple(q.claim());  // lease: as an optional
    CHECK_FALSE(claim_ec);
    REQUIRE(l.has_value());
    CHECK(l->job().id == id);
    auto [empty_ec, none] = co_await pgqueue::as_tuple(q.try_claim());
    CHECK_FALSE(empty_ec);
    CHECK_FALSE(none.has_value());
    auto [ack_ec] = co_await pgqueue::as_tuple(l->ack());
    CHECK_FALSE(ack_ec);
  });
  auto j = read_job(admin, id);
  CHECK(j.state == "done");
  CHECK(j.attempts == 1);
}

TEST_CASE("as_tuple: a lost lease is errc::lease_lost, and nothing changes", "[as_tuple]") {
  queue_fixture f;
  session admin(f.db.dsn());
  std::int64_t id = 0;
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q", {.lease = 120s, .heartbeat_interval = 60s}};
    pgqueue::queue rival{co_await f.connect(), "q", {.worker_id = "rival"}};
    id = co_await q.enqueue("{}");
    auto l = co_await q.claim();
    CHECK(take_back(admin, id) == 1);
    auto taken = co_await rival.claim();
    auto [ack_ec] = co_await pgqueue::as_tuple(l.ack());
    CHECK(ack_ec == pgqueue::errc::lease_lost);
    auto [nack_ec] = co_await pgqueue::as_tuple(l.release());  // finished by the refused ack
    CHECK(nack_ec == pgqueue::errc::lease_finished);
    auto j = read_job(admin, id);
    CHECK(j.state == "claimed");
    CHECK(*j.claimed_by == "rival");
    co_await taken.ack();
  });
  CHECK(read_job(admin, id).state == "done");
}

TEST_CASE("as_tuple: a server error is its code; the exception form keeps the SQLSTATE",
          "[as_tuple]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    auto [ec, id] = co_await pgqueue::as_tuple(q.enqueue("{not json"));
    CHECK(ec == pgqueue::pg::errc::server_error);
    CHECK(id == 0);
    std::string sqlstate;
    try {
      co_await q.enqueue("{not json");
    } catch (const pgqueue::error& e) {
      sqlstate = e.sqlstate();
    }
    CHECK(sqlstate == "22P02");
  });
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs") == 0);
}

TEST_CASE("as_tuple: a cancelled claim is operation_aborted and strands no job", "[as_tuple]") {
  queue_fixture f;
  session admin(f.db.dsn());
  run_async([&]() -> asio::awaitable<void> {
    pgqueue::queue q{co_await f.connect(), "q"};
    std::error_code seen;
    bool claimed = false;
    auto waiting = [&]() -> asio::awaitable<void> {
      auto [ec, l] = co_await pgqueue::as_tuple(q.claim());  // an empty queue: waits
      seen = ec;
      claimed = l.has_value();
    };
    auto failure = co_await cancelled_by(waiting(), hops(20), asio::cancellation_type::terminal);
    CHECK_FALSE(failure);
    CHECK(seen == asio::error::operation_aborted);
    CHECK_FALSE(claimed);
  });
  CHECK(admin.integer("SELECT count(*) FROM pgqueue.jobs WHERE state = 'claimed'") == 0);
}

TEST_CASE("as_tuple: an exception that is not a system_error still propagates", "[as_tuple]") {
  bool caught = false;
  run_async([&]() -> asio::awaitable<void> {
    try {
      auto result = co_await pgqueue::as_tuple(throws_runtime_error());
      (void)result;
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "not a system_error";
    }
  });
  CHECK(caught);
}

}  // namespace queue_as_tuple_test
