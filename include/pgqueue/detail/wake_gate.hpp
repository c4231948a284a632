// Folds the wake-ups of one queue across a whole process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pgqueue::detail {

/// One per (database, queue) in the process, shared by every handle of that queue whatever
/// connection it uses: at most one wake-up on its way at a time, and at most one per `gap`.
/// Without it, producers on eight connections each send a wake-up per job and double the
/// server's work. Thread-safe.
///
/// A wake-up goes one of two ways. A *carrier* is an enqueue of due jobs that announces them
/// (and everything requested before it) in its own transaction: no extra transaction or round
/// trip, and the notification leaves at the enqueue's commit. A *sender* is a coroutine that
/// runs pgqueue.wake() after jobs committed; it waits for the gap to pass and then half a gap
/// more, during which a starting enqueue may become the carrier and end the sender's round.
class wake_gate {
 public:
  using clock = std::chrono::steady_clock;

  /// The gate for `key` (database identity and queue name), created on first use.
  static std::shared_ptr<wake_gate> get(const std::string& key);

  /// Before sending an enqueue of jobs due now: true when that enqueue is to carry the
  /// wake-up (nothing is on its way and `gap` has passed since the last one). The caller then
  /// reports with `finish(delivered)` once the enqueue's answer is in.
  bool try_carry(clock::duration gap);

  /// Jobs committed and need announcing. Non-zero: the caller becomes the sender, and this
  /// is its ticket for `begin`. Zero: whoever is on its way will see to it.
  std::uint64_t request();

  /// How long the sender waits before its wake-up: until `gap` has passed since the last one
  /// plus half a gap for a carrier to take over, or nothing when the gate was quiet longer.
  clock::duration delay(clock::duration gap) {
    std::lock_guard lock(m_);
    const auto now = clock::now();
    if (now >= last_ + gap) return clock::duration::zero();
    return last_ + gap + gap / 2 - now;
  }

  /// The sender is about to send. False: a carrier took over its round (the sender stops).
  /// True: its wake-up covers every request made so far.
  bool begin(std::uint64_t ticket);

  /// The wake-up (sender's or carrier's) is done; `delivered` is false when it failed, so
  /// what it was to announce is still pending. Non-zero: requests came in meanwhile, and the
  /// caller continues (a sender) or starts (a carrier) a sender round with this ticket.
  std::uint64_t finish(bool delivered = true);

 private:
  enum class state { idle, waiting, sending, carrying };

  std::mutex m_;
  state state_ = state::idle;
  bool pending_ = false;
  std::uint64_t ticket_ = 0;
  // Never: steady_clock's zero is the machine's boot, so a default time point would hold back
  // the first wake-ups of a process on a machine up for less than the gap.
  clock::time_point last_ = clock::time_point::min();
};

}  // namespace pgqueue::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/detail/config.hpp"
#include "pgqueue/detail/impl/wake_gate.ipp"
#endif
