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
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

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
  asio::awaitable<void> run() {
    auto ex = co_await asio::this_coro::executor;
    // A cancellation that came before run() started anything would be lost by the reset below.
    auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw error(asio::error::operation_aborted, "worker::run() cancelled before it started");
    }
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    auto ctl = std::make_shared<run_control>(make_worker_strand(ex));
    {
      std::lock_guard<std::mutex> lock(control_mutex_);
      control_ = ctl;
    }
    std::exception_ptr failure;
    try {
      co_await join(ctl);
    } catch (...) {
      failure = std::current_exception();
    }
    // A cancellation left the state cancelled; the caller's coroutine continues normally.
    co_await asio::this_coro::reset_cancellation_state();
    if (failure) std::rethrow_exception(failure);
    if (ctl->cancelled) {
      throw error(asio::error::operation_aborted, "worker::run() cancelled; the worker stopped");
    }
  }

  /// Asks run() to stop: no more claims; running handlers get stop_timeout to finish. Any
  /// thread (it takes effect on the worker's strand; at once when called there, e.g. from a
  /// handler). Before run(), run() then stops as soon as it starts. Does not wait: run()
  /// returns when the stop is complete.
  void stop() {
    std::shared_ptr<run_control> ctl;
    {
      std::lock_guard<std::mutex> lock(control_mutex_);
      stop_requested_ = true;
      ctl = control_;
    }
    if (!ctl) return;
    asio::dispatch(ctl->strand, [ctl] {
      if (ctl->body) ctl->body->request_stop(false);
    });
  }

  /// What the worker did so far (summed over its sessions). Read it on the worker's strand
  /// (from a handler) or after run() has returned.
  worker_stats stats() const noexcept {
    worker_stats sum = stats_;  // with lanes: earlier runs' (see run_lanes)
    for (const auto& lane : lanes_) {
      const auto s = lane->stats();
      sum.claimed += s.claimed;
      sum.acked += s.acked;
      sum.failed += s.failed;
      sum.lost += s.lost;
      sum.released += s.released;
      sum.janitor_reset += s.janitor_reset;
    }
    return sum;
  }

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
  asio::awaitable<void> join(std::shared_ptr<run_control> ctl) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
        [this](auto handler, std::shared_ptr<run_control> ctl) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          if (slot.is_connected()) {
            slot.assign([ctl](asio::cancellation_type_t type) {
              const auto kind = detail::stop_for(type);
              if (kind == detail::stop_kind::none) return;
              const bool now = kind == detail::stop_kind::now;
              asio::post(ctl->strand, [ctl, now] {
                if (!ctl->body) return;  // ended meanwhile
                ctl->cancelled = true;
                ctl->body->request_stop(now);
              });
            });
          }
          // Resumes the caller on its own executor, posted so the body's frames are gone
          // first; the slot is the caller's, so it is cleared there.
          auto resume = [h = std::move(handler)](std::exception_ptr e) mutable {
            auto ex = asio::get_associated_executor(h);
            asio::post(ex, [h = std::move(h), e]() mutable {
              asio::get_associated_cancellation_slot(h).clear();
              std::move(h)(e);
            });
          };
          asio::co_spawn(
              ctl->strand, body(ctl),
              asio::bind_cancellation_slot(asio::cancellation_slot(), std::move(resume)));
        },
        asio::use_awaitable, std::move(ctl));
  }

  // run() on the strand: ends only when everything it started has ended.
  asio::awaitable<void> body(std::shared_ptr<run_control> ctl) {
    strand_.emplace(ctl->strand);
    changed_.emplace(*strand_);
    ctl->body = this;
    // What an earlier run() left: a worker may run again after run() returned.
    stopping_ = stop_now_ = forced_ = false;
    lane_failure_ = nullptr;
    {
      std::lock_guard<std::mutex> lock(control_mutex_);
      if (stop_requested_) stopping_ = true;
    }
    std::exception_ptr failure;
    try {
      if (options_.connections > 1) {
        co_await run_lanes();
      } else {
        co_await serve();
      }
    } catch (...) {
      failure = std::current_exception();
    }
    ctl->body = nullptr;
    {
      // A stop() from now on is for the next run().
      std::lock_guard<std::mutex> lock(control_mutex_);
      stop_requested_ = false;
    }
    if (failure) std::rethrow_exception(failure);
  }

  // Stops on the strand: gracefully (handlers get stop_timeout) or `now` (handlers cancelled
  // at once). A second request may only make the stop more urgent.
  void request_stop(bool now) {
    const auto current = stop_now_   ? detail::stop_kind::now
                         : stopping_ ? detail::stop_kind::graceful
                                     : detail::stop_kind::none;
    const auto next =
        detail::merged(current, now ? detail::stop_kind::now : detail::stop_kind::graceful);
    if (next == current) return;
    stopping_ = true;
    stop_now_ = next == detail::stop_kind::now;
    stop_signal_.emit(asio::cancellation_type::terminal);
    for (auto& lane : lanes_) lane->request_stop(now);
    if (changed_) changed_->notify();
  }

  // One session's claim loop, then the shutdown: acks flushed, handlers drained, the janitor
  // ended. Runs on strand_.
  asio::awaitable<void> serve() {
    if (options_.janitor_interval.count() > 0) {
      janitor_running_ = true;
      asio::co_spawn(*strand_, janitor_loop(), asio::detached);
    }
    std::exception_ptr failure;
    try {
      co_await claim_loop();
    } catch (...) {
      if (!stopping_) failure = std::current_exception();
    }
    stopping_ = true;
    flush_acks();  // acks that were waiting for a claim that will not come
    co_await drain();
    if (failure) std::rethrow_exception(failure);
  }

  // A lane of run_lanes(): serve() on the parent's strand.
  asio::awaitable<void> serve_on(strand_type strand) {
    strand_.emplace(std::move(strand));
    changed_.emplace(*strand_);
    co_await serve();
  }

  // With `connections` > 1: one single-session worker (a lane) per session, sharing this
  // worker's handler and strand (so handlers never run at once on two threads); the first lane
  // uses the queue's connection and runs the janitor. A lane that fails stops the others;
  // run() then throws its failure. Ends when every lane has ended, the extra sessions closed.
  asio::awaitable<void> run_lanes() {
    lanes_.clear();
    const int n = options_.connections;
    std::vector<database> extra;
    std::vector<pg::pooled_connection> borrowed;  // a queue on a pool: its sessions, for the run
    std::exception_ptr failure;
    try {
      // A stop cancels a connect or checkout in progress (bounded by connect_timeout or
      // acquire_timeout otherwise).
      for (int i = 1; i < n && !stopping_; ++i) {
        if (q_.sessions()) {
          borrowed.push_back(co_await asio::co_spawn(
              *strand_, q_.sessions().acquire(),
              asio::bind_cancellation_slot(stop_signal_.slot(), asio::use_awaitable)));
          extra.push_back(*borrowed.back());
        } else {
          extra.push_back(co_await asio::co_spawn(
              *strand_, q_.db().connect_another(),
              asio::bind_cancellation_slot(stop_signal_.slot(), asio::use_awaitable)));
        }
      }
    } catch (...) {
      if (!stopping_) failure = std::current_exception();
    }
    if (!failure && !stopping_) {
      for (int i = 0; i < n; ++i) {
        worker_options o = options_;
        o.connections = 1;
        o.concurrency = options_.concurrency / n + (i < options_.concurrency % n ? 1 : 0);
        o.claim_batch = std::min(options_.claim_batch, o.concurrency);
        if (i > 0) o.janitor_interval = std::chrono::milliseconds(0);
        queue lane_queue = i == 0 ? q_ : queue(extra[i - 1], q_.name(), q_.options());
        lanes_.push_back(std::make_unique<worker>(
            std::move(lane_queue), [this](lease& l) { return handler_(l); }, o));
      }
      lanes_left_ = n;
      for (auto& lane : lanes_) {
        // The completion runs on the strand (the spawn executor); the body outlives it.
        asio::co_spawn(
            *strand_, lane->serve_on(*strand_),
            asio::bind_cancellation_slot(asio::cancellation_slot(), [this](std::exception_ptr e) {
              if (e && !lane_failure_) {
                lane_failure_ = e;
                request_stop(false);
              }
              --lanes_left_;
              changed_->notify();
            }));
      }
      while (lanes_left_ > 0) co_await changed_->wait(std::chrono::seconds(1));
      failure = lane_failure_;
    }
    // The lanes' counts go into this worker's, for stats() after this and later runs.
    stats_ = stats();
    lanes_.clear();
    if (borrowed.empty()) {
      for (auto& db : extra) db.close();
    }
    borrowed.clear();  // back to the pool (reset there if anything is left unanswered)
    if (failure) std::rethrow_exception(failure);
  }

  asio::awaitable<void> claim_loop() {
    const auto ex = *strand_;
    // LISTENed for the whole run: an idle period then costs the wait_hint and the claim that
    // ends it, not a LISTEN, a second check and an UNLISTEN as well.
    pg::subscription wakeups;
    for (;;) {
      const auto step =
          detail::next_claim(stopping_, options_.concurrency, in_flight_, options_.claim_batch);
      if (step.what == detail::claim_step::kind::stop) break;
      if (step.what == detail::claim_step::kind::wait_for_slot) {
        co_await changed_->wait(std::chrono::seconds(1));
        continue;
      }
      const int want = step.want;
      std::vector<lease> got;
      bool dropped = false;
      try {
        // Busy: the acks of finished jobs ride along with the claim (one commit for both).
        // Nothing cancels this coroutine (run() gives its body an unconnected slot), so the
        // claim's answer cannot be dropped.
        if (!wakeups) wakeups = co_await q_.subscribe_wakeups();
        const auto seen = wakeups.received();
        got = co_await ack_and_claim(want);
        if (got.empty() && !stopping_) {
          // Idle: wait for a notification or the poll; finished jobs are acked on their own
          // meanwhile. Only this wait is cancelled by stop(); a claim already sent still
          // returns its jobs.
          idle_ = true;
          flush_acks();
          try {
            // A claim the stop cuts short returns its jobs (given back below, awaited) rather
            // than releasing them in the background, which could outlive run() and the
            // session (a lane's) they were claimed on.
            got = co_await asio::co_spawn(
                ex, q_.wait_then_claim(wakeups, seen, want, true),
                asio::bind_cancellation_slot(stop_signal_.slot(), asio::use_awaitable));
          } catch (...) {
            idle_ = false;
            throw;
          }
          idle_ = false;
        }
      } catch (const error& e) {
        // The connection dropped and is reconnecting: claim again once it is back (the next
        // claim waits for the new session). Jobs a lost claim took come back at lease expiry.
        if (!detail::claim_again_after_failure(stopping_, reconnecting(e))) throw;
        dropped = true;
        wakeups.unsubscribe();  // subscribed again once the session is back
      }
      if (dropped) {
        co_await changed_->wait(std::chrono::milliseconds(250));
        continue;
      }
      stats_.claimed += got.size();
      for (auto& l : got) {
        if (stopping_) {
          co_await give_back(l);
          continue;
        }
        auto r = std::make_shared<running>();
        handlers_.push_back(r);
        ++in_flight_;
        asio::co_spawn(ex, run_job(std::move(l), r),
                       asio::bind_cancellation_slot(r->cancel.slot(), asio::detached));
      }
    }
    flush_acks();
  }

  // The finished jobs waiting for an ack, taken out with their ids and lease tokens (the fence).
  struct pending_acks {
    std::vector<std::shared_ptr<detail::lease_state>> batch;
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> tokens;
  };
  pending_acks take_acks() {
    pending_acks p{std::move(to_ack_), {}, {}};
    to_ack_.clear();
    auto f = detail::lease_state::fence_of(p.batch);
    p.ids = std::move(f.ids);
    p.tokens = std::move(f.tokens);
    return p;
  }

  // Claims up to `want` jobs, acking the finished ones (if any) in the same statement.
  asio::awaitable<std::vector<lease>> ack_and_claim(int want) {
    if (to_ack_.empty()) co_return co_await q_.try_claim_batch(want);
    auto acks = take_acks();
    auto& batch = acks.batch;
    auto& ids = acks.ids;
    auto& tokens = acks.tokens;
    const auto sent = static_cast<std::int64_t>(ids.size());
    const bool repeated = std::exchange(acks_repeated_, false);
    try {
      auto r = co_await q_.ack_and_try_claim(ids, tokens, want);
      std::int64_t acked = r.acked;
      if (repeated && acked < sent) {
        acked = co_await count_acked(std::move(ids), std::move(tokens));
      }
      stats_.acked += acked;
      stats_.lost += sent - acked;
      co_return std::move(r.leases);
    } catch (const error& e) {
      if (!reconnecting(e)) {
        stats_.lost += sent;  // unconfirmed: the leases expire and the jobs run again
        throw;
      }
      retry_acks(batch);
      throw;
    }
  }

  // Whether `e` is a dropped connection that is being re-established.
  bool reconnecting(const error& e) const {
    return detail::lease_state::connection_fault(e) && q_.db().is_open();
  }

  // Acks whose outcome a dropped connection left unknown go out again with the next ones
  // (fenced by worker id and lease token, so a repeat cannot touch a later claim), while their
  // leases may still be valid; the others count as lost (they expire and run again).
  void retry_acks(std::vector<std::shared_ptr<detail::lease_state>>& batch) {
    const auto now = clock::now();
    for (auto& s : batch) {
      if (s->expires.load() > now) {
        to_ack_.insert(to_ack_.begin(), std::move(s));
      } else {
        ++stats_.lost;
      }
    }
    acks_repeated_ = true;
  }

  // After a repeated ack: how many of these jobs this worker has acked, whichever try did it
  // (one round trip, only after a connection fault).
  asio::awaitable<std::int64_t> count_acked(std::vector<std::int64_t> ids,
                                            std::vector<std::int64_t> tokens) {
    try {
      pg::params p{ids, q_.options().worker_id, tokens};
      auto r = co_await q_.db().query(detail::lease_state::count_acked_sql, std::move(p));
      co_return r.get<std::int64_t>(0, 0);
    } catch (const std::exception&) {
      co_return 0;  // the jobs are done or will run again; only the count is unknown
    }
  }

  asio::awaitable<void> give_back(lease& l) {
    try {
      co_await l.release();
      ++stats_.released;
    } catch (const std::exception&) {
      ++stats_.lost;  // it expires and runs again
    }
  }

  // A transactional handler's job: the handler and the ack in one transaction (run again
  // after 40001/40P01); a failure leaves the lease held (rolled back) for run_job to nack.
  asio::awaitable<void> handle_in_transaction(lease& l) {
    co_await pg::in_transaction(
        q_.sessions(), [this, &l](pg::transaction& tx) { return handle_then_ack(l, tx); },
        options_.transaction);
  }

  asio::awaitable<void> handle_then_ack(lease& l, pg::transaction& tx) {
    co_await tx_handler_(l.job(), tx);
    if (!tx.active()) {
      // What it wrote is committed (or rolled back) without the ack: the job runs again.
      throw error(errc::invalid_argument,
                  "the handler ended its transaction itself (commit or rollback); the worker "
                  "commits it, with the job's ack");
    }
    co_await l.ack(tx);
  }

  asio::awaitable<void> run_job(lease l, std::shared_ptr<running> self) {
    std::optional<std::string> failure;
    try {
      co_await handler_(l);
    } catch (const std::exception& e) {
      // Any text may come from a handler; the server refuses some (invalid UTF-8, NUL).
      failure = detail::clean_error_text(e.what());
    } catch (...) {
      failure = "handler threw a non-standard exception";
    }
    // A handler cancelled at stop_timeout leaves this coroutine cancelled; the bookkeeping
    // below must still reach the server.
    co_await asio::this_coro::reset_cancellation_state();
    try {
      switch (detail::next_step(l.finished(), failure.has_value(), l.lost(), forced_,
                                options_.coalesce_acks)) {
        case detail::job_step::counted:
          // A cancel cannot cut the handler's own final request off once begun: lease's final
          // operations run to their answer (shielded).
          if (l.state_) count_own_outcome(l.state_->ended_as.load());  // not when moved away
          break;
        case detail::job_step::forgotten:
          // Most likely stopped by the lost signal.
          l.forget();
          ++stats_.lost;
          break;
        case detail::job_step::given_back:
          co_await give_back(l);  // cut short by the stop: not the job's fault
          break;
        case detail::job_step::nacked:
          co_await nack_failed(l, std::move(*failure));
          break;
        case detail::job_step::coalesced:
          to_ack_.push_back(l.detach_for_ack());
          // This job's slot is free now, so the claim loop claims within a round trip.
          if (detail::flush_acks_now(idle_, stopping_)) flush_acks();
          break;
        case detail::job_step::acked:
          co_await l.ack();
          ++stats_.acked;
          break;
      }
    } catch (const std::exception&) {
      ++stats_.lost;  // lease lost, or the connection failed: the job runs again
    }
    --in_flight_;
    std::erase(handlers_, self);
    changed_->notify();
  }

  // A handler's own ack, nack or release, counted as the worker's would be.
  void count_own_outcome(detail::lease_state::outcome o) {
    switch (o) {
      case detail::lease_state::outcome::acked:
        ++stats_.acked;
        break;
      case detail::lease_state::outcome::failed:
        ++stats_.failed;
        break;
      case detail::lease_state::outcome::released:
        ++stats_.released;
        break;
      case detail::lease_state::outcome::none:
        ++stats_.lost;  // the lease was lost, or the outcome is unknown
        break;
    }
  }

  // Nacks with the handler's message. Should the server still refuse it (a statement error,
  // not a connection fault: e.g. a trigger, or an encoding that cannot hold the text), nacks
  // again once with a fixed ASCII reason, so the job is retried now rather than when its lease
  // expires. Throws what the last nack throws.
  asio::awaitable<void> nack_failed(lease& l, std::string reason) {
    std::string refused;
    try {
      co_await l.nack(std::move(reason));
      ++stats_.failed;
      co_return;
    } catch (const error& e) {
      if (e.code() != pg::errc::server_error) throw;
      refused = e.sqlstate();
    }
    // The first nack finished the lease; this one goes through its state, like its
    // destructor's nack.
    const auto s = l.state_;
    pg::params p{s->the_job.id, s->worker_id,
                 "the handler failed; the server refused its message (SQLSTATE " +
                     detail::clean_error_text(refused, 5) + ")",
                 s->token};
    bool repeated = false;
    auto r =
        co_await s->settle("SELECT pgqueue.nack($1, $2, $3, NULL, $4)", std::move(p), &repeated);
    if (r.get<std::string>(0, 0) == "lost") {
      ++stats_.lost;  // taken back meanwhile (or, after a repeat, outcome unknown)
    } else {
      ++stats_.failed;
    }
  }

  // Sends finished jobs in one ack_batch; those finishing meanwhile wait for the next.
  void flush_acks() {
    if (ack_in_flight_ || to_ack_.empty()) return;
    ack_in_flight_ = true;
    asio::co_spawn(*strand_, ack_loop(), asio::detached);
  }

  asio::awaitable<void> ack_loop() {
    while (!to_ack_.empty()) {
      auto acks = take_acks();
      auto& batch = acks.batch;
      auto& ids = acks.ids;
      auto& tokens = acks.tokens;
      const bool repeated = std::exchange(acks_repeated_, false);
      bool dropped = false;
      try {
        pg::params p{ids, q_.options().worker_id, tokens};
        auto r = co_await q_.db().query_prepared(
            "SELECT cardinality(pgqueue.ack_batch($1::bigint[], $2, $3::bigint[]))", std::move(p));
        auto acked = r.get<std::int64_t>(0, 0);
        const auto sent = static_cast<std::int64_t>(ids.size());
        if (repeated && acked < sent) {
          acked = co_await count_acked(std::move(ids), std::move(tokens));
        }
        stats_.acked += acked;
        stats_.lost += sent - acked;
      } catch (const error& e) {
        if (reconnecting(e)) {
          retry_acks(batch);
          dropped = true;
        } else {
          stats_.lost += ids.size();  // unconfirmed: the leases expire and the jobs run again
        }
      } catch (const std::exception&) {
        stats_.lost += ids.size();
      }
      if (dropped) co_await changed_->wait(std::chrono::milliseconds(250));
    }
    ack_in_flight_ = false;
    changed_->notify();
  }

  asio::awaitable<void> drain() {
    const auto deadline = clock::now() + options_.stop_timeout;
    for (;;) {
      const auto now = clock::now();
      switch (detail::next_drain_step(
          {in_flight_, stop_now_, now >= deadline, forced_, ack_in_flight_, janitor_running_})) {
        case detail::drain_step::wait_for_handlers:
          co_await changed_->wait(std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - now + std::chrono::milliseconds(1)));
          break;
        case detail::drain_step::cancel_handlers:
          forced_ = true;
          for (auto handlers = handlers_; auto& r : handlers) {
            r->cancel.emit(asio::cancellation_type::terminal);
          }
          break;
        case detail::drain_step::wait_for_rest:
          changed_->notify();  // wakes the janitor loop so it sees stopping_
          co_await changed_->wait(std::chrono::milliseconds(100));
          break;
        case detail::drain_step::done:
          co_return;
      }
    }
  }

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

  asio::awaitable<void> janitor_loop() {
    bool leader = false;
    std::uint64_t session = 0;  // the lock is the session's: a reconnect loses it
    auto next = clock::now();
    while (!stopping_) {
      if (clock::now() >= next) {
        next = clock::now() + options_.janitor_interval;
        try {
          if (leader && session != q_.db().reconnects()) leader = false;
          if (!leader) {
            session = q_.db().reconnects();
            auto r = co_await q_.db().query(take_janitor_lock_sql, {janitor_lock_key});
            leader = r.get<bool>(0, 0) && session == q_.db().reconnects();
          }
          if (leader) {
            auto r = co_await q_.db().query("SELECT pgqueue.janitor_reset_stale_claims()");
            stats_.janitor_reset += r.get<std::int64_t>(0, 0);
          }
        } catch (const error& e) {
          // A dropped session took the lock with it; a failed statement (a statement_timeout,
          // a deadlock) did not: the lock is still held, once, and kept.
          if (detail::lease_state::connection_fault(e) || !q_.db().is_open()) leader = false;
        } catch (const std::exception&) {
          // Not from the server (e.g. an unreadable answer): the lock is as it was.
        }
      }
      co_await changed_->wait(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(next - clock::now(), clock::duration(std::chrono::milliseconds(1)))));
    }
    // Exactly the one lock taken, and only on the session that took it.
    if (leader && session == q_.db().reconnects()) {
      try {
        co_await q_.db().query("SELECT pg_advisory_unlock($1)", {janitor_lock_key});
      } catch (const std::exception&) {
        // The session is gone (and the lock with it), or it ends with the connection.
      }
    }
    janitor_running_ = false;
    changed_->notify();
  }

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
