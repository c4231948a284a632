// The connection's requests and what each event does to them, without I/O.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/detail/request.hpp"

namespace pgqueue::pg::detail {

/// Requests not sent yet (in submission order) and requests sent whose answers are pending (in
/// send order, the order the server answers in). Decides what may be sent next, which request
/// an answer belongs to, and what a dropped session, a new session or a wait that ran out does
/// to each request. The connection does the sending and reading; unit tests drive this with
/// scripted events. Failing a request runs its hooks, which may push more requests: every
/// method leaves the queues whole before it fails anything.
class request_queue {
 public:
  using clock = std::chrono::steady_clock;

  void push(request_ptr r) { unsent_.push_back(std::move(r)); }

  /// The next request that may be sent now, or null: a script goes only into an idle pipeline
  /// (it needs the simple protocol), and nothing goes while a script runs. Unsent requests
  /// whose callers gave up are finished on the way (never sent, so nothing to read back; their
  /// hooks still run).
  request* next_to_send(bool script_running);

  /// The request next_to_send returned was written: it now waits for its answer.
  void sent() {
    if (unsent_.front()->op) unsent_.front()->op->mark_sent();
    sent_.push_back(take(unsent_));
  }

  /// Sending the front request failed: it leaves the queue (the caller fails it).
  request_ptr refuse_front() { return take(unsent_); }

  /// The request the next answer belongs to, or null.
  request* answering() { return sent_.empty() ? nullptr : sent_.front().get(); }
  /// Its answer is complete: it leaves the queue (the caller finishes it).
  request_ptr answered() { return take(sent_); }

  bool idle() const noexcept { return sent_.empty(); }
  bool has_unsent() const noexcept { return !unsent_.empty(); }

  /// The session is gone. Every request sent fails with `sent_error` (the server may have run
  /// it). With `wait_until`, the unsent ones wait for a new session until then; without, they
  /// fail with `unsent_error` (the connection has ended).
  void drop(const std::exception_ptr& sent_error, std::optional<clock::time_point> wait_until,
            const std::exception_ptr& unsent_error);

  /// Fails every unsent request with `e`, and any that their hooks push meanwhile.
  void fail_all_unsent(const std::exception_ptr& e) {
    while (!unsent_.empty()) {
      auto unsent = std::exchange(unsent_, {});
      for (auto& r : unsent) r->fail(e);
    }
  }

  /// A new session: `setup` goes first (it must run before anything else there), then the
  /// requests that waited, in their order.
  void new_session(std::deque<request_ptr> setup) {
    for (auto& r : unsent_) setup.push_back(std::move(r));
    unsent_ = std::move(setup);
  }

  /// Fails, with what `why()` makes, the unsent requests whose wait for a new session ended by
  /// `now`. Returns how many.
  std::size_t expire(clock::time_point now, const std::function<std::exception_ptr()>& why);

  /// When the first unsent request stops waiting for a new session; none when none waits.
  std::optional<clock::time_point> earliest_deadline() const {
    if (unsent_.empty()) return std::nullopt;
    auto earliest = unsent_.front()->deadline;
    for (const auto& r : unsent_) earliest = std::min(earliest, r->deadline);
    return earliest;
  }

 private:
  static request_ptr take(std::deque<request_ptr>& q) {
    auto r = std::move(q.front());
    q.pop_front();
    return r;
  }

  std::deque<request_ptr> unsent_;
  std::deque<request_ptr> sent_;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/request_queue.ipp"
#endif
