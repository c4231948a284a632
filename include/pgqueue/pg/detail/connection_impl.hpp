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
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

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
/// which `adopt()` sets up (statement_timeout, re-LISTEN of `channels_.channels()`) before them.
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

  void start_connect(std::string conninfo, operation_ptr<std::shared_ptr<connection_impl>> op) {
    close_at_context_shutdown();
    scrubber_ = secret_scrubber(conninfo);
    conninfo_ = conninfo;  // kept for reconnecting
    auto c = std::make_shared<connector>(
        strand_, std::move(conninfo), options_.connect_timeout, scrubber_,
        [self = shared_from_this(), op](std::exception_ptr e, conn_ptr conn) {
          if (op->done()) return;  // cancelled; `conn` is closed on scope exit
          if (e) return op->complete(std::move(e));
          if (auto failure = self->adopt(std::move(conn))) return op->complete(failure);
          op->complete(nullptr, make_handle(self));
        });
    op->on_cancel([weak = std::weak_ptr<connector>(c)] {
      if (auto p = weak.lock()) p->cancel();
    });
    c->start();
  }

  /// Sends `r` now, or while reconnecting queues it for the new session (until
  /// `reconnect_wait` passes), or fails it when closed.
  void submit(request_ptr r) {
    if (!r->outstanding) {
      outstanding_.fetch_add(1);
      r->outstanding = &outstanding_;
    }
    switch (state_) {
      case state::open:
        requests_.push(std::move(r));
        if (!pumping_) pump(!reading_);
        return;
      case state::reconnecting:
        if (options_.reconnect_wait.count() <= 0) return r->fail(waiting_error());
        r->deadline = std::chrono::steady_clock::now() + options_.reconnect_wait;
        requests_.push(std::move(r));
        arm_wait_timer();
        return;
      default:
        return r->fail(closed_error());
    }
  }

  void listen(std::shared_ptr<subscription_state> sub, operation_ptr<result> op) {
    if (state_ == state::closed) return op->complete(closed_error());
    const std::string& channel = sub->channel();
    channels_.begin_listen(channel);
    auto r = make_statement("LISTEN " + quote_identifier(channel), std::move(op));
    r->on_finish = [this, sub](const std::exception_ptr& failure, bool abandoned) {
      if (channels_.end_listen(sub->channel(), !failure && !abandoned ? sub : nullptr)) {
        unlisten(sub->channel());
      }
    };
    submit(std::move(r));
  }

  void unsubscribe(const std::shared_ptr<subscription_state>& sub) {
    sub->fail(make_error(errc::closed, "subscription closed"));
    if (channels_.remove(sub)) unlisten(sub->channel());
  }

  void wait_notification(const std::shared_ptr<subscription_state>& sub,
                         operation_ptr<notification> op, std::uint64_t after = 0) {
    sub->wait(std::move(op), after);
  }

  static request_ptr make_statement(std::string sql, operation_ptr<result> op, params args = {}) {
    auto r = std::make_unique<request>();
    r->sql = std::move(sql);
    r->args = std::move(args);
    r->op = std::move(op);
    return r;
  }

 private:
  enum class state { connecting, open, reconnecting, closed };
  using clock = std::chrono::steady_clock;

  // Called once the connector succeeded; returns an error if the session cannot be set up.
  std::exception_ptr adopt(conn_ptr conn) {
    last_fatal_.clear();
    conn_ = std::move(conn);
    PQsetNoticeReceiver(conn_.get(), &connection_impl::on_notice, this);
    if (PQsetnonblocking(conn_.get(), 1) != 0 || PQenterPipelineMode(conn_.get()) != 1) {
      auto e = make_error(errc::protocol_error, "cannot enter pipeline mode: " + libpq_message());
      conn_.reset();
      return e;
    }
    try {
      socket_.assign(PQsocket(conn_.get()));
    } catch (const std::system_error& ex) {
      conn_.reset();
      return make_error(errc::connect_failed, std::string("cannot watch socket: ") + ex.what());
    }
    pid_ = PQbackendPID(conn_.get());
    statements_.clear();  // prepared statements belong to the session
    state_ = state::open;
    open_ = true;
    in_transaction_ = false;
    // Requests that waited for this session stop counting down, and go after its set-up.
    ++wait_gen_;
    wait_armed_ = false;
    wait_timer_.cancel();
    std::deque<request_ptr> setup;
    if (options_.statement_timeout.count() > 0) {
      params ms{std::to_string(options_.statement_timeout.count())};
      setup.push_back(make_statement("SELECT set_config('statement_timeout', $1, false)", nullptr,
                                     std::move(ms)));
    }
    for (const auto& channel : channels_.channels()) setup.push_back(relisten(channel));
    requests_.new_session(std::move(setup));
    pump();
    return nullptr;
  }

  // Registers with the context's shutdown (see context_shutdown): a context destroyed while
  // coroutines wait on this connection closes it, and their handlers are destroyed with it.
  void close_at_context_shutdown() {
    auto& ctx = asio::query(strand_.get_inner_executor(), asio::execution::context);
    shutdown_registry_ = asio::use_service<context_shutdown>(ctx).shared_registry();
    context_shutdown::add(*shutdown_registry_, this, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->lose(errc::closed, "the connection's execution context was shut down");
      }
    });
  }

  // LISTEN again on a new session; its subscribers then learn that they may have missed some.
  request_ptr relisten(const std::string& channel) {
    auto r = make_statement("LISTEN " + quote_identifier(channel), nullptr);
    r->on_finish = [this, channel](const std::exception_ptr& failure, bool) {
      if (!failure) {
        channels_.resynced(channel);
      } else if (state_ == state::open) {
        channels_.fail_channel(channel, failure);  // the server refused; a drop is retried
      }
    };
    return r;
  }

  // The server's FATAL message before it hangs up arrives as a notice when no statement runs;
  // keep it for the connection_lost message.
  static void on_notice(void* arg, const PGresult* res) {
    const char* sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (sev && (std::string_view(sev) == "FATAL" || std::string_view(sev) == "PANIC")) {
      static_cast<connection_impl*>(arg)->last_fatal_ =
          trim_trailing_newlines(std::string(sev) + ":  " + field(res, PG_DIAG_MESSAGE_PRIMARY));
    }
  }

  void unlisten(const std::string& channel) {
    submit(make_statement("UNLISTEN " + quote_identifier(channel), nullptr));
  }

  // The reader loop. Arms the waits first, then polls, so no readiness edge is missed; keeps
  // going while input was read (libpq may have left some in the socket, which no new edge
  // would announce) or output is still pending. `check_input` false skips the first poll: a
  // caller that found the read wait already armed knows input that came since then completes
  // that wait. A request sent needs no further poll for the same reason. (Each poll is a
  // system call; one enqueue used to cost four.)
  void pump(bool check_input = true) {
    pumping_ = true;
    bool progress = true;
    while (progress && state_ == state::open) {
      progress = false;
      arm_waits();
      const short ev = check_input || want_write_ ? socket_.ready_now(want_write_) : 0;
      check_input = true;
      if (ev & (POLLIN | POLLERR | POLLHUP)) {
        if (PQconsumeInput(conn_.get()) != 1) {
          lose_connection();
          break;
        }
        progress = true;
      }
      if (want_write_ && (ev & (POLLOUT | POLLIN | POLLERR | POLLHUP))) {
        if (!flush()) break;
        if (ev & POLLOUT) progress = true;
      }
      if (!read_results()) break;
      drain_notifications();
      if (send_queued() && want_write_) progress = true;
      if (state_ == state::open && PQstatus(conn_.get()) == CONNECTION_BAD) lose_connection();
    }
    pumping_ = false;
    arm_watchdog();
  }

  void arm_waits() {
    using wait = asio::posix::descriptor_base;
    if (!reading_) {
      reading_ = true;
      socket_.async_wait(wait::wait_read, [self = shared_from_this()](std::error_code) {
        self->reading_ = false;
        self->pump();
      });
    }
    if (want_write_ && !writing_) {
      writing_ = true;
      socket_.async_wait(wait::wait_write, [self = shared_from_this()](std::error_code) {
        self->writing_ = false;
        self->pump();
      });
    }
  }

  bool flush() {
    const int r = PQflush(conn_.get());
    if (r < 0) {
      lose_connection();
      return false;
    }
    want_write_ = r == 1;
    return true;
  }

  // Sends what may go now: statements while in pipeline mode; a script only once every earlier
  // answer has arrived. Returns true if anything was sent.
  bool send_queued() {
    bool sent = false;
    while (state_ == state::open) {
      request* r = requests_.next_to_send(script_running_);
      if (!r) break;
      if (r->type == request::kind::script) {
        if (!start_script(*r)) return true;
      } else if (!send_statement(*r)) {
        return true;
      }
      if (requests_.idle()) progress_at_ = clock::now();  // the server starts on it now
      requests_.sent();
      sent = true;
    }
    if (sent && state_ == state::open) flush();
    return sent;
  }

  bool send_statement(request& r) {
    const auto values = r.args.pointers();
    const int n = static_cast<int>(values.size());
    bool sent = false;
    if (r.prepared) {
      // The first use in this session sends the Parse in front of the execution, in the same
      // pipeline sync: no extra round trip. Later requests may use the name at once, as the
      // server handles the pipeline in order.
      auto [it, fresh] = statements_.try_emplace(r.sql, "");
      if (fresh) {
        it->second = "pgqueue_" + std::to_string(++statement_count_);
        if (PQsendPrepare(conn_.get(), it->second.c_str(), r.sql.c_str(), n, nullptr) != 1) {
          statements_.erase(it);
          refuse_front("cannot send statement: ");
          return false;
        }
        r.sent_with_parse();
      }
      r.statement = it->second;
      sent = PQsendQueryPrepared(conn_.get(), it->second.c_str(), n, values.data(), nullptr,
                                 nullptr, 0) == 1;
    } else {
      sent = PQsendQueryParams(conn_.get(), r.sql.c_str(), n, nullptr, values.data(), nullptr,
                               nullptr, 0) == 1;
    }
    if (!sent || PQpipelineSync(conn_.get()) != 1) {
      refuse_front("cannot send statement: ");
      return false;
    }
    return true;
  }

  // The simple query protocol (needed for multi-statement text) is not allowed in pipeline
  // mode, so the pipeline is idle here and is left for the duration of the script.
  bool start_script(const request& r) {
    if (PQexitPipelineMode(conn_.get()) != 1) {
      refuse_front("cannot leave pipeline mode for a script: ");
      return false;
    }
    if (PQsendQuery(conn_.get(), r.sql.c_str()) != 1) {
      refuse_front("cannot send script: ");
      return false;
    }
    script_running_ = true;
    return true;
  }

  bool end_script() {
    script_running_ = false;
    note_transaction_status();
    requests_.answered()->finish();
    if (state_ != state::open) return false;
    if (PQenterPipelineMode(conn_.get()) != 1) {
      if (PQstatus(conn_.get()) == CONNECTION_BAD) {
        lose_connection();
      } else {
        discard_session(nullptr,
                        "cannot re-enter pipeline mode after a script: " + libpq_message());
      }
      return false;
    }
    return true;
  }

  // Hands complete answers to the requests in send order. In pipeline mode each request's
  // answer is: its result(s), a NULL, then PGRES_PIPELINE_SYNC. A script's ends with NULL.
  // Returns false once the connection is gone.
  bool read_results() {
    int nulls = 0;
    while (state_ == state::open && !requests_.idle()) {
      if (PQisBusy(conn_.get())) break;
      result_ptr res(PQgetResult(conn_.get()));
      if (!res) {
        if (script_running_) {
          if (PQstatus(conn_.get()) == CONNECTION_BAD) break;
          if (!end_script()) return false;
          continue;
        }
        // One NULL separates a statement's results from its Sync; more means "nothing yet".
        if (++nulls > 1) break;
        continue;
      }
      nulls = 0;
      progress_at_ = clock::now();
      switch (PQresultStatus(res.get())) {
        case PGRES_PIPELINE_SYNC: {
          note_transaction_status();
          auto done = requests_.answered();
          // Prepared again on next use; requests already sent with the name fail (26000).
          if (done->spoiled_statement()) {
            auto it = statements_.find(done->sql);
            if (it != statements_.end() && it->second == done->statement) statements_.erase(it);
          }
          done->finish();
          break;
        }
        case PGRES_COPY_IN:
        case PGRES_COPY_OUT:
        case PGRES_COPY_BOTH:
          // The session now waits for COPY data this layer never sends or reads.
          discard_session(requests_.answered(),
                          "COPY is not supported on a pgqueue::pg connection");
          return false;
        default:
          requests_.answering()->add(std::move(res));
      }
    }
    return state_ == state::open;
  }

  void drain_notifications() {
    while (state_ == state::open) {
      notify_ptr n(PQnotifies(conn_.get()));
      if (!n) break;
      channels_.dispatch(notification{n->relname, n->extra ? n->extra : "", n->be_pid});
    }
  }

  std::string libpq_message() const {
    std::string msg = conn_ ? trim_trailing_newlines(PQerrorMessage(conn_.get())) : "";
    return msg.empty() ? "no further information from libpq" : msg;
  }

  void lose_connection() {
    std::string msg = "connection to server lost: " + libpq_message();
    if (!last_fatal_.empty() && msg.find(last_fatal_) == std::string::npos) {
      msg += "\n" + last_fatal_;
    }
    lose(errc::connection_lost, std::move(msg));
  }

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
  void note_transaction_status() {
    switch (PQtransactionStatus(conn_.get())) {
      case PQTRANS_IDLE:
        in_transaction_ = false;
        break;
      case PQTRANS_INTRANS:
      case PQTRANS_INERROR:
        in_transaction_ = true;
        break;
      default:
        break;  // busy with later requests: keep what the last idle moment said
    }
  }

  // The single way out of `open`. Requests already sent fail with the error; libpq's socket is
  // released before PQfinish closes it. Then either the connection ends (unsent requests and
  // subscription waits fail too) or, for a dropped session with `reconnect` on, it keeps them
  // and starts reconnecting.
  void lose(errc code, std::string message) {
    if (state_ == state::closed) return;
    const auto loss = decide_loss(code, options_.reconnect, state_ == state::open, in_transaction_);
    const bool retry = loss.reconnect;
    message += loss.note;
    auto failure = make_error(code, scrubber_.scrub(std::move(message)));
    socket_.release();
    script_running_ = false;
    want_write_ = false;
    pid_ = 0;
    if (retry) {
      state_ = state::reconnecting;
      lost_error_ = failure;
    } else {
      state_ = state::closed;
      open_ = false;
      closed_error_ = failure;
      retry_timer_.cancel();
      wait_timer_.cancel();
      watchdog_.cancel();
      if (auto c = std::exchange(connector_, nullptr)) c->cancel();
    }
    // Unsent requests wait for the new session, or fail when there will be none.
    requests_.drop(failure,
                   retry ? std::optional(clock::now() + options_.reconnect_wait) : std::nullopt,
                   closed_error_);
    conn_.reset();
    if (!retry) {
      channels_.fail_all(closed_error_);
      return;
    }
    if (options_.reconnect_wait.count() <= 0) expire_waiting();
    arm_wait_timer();
    schedule_reconnect();
  }

  void schedule_reconnect() {
    retry_timer_.expires_after(backoff_.next_delay());
    retry_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->attempt_reconnect();
    });
  }

  // One attempt with the original conninfo: libpq walks its host list again and honours
  // target_session_attrs, so a failover to another listed host is followed.
  void attempt_reconnect() {
    if (state_ != state::reconnecting) return;
    ++attempts_;
    auto c = std::make_shared<connector>(
        strand_, conninfo_, options_.connect_timeout, scrubber_,
        [self = shared_from_this()](std::exception_ptr e, conn_ptr conn) {
          self->connector_.reset();
          if (self->state_ != state::reconnecting) return;  // closed meanwhile
          if (!e) e = self->adopt(std::move(conn));
          if (e) {
            self->last_attempt_error_ = e;
            return self->schedule_reconnect();
          }
          ++self->reconnects_;
          self->backoff_.reset();
        });
    connector_ = c;
    c->start();  // may finish (and drop connector_) before it returns
  }

  // Why a request waiting for the new session gives up.
  std::exception_ptr waiting_error() const {
    std::string why = "connection to server lost and not re-established within " +
                      std::to_string(options_.reconnect_wait.count()) + " ms";
    try {
      if (last_attempt_error_) std::rethrow_exception(last_attempt_error_);
      if (lost_error_) std::rethrow_exception(lost_error_);
    } catch (const std::exception& e) {
      why += std::string(": ") + e.what();
    }
    return make_error(errc::connection_lost, std::move(why));
  }

  // Fails the queued requests whose `reconnect_wait` has passed.
  void expire_waiting() {
    if (state_ != state::reconnecting) return;
    requests_.expire(clock::now(), [this] { return waiting_error(); });
  }

  void arm_wait_timer() {
    const auto next = requests_.earliest_deadline();
    if (state_ != state::reconnecting || !next) return;
    const auto earliest = *next;
    if (wait_armed_ && wait_at_ <= earliest) return;
    wait_armed_ = true;
    wait_at_ = earliest;
    wait_timer_.expires_at(earliest);
    wait_timer_.async_wait([self = shared_from_this(), gen = ++wait_gen_](std::error_code) {
      if (gen != self->wait_gen_) return;  // re-armed or reconnected since
      self->wait_armed_ = false;
      self->expire_waiting();
      self->arm_wait_timer();
    });
  }

  // With a statement_timeout: fails the requests sent (with errc::statement_timeout) and drops
  // the session once the server has sent nothing for statement_timeout + 1 s while answers are
  // due. The server's own statement_timeout fires first when it is alive; this catches a hung
  // server or a dead network, where only dropping the session frees the pipeline (PQcancel
  // would block the thread).
  void arm_watchdog() {
    if (watchdog_armed_) return;
    const auto check = watchdog_now();
    if (check.what == watchdog_check::verdict::off) return;
    watchdog_armed_ = true;
    watchdog_.expires_at(check.at);  // when expired already, the handler below runs at once
    watchdog_.async_wait([self = shared_from_this()](std::error_code ec) {
      self->watchdog_armed_ = false;
      if (ec) return;
      switch (self->watchdog_now().what) {
        case watchdog_check::verdict::off:
          return;
        case watchdog_check::verdict::wait:  // answers came meanwhile
          return self->arm_watchdog();
        case watchdog_check::verdict::expired:
          self->lose(errc::statement_timeout,
                     "no answer from the server within " +
                         std::to_string(watchdog_limit(self->options_.statement_timeout).count()) +
                         " ms (statement_timeout + 1 s); the connection was dropped (the server "
                         "may still run the statement)");
      }
    });
  }

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
