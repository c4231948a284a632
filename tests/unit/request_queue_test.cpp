// pg::detail::request_queue: what may be sent, which request an answer belongs to, and what a
// cancel, a dropped session, a new session or a wait that ran out does to each request, driven
// by scripted events without a server.
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <pgqueue/pg/detail/request_queue.hpp>

#include "scripted_operation.hpp"

namespace unit_request_queue_test {

using namespace pgqueue::pg;
using detail::request;
using detail::request_queue;
using namespace std::chrono_literals;

namespace {

// What happened to each scripted request.
struct outcome {
  bool finished = false;     // its hook ran
  bool abandoned = false;    // ... with the caller gone
  std::string error;         // the failure it finished with, if any
  bool caller_told = false;  // its caller's handler ran (after the io_context polled)
};

struct script {
  asio::io_context io;
  request_queue q;
  std::vector<std::unique_ptr<outcome>> outcomes;

  // A request whose caller waits; returns its outcome and (through `op`) its operation.
  outcome& push(const std::string& sql, std::shared_ptr<detail::operation<result>>* op = nullptr,
                request::kind kind = request::kind::statement) {
    outcomes.push_back(std::make_unique<outcome>());
    outcome& o = *outcomes.back();
    auto r = std::make_unique<request>();
    r->type = kind;
    r->sql = sql;
    r->op = unit_support::scripted_operation<result>(
        io, [&o](std::exception_ptr, result) { o.caller_told = true; });
    r->on_finish = [&o](const std::exception_ptr& e, bool abandoned) {
      o.finished = true;
      o.abandoned = abandoned;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          o.error = x.what();
        }
      }
    };
    if (op) *op = r->op;
    q.push(std::move(r));
    return o;
  }

  std::string next(bool script_running = false) {
    request* r = q.next_to_send(script_running);
    return r ? r->sql : "";
  }
  // Sends the next request; returns its text.
  std::string send() {
    auto sql = next();
    q.sent();
    return sql;
  }
};

std::exception_ptr error(const char* what) {
  return std::make_exception_ptr(std::runtime_error(what));
}

}  // namespace

TEST_CASE("requests go out in order and answers complete the oldest sent", "[request_queue]") {
  script s;
  s.push("a");
  s.push("b");
  s.push("c");
  CHECK(s.q.idle());
  CHECK(s.send() == "a");
  CHECK(s.send() == "b");
  CHECK_FALSE(s.q.idle());
  REQUIRE(s.q.answering());
  CHECK(s.q.answering()->sql == "a");
  CHECK(s.q.answered()->sql == "a");
  CHECK(s.q.answering()->sql == "b");
  CHECK(s.next() == "c");
}

TEST_CASE("a script waits for an idle pipeline, and nothing is sent while it runs",
          "[request_queue]") {
  script s;
  s.push("first");
  s.push("script", nullptr, request::kind::script);
  s.push("after");
  CHECK(s.send() == "first");
  CHECK(s.next() == "");  // the script waits for the first answer
  s.q.answered();
  CHECK(s.send() == "script");
  CHECK(s.next(true) == "");  // the script runs
  s.q.answered();
  CHECK(s.next() == "after");
}

TEST_CASE("a request cancelled before it was sent is finished without being sent",
          "[request_queue]") {
  script s;
  std::shared_ptr<detail::operation<result>> op;
  outcome& cancelled = s.push("cancelled", &op);
  s.push("kept");
  op->cancel();
  CHECK(s.next() == "kept");
  CHECK(cancelled.finished);
  CHECK(cancelled.abandoned);
}

TEST_CASE("a request cancelled after it was sent keeps its place until its answer is read",
          "[request_queue]") {
  script s;
  std::shared_ptr<detail::operation<result>> op;
  s.push("sent", &op);
  s.push("next");
  CHECK(s.send() == "sent");
  op->cancel();
  REQUIRE(s.q.answering());
  CHECK(s.q.answering()->sql == "sent");  // the server still answers it: the pipeline stays in step
  auto done = s.q.answered();
  done->finish();
  CHECK(s.outcomes[0]->abandoned);
  CHECK(s.next() == "next");
}

TEST_CASE("a drop fails what was sent; the unsent wait for a new session until their deadline",
          "[request_queue]") {
  script s;
  outcome& sent = s.push("sent");
  outcome& waiting = s.push("waiting");
  s.send();
  const auto deadline = request_queue::clock::now() + 10s;
  s.q.drop(error("connection lost"), deadline, error("closed"));
  CHECK(sent.error == "connection lost");
  CHECK_FALSE(waiting.finished);
  CHECK(s.q.idle());
  REQUIRE(s.q.earliest_deadline());
  CHECK(*s.q.earliest_deadline() == deadline);
  auto why = [] { return error("not re-established"); };
  CHECK(s.q.expire(deadline - 1ms, why) == 0);
  CHECK_FALSE(waiting.finished);
  CHECK(s.q.expire(deadline, why) == 1);
  CHECK(waiting.error == "not re-established");
  CHECK_FALSE(s.q.earliest_deadline());
  s.io.poll();
  CHECK(sent.caller_told);
  CHECK(waiting.caller_told);
}

TEST_CASE("a new session's set-up goes before the requests that waited", "[request_queue]") {
  script s;
  s.push("waited");
  s.q.drop(error("connection lost"), request_queue::clock::now() + 10s, error("closed"));
  std::deque<detail::request_ptr> setup;
  setup.push_back(std::make_unique<request>());
  setup.back()->sql = "LISTEN c";
  s.q.new_session(std::move(setup));
  CHECK(s.send() == "LISTEN c");
  CHECK(s.send() == "waited");
}

TEST_CASE("a drop that ends the connection fails every request, also those hooks add meanwhile",
          "[request_queue]") {
  script s;
  outcome& sent = s.push("sent");
  outcome& unsent = s.push("unsent");
  s.send();
  // A failing request's hook may submit more (an UNLISTEN): it must not be left behind.
  bool pushed = false;
  auto& first = *s.q.answering();
  auto hook = std::move(first.on_finish);
  first.on_finish = [&](const std::exception_ptr& e, bool abandoned) {
    hook(e, abandoned);
    if (!pushed) {
      pushed = true;
      s.push("UNLISTEN c");
    }
  };
  s.q.drop(error("connection lost"), std::nullopt, error("closed"));
  CHECK(sent.error == "connection lost");
  CHECK(unsent.error == "closed");
  REQUIRE(s.outcomes.size() == 3);
  CHECK(s.outcomes[2]->error == "closed");
  CHECK_FALSE(s.q.has_unsent());
}

}  // namespace unit_request_queue_test
