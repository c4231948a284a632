// When to try again after a dropped connection: exponential back-off with jitter.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace pgqueue::pg::detail {

/// Delays between reconnect attempts: the first is drawn from [initial/2, initial], each later
/// one from [d/2, d] with d doubling up to `max`. The random half spreads a fleet of clients
/// that lost the same server, so they do not all knock at once when it comes back.
class reconnect_policy {
 public:
  using duration = std::chrono::milliseconds;

  reconnect_policy(duration initial, duration max)
      : initial_(std::max(initial, duration(1))),
        max_(std::max(max, initial_)),
        next_(initial_),
        rng_(std::random_device{}()) {}

  /// The delay before the next attempt (and doubles the one after it).
  duration next_delay() {
    const auto d = next_;
    next_ = std::min(next_ * 2, max_);
    std::uniform_int_distribution<std::int64_t> half(d.count() / 2, d.count());
    return duration(half(rng_));
  }

  /// A session was established: the next drop starts again from `initial`.
  void reset() { next_ = initial_; }

 private:
  duration initial_;
  duration max_;
  duration next_;
  std::minstd_rand rng_;
};

}  // namespace pgqueue::pg::detail
