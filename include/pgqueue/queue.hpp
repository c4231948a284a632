// pgqueue::queue: enqueue, claim and watch one named queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"
#include "pgqueue/detail/error_text.hpp"
#include "pgqueue/detail/idle_backoff.hpp"
#include "pgqueue/detail/lease_state.hpp"
#include "pgqueue/detail/queue_state.hpp"
#include "pgqueue/detail/shield.hpp"
#include "pgqueue/detail/worker_identity.hpp"
#include "pgqueue/enqueue_options.hpp"
#include "pgqueue/error.hpp"
#include "pgqueue/lease.hpp"
#include "pgqueue/pg/detail/check_option.hpp"
#include "pgqueue/pg/notification.hpp"
#include "pgqueue/pg/transaction.hpp"
#include "pgqueue/queue_options.hpp"

namespace pgqueue {

/// A notification that a job became claimable in a queue (payload: the queue name).
using notification = pg::notification;

/// A handle to one named queue on a database. Cheap to copy (copies share state); any number of
/// coroutines may use it at once. Queue names are 1 to 255 bytes without control characters;
/// the server refuses others with SQLSTATE 22023 at the first call.
class queue {
 public:
  /// Names a queue on `db`; no round trip. Throws `errc::invalid_argument` naming the option
  /// when one is outside its range (see queue_options); the name is checked by the server.
  queue(database db, std::string name, queue_options options = {});

  /// Names a queue on a pool: its own statements (claims, acks, heartbeats, enqueues) run on
  /// the pool's shared session (`pool::shared()`), and a `worker` of it takes the sessions it
  /// needs beyond that one (`connections` > 1, transactional handlers) from the pool. The
  /// first queue of a pool takes the shared session (as `pool::acquire`); later ones no round
  /// trip. Throws as `pool::acquire`, and as the constructor.
  static asio::awaitable<queue> open(pg::pool sessions, std::string name,
                                     queue_options options = {});

  const std::string& name() const noexcept { return s_->name; }
  const queue_options& options() const noexcept { return s_->options; }
  database& db() const noexcept { return s_->db; }
  /// The pool the queue was opened on (`open`); an empty handle for a queue on a `database`.
  const pg::pool& sessions() const noexcept { return s_->sessions; }

  /// Adds a job (`payload` is JSON text) and returns its id; with an idempotency key that is
  /// already in the queue, returns that job's id. One round trip. Listeners are woken at its
  /// commit, or, while another wake-up of the queue is on its way or was sent less than
  /// `wake_interval` ago, by one short transaction that covers many enqueues (not awaited).
  /// A job with `run_after` in the future wakes them too, so an idle claim learns its due time.
  /// With `depends_on` the job waits for those jobs (see enqueue_options::depends_on), still
  /// one round trip. Throws the server's error: 22P02 invalid JSON, 22023 bad queue name or
  /// max_attempts, 23503 a `depends_on` id that is not a job, and connection errors;
  /// `errc::invalid_argument` (nothing sent) for an idempotency key longer than
  /// `enqueue_options::max_idempotency_key_bytes`.
  ///
  /// Cancellation: a cancel before the request is sent (also while it waits for a new session
  /// during a reconnect) throws operation_aborted and adds nothing. Once sent, the enqueue is not
  /// interrupted (the server may already have committed the job): the call waits for the answer,
  /// announces the job and returns its id.
  asio::awaitable<std::int64_t> enqueue(std::string_view payload, enqueue_options opts = {});

  /// Adds many jobs in one statement and one round trip; ids in input order. Options apply to
  /// every job, except `idempotency_key`, which batch calls refuse (use `keys`: one per payload,
  /// std::nullopt for none; each at most `enqueue_options::max_idempotency_key_bytes`). With
  /// `depends_on`, every job of the batch waits for those jobs (a fan-out; a job whose key
  /// already existed gets no new dependencies). Throws as `enqueue`; cancellation as `enqueue`
  /// (all or nothing).
  asio::awaitable<std::vector<std::int64_t>> enqueue_batch(
      std::vector<std::string> payloads, enqueue_options opts = {},
      std::vector<std::optional<std::string>> keys = {}) {
    auto deps = take_depends_on(opts);
    return do_enqueue_batch(s_, std::move(payloads), std::move(opts), std::move(keys),
                            std::move(deps));
  }

  /// Adds a job inside `tx`, the application's transaction: the job exists if and only if `tx`
  /// commits, and listeners are woken at that commit (never for a rollback). One round trip on
  /// the transaction's session. Throws as `enqueue` (a server error also fails `tx`: roll it
  /// back), and `errc::closed` when `tx` has ended. The queue handle's own connection is not
  /// used. A cancel before the request is sent adds nothing; once sent, the call waits for
  /// the answer (the transaction's fate decides the job's).
  asio::awaitable<std::int64_t> enqueue(const pg::transaction& tx, std::string_view payload,
                                        enqueue_options opts = {}) {
    std::optional<std::string> key;
    if (opts.idempotency_key) key.emplace(*opts.idempotency_key);
    auto deps = take_depends_on(opts);
    return do_enqueue_in(s_->name, tx, std::string(payload), std::move(key), opts, std::move(deps));
  }

  /// As `enqueue_batch`, inside `tx` (see `enqueue(tx, ...)`): all the jobs exist if and only
  /// if `tx` commits.
  asio::awaitable<std::vector<std::int64_t>> enqueue_batch(
      const pg::transaction& tx, std::vector<std::string> payloads, enqueue_options opts = {},
      std::vector<std::optional<std::string>> keys = {}) {
    auto deps = take_depends_on(opts);
    return do_enqueue_batch_in(s_->name, tx, std::move(payloads), std::move(opts), std::move(keys),
                               std::move(deps));
  }

  /// Claims the next due job, or returns nothing at once when there is none. One round trip.
  /// Expired leases of any queue are taken back first when that is due (at most once a second
  /// across the database, by whichever claim comes first), so jobs of a crashed holder come
  /// back even without a `worker`.
  ///
  /// Cancellation: a cancel before the request is sent (also while it waits for a new session
  /// during a reconnect) throws operation_aborted and claims nothing. Once sent, the claim is
  /// completed; if the caller was cancelled meanwhile, the jobs it took are released (ready again
  /// at once, the attempt not counted) and it throws operation_aborted. A cancelled claim never
  /// strands a job.
  asio::awaitable<std::optional<lease>> try_claim();

  /// Claims up to `max` due jobs (1 to 10000) in one round trip; empty when none is due.
  /// Throws `errc::invalid_argument` (nothing sent) for `max` outside 1..10000, as
  /// `claim_batch` does. Cancellation as `try_claim`.
  asio::awaitable<std::vector<lease>> try_claim_batch(int max) { return claim_now(max, false); }

  /// Waits until a job is claimable and claims it. Idle, it waits for an event: a
  /// notification (a job enqueued, retried or taken back; a job enqueued for later tells it
  /// the new due time), the due time of the next scheduled job, or `poll_interval` (since
  /// notifications can be lost), whichever comes first. A due job it cannot claim (row-locked
  /// by another transaction) is re-checked with a back-off from 10 ms up to `poll_interval`,
  /// never in a tight loop. After a reconnect it re-checks at once (the subscription's
  /// `reconnected` marker), since notifications sent meanwhile are lost. A request of its own
  /// that the drop caught in flight fails it with `connection_lost`; so does the drop itself
  /// when the connection ends for good (closed, or `reconnect` off), at once rather than at
  /// the next poll. Two round trips per check when nothing is found (the claim, and what to
  /// wait for).
  ///
  /// Cancellation: the wait is interrupted at once (operation_aborted); a claim request
  /// already sent is completed and its jobs released, as `try_claim`. Nothing is stranded.
  asio::awaitable<lease> claim();

  /// Waits until at least one job is claimable, then claims up to `max`. As `claim`.
  asio::awaitable<std::vector<lease>> claim_batch(int max);

  /// Pauses the queue for every process: it keeps accepting jobs, and every claim (anyone's)
  /// hands none out until `resume()`; jobs already claimed run on and finish as usual, and
  /// idle claimers wait without polling. True when it was running. One round trip. Needs the
  /// schema owner's rights (`pgqueue.pause` is not granted to producer or worker roles):
  /// SQLSTATE 42501 otherwise; 22023 for a bad queue name, or on a session whose default
  /// isolation is REPEATABLE READ or SERIALIZABLE (pgqueue.pause runs in READ COMMITTED only).
  asio::awaitable<bool> pause();

  /// Resumes a paused queue and wakes its idle claimers at once (at commit). True when it was
  /// paused. One round trip; fails as `pause()`.
  asio::awaitable<bool> resume();

  /// Starts listening for this queue's notifications (what next_notification() receives) and
  /// returns once the server confirmed it, so nothing committed after that is missed. One
  /// round trip the first time; nothing afterwards.
  asio::awaitable<void> watch();

  /// The next notification that a job became claimable in this queue (enqueue, immediate retry,
  /// janitor, retry_dead). The first call subscribes (one round trip); notifications arriving
  /// between calls are kept. Notifications can be lost while disconnected: use it as a hint,
  /// not a count; after a reconnect one arrives with `reconnected == true` (check the queue).
  /// Cancellable. Meant for one waiting coroutine per queue handle.
  asio::awaitable<notification> next_notification();

 private:
  friend class worker;

  // try_claim_batch; with `keep_if_cancelled`, a cancelled caller gets the jobs the claim took
  // (to give them back itself) instead of their release in the background and an error.
  asio::awaitable<std::vector<lease>> claim_now(int max, bool keep_if_cancelled);

  // The ranges queue_options documents. Checked before anything uses the values: an enormous
  // lease overflows steady_clock arithmetic, a negative interval makes a timer loop spin.
  static void check(const queue_options& o);

  // claim_batch after a check that found nothing. With `keep_if_cancelled` as claim_now.
  asio::awaitable<std::vector<lease>> wait_and_claim(int max, bool keep_if_cancelled = false);

  // The LISTEN on this queue's wake-ups, for a claimer that keeps it across claims (the
  // worker: one per run and session instead of a LISTEN and an UNLISTEN per idle period).
  asio::awaitable<pg::subscription> subscribe_wakeups();

  // Waits for an event and claims, until a claim gets a job. The caller's last claim found
  // nothing and was sent once `sub` had received `seen` notifications: those are stale (that
  // claim saw what they announced), the later ones news.
  asio::awaitable<std::vector<lease>> wait_then_claim(const pg::subscription& sub,
                                                      std::uint64_t seen, int max,
                                                      bool keep_if_cancelled);

  // Leases for the claimed rows of `r` (columns as try_claim_batch's; rows without an id are
  // not jobs), their lost signals on `home` (the claiming coroutine's executor).
  std::vector<lease> leases_from(const pg::result& r, const asio::any_io_executor& home) const;
  // What claims select besides the job's columns: when it became due ('-infinity', which the
  // seed allowed, counts as the claim's own time) and when it was claimed, in epoch seconds.
  static constexpr const char* claim_times_sql =
      "extract(epoch FROM CASE WHEN run_after > '-infinity' THEN run_after ELSE claimed_at "
      "END)::float8, extract(epoch FROM claimed_at)::float8";
  static std::chrono::system_clock::time_point server_time(double epoch_seconds) {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(epoch_seconds)));
  }

  struct acked_and_claimed {
    std::vector<std::int64_t> acked;  // the jobs whose acks the server confirmed
    std::vector<lease> leases;        // jobs claimed
  };

  // The worker's busy path: acks finished jobs (`ids` with their lease `tokens`) and claims up
  // to `max` in one statement, so one transaction and one commit serve both. The row with a
  // NULL id carries the ack count; the others are the claimed jobs. Once sent, a
  // cancellation does not drop its answer (the worker's claim loop is never cancelled anyway).
  asio::awaitable<acked_and_claimed> ack_and_try_claim(std::vector<std::int64_t> ids,
                                                       std::vector<std::int64_t> tokens, int max);

  static constexpr const char* enqueue_sql =
      "SELECT pgqueue.enqueue($1, $2::jsonb, $3, $4, coalesce(to_timestamp($5::float8), now()), "
      "$6, $7, $8::bigint[])";
  static constexpr const char* enqueue_batch_sql =
      "SELECT unnest(pgqueue.enqueue_batch($1, $2::jsonb[], $3::text[], $4, "
      "coalesce(to_timestamp($5::float8), now()), $6, $7, $8::bigint[]))";

  // A copy of `opts.depends_on`, taken before a coroutine starts (the caller's ids may be gone
  // by the time it runs); the span is then cleared.
  static std::vector<std::int64_t> take_depends_on(enqueue_options& opts) {
    std::vector<std::int64_t> deps(opts.depends_on.begin(), opts.depends_on.end());
    opts.depends_on = {};
    return deps;
  }

  // depends_on as a parameter: NULL for none, the enqueue's fast path.
  static void add_depends_on(pg::params& p, const std::vector<std::int64_t>& deps) {
    if (deps.empty()) {
      p.add(std::nullopt);
    } else {
      p.add(deps);
    }
  }

  // enqueue's parameters; `wake`: the statement announces its job at its commit.
  static pg::params enqueue_params(const std::string& queue, const std::string& payload,
                                   const std::optional<std::string>& key,
                                   const enqueue_options& opts, bool wake,
                                   const std::vector<std::int64_t>& deps) {
    pg::params p{queue, payload, key, opts.priority, epoch(opts.run_after), opts.max_attempts,
                 wake};
    add_depends_on(p, deps);
    return p;
  }

  // What enqueue_batch refuses before sending anything.
  static void check_batch(const std::vector<std::string>& payloads,
                          const std::vector<std::optional<std::string>>& keys,
                          const enqueue_options& opts);

  // enqueue_batch's parameters (checked by check_batch; `wake` as in enqueue_params).
  static pg::params enqueue_batch_params(const std::string& queue,
                                         const std::vector<std::string>& payloads,
                                         const std::vector<std::optional<std::string>>& keys,
                                         const enqueue_options& opts, bool wake,
                                         const std::vector<std::int64_t>& deps);

  static std::vector<std::int64_t> ids_of(const pg::result& r) {
    std::vector<std::int64_t> ids;
    ids.reserve(r.rows());
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.get<std::int64_t>(i, 0));
    return ids;
  }

  static asio::awaitable<std::int64_t> do_enqueue(std::shared_ptr<detail::queue_state> s,
                                                  std::string payload,
                                                  std::optional<std::string> key,
                                                  enqueue_options opts,
                                                  std::vector<std::int64_t> deps);

  static asio::awaitable<std::vector<std::int64_t>> do_enqueue_batch(
      std::shared_ptr<detail::queue_state> s, std::vector<std::string> payloads,
      enqueue_options opts, std::vector<std::optional<std::string>> keys,
      std::vector<std::int64_t> deps);

  // In the caller's transaction: the wake-up goes out at its commit, from the trigger's NOTIFY
  // (no gate: one transaction's notifications fold into one, and a rollback sends none).
  static asio::awaitable<std::int64_t> do_enqueue_in(std::string queue, const pg::transaction& tx,
                                                     std::string payload,
                                                     std::optional<std::string> key,
                                                     enqueue_options opts,
                                                     std::vector<std::int64_t> deps);

  static asio::awaitable<std::vector<std::int64_t>> do_enqueue_batch_in(
      std::string queue, const pg::transaction& tx, std::vector<std::string> payloads,
      enqueue_options opts, std::vector<std::optional<std::string>> keys,
      std::vector<std::int64_t> deps);

  // Runs an enqueue statement. With `gate` it carries the queue's wake-up (its $7 is true) and
  // reports to the gate when answered; else jobs added (`any`) are announced after it
  // committed. Once sent it is completed even if the caller is cancelled meanwhile (the job
  // may be committed), and announced all the same.
  static asio::awaitable<pg::result> insert_and_wake(std::shared_ptr<detail::queue_state> s,
                                                     std::shared_ptr<detail::wake_gate> gate,
                                                     bool any, const char* sql, pg::params p);

  // The server takes keys up to the btree row limit (about 2.7 kB after compression), so a
  // key that happens to compress well would pass where a random one of the same length fails:
  // the client holds every key to one plain limit instead.
  static void check_key(std::string_view key);

  static std::optional<double> epoch(std::optional<std::chrono::system_clock::time_point> t) {
    if (!t) return std::nullopt;
    return std::chrono::duration<double>(t->time_since_epoch()).count();
  }

  // The queue's LISTEN channel (asked of the server once: it validates the name too).
  asio::awaitable<std::string> channel();

  // What an idle claim waits for after finding nothing (pgqueue.wait_hint): whether a due job
  // is there that it could not claim, and in how many ms the next scheduled job falls due.
  asio::awaitable<detail::wait_hint> wait_hint();

  static detail::wake_gate::clock::duration wake_gap(const detail::queue_state& s) {
    return std::chrono::duration_cast<detail::wake_gate::clock::duration>(s.options.wake_interval);
  }

  // The gate when this enqueue is to carry the queue's wake-up in its own transaction (see
  // wake_gate), else null. The insert trigger notifies for every ready job, scheduled or not;
  // a handle's first enqueue never carries, as its gate is not known yet.
  static std::shared_ptr<detail::wake_gate> try_carry(const detail::queue_state& s,
                                                      const enqueue_options&) {
    auto gate = s.wake.load();
    return gate && gate->try_carry(wake_gap(s)) ? gate : nullptr;
  }

  // A carrying enqueue is answered; if it failed its wake-up did not happen.
  static void carried(const std::shared_ptr<detail::queue_state>& s,
                      const std::shared_ptr<detail::wake_gate>& gate, bool delivered) {
    if (auto ticket = gate->finish(delivered)) {
      asio::co_spawn(s->db.get_executor(), send_wakes(s, gate, ticket), asio::detached);
    }
  }

  // Announces jobs that committed without carrying their wake-up, in a transaction of its own
  // (see pgqueue.wake), through the queue's process-wide gate: when a wake-up is on its way or
  // was sent less than wake_interval ago, the gate's sender (or a carrier) covers these too.
  // Does not wait, so a cancelled enqueue cannot cut it short.
  static void wake(const std::shared_ptr<detail::queue_state>& s);

  // The first wake-up of a handle asks the server which database this is (one round trip), so
  // that handles on different connections to one database share a gate.
  static asio::awaitable<void> find_gate_and_wake(std::shared_ptr<detail::queue_state> s);

  static void request_wake(const std::shared_ptr<detail::queue_state>& s,
                           const std::shared_ptr<detail::wake_gate>& gate) {
    if (auto ticket = gate->request()) {
      asio::co_spawn(s->db.get_executor(), send_wakes(s, gate, ticket), asio::detached);
    }
  }

  static asio::awaitable<void> send_wakes(std::shared_ptr<detail::queue_state> s,
                                          std::shared_ptr<detail::wake_gate> gate,
                                          std::uint64_t ticket);

  std::shared_ptr<detail::queue_state> s_;
};

}  // namespace pgqueue

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/impl/queue.ipp"
#endif
