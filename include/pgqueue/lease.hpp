// pgqueue::lease: a claimed job, held for as long as the object lives.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/lease_state.hpp"
#include "pgqueue/error.hpp"
#include "pgqueue/job.hpp"

namespace pgqueue {

class worker;

/// What a nack did to the job.
enum class nack_result {
  requeued,  ///< The job will be retried (after the back-off or the given delay).
  dead,      ///< That was its last attempt: the job ended `dead`.
};

/// A claimed job, held while the object lives (move-only). It heartbeats on its own every
/// `heartbeat_interval`, so a job may run far longer than the lease length. If the lease is
/// lost (a heartbeat refused: the janitor took the job back, or the lease ran out while the
/// server was unreachable), `lost()` turns true and `lost_slot()` fires; `ack`/`nack` then throw
/// `errc::lease_lost` instead of touching the job's new attempt.
///
/// Destroying a lease that was neither acked, nacked nor released nacks it in the background
/// (the destructor never blocks) with the reason "abandoned", or "abandoned: exception during
/// handler" while an exception unwinds. If the process dies instead, the lease simply expires.
class lease {
 public:
  lease(lease&&) noexcept = default;
  lease& operator=(lease&& other) noexcept {
    if (this != &other) {
      abandon();
      state_ = std::move(other.state_);
      unwinding_at_start_ = other.unwinding_at_start_;
    }
    return *this;
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease() { abandon(); }

  /// The job: id, queue, payload (JSON text), priority, attempts, max_attempts.
  const pgqueue::job& job() const noexcept { return state_->the_job; }

  /// Whether ack, nack or release was already called (or the lease is empty).
  bool finished() const noexcept { return !state_ || state_->finished; }

  /// Whether the lease is known to be lost. No round trip.
  bool lost() const noexcept { return state_ && state_->lost; }

  /// Emitted (terminal cancellation) on the connection's strand when the lease is lost; bind a
  /// handler's operations to it with asio::bind_cancellation_slot to stop work that no longer
  /// counts.
  asio::cancellation_slot lost_slot() noexcept { return state_->lost_signal.slot(); }

  /// Marks the job done. One round trip. Throws `errc::lease_lost` when the job is no longer
  /// held (nothing is changed), `errc::lease_finished` when already finished, or a connection
  /// error (the lease then expires and the job runs again: at-least-once). When the connection
  /// drops, the ack is sent again once it has reconnected, while the lease may still be valid;
  /// if the first try had taken effect (its answer was lost), the job is found done by this
  /// worker at this attempt and the ack succeeds (one more round trip).
  asio::awaitable<void> ack() {
    auto s = finish();
    pg::params p{s->the_job.id, s->worker_id, s->the_job.attempts};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.ack($1, $2, $3)", std::move(p), &repeated);
    if (r.get<bool>(0, 0)) co_return;
    if (repeated) {
      const auto f = detail::lease_state::fence_of({s});
      pg::params q{f.ids, s->worker_id, f.attempts};
      auto done =
          co_await s->settle(detail::lease_state::count_acked_sql, std::move(q), &repeated);
      if (done.get<std::int64_t>(0, 0) == 1) co_return;
    }
    throw lost_error(*s);
  }

  /// Gives the job back after a failure: retried after the queue's back-off (or `delay`), or
  /// ended `dead` when this was its last attempt; `reason` is kept in `last_error`. One round
  /// trip. Throws as `ack`, and `errc::invalid_argument` (the lease still held and usable) for
  /// a reason with a NUL byte or a delay that is negative or reaches past what system_clock
  /// can represent. A reason the server refuses (e.g. invalid UTF-8, SQLSTATE 22021) ends the
  /// lease with the job unchanged: it runs again once the lease expires. Sent again across a
  /// reconnect like `ack` (if the job is then found ready or dead at this attempt, that is what
  /// is returned).
  asio::awaitable<nack_result> nack(std::string reason,
                                    std::optional<std::chrono::milliseconds> delay = {}) {
    // Checked before finish(): a refusal here must leave the lease as it was.
    if (reason.find('\0') != std::string::npos) {
      throw error(errc::invalid_argument, "nack reason contains a NUL byte");
    }
    if (delay && (delay->count() < 0 || *delay > max_delay())) {
      throw error(errc::invalid_argument,
                  "nack delay of " + std::to_string(delay->count()) +
                      " ms is negative or beyond what std::chrono::system_clock can represent");
    }
    // The coroutine takes the reason as an xvalue (see queue::enqueue on GCC 12).
    return do_nack(finish(), std::move(reason), delay);
  }

  /// Gives the job back without using up its attempt (e.g. shutting down): ready again at once.
  /// One round trip. Throws as `ack`; sent again across a reconnect like `ack`.
  asio::awaitable<void> release() {
    auto s = finish();
    pg::params p{s->the_job.id, s->worker_id, s->the_job.attempts};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.release($1, $2, $3)", std::move(p), &repeated);
    if (r.get<bool>(0, 0)) co_return;
    if (repeated) {  // a release that took effect left the job ready, its attempt given back
      pg::params q{s->the_job.id, s->the_job.attempts - 1};
      auto done = co_await s->settle(
          "SELECT EXISTS (SELECT 1 FROM pgqueue.jobs WHERE id = $1 AND state = 'ready' "
          "AND attempts = $2)",
          std::move(q), &repeated);
      if (done.get<bool>(0, 0)) co_return;
    }
    throw lost_error(*s);
  }

 private:
  friend class queue;
  friend class worker;
  friend asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases);

  explicit lease(std::shared_ptr<detail::lease_state> s)
      : state_(std::move(s)), unwinding_at_start_(std::uncaught_exceptions()) {
    state_->start_heartbeat();
  }

  static asio::awaitable<nack_result> do_nack(std::shared_ptr<detail::lease_state> s,
                                              std::string reason,
                                              std::optional<std::chrono::milliseconds> delay) {
    // Built before the co_await: GCC 12 destroys a conditional's temporary in it twice.
    std::optional<std::string> requeue_after;
    if (delay) requeue_after = detail::lease_state::interval(*delay);
    pg::params p{s->the_job.id, s->worker_id, reason, requeue_after, s->the_job.attempts};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.nack($1, $2, $3, $4::interval, $5)",
                                std::move(p), &repeated);
    auto outcome = r.get<std::string>(0, 0);
    if (outcome == "lost" && repeated) {
      // The first try may have taken effect: the job is then ready or dead, not claimed again.
      pg::params q{s->the_job.id, s->the_job.attempts};
      auto now = co_await s->settle(
          "SELECT coalesce((SELECT CASE state WHEN 'ready' THEN 'requeued' ELSE state::text END "
          "FROM pgqueue.jobs WHERE id = $1 AND attempts = $2 AND state IN ('ready', 'dead')), "
          "'lost')",
          std::move(q), &repeated);
      outcome = now.get<std::string>(0, 0);
    }
    if (outcome == "lost") throw lost_error(*s);
    co_return outcome == "dead" ? nack_result::dead : nack_result::requeued;
  }

  static std::chrono::milliseconds max_delay() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::time_point::max() - std::chrono::system_clock::now());
  }

  static error lost_error(const detail::lease_state& s) {
    return error(errc::lease_lost,
                 "lease lost: job " + std::to_string(s.the_job.id) + " (attempt " +
                     std::to_string(s.the_job.attempts) + ") is no longer held by worker '" +
                     s.worker_id + "'; it was taken back after its lease expired");
  }

  // Ends the lease's own life (heartbeats stop) before a final operation; throws if that is
  // not possible.
  std::shared_ptr<detail::lease_state> finish() {
    if (!state_) throw error(errc::lease_finished, "lease is empty (moved from)");
    if (state_->finished.exchange(true)) {
      throw error(errc::lease_finished,
                  "lease of job " + std::to_string(state_->the_job.id) + " already finished");
    }
    state_->stop_heartbeat();
    if (state_->lost) throw lost_error(*state_);
    return state_;
  }

  // Ends the lease without telling the server (it is already lost).
  void forget() noexcept {
    if (!state_) return;
    state_->finished = true;
    state_->stop_heartbeat();
    state_.reset();
  }

  // Hands the job to the worker's batched ack instead of acking it here.
  std::shared_ptr<detail::lease_state> detach_for_ack() {
    auto s = finish();
    state_.reset();
    return s;
  }

  void abandon() noexcept {
    if (!state_ || state_->finished.exchange(true)) return;
    state_->stop_heartbeat();
    std::string reason = std::uncaught_exceptions() > unwinding_at_start_
                             ? "abandoned: exception during handler"
                             : "abandoned";
    try {
      asio::co_spawn(state_->db.get_executor(), nack_in_background(state_, std::move(reason)),
                     asio::detached);
    } catch (...) {
      // Spawning failed (out of memory): the lease expires and the job runs again.
    }
    state_.reset();
  }

  static asio::awaitable<void> nack_in_background(std::shared_ptr<detail::lease_state> s,
                                                  std::string reason) {
    try {
      pg::params p{s->the_job.id, s->worker_id, std::move(reason), s->the_job.attempts};
      bool repeated = false;  // a repeat that finds the job gone changes nothing: fine here
      co_await s->settle("SELECT pgqueue.nack($1, $2, $3, NULL, $4)", std::move(p), &repeated);
    } catch (const std::exception&) {
      // Nobody is left to tell; the lease expires and the job is retried.
    }
  }

  std::shared_ptr<detail::lease_state> state_;
  int unwinding_at_start_ = 0;
};

/// Acks many leases in one round trip and one commit (pgqueue.ack_batch); every lease ends
/// finished. Returns how many jobs were marked done: a lease that was lost is not, and is not
/// an error here (compare with `leases.size()`). Throws `lease_finished` if one was already
/// finished (before anything is sent), or a connection error (the jobs' leases then expire).
/// Sent again across a reconnect like `lease::ack`; then the count is of the jobs found done by
/// this worker at their attempts (one more round trip).
inline asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases) {
  if (leases.empty()) co_return 0;
  for (auto& l : leases) {
    if (l.finished()) throw error(errc::lease_finished, "ack_batch: a lease is already finished");
  }
  std::vector<std::shared_ptr<detail::lease_state>> states;
  for (auto& l : leases) {
    if (l.lost()) {
      l.forget();
    } else {
      states.push_back(l.detach_for_ack());
    }
  }
  if (states.empty()) co_return 0;
  const auto f = detail::lease_state::fence_of(states);
  pg::params p{f.ids, states.front()->worker_id, f.attempts};
  bool repeated = false;
  auto r = co_await states.front()->settle(
      "SELECT cardinality(pgqueue.ack_batch($1::bigint[], $2, $3::int[]))", std::move(p),
      &repeated);
  if (repeated) {
    pg::params q{f.ids, states.front()->worker_id, f.attempts};
    r = co_await states.front()->settle(detail::lease_state::count_acked_sql, std::move(q),
                                        &repeated);
  }
  co_return static_cast<std::size_t>(r.get<std::int64_t>(0, 0));
}

}  // namespace pgqueue
