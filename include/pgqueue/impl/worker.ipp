// Out-of-line definitions of pgqueue/worker.hpp: included at its end (header-only), or compiled
// once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/worker.hpp"

namespace pgqueue {

PGQUEUE_DECL asio::awaitable<void> worker::run() {
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

PGQUEUE_DECL void worker::stop() {
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

PGQUEUE_DECL worker_stats worker::stats() const noexcept {
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

PGQUEUE_DECL asio::awaitable<void> worker::join(std::shared_ptr<run_control> ctl) {
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
        asio::co_spawn(ctl->strand, body(ctl),
                       asio::bind_cancellation_slot(asio::cancellation_slot(), std::move(resume)));
      },
      asio::use_awaitable, std::move(ctl));
}

PGQUEUE_DECL asio::awaitable<void> worker::body(std::shared_ptr<run_control> ctl) {
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

PGQUEUE_DECL void worker::request_stop(bool now) {
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

PGQUEUE_DECL asio::awaitable<void> worker::serve() {
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

PGQUEUE_DECL asio::awaitable<void> worker::serve_on(strand_type strand) {
  strand_.emplace(std::move(strand));
  changed_.emplace(*strand_);
  co_await serve();
}

PGQUEUE_DECL asio::awaitable<void> worker::run_lanes() {
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

PGQUEUE_DECL asio::awaitable<void> worker::claim_loop() {
  const auto ex = *strand_;
  // LISTENed for the whole run: an idle period then costs the wait_hint and the claim that
  // ends it, not a LISTEN, a second check and an UNLISTEN as well.
  pg::subscription wakeups;
  detail::repeat_pacing pacing;
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
      // Or the server refused the claim this once (it waited past a lock_timeout, say): again
      // after the same pacing; it took no job.
      if (!detail::claim_again_after_failure(stopping_, send_again(e))) throw;
      if (refused_this_once(e)) ++stats_.refused;
      dropped = true;
      if (reconnecting(e)) wakeups.unsubscribe();  // subscribed again once the session is back
    }
    if (dropped) {
      const auto pause = pacing.after_drop(q_.db().reconnects());
      if (pause.count() > 0) co_await changed_->wait(pause);
      continue;
    }
    pacing.answered();
    stats_.claimed += got.size();
    for (auto& l : got) notify(job_event_kind::claimed, l.job());
    for (auto& l : got) {
      if (stopping_) {
        const bool released = co_await give_back(l);
        notify(released ? job_event_kind::released : job_event_kind::lost, l.job());
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

PGQUEUE_DECL auto worker::take_acks() -> pending_acks {
  pending_acks p{std::move(to_ack_), {}, {}};
  to_ack_.clear();
  auto f = detail::lease_state::fence_of(p.batch);
  p.ids = std::move(f.ids);
  p.tokens = std::move(f.tokens);
  return p;
}

PGQUEUE_DECL asio::awaitable<std::vector<lease>> worker::ack_and_claim(int want) {
  if (to_ack_.empty()) co_return co_await q_.try_claim_batch(want);
  auto acks = take_acks();
  auto& batch = acks.batch;
  auto& ids = acks.ids;
  auto& tokens = acks.tokens;
  const auto sent = static_cast<std::int64_t>(ids.size());
  const bool repeated = std::exchange(acks_repeated_, false);
  try {
    auto r = co_await q_.ack_and_try_claim(ids, tokens, want);
    auto acked = static_cast<std::int64_t>(r.acked.size());
    if (repeated && acked < sent) {
      acked = co_await count_acked(std::move(ids), std::move(tokens));
    }
    stats_.acked += acked;
    stats_.lost += sent - acked;
    notify_acks(batch, std::move(r.acked), acked == sent);
    co_return std::move(r.leases);
  } catch (const error& e) {
    // The server refused the statement (nothing it asked was done) or the connection is
    // coming back: the acks go out again, with the next claim or on their own (ack_batch)
    // before run() ends, should the claim's failure end it. (Acks riding a claim that was
    // refused for good, e.g. 42501, were counted lost: their jobs ran again.)
    if (!send_again(e) && e.code() != pg::errc::server_error) {
      stats_.lost += sent;  // unconfirmed: the leases expire and the jobs run again
      notify_acks(batch, {}, false);
      throw;
    }
    retry_acks(batch);
    throw;
  }
}

PGQUEUE_DECL void worker::retry_acks(std::vector<std::shared_ptr<detail::lease_state>>& batch) {
  const auto now = clock::now();
  for (auto& s : batch) {
    if (s->expires.load() > now) {
      to_ack_.insert(to_ack_.begin(), std::move(s));
    } else {
      ++stats_.lost;
      notify(job_event_kind::lost, s->the_job, s->handler_time);
    }
  }
  acks_repeated_ = true;
}

PGQUEUE_DECL asio::awaitable<std::int64_t> worker::count_acked(std::vector<std::int64_t> ids,
                                                               std::vector<std::int64_t> tokens) {
  try {
    pg::params p{ids, q_.options().worker_id, tokens};
    auto r = co_await q_.db().query(detail::lease_state::count_acked_sql, std::move(p));
    co_return r.get<std::int64_t>(0, 0);
  } catch (const std::exception&) {
    co_return 0;  // the jobs are done or will run again; only the count is unknown
  }
}

template <class Op>
asio::awaitable<void> worker::own_final(Op op) {
  const auto give_up = clock::now() + q_.options().lease;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    try {
      co_await op();
      co_return;
    } catch (const error& e) {
      if (!refused_this_once(e) || forced_ || clock::now() >= give_up) throw;
      ++stats_.refused;
    }
    pause.expires_after(detail::repeat_pacing::pause);
    std::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

PGQUEUE_DECL asio::awaitable<bool> worker::give_back(lease& l) {
  try {
    co_await own_final([&l] { return l.release(); });
    ++stats_.released;
    co_return true;
  } catch (const std::exception&) {
    ++stats_.lost;  // it expires and runs again
  }
  co_return false;
}

PGQUEUE_DECL asio::awaitable<void> worker::handle_in_transaction(lease& l) {
  co_await pg::in_transaction(
      q_.sessions(), [this, &l](pg::transaction& tx) { return handle_then_ack(l, tx); },
      options_.transaction);
}

PGQUEUE_DECL asio::awaitable<void> worker::handle_then_ack(lease& l, pg::transaction& tx) {
  co_await tx_handler_(l.job(), tx);
  if (!tx.active()) {
    // What it wrote is committed (or rolled back) without the ack: the job runs again.
    throw error(errc::invalid_argument,
                "the handler ended its transaction itself (commit or rollback); the worker "
                "commits it, with the job's ack");
  }
  co_await l.ack(tx);
}

PGQUEUE_DECL asio::awaitable<void> worker::run_job(lease l, std::shared_ptr<running> self) {
  // The job as claimed, for the observer: the handler may move the lease away.
  const auto observed = options_.observer ? l.state_ : nullptr;
  if (observed) notify(job_event_kind::started, observed->the_job);
  const auto started = clock::now();
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
  const auto run_time = clock::now() - started;
  std::optional<job_event_kind> ending = job_event_kind::lost;
  std::string error;
  try {
    switch (detail::next_step(l.finished(), failure.has_value(), l.lost(), forced_,
                              options_.coalesce_acks)) {
      case detail::job_step::counted:
        // A cancel cannot cut the handler's own final request off once begun: lease's final
        // operations run to their answer (shielded).
        if (l.state_) ending = count_own_outcome(l.state_->ended_as.load());  // not when moved
        break;
      case detail::job_step::forgotten:
        // Most likely stopped by the lost signal.
        l.forget();
        ++stats_.lost;
        break;
      case detail::job_step::given_back:
        // cut short by the stop: not the job's fault
        if (co_await give_back(l)) ending = job_event_kind::released;
        break;
      case detail::job_step::nacked:
        if (observed) error = *failure;
        if (co_await nack_failed(l, std::move(*failure))) ending = job_event_kind::failed;
        break;
      case detail::job_step::coalesced:
        if (observed) observed->handler_time = run_time;
        to_ack_.push_back(l.detach_for_ack());
        ending = std::nullopt;  // told once the server has answered the ack (notify_acks)
        // This job's slot is free now, so the claim loop claims within a round trip.
        if (detail::flush_acks_now(idle_, stopping_)) flush_acks();
        break;
      case detail::job_step::acked:
        co_await own_final([&l] { return l.ack(); });
        ++stats_.acked;
        ending = job_event_kind::finished;
        break;
    }
  } catch (const std::exception&) {
    ++stats_.lost;  // lease lost, or the connection failed: the job runs again
    ending = job_event_kind::lost;
  }
  if (observed && ending) notify(*ending, observed->the_job, run_time, error);
  --in_flight_;
  std::erase(handlers_, self);
  changed_->notify();
}

PGQUEUE_DECL job_event_kind worker::count_own_outcome(detail::lease_state::outcome o) {
  switch (o) {
    case detail::lease_state::outcome::acked:
      ++stats_.acked;
      return job_event_kind::finished;
    case detail::lease_state::outcome::failed:
      ++stats_.failed;
      return job_event_kind::failed;
    case detail::lease_state::outcome::released:
      ++stats_.released;
      return job_event_kind::released;
    case detail::lease_state::outcome::none:
      break;
  }
  ++stats_.lost;  // the lease was lost, or the outcome is unknown
  return job_event_kind::lost;
}

PGQUEUE_DECL asio::awaitable<bool> worker::nack_failed(lease& l, std::string reason) {
  std::string refused;
  try {
    co_await own_final([&l, &reason] { return l.nack(reason); });
    ++stats_.failed;
    co_return true;
  } catch (const error& e) {
    if (e.code() != pg::errc::server_error) throw;
    refused = e.sqlstate();
  }
  // A refused nack changed nothing: the lease is held, for the nack with a fixed reason.
  try {
    co_await own_final([&l, &refused] {
      return l.nack("the handler failed; the server refused its message (SQLSTATE " +
                    detail::clean_error_text(refused, 5) + ")");
    });
  } catch (const error& e) {
    if (e.code() != errc::lease_lost) throw;
    ++stats_.lost;  // taken back meanwhile
    co_return false;
  }
  ++stats_.failed;
  co_return true;
}

PGQUEUE_DECL asio::awaitable<void> worker::ack_loop() {
  detail::repeat_pacing pacing;
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
          "SELECT unnest(pgqueue.ack_batch($1::bigint[], $2, $3::bigint[]))", std::move(p));
      std::vector<std::int64_t> acked_ids;
      for (int i = 0; i < r.rows(); ++i) acked_ids.push_back(r.get<std::int64_t>(i, 0));
      auto acked = static_cast<std::int64_t>(acked_ids.size());
      const auto sent = static_cast<std::int64_t>(ids.size());
      if (repeated && acked < sent) {
        acked = co_await count_acked(std::move(ids), std::move(tokens));
      }
      stats_.acked += acked;
      stats_.lost += sent - acked;
      notify_acks(batch, std::move(acked_ids), acked == sent);
      pacing.answered();
    } catch (const error& e) {
      if (send_again(e) && !forced_) {
        if (refused_this_once(e)) ++stats_.refused;
        retry_acks(batch);
        dropped = true;
      } else {
        stats_.lost += ids.size();  // unconfirmed: the leases expire and the jobs run again
        notify_acks(batch, {}, false);
      }
    } catch (const std::exception&) {
      stats_.lost += ids.size();
      notify_acks(batch, {}, false);
    }
    if (dropped) {
      const auto pause = pacing.after_drop(q_.db().reconnects());
      if (pause.count() > 0) co_await changed_->wait(pause);
    }
  }
  ack_in_flight_ = false;
  changed_->notify();
}

PGQUEUE_DECL asio::awaitable<void> worker::drain() {
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
        // Past stop_timeout (or stopping now), what the server refuses or a reconnect holds up
        // is not sent again: an ack batch under a row lock held for minutes kept stop()
        // waiting as long. Its jobs are counted lost and run again once their leases expire.
        if (stop_now_ || now >= deadline) forced_ = true;
        changed_->notify();  // wakes the janitor loop so it sees stopping_
        co_await changed_->wait(std::chrono::milliseconds(100));
        break;
      case detail::drain_step::done:
        co_return;
    }
  }
}

PGQUEUE_DECL asio::awaitable<void> worker::janitor_loop() {
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

}  // namespace pgqueue
