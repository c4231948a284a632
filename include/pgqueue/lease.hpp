// pgqueue::lease: a claimed job, held for as long as the object lives.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/this_coro.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"
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
  lease& operator=(lease&& other) noexcept;
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
  /// or nack inside a transaction is pending (nothing sent), the server's error when it
  /// refused the statement (e.g. 55P03 past a `lock_timeout`, 57014 past a
  /// `statement_timeout`: nothing changed, and the lease is still held and heartbeating, so
  /// the call may be made again, and a lease destroyed is nacked as usual), or a connection
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
  asio::awaitable<void> ack();

  /// Gives the job back after a failure: retried after the queue's back-off (or `delay`), or
  /// ended `dead` when this was its last attempt; `reason` is kept in `last_error`. One round
  /// trip. Throws as `ack`, and `errc::invalid_argument` (the lease still held and usable) for
  /// a reason with a NUL byte or a delay that is negative or reaches past what system_clock
  /// can represent. Invalid UTF-8 in `reason` is stored as '?' and a reason longer than 2000
  /// bytes is cut (the server keeps at most that). Sent again across a reconnect like `ack`
  /// (if the job is then found ready or dead under this claim, that is what is returned).
  /// Cancellation as `ack`.
  asio::awaitable<nack_result> nack(std::string reason,
                                    std::optional<std::chrono::milliseconds> delay = {});

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
  asio::awaitable<void> ack(pg::transaction& tx);

  /// As `nack`, inside `tx` (see `ack(tx)`): the job is retried or dead if and only if `tx`
  /// commits. Throws as `nack` and `ack(tx)`.
  asio::awaitable<nack_result> nack(pg::transaction& tx, std::string reason,
                                    std::optional<std::chrono::milliseconds> delay = {});

  /// Gives the job back without using up its attempt (e.g. shutting down): ready again at once.
  /// One round trip. Throws as `ack`; sent again across a reconnect like `ack`. Cancellation
  /// as `ack`.
  asio::awaitable<void> release();

 private:
  friend class queue;
  friend class worker;
  friend asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases);

  static asio::awaitable<std::size_t> do_ack_batch(
      std::vector<std::shared_ptr<detail::lease_state>> states);

  explicit lease(std::shared_ptr<detail::lease_state> s)
      : state_(std::move(s)), unwinding_at_start_(std::uncaught_exceptions()) {
    state_->start_heartbeat();
  }

  static asio::awaitable<void> do_ack(std::shared_ptr<detail::lease_state> s);

  static asio::awaitable<nack_result> do_nack(std::shared_ptr<detail::lease_state> s,
                                              std::string reason,
                                              std::optional<std::chrono::milliseconds> delay);

  static asio::awaitable<void> do_release(std::shared_ptr<detail::lease_state> s);
  // The first statement of a final operation (settle): one the server refused changed
  // nothing, so the lease is held again (see lease_state::held_again) before the error goes on.
  static asio::awaitable<pg::result> settle_own(std::shared_ptr<detail::lease_state> s,
                                                std::string_view sql, pg::params args,
                                                bool* repeated);

  // The job's state as far as this claim is concerned (pgqueue.lease_outcome): its state while
  // no later claim was made, else "lost". One round trip, after a repeated final operation.
  static asio::awaitable<std::string> outcome_of(const std::shared_ptr<detail::lease_state>& s,
                                                 bool* repeated);

  static void check_nack_args(const std::string& reason,
                              const std::optional<std::chrono::milliseconds>& delay);

  // Before an ack or nack inside a transaction: the lease must be held, with no other such
  // operation pending. Marks one pending (a destroyed handle then leaves the job to it).
  std::shared_ptr<detail::lease_state> begin_in_transaction();

  // The operation did not take effect: the lease is as before (or, if its handle went away
  // meanwhile, given back now as the destructor would have).
  static void not_in_transaction(const std::shared_ptr<detail::lease_state>& s);

  // The lease follows `tx`: finished as `outcome` when it commits; held again when it rolls
  // back (or given back, if its handle went away meanwhile).
  static void follow(pg::transaction& tx, std::shared_ptr<detail::lease_state> s,
                     detail::lease_state::outcome outcome);

  static std::chrono::milliseconds max_delay() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::time_point::max() - std::chrono::system_clock::now());
  }

  static error lost_error(const detail::lease_state& s);

  // Ends the lease's own life (heartbeats stop) before a final operation; throws if that is
  // not possible.
  std::shared_ptr<detail::lease_state> finish();

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
  void end_in_background(std::optional<std::string> reason) noexcept;

  static void end_state_in_background(std::shared_ptr<detail::lease_state> s,
                                      std::optional<std::string> reason) noexcept;

  static asio::awaitable<void> finish_quietly(std::shared_ptr<detail::lease_state> s,
                                              std::optional<std::string> reason);

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
asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases);

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/lease.ipp"
#endif
