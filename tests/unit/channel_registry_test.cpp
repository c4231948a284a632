// pg::detail::channel_registry and subscription_state: which channels a connection LISTENs to
// and what each subscription receives, driven by scripted events (LISTEN answers, cancels,
// notifications, a reconnect, a refused re-LISTEN) on an io_context without a server.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <pgqueue/pg/detail/channel_registry.hpp>

#include "scripted_operation.hpp"

namespace unit_channel_registry_test {

using namespace pgqueue::pg;
using detail::channel_registry;
using detail::subscription_state;

namespace {

// A waiter on a subscription, and what it completed with once the io_context ran.
struct waiter {
  std::optional<notification> got;
  std::exception_ptr error;
  bool completed = false;
  std::shared_ptr<detail::operation<notification>> op;

  explicit waiter(asio::io_context& io) {
    op = unit_support::scripted_operation<notification>(
        io, [this](std::exception_ptr e, notification n) {
          completed = true;
          error = e;
          if (!e) got = std::move(n);
        });
  }
};

// A subscription to `channel` whose LISTEN went through.
std::shared_ptr<subscription_state> subscribed(channel_registry& r, const std::string& channel) {
  auto s = std::make_shared<subscription_state>(channel);
  r.begin_listen(channel);
  r.end_listen(channel, s);
  return s;
}

notification note(const std::string& channel, const std::string& payload) {
  return notification{channel, payload, 42, false};
}

}  // namespace

TEST_CASE("a LISTEN whose caller gave up before the answer asks for an UNLISTEN",
          "[channel_registry]") {
  channel_registry r;
  r.begin_listen("c");
  CHECK(r.channels() == std::vector<std::string>{"c"});  // re-LISTENed if the session drops now
  CHECK(r.end_listen("c", nullptr));
  CHECK(r.channels().empty());
}

TEST_CASE("a channel stays LISTENed while a subscription or a LISTEN in flight wants it",
          "[channel_registry]") {
  channel_registry r;
  auto a = std::make_shared<subscription_state>("c");
  auto b = std::make_shared<subscription_state>("c");
  r.begin_listen("c");
  CHECK_FALSE(r.end_listen("c", a));
  r.begin_listen("c");       // a second subscriber's LISTEN is on its way
  CHECK_FALSE(r.remove(a));  // the first leaves: the LISTEN in flight still wants the channel
  CHECK_FALSE(r.end_listen("c", b));
  CHECK(r.remove(b));        // the last interest: UNLISTEN
  CHECK_FALSE(r.remove(b));  // removing twice asks nothing more
  CHECK(r.channels().empty());
}

TEST_CASE("notifications reach their channel's subscriptions in order; a reconnect marks them",
          "[channel_registry]") {
  asio::io_context io;
  channel_registry r;
  auto a = subscribed(r, "a");
  auto b = subscribed(r, "b");
  r.dispatch(note("a", "1"));
  r.dispatch(note("a", "2"));
  r.dispatch(note("nobody", "x"));
  CHECK(a->received() == 2);
  CHECK(b->received() == 0);

  waiter first(io), second(io), marker(io);
  a->wait(first.op);
  a->wait(second.op);
  r.resynced("a");  // LISTENed again on a new session
  a->wait(marker.op);
  io.poll();
  REQUIRE(first.got);
  CHECK(first.got->payload == "1");
  REQUIRE(second.got);
  CHECK(second.got->payload == "2");
  REQUIRE(marker.got);
  CHECK(marker.got->reconnected);
  CHECK(marker.got->channel == "a");
}

TEST_CASE("a waiter may skip what it has already accounted for", "[channel_registry]") {
  asio::io_context io;
  auto s = std::make_shared<subscription_state>("c");
  s->deliver(note("c", "stale"));
  const auto seen = s->received();
  s->deliver(note("c", "news"));
  waiter w(io);
  s->wait(w.op, seen);
  io.poll();
  REQUIRE(w.got);
  CHECK(w.got->payload == "news");
}

TEST_CASE("a cancelled waiter gets nothing, and the notification waits for the next one",
          "[channel_registry]") {
  asio::io_context io;
  auto s = std::make_shared<subscription_state>("c");
  waiter cancelled(io), next(io);
  s->wait(cancelled.op);
  cancelled.op->cancel();
  s->deliver(note("c", "kept"));
  s->wait(next.op);
  io.poll();
  CHECK(cancelled.completed);
  CHECK(cancelled.error);
  CHECK_FALSE(cancelled.got);
  REQUIRE(next.got);
  CHECK(next.got->payload == "kept");
}

TEST_CASE("a full buffer keeps the newest notifications and counts the dropped",
          "[channel_registry]") {
  asio::io_context io;
  auto s = std::make_shared<subscription_state>("c", 2);
  for (const char* p : {"1", "2", "3"}) s->deliver(note("c", p));
  CHECK(s->dropped() == 1);
  CHECK(s->received() == 3);
  waiter w(io);
  s->wait(w.op);
  io.poll();
  REQUIRE(w.got);
  CHECK(w.got->payload == "2");
}

TEST_CASE("a refused re-LISTEN ends only that channel's subscriptions, waiting or not",
          "[channel_registry]") {
  asio::io_context io;
  channel_registry r;
  auto a = subscribed(r, "a");
  auto b = subscribed(r, "b");
  waiter waiting(io);
  a->wait(waiting.op);
  r.fail_channel("a", std::make_exception_ptr(std::runtime_error("permission denied")));
  waiter later(io);
  a->wait(later.op);
  io.poll();
  CHECK(waiting.error);
  CHECK(later.error);
  CHECK(r.channels() == std::vector<std::string>{"b"});

  r.fail_all(std::make_exception_ptr(std::runtime_error("closed")));
  waiter on_b(io);
  b->wait(on_b.op);
  io.restart();  // the first poll ran out of work, which stops the io_context
  io.poll();
  CHECK(on_b.error);
  CHECK(r.channels().empty());
}

}  // namespace unit_channel_registry_test
