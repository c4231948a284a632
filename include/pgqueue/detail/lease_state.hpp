// The shared state of one lease: the job, who holds it, and its heartbeat loop.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "pgqueue/connect.hpp"
#include "pgqueue/job.hpp"

namespace pgqueue::detail {

// Owned jointly by the `lease` handle and its heartbeat coroutine, so the loop can outlive a
// moved-from or destroyed handle for as long as it takes to notice. The timer and the lost
// signal live on the connection's strand.
struct lease_state : std::enable_shared_from_this<lease_state> {
  lease_state(database d, job j, std::string worker, std::chrono::milliseconds lease_for,
              std::chrono::milliseconds heartbeat_every)
      : db(std::move(d)),
        the_job(std::move(j)),
        worker_id(std::move(worker)),
        lease_for(lease_for),
        heartbeat_every(heartbeat_every),
        timer(db.get_executor()),
        expires(std::chrono::steady_clock::now() + lease_for) {}

  database db;
  job the_job;
  std::string worker_id;
  std::chrono::milliseconds lease_for;
  std::chrono::milliseconds heartbeat_every;
  asio::steady_timer timer;
  asio::cancellation_signal lost_signal;
  std::atomic<bool> finished{false};  // acked, nacked, released or abandoned
  std::atomic<bool> lost{false};      // the server refused a heartbeat, or the lease ran out
  std::chrono::steady_clock::time_point expires;  // our estimate of lease_until

  static std::string interval(std::chrono::milliseconds d) {
    return std::to_string(d.count()) + " milliseconds";
  }

  void start_heartbeat() {
    asio::co_spawn(db.get_executor(), heartbeat_loop(shared_from_this()), asio::detached);
  }

  // Stops the heartbeat loop (from any thread).
  void stop_heartbeat() {
    asio::post(db.get_executor(), [self = shared_from_this()] { self->timer.cancel(); });
  }

  void mark_lost() {
    if (lost.exchange(true)) return;
    lost_signal.emit(asio::cancellation_type::terminal);
  }

  static asio::awaitable<void> heartbeat_loop(std::shared_ptr<lease_state> self) {
    while (!self->finished) {
      self->timer.expires_after(self->heartbeat_every);
      std::error_code ec;
      co_await self->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (self->finished) break;
      try {
        auto r = co_await self->db.query(
            "SELECT pgqueue.heartbeat($1, $2, $3::interval, $4)",
            {self->the_job.id, self->worker_id, interval(self->lease_for), self->the_job.attempts});
        if (self->finished) break;
        if (!r.get<bool>(0, 0)) {
          self->mark_lost();
          break;
        }
        self->expires = std::chrono::steady_clock::now() + self->lease_for;
      } catch (const std::exception&) {
        // A failed heartbeat (connection trouble) is retried at the next tick while the lease
        // can still be valid; after that the job may already belong to someone else.
        if (std::chrono::steady_clock::now() >= self->expires) {
          self->mark_lost();
          break;
        }
      }
    }
  }
};

}  // namespace pgqueue::detail
