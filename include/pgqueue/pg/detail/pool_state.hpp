// A connection pool's bookkeeping, without I/O: idle sessions, sessions being opened, and the
// acquirers waiting in line. The pool (pg/pool.hpp) holds it under its mutex and does what it
// says; unit tests drive it with scripted events.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace pgqueue::pg::detail {

/// `Session` is what the pool hands out (a connection handle; copyable).
template <class Session>
class pool_state {
 public:
  using clock = std::chrono::steady_clock;

  pool_state(std::size_t min_size, std::size_t max_size) : min_(min_size), max_(max_size) {}

  /// What an acquire does at once.
  struct acquire_step {
    enum class kind {
      take,    ///< `session` is the caller's
      open,    ///< a slot is reserved: the caller opens a session (opened() or open_failed())
      wait,    ///< every slot is taken: wait in line as `waiter` (see give_back)
      closed,  ///< the pool is closed
    };
    kind what;
    std::optional<Session> session;
    std::uint64_t waiter = 0;
  };

  /// Takes the most recently returned idle session (warm, and it lets the others time out),
  /// or reserves a slot for a new one, or joins the line.
  acquire_step acquire() {
    if (closed_) return {acquire_step::kind::closed, std::nullopt, 0};
    if (!idle_.empty()) {
      auto s = std::move(idle_.back().session);
      idle_.pop_back();
      return {acquire_step::kind::take, std::move(s), 0};
    }
    if (size_ < max_) {
      ++size_;
      return {acquire_step::kind::open, std::nullopt, 0};
    }
    line_.push_back(++last_waiter_);
    return {acquire_step::kind::wait, std::nullopt, last_waiter_};
  }

  /// Who gets what a give_back or a failed open freed: `waiter` 0 when nobody waited.
  struct handover {
    std::uint64_t waiter = 0;
    std::optional<Session> session;  ///< for the waiter; none: the waiter may open a session
  };

  /// A session comes back usable: to the first in line, else idle (closed at once, returned
  /// in `to_close`, when the pool is closed).
  handover give_back(Session s, clock::time_point now, std::optional<Session>& to_close) {
    if (closed_) {
      --size_;
      to_close = std::move(s);
      return {};
    }
    if (!line_.empty()) return {pop_waiter(), std::move(s)};
    idle_.push_back({std::move(s), now});
    return {};
  }

  /// A session came back broken (or a reserved open failed): its slot is free. The first in
  /// line may open one in its place.
  handover discard() {
    if (!line_.empty() && !closed_) return {pop_waiter(), std::nullopt};
    --size_;
    return {};
  }

  /// A waiter gave up (timeout or cancel) before anything was handed to it. False: it was
  /// handed something already (the caller then takes it, or gives it back).
  bool leave(std::uint64_t waiter) {
    for (auto it = line_.begin(); it != line_.end(); ++it) {
      if (*it == waiter) {
        line_.erase(it);
        return true;
      }
    }
    return false;
  }

  /// Idle sessions unused since before `now - idle_timeout`, beyond `min_size`: to close.
  std::vector<Session> expire(clock::time_point now, clock::duration idle_timeout) {
    std::vector<Session> out;
    // Oldest first: idle_ is in order of return.
    while (!idle_.empty() && size_ > min_ && idle_.front().since + idle_timeout <= now) {
      out.push_back(std::move(idle_.front().session));
      idle_.pop_front();
      --size_;
    }
    return out;
  }

  /// Closes the pool: acquires fail from now on; the idle sessions are returned to be closed,
  /// the waiters to be woken (they fail too), and sessions in use are closed when they return.
  std::pair<std::vector<Session>, std::vector<std::uint64_t>> close() {
    closed_ = true;
    std::vector<Session> idle;
    for (auto& e : idle_) idle.push_back(std::move(e.session));
    size_ -= idle_.size();
    idle_.clear();
    std::vector<std::uint64_t> waiters(line_.begin(), line_.end());
    line_.clear();
    return {std::move(idle), std::move(waiters)};
  }

  /// Sessions open or being opened (in use or idle).
  std::size_t size() const noexcept { return size_; }
  std::size_t idle() const noexcept { return idle_.size(); }
  std::size_t waiting() const noexcept { return line_.size(); }
  bool closed() const noexcept { return closed_; }

 private:
  struct idle_session {
    Session session;
    clock::time_point since;
  };

  std::uint64_t pop_waiter() {
    const auto w = line_.front();
    line_.pop_front();
    return w;
  }

  std::size_t min_, max_;
  std::size_t size_ = 0;
  std::deque<idle_session> idle_;
  std::deque<std::uint64_t> line_;
  std::uint64_t last_waiter_ = 0;
  bool closed_ = false;
};

}  // namespace pgqueue::pg::detail
