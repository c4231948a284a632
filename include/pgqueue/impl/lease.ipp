// Out-of-line definitions of pgqueue/lease.hpp: included at its end (header-only), or compiled
// once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/lease.hpp"

namespace pgqueue {

PGQUEUE_DECL lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    abandon();
    state_ = std::move(other.state_);
    unwinding_at_start_ = other.unwinding_at_start_;
  }
  return *this;
}

PGQUEUE_DECL asio::awaitable<void> lease::ack() {
  const auto state = co_await asio::this_coro::cancellation_state;
  detail::throw_if_cancelled(state, "ack cancelled before it started; the lease is still held");
  auto op = do_ack(finish());
  co_await detail::shielded(std::move(op));
}

PGQUEUE_DECL asio::awaitable<nack_result> lease::nack(
    std::string reason, std::optional<std::chrono::milliseconds> delay) {
  // Checked before finish(): a refusal here must leave the lease as it was.
  check_nack_args(reason, delay);
  const auto state = co_await asio::this_coro::cancellation_state;
  detail::throw_if_cancelled(state, "nack cancelled before it started; the lease is still held");
  auto op = do_nack(finish(), detail::clean_error_text(reason), delay);
  co_return co_await detail::shielded(std::move(op));
}

PGQUEUE_DECL asio::awaitable<void> lease::ack(pg::transaction& tx) {
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

PGQUEUE_DECL asio::awaitable<nack_result> lease::nack(
    pg::transaction& tx, std::string reason, std::optional<std::chrono::milliseconds> delay) {
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

PGQUEUE_DECL asio::awaitable<void> lease::release() {
  const auto state = co_await asio::this_coro::cancellation_state;
  detail::throw_if_cancelled(state, "release cancelled before it started; the lease is still held");
  auto op = do_release(finish());
  co_await detail::shielded(std::move(op));
}

PGQUEUE_DECL asio::awaitable<std::size_t> lease::do_ack_batch(
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

PGQUEUE_DECL asio::awaitable<void> lease::do_ack(std::shared_ptr<detail::lease_state> s) {
  pg::params p{s->the_job.id, s->worker_id, s->token};
  bool repeated = false;
  auto r = co_await settle_own(s, "SELECT pgqueue.ack($1, $2, $3)", std::move(p), &repeated);
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

PGQUEUE_DECL asio::awaitable<nack_result> lease::do_nack(
    std::shared_ptr<detail::lease_state> s, std::string reason,
    std::optional<std::chrono::milliseconds> delay) {
  // Built before the co_await: GCC 12 destroys a conditional's temporary in it twice.
  std::optional<std::string> requeue_after;
  if (delay) requeue_after = detail::lease_state::interval(*delay);
  pg::params p{s->the_job.id, s->worker_id, reason, requeue_after, s->token};
  bool repeated = false;
  auto r = co_await settle_own(s, "SELECT pgqueue.nack($1, $2, $3, $4::interval, $5)",
                               std::move(p), &repeated);
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

PGQUEUE_DECL asio::awaitable<void> lease::do_release(std::shared_ptr<detail::lease_state> s) {
  pg::params p{s->the_job.id, s->worker_id, s->token};
  bool repeated = false;
  auto r =
      co_await settle_own(s, "SELECT pgqueue.release($1, $2, $3)", std::move(p), &repeated);
  bool released = r.get<bool>(0, 0);
  // A release that took effect left the job ready under this claim.
  if (!released && repeated) released = co_await outcome_of(s, &repeated) == "ready";
  if (!released) throw lost_error(*s);
  s->ended_as = detail::lease_state::outcome::released;
}

PGQUEUE_DECL asio::awaitable<pg::result> lease::settle_own(std::shared_ptr<detail::lease_state> s,
                                                          std::string_view sql, pg::params args,
                                                          bool* repeated) {
  try {
    co_return co_await s->settle(sql, std::move(args), repeated);
  } catch (const error& e) {
    // (After a repeat the first try's outcome is unknown: the lease stays finished.)
    if (e.code() == pg::errc::server_error && !*repeated) s->held_again();
    throw;
  }
}

PGQUEUE_DECL asio::awaitable<std::string> lease::outcome_of(
    const std::shared_ptr<detail::lease_state>& s, bool* repeated) {
  pg::params q{s->the_job.id, s->worker_id, s->token};
  auto r = co_await s->settle("SELECT pgqueue.lease_outcome($1, $2, $3)", std::move(q), repeated);
  co_return r.get<std::string>(0, 0);
}

PGQUEUE_DECL void lease::check_nack_args(const std::string& reason,
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

PGQUEUE_DECL std::shared_ptr<detail::lease_state> lease::begin_in_transaction() {
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

PGQUEUE_DECL void lease::not_in_transaction(const std::shared_ptr<detail::lease_state>& s) {
  std::optional<std::optional<std::string>> abandoned;
  {
    std::lock_guard lock(s->in_transaction_mutex);
    s->in_transaction = false;
    abandoned = std::exchange(s->abandoned_in_transaction, std::nullopt);
  }
  if (abandoned) end_state_in_background(s, std::move(*abandoned));
}

PGQUEUE_DECL void lease::follow(pg::transaction& tx, std::shared_ptr<detail::lease_state> s,
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

PGQUEUE_DECL error lease::lost_error(const detail::lease_state& s) {
  return error(errc::lease_lost, "lease lost: job " + std::to_string(s.the_job.id) + " (attempt " +
                                     std::to_string(s.the_job.attempts) + ", lease token " +
                                     std::to_string(s.token) + ") is no longer held by worker '" +
                                     s.worker_id + "'; it was taken back after its lease expired");
}

PGQUEUE_DECL std::shared_ptr<detail::lease_state> lease::finish() {
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

PGQUEUE_DECL void lease::end_in_background(std::optional<std::string> reason) noexcept {
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

PGQUEUE_DECL void lease::end_state_in_background(std::shared_ptr<detail::lease_state> s,
                                                 std::optional<std::string> reason) noexcept {
  if (s->finished.exchange(true)) return;
  s->stop_heartbeat();
  try {
    asio::co_spawn(s->db.get_executor(), finish_quietly(s, std::move(reason)), asio::detached);
  } catch (...) {
    // Spawning failed (out of memory): the lease expires and the job runs again.
  }
}

PGQUEUE_DECL asio::awaitable<void> lease::finish_quietly(std::shared_ptr<detail::lease_state> s,
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

PGQUEUE_DECL asio::awaitable<std::size_t> ack_batch(std::vector<lease>& leases) {
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
