// Folds the wake-ups of one queue across a whole process.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pgqueue::detail {

/// One per (database, queue) in the process, shared by every handle of that queue whatever
/// connection it uses: at most one sender of pgqueue.wake() at a time, and at most one wake-up
/// per `min_gap`. Without it, producers on eight connections each send a wake-up transaction
/// per job and double the server's work. Thread-safe.
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

  /// Jobs committed and need announcing. True: the caller becomes the sender and runs
  /// `delay`/`begin`/`finish` rounds. False: a sender is active and will send once more.
  bool request() {
    std::lock_guard lock(m_);
    if (sending_) {
      pending_ = true;
      return false;
    }
    sending_ = true;
    return true;
  }

  /// How long the sender waits before its next wake-up (zero when `min_gap` has passed).
  clock::duration delay(clock::duration min_gap) {
    std::lock_guard lock(m_);
    const auto due = last_ + min_gap;
    const auto now = clock::now();
    return due > now ? due - now : clock::duration::zero();
  }

  /// The sender is about to send: that wake-up covers every request made so far.
  void begin() {
    std::lock_guard lock(m_);
    pending_ = false;
    last_ = clock::now();
  }

  /// The wake-up was sent (or failed). True: requests came in meanwhile, send another round.
  bool finish() {
    std::lock_guard lock(m_);
    if (pending_) return true;
    sending_ = false;
    return false;
  }

 private:
  std::mutex m_;
  bool sending_ = false;
  bool pending_ = false;
  clock::time_point last_{};
};

}  // namespace pgqueue::detail
