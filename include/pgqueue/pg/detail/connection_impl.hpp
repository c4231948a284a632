// The connection state machine: one reader loop per connection that owns the socket, sends
// queued requests (pipelined, one Sync each), routes results back in order, switches out of
// pipeline mode for scripts, and dispatches notifications.
#pragma once

#include <libpq-fe.h>
#include <poll.h>

#include <asio/any_io_executor.hpp>
#include <asio/execution/context.hpp>
#include <asio/post.hpp>
#include <asio/query.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pgqueue/detail/config.hpp"
#include "pgqueue/pg/connect_options.hpp"
#include "pgqueue/pg/detail/channel_registry.hpp"
#include "pgqueue/pg/detail/connector.hpp"
#include "pgqueue/pg/detail/context_shutdown.hpp"
#include "pgqueue/pg/detail/identifier.hpp"
#include "pgqueue/pg/detail/libpq_handles.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/reconnect_policy.hpp"
#include "pgqueue/pg/detail/request.hpp"
#include "pgqueue/pg/detail/request_queue.hpp"
#include "pgqueue/pg/detail/secrets.hpp"
#include "pgqueue/pg/detail/server_error.hpp"
#include "pgqueue/pg/detail/session_loss.hpp"
#include "pgqueue/pg/detail/socket_watch.hpp"
#include "pgqueue/pg/detail/subscription_state.hpp"
#include "pgqueue/pg/detail/watchdog.hpp"

namespace pgqueue::pg::detail {

/// Everything below runs on `strand()` unless stated otherwise. States: connecting → open →
/// closed, or open → reconnecting → open when a session drops and `connect_options::reconnect`
/// is on. `lose()` is the single exit from `open`: it fails what was sent, and either ends
/// the connection or keeps the unsent requests and the subscriptions for the next session,
/// which `adopt()` sets up (READ COMMITTED as the default isolation, statement_timeout,
/// re-LISTEN of `channels_.channels()`) before them.
class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  explicit connection_impl(const asio::any_io_executor& ex, connect_options options = {})
      : strand_(asio::make_strand(ex)),
        socket_(strand_),
        options_(options),
        backoff_(options.reconnect_initial_backoff, options.reconnect_max_backoff),
        retry_timer_(strand_),
        wait_timer_(strand_),
        watchdog_(strand_) {}

  connection_impl(const connection_impl&) = delete;
  connection_impl& operator=(const connection_impl&) = delete;

  ~connection_impl() {
    if (shutdown_registry_) context_shutdown::remove(*shutdown_registry_, this);
    socket_.release();
    conn_.reset();
  }

  /// The handle applications hold: when the last copy goes, the connection closes (internal
  /// references from pending waits alone do not keep it open). Any thread.
  static std::shared_ptr<connection_impl> make_handle(
      const std::shared_ptr<connection_impl>& impl) {
    return std::shared_ptr<connection_impl>(impl.get(),
                                            [keep = impl](connection_impl*) { keep->close(); });
  }

  const strand_type& strand() const noexcept { return strand_; }
  /// What this connection was opened with (for opening another like it).
  const std::string& conninfo() const noexcept { return conninfo_; }
  const connect_options& options() const noexcept { return options_; }
  /// Open, or reconnecting (not closed for good). Any thread.
  bool is_open() const noexcept { return open_.load(); }
  /// The current session's server PID; 0 while reconnecting. Any thread.
  int backend_pid() const noexcept { return pid_.load(); }
  /// Sessions established after the first one. Any thread.
  std::uint64_t reconnects() const noexcept { return reconnects_.load(); }
  /// Reconnect attempts started (successful or not). Any thread.
  std::uint64_t reconnect_attempts() const noexcept { return attempts_.load(); }

  /// Whether the session was inside a transaction block at its last answer. Any thread.
  bool in_transaction() const noexcept { return in_transaction_.load(); }
  /// Requests submitted and not finished yet. Any thread.
  std::uint32_t outstanding() const noexcept { return outstanding_.load(); }

  /// Fails all pending work with errc::closed. Any thread; takes effect on the strand.
  void close() {
    open_ = false;
    asio::post(strand_, [self = shared_from_this()] {
      self->lose(errc::closed, "connection closed by the application");
    });
  }

  void start_connect(std::string conninfo, operation_ptr<std::shared_ptr<connection_impl>> op);

  /// Sends `r` now, or while reconnecting queues it for the new session (until
  /// `reconnect_wait` passes), or fails it when closed.
  void submit(request_ptr r);

  void listen(std::shared_ptr<subscription_state> sub, operation_ptr<result> op);

  void unsubscribe(const std::shared_ptr<subscription_state>& sub) {
    sub->fail(make_error(errc::closed, "subscription closed"));
    if (channels_.remove(sub)) unlisten(sub->channel());
  }

  void wait_notification(const std::shared_ptr<subscription_state>& sub,
                         operation_ptr<notification> op, std::uint64_t after = 0) {
    sub->wait(std::move(op), after);
  }

  static request_ptr make_statement(std::string sql, operation_ptr<result> op, params args = {});

 private:
  enum class state { connecting, open, reconnecting, closed };
  using clock = std::chrono::steady_clock;

  // Called once the connector succeeded; returns an error if the session cannot be set up.
  std::exception_ptr adopt(conn_ptr conn);

  // Registers with the context's shutdown (see context_shutdown): a context destroyed while
  // coroutines wait on this connection closes it, and their handlers are destroyed with it.
  void close_at_context_shutdown();

  // LISTEN again on a new session; its subscribers then learn that they may have missed some.
  request_ptr relisten(const std::string& channel);

  // The server's FATAL message before it hangs up arrives as a notice when no statement runs;
  // keep it for the connection_lost message.
  static void on_notice(void* arg, const PGresult* res);

  void unlisten(const std::string& channel) {
    submit(make_statement("UNLISTEN " + quote_identifier(channel), nullptr));
  }

  // The reader loop. Arms the waits first, then polls, so no readiness edge is missed; keeps
  // going while input was read (libpq may have left some in the socket, which no new edge
  // would announce) or output is still pending. `check_input` false skips the first poll: a
  // caller that found the read wait already armed knows input that came since then completes
  // that wait. A request sent needs no further poll for the same reason. `readable`: the read
  // wait just completed, so input is there (or the end or an error, which reading reports);
  // the first poll is skipped unless output is pending. (Each poll is a system call; one
  // enqueue used to cost four.)
  void pump(bool check_input = true, bool readable = false);

  void arm_waits();

  bool flush();

  // Sends what may go now: statements while in pipeline mode; a script only once every earlier
  // answer has arrived. Returns true if anything was sent.
  bool send_queued();

  bool send_statement(request& r);

  // The simple query protocol (needed for multi-statement text) is not allowed in pipeline
  // mode, so the pipeline is idle here and is left for the duration of the script.
  bool start_script(const request& r);

  bool end_script();

  // Hands complete answers to the requests in send order. In pipeline mode each request's
  // answer is: its result(s), a NULL, then PGRES_PIPELINE_SYNC. A script's ends with NULL.
  // Returns false once the connection is gone.
  bool read_results();

  void drain_notifications();

  std::string libpq_message() const {
    std::string msg = conn_ ? trim_trailing_newlines(PQerrorMessage(conn_.get())) : "";
    return msg.empty() ? "no further information from libpq" : msg;
  }

  void lose_connection();

  // Sending the first queued request failed: if the connection broke that is the real cause;
  // otherwise the request fails with errc::protocol_error and the session is discarded.
  void refuse_front(const std::string& what) {
    if (PQstatus(conn_.get()) == CONNECTION_BAD) return lose_connection();
    discard_session(requests_.refuse_front(), what + libpq_message());
  }

  // libpq is in a state this layer does not handle (a COPY, a refused call): `offender` (if
  // any) fails with errc::protocol_error and `why`, and the session is given up like a dropped
  // one, since what it would do next is unknown. Other requests sent on it fail with
  // connection_lost; with `reconnect` on, unsent ones wait for the new session and
  // subscriptions are LISTENed again there. One bad statement must not end the connection
  // that every queue and worker on it shares.
  void discard_session(request_ptr offender, const std::string& why) {
    lose(errc::connection_lost, "session discarded after an unsupported protocol state: " + why);
    if (offender) offender->fail(make_error(errc::protocol_error, scrubber_.scrub(why)));
  }

  // After each answer (pipeline idle then, when used sequentially): whether the session is
  // inside a transaction block, which a new session could not continue.
  void note_transaction_status();

  // The single way out of `open`. Requests already sent fail with the error; libpq's socket is
  // released before PQfinish closes it. Then either the connection ends (unsent requests and
  // subscription waits fail too) or, for a dropped session with `reconnect` on, it keeps them
  // and starts reconnecting.
  void lose(errc code, std::string message);

  void schedule_reconnect() {
    retry_timer_.expires_after(backoff_.next_delay());
    retry_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->attempt_reconnect();
    });
  }

  // One attempt with the original conninfo: libpq walks its host list again and honours
  // target_session_attrs, so a failover to another listed host is followed.
  void attempt_reconnect();

  // Why a request waiting for the new session gives up.
  std::exception_ptr waiting_error() const;

  // Fails the queued requests whose `reconnect_wait` has passed.
  void expire_waiting() {
    if (state_ != state::reconnecting) return;
    requests_.expire(clock::now(), [this] { return waiting_error(); });
  }

  void arm_wait_timer();

  // With a statement_timeout: fails the requests sent (with errc::statement_timeout) and drops
  // the session once the server has sent nothing for statement_timeout + 1 s while answers are
  // due. The server's own statement_timeout fires first when it is alive; this catches a hung
  // server or a dead network, where only dropping the session frees the pipeline (PQcancel
  // would block the thread).
  void arm_watchdog();

  watchdog_check watchdog_now() const {
    return check_watchdog(options_.statement_timeout, state_ == state::open, !requests_.idle(),
                          progress_at_, clock::now());
  }

  std::exception_ptr closed_error() const {
    return closed_error_ ? closed_error_ : make_error(errc::closed, "connection is not open");
  }

  std::shared_ptr<context_shutdown::registry> shutdown_registry_;
  strand_type strand_;
  socket_watch socket_;
  conn_ptr conn_;
  secret_scrubber scrubber_;
  connect_options options_;
  std::string conninfo_;
  state state_ = state::connecting;
  std::atomic<bool> open_{false};
  std::atomic<int> pid_{0};
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::uint64_t> attempts_{0};
  request_queue requests_;
  channel_registry channels_;
  // The session's prepared statements: SQL text -> name. Only `request::prepared` statements
  // (the library's own, a fixed set) get one, so this stays small.
  std::unordered_map<std::string, std::string> statements_;
  std::uint64_t statement_count_ = 0;
  std::exception_ptr closed_error_;
  std::exception_ptr lost_error_;          // why the last session ended (while reconnecting)
  std::exception_ptr last_attempt_error_;  // why the last reconnect attempt failed
  std::string last_fatal_;
  reconnect_policy backoff_;
  std::shared_ptr<connector> connector_;  // the reconnect attempt in progress
  asio::steady_timer retry_timer_;        // the back-off before the next attempt
  asio::steady_timer wait_timer_;         // the earliest deadline of a waiting request
  asio::steady_timer watchdog_;           // statement_timeout's client-side deadline
  clock::time_point wait_at_{};
  clock::time_point progress_at_{};  // last answer, or first send into an idle pipeline
  unsigned wait_gen_ = 0;
  bool wait_armed_ = false;
  bool watchdog_armed_ = false;
  std::atomic<bool> in_transaction_{false};
  std::atomic<std::uint32_t> outstanding_{0};  // requests submitted, not finished
  bool pumping_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool want_write_ = false;
  bool script_running_ = false;
};

}  // namespace pgqueue::pg::detail

#if !defined(PGQUEUE_SEPARATE_COMPILATION)
#include "pgqueue/pg/detail/impl/connection_impl.ipp"
#endif
