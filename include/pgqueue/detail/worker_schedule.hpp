// What a worker does next, without I/O: its claim loop's step, the stop a request or a
// cancellation of run() asks for, and the shutdown's next step. The worker awaits and sends;
// these decide (and are unit-tested with scripted states).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include <asio/cancellation_type.hpp>

namespace pgqueue::detail {

/// How urgently the worker stops; a later request may only make it more urgent.
enum class stop_kind {
  none,      ///< running
  graceful,  ///< no more claims; running handlers get stop_timeout to finish
  now,       ///< no more claims; running handlers are cancelled at once
};

/// The stop a cancellation of run() asks for: `partial` or `total` (alone or with `terminal`,
/// as `||` and parallel groups emit them) a graceful one, `terminal` alone a stop now.
inline stop_kind stop_for(asio::cancellation_type_t type) {
  if (type == asio::cancellation_type::none) return stop_kind::none;
  const auto soft = asio::cancellation_type::partial | asio::cancellation_type::total;
  return (type & soft) != asio::cancellation_type::none ? stop_kind::graceful : stop_kind::now;
}

/// The stop after `requested` arrives during `current`: the more urgent of the two.
inline stop_kind merged(stop_kind current, stop_kind requested) {
  return std::max(current, requested);
}

/// The claim loop's next step.
struct claim_step {
  enum class kind {
    stop,           ///< stopping: no more claims
    wait_for_slot,  ///< every handler slot is taken: wait until one ends
    claim,          ///< claim up to `want` jobs
  };
  kind what;
  int want = 0;
};

/// With `in_flight` of `concurrency` handlers running: claims for the free slots, at most
/// `claim_batch` at a time.
inline claim_step next_claim(bool stopping, int concurrency, int in_flight, int claim_batch) {
  if (stopping) return {claim_step::kind::stop};
  const int free = concurrency - in_flight;
  if (free <= 0) return {claim_step::kind::wait_for_slot};
  return {claim_step::kind::claim, std::min(free, claim_batch)};
}

/// What a failed claim does to the loop: a dropped connection that is being re-established is
/// claimed on again once it is back (jobs the lost claim took return at lease expiry), and so
/// is a statement the server refused this once (`transient_refusal`); any other failure, or
/// any failure once stopping, ends the loop (run() throws it unless stopped).
inline bool claim_again_after_failure(bool stopping, bool retryable) {
  return !stopping && retryable;
}

/// Whether SQLSTATE `state` says the server refused a statement this once, so that the same
/// statement may well succeed when sent again: a serialization failure (40001), a deadlock
/// (40P01), a lock wait past `lock_timeout` (55P03), a statement past `statement_timeout` or
/// cancelled (57014). A database or role may set those timeouts low: one claim that waited
/// for a lock ended the worker's run, and the acks it carried were counted lost.
inline bool transient_refusal(std::string_view state) {
  return state == "40001" || state == "40P01" || state == "55P03" || state == "57014";
}

/// Paces the repeats of requests a dropped connection failed (a claim, an ack batch). A repeat
/// goes out at once when a new session came since the last failure: it waits for that session
/// itself (up to the connection's `reconnect_wait`), and a worker that paused after every drop
/// would let its leases run out under session churn (a failover, backends being killed). A
/// failure with no new session since the previous one (the session is not coming back, or
/// `reconnect_wait` is zero and such requests fail at once) is followed by `pause`, so that a
/// connection that stays down costs no busy loop.
class repeat_pacing {
 public:
  static constexpr std::chrono::milliseconds pause{250};

  /// A request failed with a drop when the connection had made `sessions` new sessions
  /// (`connection::reconnects()`); returns how long to wait before sending it again.
  std::chrono::milliseconds after_drop(std::uint64_t sessions) {
    const bool no_new_session = last_ && *last_ == sessions;
    last_ = sessions;
    return no_new_session ? pause : std::chrono::milliseconds(0);
  }

  /// A request was answered: the next drop is a new one.
  void answered() { last_.reset(); }

 private:
  std::optional<std::uint64_t> last_;
};

/// The shutdown's next step once the claim loop has ended.
enum class drain_step {
  wait_for_handlers,  ///< handlers run and stop_timeout has not passed: wait for them
  cancel_handlers,    ///< a stop now, or stop_timeout passed: cancel the running handlers
  wait_for_rest,      ///< cancelled handlers, an ack batch or the janitor still end: wait
  done,               ///< nothing the worker started still runs
};

/// What the shutdown waits for. `cancelled`: the handlers were cancelled already.
struct drain_state {
  int in_flight = 0;
  bool stop_now = false;
  bool past_deadline = false;
  bool cancelled = false;
  bool ack_in_flight = false;
  bool janitor_running = false;
};

inline drain_step next_drain_step(const drain_state& s) {
  if (s.in_flight > 0 && !s.cancelled) {
    return s.stop_now || s.past_deadline ? drain_step::cancel_handlers
                                         : drain_step::wait_for_handlers;
  }
  if (s.in_flight > 0 || s.ack_in_flight || s.janitor_running) return drain_step::wait_for_rest;
  return drain_step::done;
}

}  // namespace pgqueue::detail
