// Out-of-line definitions of pgqueue/queue.hpp: included at its end (header-only), or compiled
// once by pgqueue/src.hpp (PGQUEUE_SEPARATE_COMPILATION).
#pragma once

#include "pgqueue/queue.hpp"

namespace pgqueue {

PGQUEUE_DECL queue::queue(database db, std::string name, queue_options options)
    : s_(std::make_shared<detail::queue_state>()) {
  check(options);
  s_->worker_id =
      options.worker_id.empty() ? detail::default_worker_id() : std::string(options.worker_id);
  if (options.heartbeat_interval.count() == 0) options.heartbeat_interval = options.lease / 3;
  s_->db = std::move(db);
  s_->name = std::move(name);
  s_->options = options;
  s_->options.worker_id = s_->worker_id;
}

PGQUEUE_DECL asio::awaitable<queue> queue::open(pg::pool sessions, std::string name,
                                                queue_options options) {
  queue q(co_await sessions.shared(), std::move(name), options);
  q.s_->sessions = std::move(sessions);
  co_return q;
}

PGQUEUE_DECL asio::awaitable<std::int64_t> queue::enqueue(std::string_view payload,
                                                          enqueue_options opts) {
  // Coroutines take their arguments from here as xvalues: GCC 12 destroys a coroutine
  // parameter twice when it is initialised straight from a temporary.
  std::optional<std::string> key;
  if (opts.idempotency_key) key.emplace(*opts.idempotency_key);
  auto deps = take_depends_on(opts);
  return do_enqueue(s_, std::string(payload), std::move(key), opts, std::move(deps));
}

PGQUEUE_DECL asio::awaitable<std::optional<lease>> queue::try_claim() {
  auto got = co_await try_claim_batch(1);
  if (got.empty()) co_return std::nullopt;
  co_return std::move(got.front());
}

PGQUEUE_DECL asio::awaitable<lease> queue::claim() {
  auto got = co_await claim_batch(1);
  co_return std::move(got.front());
}

PGQUEUE_DECL asio::awaitable<std::vector<lease>> queue::claim_batch(int max) {
  auto got = co_await try_claim_batch(max);
  if (!got.empty()) co_return got;
  co_return co_await wait_and_claim(max);
}

PGQUEUE_DECL asio::awaitable<bool> queue::pause() {
  auto r = co_await s_->db.query("SELECT pgqueue.pause($1)", {s_->name});
  co_return r.get<bool>(0, 0);
}

PGQUEUE_DECL asio::awaitable<bool> queue::resume() {
  auto r = co_await s_->db.query("SELECT pgqueue.resume($1)", {s_->name});
  co_return r.get<bool>(0, 0);
}

PGQUEUE_DECL asio::awaitable<void> queue::watch() {
  if (!s_->watcher) s_->watcher.emplace(co_await s_->db.subscribe(co_await channel()));
}

PGQUEUE_DECL asio::awaitable<notification> queue::next_notification() {
  co_await watch();
  co_return co_await s_->watcher->next();
}

PGQUEUE_DECL asio::awaitable<std::vector<lease>> queue::claim_now(int max, bool keep_if_cancelled) {
  if (max < 1 || max > 10000) {
    throw error(errc::invalid_argument,
                "a claim takes 1 to 10000 jobs at a time, not " + std::to_string(max));
  }
  auto home = co_await asio::this_coro::executor;
  // Asio refuses the await itself, unless the caller turned that off (throw_if_cancelled).
  detail::throw_if_cancelled(co_await asio::this_coro::cancellation_state,
                             "claim cancelled before it was sent; nothing was claimed");
  const auto& o = s_->options;
  auto r = co_await s_->db.query_prepared(
      "SELECT id, queue, payload::text, priority, attempts, max_attempts, lease_token, " +
          std::string(claim_times_sql) + " FROM pgqueue.claim_batch($1, $2, $3, $4::interval)",
      {s_->name, o.worker_id, max, detail::lease_state::interval(o.lease)}, pg::cancel_until_sent);
  auto leases = leases_from(r, home);
  const auto state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) {
    if (keep_if_cancelled && !leases.empty()) co_return leases;
    for (auto& l : leases) l.release_in_background();
    throw detail::cancelled_error("claim cancelled; the jobs it took were released");
  }
  co_return leases;
}

PGQUEUE_DECL void queue::check(const queue_options& o) {
  using ms = std::chrono::milliseconds;
  const std::error_code bad = errc::invalid_argument;
  pg::detail::check_between(bad, "queue_options.lease", o.lease, queue_options::min_lease,
                            queue_options::max_lease);
  if (o.heartbeat_interval.count() != 0) {
    pg::detail::check_between(bad, "queue_options.heartbeat_interval (0, or less than lease)",
                              o.heartbeat_interval, ms(1), o.lease - ms(1));
  }
  pg::detail::check_between(bad, "queue_options.poll_interval", o.poll_interval, ms(1),
                            queue_options::max_poll_interval);
  pg::detail::check_between(bad, "queue_options.wake_interval", o.wake_interval,
                            std::chrono::microseconds(0), queue_options::max_wake_interval);
  // Checked here rather than left to the server: it would refuse a NUL byte or invalid UTF-8
  // only at the first claim, and accept any length.
  const auto id = o.worker_id;
  if (id.size() > queue_options::max_worker_id_bytes) {
    throw error(bad, "queue_options.worker_id is " + std::to_string(id.size()) +
                         " bytes; at most " + std::to_string(queue_options::max_worker_id_bytes) +
                         " are allowed");
  }
  if (id.find('\0') != std::string_view::npos || !detail::is_utf8(id)) {
    throw error(bad, "queue_options.worker_id must be UTF-8 without NUL bytes");
  }
}

PGQUEUE_DECL asio::awaitable<std::vector<lease>> queue::wait_and_claim(int max,
                                                                       bool keep_if_cancelled) {
  // Subscribe before checking again: a job committed after this check is then announced to
  // us, and one committed before it is found by it.
  auto sub = co_await subscribe_wakeups();
  const auto seen = sub.received();
  auto got = co_await claim_now(max, keep_if_cancelled);
  if (!got.empty()) co_return got;
  co_return co_await wait_then_claim(sub, seen, max, keep_if_cancelled);
}

PGQUEUE_DECL asio::awaitable<pg::subscription> queue::subscribe_wakeups() {
  co_return co_await s_->db.subscribe(co_await channel());
}

PGQUEUE_DECL asio::awaitable<std::vector<lease>> queue::wait_then_claim(const pg::subscription& sub,
                                                                        std::uint64_t seen, int max,
                                                                        bool keep_if_cancelled) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  detail::idle_backoff backoff(s_->options.poll_interval);
  detail::wait_hint hint;
  // `||` waits for the first operation that succeeds: a subscription that failed (its
  // connection ended for good) would otherwise be noticed only when the timer fires. While a
  // limit holds the queue, only a freed place (or a reconnect) is news: an enqueue's
  // notification would only make it claim nothing again.
  auto news = [&sub, &seen, &hint]() -> asio::awaitable<std::exception_ptr> {
    try {
      auto n = co_await sub.next_after(seen);
      while (hint.held && !detail::frees_a_place(n)) n = co_await sub.next();
    } catch (...) {
      co_return std::current_exception();
    }
    co_return nullptr;
  };
  for (;;) {
    hint = co_await wait_hint();
    timer.expires_after(backoff.next(hint));
    using namespace asio::experimental::awaitable_operators;
    std::error_code ec;
    auto woken =
        co_await (news() || timer.async_wait(asio::redirect_error(asio::use_awaitable, ec)));
    // A cancelled wait goes on to claim_now, which refuses with the usual cancellation error.
    const auto state = co_await asio::this_coro::cancellation_state;
    if (woken.index() == 0 && std::get<0>(woken) &&
        state.cancelled() == asio::cancellation_type::none) {
      std::rethrow_exception(std::get<0>(woken));
    }
    seen = sub.received();
    auto got = co_await claim_now(max, keep_if_cancelled);
    if (!got.empty()) co_return got;
  }
}

PGQUEUE_DECL std::vector<lease> queue::leases_from(const pg::result& r,
                                                   const asio::any_io_executor& home) const {
  const auto& o = s_->options;
  std::vector<lease> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    if (r.is_null(i, 0)) continue;
    job j;
    j.id = r.get<std::int64_t>(i, 0);
    j.queue = r.get<std::string>(i, 1);
    j.payload = r.get<std::string>(i, 2);
    j.priority = r.get<int>(i, 3);
    j.attempts = r.get<int>(i, 4);
    j.max_attempts = r.get<int>(i, 5);
    j.due_at = server_time(r.get<double>(i, 7));
    j.claimed_at = server_time(r.get<double>(i, 8));
    out.push_back(lease(std::make_shared<detail::lease_state>(
        s_->db, std::move(j), r.get<std::int64_t>(i, 6), std::string(o.worker_id), o.lease,
        o.heartbeat_interval, home)));
  }
  return out;
}

PGQUEUE_DECL asio::awaitable<queue::acked_and_claimed> queue::ack_and_try_claim(
    std::vector<std::int64_t> ids, std::vector<std::int64_t> tokens, int max) {
  auto home = co_await asio::this_coro::executor;
  const auto& o = s_->options;
  auto r = co_await s_->db.query_prepared(
      "SELECT NULL::bigint, NULL::text, NULL::text, NULL::int, NULL::int, NULL::int, a.id, "
      "NULL::float8, NULL::float8 "
      "FROM unnest(pgqueue.ack_batch($5::bigint[], $2, $6::bigint[])) a(id) "
      "UNION ALL "
      "SELECT id, queue, payload::text, priority, attempts, max_attempts, lease_token, " +
          std::string(claim_times_sql) + " FROM pgqueue.claim_batch($1, $2, $3, $4::interval)",
      {s_->name, o.worker_id, max, detail::lease_state::interval(o.lease), ids, tokens},
      pg::cancel_until_sent);
  acked_and_claimed out;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.is_null(i, 0)) out.acked.push_back(r.get<std::int64_t>(i, 6));  // an acked job
  }
  out.leases = leases_from(r, home);
  co_return out;
}

PGQUEUE_DECL void queue::check_batch(const std::vector<std::string>& payloads,
                                     const std::vector<std::optional<std::string>>& keys,
                                     const enqueue_options& opts) {
  if (opts.idempotency_key) {
    throw error(errc::invalid_argument, "enqueue_batch takes one key per payload in `keys`");
  }
  if (!keys.empty() && keys.size() != payloads.size()) {
    throw error(errc::invalid_argument, "enqueue_batch needs one key (or nullopt) per payload");
  }
  for (const auto& k : keys) {
    if (k) check_key(*k);
  }
}

PGQUEUE_DECL pg::params queue::enqueue_batch_params(
    const std::string& queue, const std::vector<std::string>& payloads,
    const std::vector<std::optional<std::string>>& keys, const enqueue_options& opts, bool wake,
    const std::vector<std::int64_t>& deps) {
  pg::params p{queue, payloads};
  if (keys.empty()) {
    p.add(std::nullopt);
  } else {
    p.add(keys);
  }
  p.add(opts.priority).add(epoch(opts.run_after)).add(opts.max_attempts).add(wake);
  add_depends_on(p, deps);
  return p;
}

PGQUEUE_DECL asio::awaitable<std::int64_t> queue::do_enqueue(std::shared_ptr<detail::queue_state> s,
                                                             std::string payload,
                                                             std::optional<std::string> key,
                                                             enqueue_options opts,
                                                             std::vector<std::int64_t> deps) {
  opts.idempotency_key.reset();  // use the owned copy: the caller's text may be gone by now
  if (key) check_key(*key);
  auto gate = try_carry(*s, opts);
  auto p = enqueue_params(s->name, payload, key, opts, gate != nullptr, deps);
  auto r = co_await insert_and_wake(s, std::move(gate), true, enqueue_sql, std::move(p));
  co_return r.get<std::int64_t>(0, 0);
}

PGQUEUE_DECL asio::awaitable<std::vector<std::int64_t>> queue::do_enqueue_batch(
    std::shared_ptr<detail::queue_state> s, std::vector<std::string> payloads, enqueue_options opts,
    std::vector<std::optional<std::string>> keys, std::vector<std::int64_t> deps) {
  check_batch(payloads, keys, opts);
  auto gate = payloads.empty() ? nullptr : try_carry(*s, opts);
  auto p = enqueue_batch_params(s->name, payloads, keys, opts, gate != nullptr, deps);
  auto r = co_await insert_and_wake(s, std::move(gate), !payloads.empty(), enqueue_batch_sql,
                                    std::move(p));
  co_return ids_of(r);
}

PGQUEUE_DECL asio::awaitable<std::int64_t> queue::do_enqueue_in(
    std::string queue, const pg::transaction& tx, std::string payload,
    std::optional<std::string> key, enqueue_options opts, std::vector<std::int64_t> deps) {
  if (key) check_key(*key);
  auto p = enqueue_params(queue, payload, key, opts, true, deps);
  auto r = co_await tx.query_prepared(enqueue_sql, std::move(p), pg::cancel_until_sent);
  co_return r.get<std::int64_t>(0, 0);
}

PGQUEUE_DECL asio::awaitable<std::vector<std::int64_t>> queue::do_enqueue_batch_in(
    std::string queue, const pg::transaction& tx, std::vector<std::string> payloads,
    enqueue_options opts, std::vector<std::optional<std::string>> keys,
    std::vector<std::int64_t> deps) {
  check_batch(payloads, keys, opts);
  auto p = enqueue_batch_params(queue, payloads, keys, opts, true, deps);
  auto r = co_await tx.query_prepared(enqueue_batch_sql, std::move(p), pg::cancel_until_sent);
  co_return ids_of(r);
}

PGQUEUE_DECL asio::awaitable<pg::result> queue::insert_and_wake(
    std::shared_ptr<detail::queue_state> s, std::shared_ptr<detail::wake_gate> gate, bool any,
    const char* sql, pg::params p) {
  std::optional<pg::result> r;
  try {
    // Asio refuses the await itself, unless the caller turned that off (throw_if_cancelled).
    detail::throw_if_cancelled(co_await asio::this_coro::cancellation_state,
                               "enqueue cancelled before it was sent; nothing was added");
    r.emplace(co_await s->db.query_prepared(sql, std::move(p), pg::cancel_until_sent));
  } catch (...) {
    if (gate) carried(s, gate, false);
    throw;
  }
  if (gate) {
    carried(s, gate, true);
  } else if (any) {
    wake(s);
  }
  co_return std::move(*r);
}

PGQUEUE_DECL void queue::check_key(std::string_view key) {
  if (key.size() > enqueue_options::max_idempotency_key_bytes) {
    throw error(errc::invalid_argument,
                "idempotency key is " + std::to_string(key.size()) + " bytes; at most " +
                    std::to_string(enqueue_options::max_idempotency_key_bytes) + " are allowed");
  }
}

PGQUEUE_DECL asio::awaitable<std::string> queue::channel() {
  if (s_->channel.empty()) {
    auto r = co_await s_->db.query("SELECT pgqueue.channel($1), pgqueue.check_queue_name($1)",
                                   {s_->name});
    s_->channel = r.get<std::string>(0, 0);
  }
  co_return s_->channel;
}

PGQUEUE_DECL asio::awaitable<detail::wait_hint> queue::wait_hint() {
  auto r = co_await s_->db.query_prepared(
      "SELECT due_now, ceil(extract(epoch FROM next_due - clock_timestamp()) * 1000), held "
      "FROM pgqueue.wait_hint($1)",
      {s_->name});
  detail::wait_hint hint;
  hint.due_now = r.get<bool>(0, 0);
  hint.held = r.get<bool>(0, 2);
  if (auto ms = r.get<std::optional<double>>(0, 1)) {
    hint.next_due = std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
  }
  co_return hint;
}

PGQUEUE_DECL void queue::wake(const std::shared_ptr<detail::queue_state>& s) {
  if (auto gate = s->wake.load()) {
    request_wake(s, gate);
  } else {
    asio::co_spawn(s->db.get_executor(), find_gate_and_wake(s), asio::detached);
  }
}

PGQUEUE_DECL asio::awaitable<void> queue::find_gate_and_wake(
    std::shared_ptr<detail::queue_state> s) {
  std::shared_ptr<detail::wake_gate> gate;
  try {
    auto r = co_await s->db.query(
        "SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' || "
        "current_database()");
    gate = detail::wake_gate::get(r.get<std::string>(0, 0) + '/' + s->name);
    s->wake.store(gate);
  } catch (const std::exception&) {
    co_return;  // a lost wake-up only delays idle workers until their next poll
  }
  request_wake(s, gate);
}

PGQUEUE_DECL asio::awaitable<void> queue::send_wakes(std::shared_ptr<detail::queue_state> s,
                                                     std::shared_ptr<detail::wake_gate> gate,
                                                     std::uint64_t ticket) {
  asio::steady_timer timer(s->db.get_executor());
  do {
    if (auto d = gate->delay(wake_gap(*s)); d > detail::wake_gate::clock::duration::zero()) {
      timer.expires_after(d);
      std::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    if (!gate->begin(ticket)) co_return;  // an enqueue carried it meanwhile
    try {
      co_await s->db.query_prepared("SELECT pgqueue.wake($1)", {s->name});
    } catch (const std::exception&) {
      // A lost wake-up only delays idle workers until their next poll.
    }
    ticket = gate->finish();
  } while (ticket != 0);
}

}  // namespace pgqueue
