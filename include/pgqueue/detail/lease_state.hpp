// The shared state of one lease: the job, who holds it, and its heartbeat loop.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/detail/config.hpp"
#include "pgqueue/job.hpp"
#include "pgqueue/pg/error.hpp"

namespace pgqueue::detail {

// Owned jointly by the `lease` handle and its heartbeat coroutine, so the loop can outlive a
// moved-from or destroyed handle for as long as it takes to notice. The heartbeat timer lives
// on the connection's strand; the lost signal on `home`, the executor of the coroutine that
// claimed the job, where the job's handler attaches to it (a signal and its slots must be used
// from one thread at a time).
struct lease_state : std::enable_shared_from_this<lease_state> {
  lease_state(database d, job j, std::int64_t lease_token, std::string worker,
              std::chrono::milliseconds lease_for, std::chrono::milliseconds heartbeat_every,
              asio::any_io_executor home)
      : db(std::move(d)),
        the_job(std::move(j)),
        token(lease_token),
        worker_id(std::move(worker)),
        lease_for(lease_for),
        heartbeat_every(heartbeat_every),
        home(std::move(home)),
        timer(db.get_executor()),
        expires(std::chrono::steady_clock::now() + lease_for) {}

  database db;
  job the_job;
  std::int64_t token;  // the claim's lease_token: fences every operation on the job
  std::string worker_id;
  std::chrono::milliseconds lease_for;
  std::chrono::milliseconds heartbeat_every;
  asio::any_io_executor home;
  asio::steady_timer timer;
  asio::cancellation_signal lost_signal;  // touched on `home` only
  std::atomic<bool> finished{false};      // acked, nacked, released or abandoned
  std::atomic<bool> lost{false};          // the server refused a heartbeat, or the lease ran out
  std::atomic<bool> beating{false};       // a heartbeat loop runs (ended on the strand)
  // What a final operation of the lease's own (ack, nack, release) achieved, for the worker's
  // counts of what handlers did themselves.
  enum class outcome : int { none, acked, failed, released };
  std::atomic<outcome> ended_as{outcome::none};
  // Our estimate of lease_until: written by the heartbeat (connection strand), read by final
  // operations and the worker (their own executors).
  std::atomic<std::chrono::steady_clock::time_point> expires;
  // The handler's run time, kept while the worker's ack of the job is pending (for the
  // observer's event, told once the server has answered the ack).
  std::chrono::steady_clock::duration handler_time{};
  // An ack or nack sent inside the application's transaction, which has not ended: the lease is
  // held until it does (committed: finished; rolled back: held as before). A handle destroyed
  // meanwhile leaves its reason here, for the rollback to give the job back with.
  std::mutex in_transaction_mutex;
  bool in_transaction = false;  // guarded by in_transaction_mutex
  // Set when abandoned: the nack reason (none: release). Guarded by in_transaction_mutex.
  std::optional<std::optional<std::string>> abandoned_in_transaction;

  static std::string interval(std::chrono::milliseconds d) {
    return std::to_string(d.count()) + " milliseconds";
  }

  /// What fences a final operation on some leases: their job ids and lease tokens, in order.
  struct fence {
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> tokens;
  };

  static fence fence_of(const std::vector<std::shared_ptr<lease_state>>& states);

  /// Counts the jobs of ($1 ids, $3 lease tokens) that worker $2 acked under those claims:
  /// what an ack repeated across a reconnect achieved, whichever try did it. Through a
  /// function, so the least-privilege worker role (no access to the table) may ask.
  static constexpr std::string_view count_acked_sql =
      "SELECT pgqueue.count_acked($1::bigint[], $2, $3::bigint[])";

  /// A failure of the connection rather than of the statement: the request may be sent again
  /// once the connection has a new session.
  static bool connection_fault(const pg::error& e) {
    return e.code() == pg::errc::connection_lost || e.code() == pg::errc::statement_timeout;
  }

  /// How long to wait before sending a failed heartbeat or final operation again (the request
  /// itself then waits for the new session, up to connect_options::reconnect_wait).
  std::chrono::milliseconds retry_delay() const {
    return std::min(heartbeat_every, std::chrono::milliseconds(250));
  }

  /// Runs a final operation (ack, nack, release) on the job, sending it again after a connection
  /// fault while the connection reconnects and the lease may still be valid (at least three
  /// tries). The operations are fenced by worker id and lease token, so a repeat cannot touch
  /// a later claim; `*repeated` tells the caller that an earlier try's outcome is unknown (it
  /// may have taken effect). A statement for a batch names its leases in `batch`: it is sent
  /// again while any of them may be valid. Throws the last failure.
  asio::awaitable<pg::result> settle(
      std::string_view sql, pg::params args, bool* repeated,
      const std::vector<std::shared_ptr<lease_state>>* batch = nullptr);

  void start_heartbeat() {
    beating = true;
    asio::co_spawn(db.get_executor(), heartbeat_loop(shared_from_this()), asio::detached);
  }

  // A final operation the server refused (a statement error: it changed nothing) leaves the
  // lease held again, heartbeating: the caller may try again, and a lease destroyed is nacked
  // as abandoned. The heartbeat loop that finish() stopped may not have ended yet (its stop is
  // posted): it then goes on, else a new one starts; both on the connection's strand.
  void held_again() {
    finished = false;
    asio::post(db.get_executor(), [self = shared_from_this()] {
      if (!self->finished && !self->lost && !self->beating) self->start_heartbeat();
    });
  }

  // Stops the heartbeat loop (from any thread).
  void stop_heartbeat() {
    asio::post(db.get_executor(), [self = shared_from_this()] { self->timer.cancel(); });
  }

  void mark_lost() {
    if (lost.exchange(true)) return;
    asio::post(home, [self = shared_from_this()] {
      self->lost_signal.emit(asio::cancellation_type::terminal);
    });
  }

  enum class beat_outcome { extended, refused, failed };

  // One heartbeat; never throws.
  static asio::awaitable<beat_outcome> beat(std::shared_ptr<lease_state> self);

  // Heartbeats every `heartbeat_every`. A heartbeat that fails (connection trouble) is sent
  // again after retry_delay(), and one that waits for a reconnect is given up, until the lease
  // would have expired: after that the job may already belong to someone else, so it is lost.
  static asio::awaitable<void> heartbeat_loop(std::shared_ptr<lease_state> self);
};

}  // namespace pgqueue::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/detail/impl/lease_state.ipp"
#endif
