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
#include <asio/this_coro.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/error_text.hpp"
#include "pgqueue/detail/lease_state.hpp"
#include "pgqueue/detail/shield.hpp"
#include "pgqueue/error.hpp"
#include "pgqueue/job.hpp"
#include "pgqueue/pg/transaction.hpp"

namespace pgqueue {

class worker;

/// What a nack did to the job.
enum class nack_result {
  requeued,  ///< The job will be retried (after the back-off or the given delay).
  dead,      ///< That was its last attempt: the job ended `dead`.
};

/// A claimed job, held while the object lives (move-only). It heartbeats on its own every
/// `heartbeat_interval`, so a job may run far longer than the lease length. If the lease may
/// be lost (a heartbeat refused: the janitor took the job back; or the lease ran out before a
/// heartbeat got through, e.g. while the server was unreachable or the process stalled),
/// `lost()` turns true and `lost_slot()` fires: stop working on the job. `ack`/`nack` still ask
/// the server, which accepts them while nobody has taken the job back and otherwise refuses
/// them (`errc::lease_lost`, nothing changed): the lease token fences them from a later claim.
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
  /// Throws `errc::lease_finished` for an empty (moved-from) lease; a finished one still
  /// answers.
  const pgqueue::job& job() const {
    if (!state_) throw error(errc::lease_finished, "lease is empty (moved from)");
    return state_->the_job;
  }

  /// Whether ack, nack or release was already called (or the lease is empty).
  bool finished() const noexcept { return !state_ || state_->finished; }

  /// Whether the lease was refused by the server or ran out before a heartbeat got through
  /// (the job may be someone else's by now). No round trip.
  bool lost() const noexcept { return state_ && state_->lost; }

  /// Emitted (terminal cancellation) when the lease is lost, on the executor of the coroutine
  /// that claimed the job (the worker's strand for a worker's handler); bind a handler's
  /// operations to it with asio::bind_cancellation_slot, from that executor, to stop work that
  /// no longer counts.
  /// Throws `errc::lease_finished` for an empty (moved-from) lease.
  asio::cancellation_slot lost_slot() {
    if (!state_) throw error(errc::lease_finished, "lease is empty (moved from)");
    return state_->lost_signal.slot();
  }

  /// Marks the job done. One round trip. Throws `errc::lease_lost` when the job is no longer
  /// held (nothing is changed), `errc::lease_finished` when already finished or while an ack
  /// or nack inside a transaction is pending (nothing sent), or a connection
  /// error (the lease then expires and the job runs again: at-least-once). When the connection
  /// drops, the ack is sent again once it has reconnected, while the lease may still be valid;
  /// if the first try had taken effect (its answer was lost), the job is found done under this
  /// claim and the ack succeeds (one more round trip).
  ///
  /// Cancellation: a cancel before the call starts throws operation_aborted and leaves the
  /// lease as it was (held, heartbeating). Once started the ack is not interrupted: a cancel
  /// waits for its outcome (one round trip; across a reconnect, until the lease expires at
  /// most), which is then reported as without the cancel. The same holds for nack, release
  /// and ack_batch.
  asio::awaitable<void> ack() {
    const auto state = co_await asio::this_coro::cancellation_state;
    detail::throw_if_cancelled(state, "ack cancelled before it started; the lease is still held");
    auto op = do_ack(finish());
    co_await detail::shielded(std::move(op));
  }

  /// Gives the job back after a failure: retried after the queue's back-off (or `delay`), or
  /// ended `dead` when this was its last attempt; `reason` is kept in `last_error`. One round
  /// trip. Throws as `ack`, and `errc::invalid_argument` (the lease still held and usable) for
  /// a reason with a NUL byte or a delay that is negative or reaches past what system_clock
  /// can represent. Invalid UTF-8 in `reason` is stored as '?' and a reason longer than 2000
  /// bytes is cut (the server keeps at most that). Sent again across a reconnect like `ack`
  /// (if the job is then found ready or dead under this claim, that is what is returned).
  /// Cancellation as `ack`.
  asio::awaitable<nack_result> nack(std::string reason,
                                    std::optional<std::chrono::milliseconds> delay = {}) {
    // Checked before finish(): a refusal here must leave the lease as it was.
    check_nack_args(reason, delay);
    const auto state = co_await asio::this_coro::cancellation_state;
    detail::throw_if_cancelled(state, "nack cancelled before it started; the lease is still held");
    auto op = do_nack(finish(), detail::clean_error_text(reason), delay);
    co_return co_await detail::shielded(std::move(op));
  }

  /// Marks the job done inside `tx`, the application's transaction: done if and only if `tx`
  /// commits, with what else it wrote. One round trip on the transaction's session. Until `tx`
  /// ends the lease stays held (its heartbeats skip the job's row while `tx` holds it: nothing
  /// waits on the transaction, however long it runs); when `tx` commits the lease is finished,
  /// when it rolls back the lease is held as before and may be finished again. A transaction
  /// open longer than the lease may find the lease lost after a rollback (a job `tx` holds is
  /// never taken back meanwhile). Throws `errc::lease_lost` when the job is no longer held
  /// (nothing changed; `tx` still usable), `errc::lease_finished` when the lease is finished or
  /// an ack or nack inside a transaction is pending, and the server's or connection's errors
  /// (which fail `tx`). Destroying the lease before `tx` ends leaves the job to `tx`: done if
  /// it commits, nacked ("abandoned") if it rolls back. Cancellation as `ack`.
  asio::awaitable<void> ack(pg::transaction& tx) {
    const auto state = co_await asio::this_coro::cancellation_state;
    detail::throw_if_cancelled(state, "ack cancelled before it started; the lease is still held");
    auto s = begin_in_transaction();
    std::optional<pg::result> r;
    try {
      pg::params p{s->the_job.id, s->worker_id, s->token};
      r.emplace(co_await tx.query_prepared("SELECT pgqueue.ack($1, $2, $3)", std::move(p),
                                           pg::cancel_until_sent));
    } catch (...) {
      not_in_transaction(s);
      throw;
    }
    if (!r->get<bool>(0, 0)) {
      not_in_transaction(s);
      throw lost_error(*s);
    }
    follow(tx, s, detail::lease_state::outcome::acked);
  }

  /// As `nack`, inside `tx` (see `ack(tx)`): the job is retried or dead if and only if `tx`
  /// commits. Throws as `nack` and `ack(tx)`.
  asio::awaitable<nack_result> nack(pg::transaction& tx, std::string reason,
                                    std::optional<std::chrono::milliseconds> delay = {}) {
    check_nack_args(reason, delay);
    const auto state = co_await asio::this_coro::cancellation_state;
    detail::throw_if_cancelled(state, "nack cancelled before it started; the lease is still held");
    auto s = begin_in_transaction();
    std::optional<pg::result> r;
    try {
      std::optional<std::string> requeue_after;
      if (delay) requeue_after = detail::lease_state::interval(*delay);
      pg::params p{s->the_job.id, s->worker_id, detail::clean_error_text(reason), requeue_after,
                   s->token};
      r.emplace(co_await tx.query_prepared("SELECT pgqueue.nack($1, $2, $3, $4::interval, $5)",
                                           std::move(p), pg::cancel_until_sent));
    } catch (...) {
      not_in_transaction(s);
      throw;
    }
    const auto outcome = r->get<std::string>(0, 0);
    if (outcome != "requeued" && outcome != "dead") {
      not_in_transaction(s);
      throw lost_error(*s);
    }
    follow(tx, s, detail::lease_state::outcome::failed);
    co_return outcome == "dead" ? nack_result::dead : nack_result::requeued;
  }

  /// Gives the job back without using up its attempt (e.g. shutting down): ready again at once.
  /// One round trip. Throws as `ack`; sent again across a reconnect like `ack`. Cancellation
  /// as `ack`.
  asio::awaitable<void> release() {
    const auto state = co_await asio::this_coro::cancellation_state;
    detail::throw_if_cancelled(state,
                               "release cancelled before it started; the lease is still held");
    auto op = do_release(finish());
    co_await detail::shielded(std::move(op));
  }

 private:
  friend class queue;
  friend class worker;
  friend asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases);

  static asio::awaitable<std::size_t> do_ack_batch(
      std::vector<std::shared_ptr<detail::lease_state>> states) {
    const auto f = detail::lease_state::fence_of(states);
    pg::params p{f.ids, states.front()->worker_id, f.tokens};
    bool repeated = false;
    // Sent again while any of the leases may be valid, not only the first.
    auto r = co_await states.front()->settle(
        "SELECT cardinality(pgqueue.ack_batch($1::bigint[], $2, $3::bigint[]))", std::move(p),
        &repeated, &states);
    if (repeated) {
      pg::params q{f.ids, states.front()->worker_id, f.tokens};
      r = co_await states.front()->settle(detail::lease_state::count_acked_sql, std::move(q),
                                          &repeated, &states);
    }
    co_return static_cast<std::size_t>(r.get<std::int64_t>(0, 0));
  }

  explicit lease(std::shared_ptr<detail::lease_state> s)
      : state_(std::move(s)), unwinding_at_start_(std::uncaught_exceptions()) {
    state_->start_heartbeat();
  }

  static asio::awaitable<void> do_ack(std::shared_ptr<detail::lease_state> s) {
    pg::params p{s->the_job.id, s->worker_id, s->token};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.ack($1, $2, $3)", std::move(p), &repeated);
    bool acked = r.get<bool>(0, 0);
    if (!acked && repeated) {
      const auto f = detail::lease_state::fence_of({s});
      pg::params q{f.ids, s->worker_id, f.tokens};
      auto done = co_await s->settle(detail::lease_state::count_acked_sql, std::move(q), &repeated);
      acked = done.get<std::int64_t>(0, 0) == 1;
    }
    if (!acked) throw lost_error(*s);
    s->ended_as = detail::lease_state::outcome::acked;
  }

  static asio::awaitable<nack_result> do_nack(std::shared_ptr<detail::lease_state> s,
                                              std::string reason,
                                              std::optional<std::chrono::milliseconds> delay) {
    // Built before the co_await: GCC 12 destroys a conditional's temporary in it twice.
    std::optional<std::string> requeue_after;
    if (delay) requeue_after = detail::lease_state::interval(*delay);
    pg::params p{s->the_job.id, s->worker_id, reason, requeue_after, s->token};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.nack($1, $2, $3, $4::interval, $5)", std::move(p),
                                &repeated);
    auto outcome = r.get<std::string>(0, 0);
    if (outcome == "lost" && repeated) {
      // The first try may have taken effect: the job is then ready or dead under this claim.
      outcome = co_await outcome_of(s, &repeated);
      if (outcome == "ready") outcome = "requeued";
    }
    if (outcome != "requeued" && outcome != "dead") throw lost_error(*s);
    s->ended_as = detail::lease_state::outcome::failed;
    co_return outcome == "dead" ? nack_result::dead : nack_result::requeued;
  }

  static asio::awaitable<void> do_release(std::shared_ptr<detail::lease_state> s) {
    pg::params p{s->the_job.id, s->worker_id, s->token};
    bool repeated = false;
    auto r = co_await s->settle("SELECT pgqueue.release($1, $2, $3)", std::move(p), &repeated);
    bool released = r.get<bool>(0, 0);
    // A release that took effect left the job ready under this claim.
    if (!released && repeated) released = co_await outcome_of(s, &repeated) == "ready";
    if (!released) throw lost_error(*s);
    s->ended_as = detail::lease_state::outcome::released;
  }

  // The job's state as far as this claim is concerned (pgqueue.lease_outcome): its state while
  // no later claim was made, else "lost". One round trip, after a repeated final operation.
  static asio::awaitable<std::string> outcome_of(const std::shared_ptr<detail::lease_state>& s,
                                                 bool* repeated) {
    pg::params q{s->the_job.id, s->worker_id, s->token};
    auto r = co_await s->settle("SELECT pgqueue.lease_outcome($1, $2, $3)", std::move(q), repeated);
    co_return r.get<std::string>(0, 0);
  }

  static void check_nack_args(const std::string& reason,
                              const std::optional<std::chrono::milliseconds>& delay) {
    if (reason.find('\0') != std::string::npos) {
      throw error(errc::invalid_argument, "nack reason contains a NUL byte");
    }
    if (delay && (delay->count() < 0 || *delay > max_delay())) {
      throw error(errc::invalid_argument,
                  "nack delay of " + std::to_string(delay->count()) +
                      " ms is negative or beyond what std::chrono::system_clock can represent");
    }
  }

  // Before an ack or nack inside a transaction: the lease must be held, with no other such
  // operation pending. Marks one pending (a destroyed handle then leaves the job to it).
  std::shared_ptr<detail::lease_state> begin_in_transaction() {
    if (!state_) throw error(errc::lease_finished, "lease is empty (moved from)");
    std::lock_guard lock(state_->in_transaction_mutex);
    if (state_->finished) {
      throw error(errc::lease_finished,
                  "lease of job " + std::to_string(state_->the_job.id) + " already finished");
    }
    if (state_->in_transaction) {
      throw error(errc::lease_finished, "lease of job " + std::to_string(state_->the_job.id) +
                                            " has an ack or nack pending in a transaction");
    }
    state_->in_transaction = true;
    return state_;
  }

  // The operation did not take effect: the lease is as before (or, if its handle went away
  // meanwhile, given back now as the destructor would have).
  static void not_in_transaction(const std::shared_ptr<detail::lease_state>& s) {
    std::optional<std::optional<std::string>> abandoned;
    {
      std::lock_guard lock(s->in_transaction_mutex);
      s->in_transaction = false;
      abandoned = std::exchange(s->abandoned_in_transaction, std::nullopt);
    }
    if (abandoned) end_state_in_background(s, std::move(*abandoned));
  }

  // The lease follows `tx`: finished as `outcome` when it commits; held again when it rolls
  // back (or given back, if its handle went away meanwhile).
  static void follow(pg::transaction& tx, std::shared_ptr<detail::lease_state> s,
                     detail::lease_state::outcome outcome) {
    tx.on_end([s = std::move(s), outcome](bool committed) {
      if (!committed) return not_in_transaction(s);
      {
        std::lock_guard lock(s->in_transaction_mutex);
        s->in_transaction = false;
        s->abandoned_in_transaction.reset();
      }
      if (!s->finished.exchange(true)) s->stop_heartbeat();
      s->ended_as = outcome;
    });
  }

  static std::chrono::milliseconds max_delay() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::time_point::max() - std::chrono::system_clock::now());
  }

  static error lost_error(const detail::lease_state& s) {
    return error(errc::lease_lost, "lease lost: job " + std::to_string(s.the_job.id) +
                                       " (attempt " + std::to_string(s.the_job.attempts) +
                                       ", lease token " + std::to_string(s.token) +
                                       ") is no longer held by worker '" + s.worker_id +
                                       "'; it was taken back after its lease expired");
  }

  // Ends the lease's own life (heartbeats stop) before a final operation; throws if that is
  // not possible.
  std::shared_ptr<detail::lease_state> finish() {
    if (!state_) throw error(errc::lease_finished, "lease is empty (moved from)");
    {
      // An ack or nack pending in a transaction holds the job's row: a plain one now would
      // wait on that lock, holding up every statement behind it on its session.
      std::lock_guard lock(state_->in_transaction_mutex);
      if (state_->in_transaction) {
        throw error(errc::lease_finished,
                    "lease of job " + std::to_string(state_->the_job.id) +
                        " has an ack or nack pending in a transaction; that transaction decides");
      }
      if (state_->finished.exchange(true)) {
        throw error(errc::lease_finished,
                    "lease of job " + std::to_string(state_->the_job.id) + " already finished");
      }
    }
    state_->stop_heartbeat();
    // Not refused here when lost() is set: the server decides. A lease whose deadline passed
    // before a heartbeat got through may still be ours (nobody took the job back), and the
    // final operations are fenced by the lease token, so asking cannot touch a later claim.
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
    end_in_background(std::uncaught_exceptions() > unwinding_at_start_
                          ? "abandoned: exception during handler"
                          : "abandoned");
  }

  // Gives the job back in the background, its attempt not counted: for a claim whose caller
  // was cancelled before it could see the job.
  void release_in_background() noexcept { end_in_background(std::nullopt); }

  // Ends the lease without waiting: nacks with `reason`, or releases without one. The
  // destructor never blocks; if even this fails, the lease expires and the job runs again.
  void end_in_background(std::optional<std::string> reason) noexcept {
    if (!state_) return;
    {
      // An ack or nack inside a transaction is pending: the transaction decides (a nack or
      // release now would wait on the row it holds, and hold up the session meanwhile).
      std::lock_guard lock(state_->in_transaction_mutex);
      if (state_->in_transaction) {
        state_->abandoned_in_transaction.emplace(std::move(reason));
        state_.reset();
        return;
      }
    }
    end_state_in_background(std::exchange(state_, nullptr), std::move(reason));
  }

  static void end_state_in_background(std::shared_ptr<detail::lease_state> s,
                                      std::optional<std::string> reason) noexcept {
    if (s->finished.exchange(true)) return;
    s->stop_heartbeat();
    try {
      asio::co_spawn(s->db.get_executor(), finish_quietly(s, std::move(reason)), asio::detached);
    } catch (...) {
      // Spawning failed (out of memory): the lease expires and the job runs again.
    }
  }

  static asio::awaitable<void> finish_quietly(std::shared_ptr<detail::lease_state> s,
                                              std::optional<std::string> reason) {
    try {
      bool repeated = false;  // a repeat that finds the job gone changes nothing: fine here
      if (reason) {
        pg::params p{s->the_job.id, s->worker_id, std::move(*reason), s->token};
        co_await s->settle("SELECT pgqueue.nack($1, $2, $3, NULL, $4)", std::move(p), &repeated);
      } else {
        pg::params p{s->the_job.id, s->worker_id, s->token};
        co_await s->settle("SELECT pgqueue.release($1, $2, $3)", std::move(p), &repeated);
      }
    } catch (const std::exception&) {
      // Nobody is left to tell; the lease expires and the job is retried.
    }
  }

  std::shared_ptr<detail::lease_state> state_;
  int unwinding_at_start_ = 0;
};

/// Acks many leases in one round trip and one commit (pgqueue.ack_batch); every lease ends
/// finished. All must come from handles with one worker id on one connection (e.g. one queue
/// handle), else `errc::invalid_argument` before anything is sent. Returns how many jobs were
/// marked done: a lease that was lost is not, and is not an error here (compare with
/// `leases.size()`). Throws `lease_finished` if one was already finished (before anything is sent),
/// or a connection error (the jobs' leases then expire). Sent again across a reconnect like
/// `lease::ack`; then the count is of the jobs found done by this worker under their claims (one
/// more round trip). Cancellation as `lease::ack`.
inline asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases) {
  if (leases.empty()) co_return 0;
  const auto state = co_await asio::this_coro::cancellation_state;
  detail::throw_if_cancelled(state, "ack_batch cancelled before it started; the leases are held");
  for (auto& l : leases) {
    if (l.finished()) throw error(errc::lease_finished, "ack_batch: a lease is already finished");
    // One statement acks for one worker id: leases of handles with other ids would be left
    // claimed (and run again after their lease expires).
    if (l.state_->worker_id != leases.front().state_->worker_id) {
      throw error(errc::invalid_argument,
                  "ack_batch: the leases were claimed under different worker ids ('" +
                      leases.front().state_->worker_id + "', '" + l.state_->worker_id +
                      "'); ack them in one batch per queue handle");
    }
    // The statement goes to one database: a job claimed through another connection (perhaps
    // another database, with the same explicit worker id) would not be found there.
    if (!(l.state_->db == leases.front().state_->db)) {
      throw error(errc::invalid_argument,
                  "ack_batch: the leases were claimed on different connections; ack them in one "
                  "batch per connection");
    }
  }
  std::vector<std::shared_ptr<detail::lease_state>> states;
  for (auto& l : leases) {
    // The leases keep their state (finished), so job() still answers afterwards.
    l.state_->finished = true;
    l.state_->stop_heartbeat();
    states.push_back(l.state_);  // lost ones too: the server decides (see finish())
  }
  if (states.empty()) co_return 0;
  auto op = lease::do_ack_batch(std::move(states));
  co_return co_await detail::shielded(std::move(op));
}

}  // namespace pgqueue
