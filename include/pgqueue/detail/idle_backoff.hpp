// How long an idle claim waits before checking the queue again: the I/O-free decision, so it
// can be tested without a server.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "pgqueue/pg/notification.hpp"

namespace pgqueue::detail {

/// What the server said after a claim found nothing (pgqueue.wait_hint).
struct wait_hint {
  /// A ready job is already due: it is row-locked by another transaction or out of attempts,
  /// so checking again at once would find nothing again.
  bool due_now = false;
  /// In how long the next job not yet due falls due (none: no such job).
  std::optional<std::chrono::milliseconds> next_due;
  /// A limit of the queue holds it (its concurrency limit reached, or its token bucket empty
  /// while jobs are due): until `next_due`, only a notification that a place freed can change
  /// that (frees_a_place).
  bool held = false;
};

/// Whether a queue's notification says that a place freed in it, or that its limits changed
/// (payload "QUEUE\nfreed"), or is the marker of a reconnect (after which anything may have
/// happened). Enqueues' notifications carry the queue's name alone.
inline bool frees_a_place(const pg::notification& n) {
  return n.reconnected || n.payload.ends_with("\nfreed");
}

/// The wait before the next check (a notification ends it early): the poll interval, or the
/// next due time when sooner; while a due job stays unclaimable, a back-off that starts at
/// `first` and doubles up to the poll interval, so a locked row never makes a tight loop.
class idle_backoff {
 public:
  explicit idle_backoff(std::chrono::milliseconds poll,
                        std::chrono::milliseconds first = std::chrono::milliseconds(10))
      : poll_(std::max(poll, std::chrono::milliseconds(1))),
        first_(std::clamp(first, std::chrono::milliseconds(1), poll_)),
        blocked_(first_) {}

  std::chrono::milliseconds next(const wait_hint& hint) {
    auto wait = poll_;
    if (hint.next_due)
      wait = std::min(wait, std::max(*hint.next_due, std::chrono::milliseconds(1)));
    if (hint.due_now) {
      wait = std::min(wait, blocked_);
      blocked_ = std::min(blocked_ * 2, poll_);
    } else {
      blocked_ = first_;
    }
    return wait;
  }

 private:
  std::chrono::milliseconds poll_;
  std::chrono::milliseconds first_;
  std::chrono::milliseconds blocked_;
};

}  // namespace pgqueue::detail
