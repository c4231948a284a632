// pgqueue::worker: runs a handler over a queue with N jobs at a time.
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/detail/error_text.hpp"
#include "pgqueue/detail/event.hpp"
#include "pgqueue/detail/job_outcome.hpp"
#include "pgqueue/detail/shield.hpp"
#include "pgqueue/detail/worker_schedule.hpp"
#include "pgqueue/lease.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/pool.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "pgqueue/queue.hpp"
#include "pgqueue/worker_options.hpp"

namespace pgqueue {

/// Counters of what a worker did (read them on the worker's strand, e.g. in a handler, or after
/// run()).
struct worker_stats {
  std::uint64_t claimed = 0;        ///< jobs claimed
  std::uint64_t acked = 0;          ///< marked done (handler returned, or acked itself)
  std::uint64_t failed = 0;         ///< nacked (handler threw, or nacked itself)
  std::uint64_t lost = 0;           ///< lease lost (or ack unconfirmed) before the job could finish
  std::uint64_t released = 0;       ///< given back unfinished (at stop(), or by the handler)
  std::uint64_t janitor_reset = 0;  ///< expired leases this worker's janitor took back
  /// Statements the server refused this once (40001, 40P01, 55P03, 57014) that the worker sent
  /// again: claims (with the acks riding on them), ack batches, its own acks, nacks and
  /// releases. run() does not end for these; a count that keeps growing while nothing is
  /// claimed means a lock_timeout or statement_timeout too short for the queue's statements.
  std::uint64_t refused = 0;
};

/// Runs a handler for each job of a queue, `concurrency` at a time: acks when the handler
/// returns, nacks with the exception's message when it throws (ill-formed UTF-8 and control
/// bytes but \t and \n as '?', cut to 2000 bytes; a message the server still refuses is replaced
/// by a fixed one naming the SQLSTATE). Claims in batches and coalesces acks when busy, waits
/// on notifications when idle (LISTENing once per run() and session: an idle period costs a
/// wait_hint and the claim that ends it), and runs the janitor when it holds the fleet's
/// janitor lock.
/// Its own work and the handlers run on a strand that run() makes of the executor awaiting it
/// (a multi-threaded io_context is fine); queries run on the connection's strand. stop() may
/// be called from any thread; cancelling run() stops the worker too (see run()). The worker
/// must outlive run(), and may be destroyed as soon as run() has returned or thrown; run()
/// may then be called again. Destroy it before its io_context (a worker inside the coroutine
/// that awaits run() is: the context destroys that frame).
class worker {
 public:
  /// `handler` is called as `co_await handler(lease&)` (it may ack/nack itself, or watch
  /// `lease.lost_slot()`), as `co_await handler(const job&)`, or, for a queue opened on a pool
  /// (`queue::open(pool, ...)`), as `co_await handler(const job&, pgqueue::transaction&)`.
  ///
  /// A transactional handler runs inside a transaction of its own on a session of the pool
  /// (begun as `options.transaction` says); when it returns the worker acks the job inside that
  /// transaction and commits, so the job is done if and only if what the handler wrote
  /// commits: exactly-once effects for work whose effects live in the same database. A throw
  /// rolls the transaction back and nacks the job (outside it); a 40001 or 40P01 runs the
  /// handler again in a new transaction (see transaction_options::max_attempts). When the
  /// session drops while COMMIT is in flight (`errc::commit_unknown`) the worker nacks: fenced
  /// by the lease token, that nack is refused if the commit took effect (the job is done; it
  /// counts as `lost` in stats()), and retries the job otherwise. Per job: a session checkout
  /// (no round trip when one is idle), BEGIN, the handler's statements, the ack and COMMIT:
  /// size the pool for `concurrency` transactions besides the queue's shared session (and
  /// `connections` - 1 more). The transaction is the worker's: the handler runs statements in
  /// it but neither commits nor rolls it back (one that does has its job nacked), and must not
  /// keep the reference beyond its return.
  ///
  /// No round trip. Throws `errc::invalid_argument` naming the option when one is outside its
  /// range (see worker_options), or for a transactional handler on a queue without a pool or
  /// with `transaction.read_only`.
  template <class Handler>
  worker(queue q, Handler handler, worker_options options = {})
      : q_(std::move(q)), options_(options) {
    if constexpr (std::is_invocable_v<Handler&, lease&>) {
      handler_ = std::move(handler);
    } else if constexpr (std::is_invocable_v<Handler&, const job&, pg::transaction&>) {
      if (!q_.sessions()) {
        throw error(errc::invalid_argument,
                    "a transactional handler needs a queue opened on a pool (queue::open)");
      }
      tx_handler_ = std::move(handler);
      handler_ = [this](lease& l) { return handle_in_transaction(l); };
    } else {
      static_assert(std::is_invocable_v<Handler&, const job&>,
                    "a worker handler takes (pgqueue::lease&), (const pgqueue::job&) or "
                    "(const pgqueue::job&, pgqueue::transaction&)");
      handler_ = [h = std::move(handler)](lease& l) mutable { return h(l.job()); };
    }
    // The ranges worker_options documents: a huge interval overflows steady_clock arithmetic
    // (stop()'s deadline, the janitor's next run), a negative one is most likely a mistake.
    using ms = std::chrono::milliseconds;
    const std::error_code bad = errc::invalid_argument;
    pg::detail::check_between(bad, "worker_options.concurrency", options_.concurrency, 1,
                              worker_options::max_concurrency);
    pg::detail::check_between(bad, "worker_options.connections (up to concurrency)",
                              options_.connections, 1, options_.concurrency);
    pg::detail::check_between(bad, "worker_options.claim_batch", options_.claim_batch, 0, INT_MAX);
    pg::detail::check_between(bad, "worker_options.janitor_interval", options_.janitor_interval,
                              ms(0), worker_options::max_interval);
    pg::detail::check_between(bad, "worker_options.stop_timeout", options_.stop_timeout, ms(0),
                              worker_options::max_interval);
    pg::detail::check_between(bad, "worker_options.transaction.max_attempts",
                              options_.transaction.max_attempts, 1, 100);
    if (options_.transaction.read_only && tx_handler_) {
      throw error(bad,
                  "worker_options.transaction.read_only: the worker acks the job inside "
                  "the handler's transaction");
    }
    if (options_.claim_batch == 0) options_.claim_batch = options_.concurrency;
    options_.claim_batch = std::min({options_.claim_batch, options_.concurrency, 10000});
  }

  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  /// Claims and handles jobs until stopped; then lets running handlers finish (up to
  /// stop_timeout), cancels and releases the rest, waits for pending acks and returns. While
  /// the connection reconnects after a drop it keeps going: claims are sent again, acks whose
  /// outcome was lost are repeated (fenced by lease token) and counted by what the server shows.
  /// So are a claim and acks the server refused this once (SQLSTATE 40001, 40P01, 55P03 or
  /// 57014: a lock or statement timeout the database or role sets).
  ///
  /// Everything the worker runs (its claim, ack and janitor loops, the handlers, the lanes of
  /// `connections` > 1) runs on a strand that run() makes of the awaiting coroutine's
  /// executor, so a multi-threaded io_context is fine. run() returns (or throws) only once all
  /// of that has ended and the sessions it opened are closed: the worker may be destroyed as
  /// soon as run() is done, however it ended. One run() at a time.
  ///
  /// Stopping: stop() (any thread), or cancelling run() through Asio per-operation
  /// cancellation, which run() turns into a stop of the same kind:
  /// - `partial` or `total` (alone or with `terminal`, as `||` and parallel groups emit):
  ///   as stop(): no more claims; handlers get stop_timeout to finish.
  /// - `terminal` alone: stop now: no more claims; running handlers are cancelled at once and
  ///   their jobs released (ready again, the attempt not counted); a handler cut short inside
  ///   its own ack, nack or release has its job released if that request did not run.
  /// A later `terminal` request turns a graceful stop into a stop now. Either way the acks
  /// of finished jobs are sent before run() ends. To receive every type, run() resets the
  /// awaiting coroutine's cancellation state to `enable_total_cancellation` on entry, and to
  /// Asio's default (terminal only) before it ends.
  ///
  /// Returns normally after stop(). Throws `operation_aborted` (as `pgqueue::error`) when it
  /// was cancelled, after the full shutdown (at once, having started nothing, when the
  /// awaiting coroutine was already cancelled); when its own claim fails otherwise (e.g. the
  /// connection is closed for good, or `reconnect` is off) it throws that error, after the
  /// same shutdown. An idle worker learns of such an end at once, not at its next poll. A stop
  /// that comes first wins: a failure after stop() was requested is not thrown (stats() counts
  /// the acks that could not be sent as lost; those jobs run again once their leases expire).
  asio::awaitable<void> run();

  /// Asks run() to stop: no more claims; running handlers get stop_timeout to finish. Any
  /// thread (it takes effect on the worker's strand; at once when called there, e.g. from a
  /// handler). Before run(), run() then stops as soon as it starts. Does not wait: run()
  /// returns when the stop is complete.
  void stop();

  /// What the worker did so far (summed over its sessions). Read it on the worker's strand
  /// (from a handler) or after run() has returned.
  worker_stats stats() const noexcept;

 private:
  using clock = std::chrono::steady_clock;
  // A strand, type-erased: over the io_context's own executor type when that is what run()
  // was awaited on, since a strand over a type-erased executor costs more on every hop
  // (measured: up to a fifth more client CPU per job in the drain benchmark's unbatched rows).
  using strand_type = asio::any_io_executor;
  static strand_type make_worker_strand(const asio::any_io_executor& ex) {
    if (const auto* io = ex.target<asio::io_context::executor_type>())
      return asio::make_strand(*io);
    return asio::make_strand(ex);
  }

  // A running handler, cancellable once stop_timeout has passed.
  struct running {
    asio::cancellation_signal cancel;
  };

  // What run() shares with its body and with stop requests (from stop() on any thread, or
  // from run()'s cancellation slot): shared, so a request arriving after the body ended (the
  // worker may be gone by then) touches nothing freed. `body` and `cancelled` are used on
  // `strand` only.
  struct run_control {
    explicit run_control(strand_type s) : strand(std::move(s)) {}
    strand_type strand;
    worker* body = nullptr;  // set while run()'s body runs
    bool cancelled = false;  // a cancellation of run() reached the body
  };

  // Runs body() on the control's strand with its own, unconnected cancellation slot (as
  // detail::shielded does), and completes when it has ended. A cancellation of the awaiting
  // coroutine reaches the body only as a stop request posted to the strand.
  asio::awaitable<void> join(std::shared_ptr<run_control> ctl);

  // run() on the strand: ends only when everything it started has ended.
  asio::awaitable<void> body(std::shared_ptr<run_control> ctl);

  // Stops on the strand: gracefully (handlers get stop_timeout) or `now` (handlers cancelled
  // at once). A second request may only make the stop more urgent.
  void request_stop(bool now);

  // One session's claim loop, then the shutdown: acks flushed, handlers drained, the janitor
  // ended. Runs on strand_.
  asio::awaitable<void> serve();

  // A lane of run_lanes(): serve() on the parent's strand.
  asio::awaitable<void> serve_on(strand_type strand);

  // With `connections` > 1: one single-session worker (a lane) per session, sharing this
  // worker's handler and strand (so handlers never run at once on two threads); the first lane
  // uses the queue's connection and runs the janitor. A lane that fails stops the others;
  // run() then throws its failure. Ends when every lane has ended, the extra sessions closed.
  asio::awaitable<void> run_lanes();

  asio::awaitable<void> claim_loop();

  // The finished jobs waiting for an ack, taken out with their ids and lease tokens (the fence).
  struct pending_acks {
    std::vector<std::shared_ptr<detail::lease_state>> batch;
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> tokens;
  };
  pending_acks take_acks();

  // Claims up to `want` jobs, acking the finished ones (if any) in the same statement.
  asio::awaitable<std::vector<lease>> ack_and_claim(int want);

  // Whether `e` is a dropped connection that is being re-established.
  bool reconnecting(const error& e) const {
    return detail::lease_state::connection_fault(e) && q_.db().is_open();
  }

  // Whether the statement that failed with `e` goes out again (acks with the next ones, the
  // claim on the next turn): the connection is being re-established, or the server refused it
  // this once (a lock or statement timeout, a serialization failure, a deadlock). The statement
  // then did nothing: its acks are still to do.
  bool send_again(const error& e) const { return reconnecting(e) || refused_this_once(e); }

  static bool refused_this_once(const error& e) {
    return e.code() == pg::errc::server_error && detail::transient_refusal(e.sqlstate());
  }

  // Acks whose outcome a dropped connection left unknown go out again with the next ones
  // (fenced by worker id and lease token, so a repeat cannot touch a later claim), while their
  // leases may still be valid; the others count as lost (they expire and run again).
  void retry_acks(std::vector<std::shared_ptr<detail::lease_state>>& batch);

  // After a repeated ack: how many of these jobs this worker has acked, whichever try did it
  // (one round trip, only after a connection fault).
  asio::awaitable<std::int64_t> count_acked(std::vector<std::int64_t> ids,
                                            std::vector<std::int64_t> tokens);

  // Releases a job this worker will not finish. True when released, false when lost.
  asio::awaitable<bool> give_back(lease& l);

  // Runs `op` (an ack, nack or release of the worker's own) and sends it again while the
  // server refuses it this once (transient_refusal: the lease is then still held), 250 ms
  // apart, for at most the lease's length and not once the stop is forced; rethrows the last
  // failure. (One refusal lost the nack: the job waited for its lease to expire.)
  template <class Op>
  asio::awaitable<void> own_final(Op op);

  // A transactional handler's job: the handler and the ack in one transaction (run again
  // after 40001/40P01); a failure leaves the lease held (rolled back) for run_job to nack.
  asio::awaitable<void> handle_in_transaction(lease& l);

  asio::awaitable<void> handle_then_ack(lease& l, pg::transaction& tx);

  asio::awaitable<void> run_job(lease l, std::shared_ptr<running> self);

  // A handler's own ack, nack or release, counted as the worker's would be; what the
  // observer hears of it.
  job_event_kind count_own_outcome(detail::lease_state::outcome o);

  // Nacks with the handler's message (sent again while refused this once, see own_final).
  // Should the server still refuse it (a statement error, not a connection fault: e.g. a
  // trigger, or an encoding that cannot hold the text), nacks again with a fixed ASCII reason,
  // so the job is retried now rather than when its lease expires. True when nacked, false when the lease was lost. Throws what the last nack throws.
  asio::awaitable<bool> nack_failed(lease& l, std::string reason);

  // Tells the observer how the worker's acks of `batch` ended: `finished` for the jobs in
  // `acked` (or for all, when `all_acked`: a repeated ack that count_acked found all done),
  // `lost` for the others.
  void notify_acks(const std::vector<std::shared_ptr<detail::lease_state>>& batch,
                   std::vector<std::int64_t> acked, bool all_acked) noexcept {
    if (!options_.observer) return;
    // Sorted once: a batch holds up to 10,000 acks, and a lookup each would be quadratic.
    std::sort(acked.begin(), acked.end());
    for (const auto& s : batch) {
      const bool done = all_acked || std::binary_search(acked.begin(), acked.end(), s->the_job.id);
      notify(done ? job_event_kind::finished : job_event_kind::lost, s->the_job, s->handler_time);
    }
  }

  // Tells the observer, if any (noexcept: a throwing observer terminates, as documented).
  void notify(job_event_kind kind, const job& j, clock::duration run_time = {},
              std::string_view error = {}) noexcept {
    if (options_.observer) options_.observer(job_event{kind, j, run_time, error});
  }

  // Sends finished jobs in one ack_batch; those finishing meanwhile wait for the next.
  void flush_acks() {
    if (ack_in_flight_ || to_ack_.empty()) return;
    ack_in_flight_ = true;
    asio::co_spawn(*strand_, ack_loop(), asio::detached);
  }

  asio::awaitable<void> ack_loop();

  asio::awaitable<void> drain();

  // One worker per database runs the janitor: whoever holds this session-level advisory lock.
  static constexpr std::int64_t janitor_lock_key = 8100266002545501542;

  // Takes the janitor lock unless this session holds it already: advisory locks are
  // re-entrant, so another worker on the same connection would take it a second time (and
  // both would run the janitor). pg_locks shows a bigint key as its high and low 32 bits
  // (classid, objid) with objsubid 1. True when this call took it.
  static constexpr std::string_view take_janitor_lock_sql =
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
      "AND pid = pg_backend_pid() AND granted AND classid = ($1::bigint >> 32)::oid "
      "AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1) "
      "THEN false ELSE pg_try_advisory_lock($1) END";

  asio::awaitable<void> janitor_loop();

  queue q_;
  worker_options options_;
  std::function<asio::awaitable<void>(lease&)> handler_;
  std::function<asio::awaitable<void>(const job&, pg::transaction&)> tx_handler_;  // or none
  worker_stats stats_;
  bool stopping_ = false;
  bool forced_ = false;
  bool ack_in_flight_ = false;
  bool idle_ = false;           // the claim loop waits for jobs to appear
  bool acks_repeated_ = false;  // to_ack_ holds acks a dropped connection may have applied
  bool janitor_running_ = false;
  int in_flight_ = 0;
  asio::cancellation_signal stop_signal_;
  std::optional<detail::event> changed_;
  std::optional<strand_type> strand_;  // run()'s, or the parent's for a lane
  std::mutex control_mutex_;           // guards control_ and stop_requested_
  std::shared_ptr<run_control> control_;
  bool stop_requested_ = false;  // stop() was called (perhaps before run())
  bool stop_now_ = false;        // stop without waiting for handlers
  int lanes_left_ = 0;
  std::exception_ptr lane_failure_;
  std::vector<std::shared_ptr<running>> handlers_;
  std::vector<std::shared_ptr<detail::lease_state>> to_ack_;
  std::vector<std::unique_ptr<worker>> lanes_;  // with connections > 1: one per session
};

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/worker.ipp"
#endif
