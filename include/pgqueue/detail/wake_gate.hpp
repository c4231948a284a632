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
  static std::shared_ptr<wake_gate> get(const std::string& key) {
    static std::mutex registry_mutex;
    static std::unordered_map<std::string, std::weak_ptr<wake_gate>> registry;
    std::lock_guard lock(registry_mutex);
    auto& slot = registry[key];
    if (auto gate = slot.lock()) return gate;
    std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
    auto gate = std::make_shared<wake_gate>();
    registry[key] = gate;
    return gate;
  }

  /// Before sending an enqueue of jobs due now: true when that enqueue is to carry the
  /// wake-up (nothing is on its way and `gap` has passed since the last one). The caller then
  /// reports with `finish(delivered)` once the enqueue's answer is in.
  bool try_carry(clock::duration gap) {
    std::lock_guard lock(m_);
    const auto now = clock::now();
    if (state_ == state::sending || state_ == state::carrying || now < last_ + gap) return false;
    state_ = state::carrying;  // a waiting sender finds its round taken (see begin)
    pending_ = false;
    last_ = now;
    return true;
  }

  /// Jobs committed and need announcing. Non-zero: the caller becomes the sender, and this
  /// is its ticket for `begin`. Zero: whoever is on its way will see to it.
  std::uint64_t request() {
    std::lock_guard lock(m_);
    if (state_ != state::idle) {
      pending_ = true;
      return 0;
    }
    state_ = state::waiting;
    return ++ticket_;
  }

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
  bool begin(std::uint64_t ticket) {
    std::lock_guard lock(m_);
    if (state_ != state::waiting || ticket != ticket_) return false;
    state_ = state::sending;
    pending_ = false;
    last_ = clock::now();
    return true;
  }

  /// The wake-up (sender's or carrier's) is done; `delivered` is false when it failed, so
  /// what it was to announce is still pending. Non-zero: requests came in meanwhile, and the
  /// caller continues (a sender) or starts (a carrier) a sender round with this ticket.
  std::uint64_t finish(bool delivered = true) {
    std::lock_guard lock(m_);
    if (!delivered) pending_ = true;
    if (pending_) {
      state_ = state::waiting;
      return ++ticket_;
    }
    state_ = state::idle;
    return 0;
  }

 private:
  enum class state { idle, waiting, sending, carrying };

  std::mutex m_;
  state state_ = state::idle;
  bool pending_ = false;
  std::uint64_t ticket_ = 0;
  clock::time_point last_{};
};

}  // namespace pgqueue::detail
