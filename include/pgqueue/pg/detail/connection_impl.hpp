// The connection state machine: one reader loop per connection that owns the socket, sends
// queued requests (pipelined, one Sync each), routes results back in order, switches out of
// pipeline mode for scripts, and dispatches notifications.
#pragma once

#include <libpq-fe.h>
#include <poll.h>

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "pgqueue/pg/detail/channel_registry.hpp"
#include "pgqueue/pg/detail/connector.hpp"
#include "pgqueue/pg/detail/identifier.hpp"
#include "pgqueue/pg/detail/libpq_handles.hpp"
#include "pgqueue/pg/detail/operation.hpp"
#include "pgqueue/pg/detail/request.hpp"
#include "pgqueue/pg/detail/secrets.hpp"
#include "pgqueue/pg/detail/server_error.hpp"
#include "pgqueue/pg/detail/socket_watch.hpp"
#include "pgqueue/pg/detail/subscription_state.hpp"

namespace pgqueue::pg::detail {

/// Everything below runs on `strand()` unless stated otherwise. States: connecting → open →
/// closed. `lose()` is the single exit from `open`; a later reconnect would go
/// open → reconnecting → open there, re-LISTENing `channels_.channels()`.
class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  explicit connection_impl(const asio::any_io_executor& ex)
      : strand_(asio::make_strand(ex)), socket_(strand_) {}

  connection_impl(const connection_impl&) = delete;
  connection_impl& operator=(const connection_impl&) = delete;

  ~connection_impl() {
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
  /// Any thread.
  bool is_open() const noexcept { return open_.load(); }
  /// Any thread.
  int backend_pid() const noexcept { return pid_.load(); }

  /// Fails all pending work with errc::closed. Any thread; takes effect on the strand.
  void close() {
    open_ = false;
    asio::post(strand_, [self = shared_from_this()] {
      self->lose(errc::closed, "connection closed by the application");
    });
  }

  void start_connect(std::string conninfo, std::chrono::milliseconds timeout,
                     operation_ptr<std::shared_ptr<connection_impl>> op) {
    scrubber_ = secret_scrubber(conninfo);
    auto c = std::make_shared<connector>(
        strand_, std::move(conninfo), timeout, scrubber_,
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

  void submit(request_ptr r) {
    if (state_ != state::open) return r->fail(closed_error());
    queued_.push_back(std::move(r));
    if (!pumping_) pump();
  }

  void listen(std::shared_ptr<subscription_state> sub, operation_ptr<result> op) {
    if (state_ != state::open) return op->complete(closed_error());
    const std::string& channel = sub->channel();
    channels_.begin_listen(channel);
    auto r = make_statement("LISTEN " + quote_identifier(channel), std::move(op));
    r->on_finish = [this, sub](bool ok, bool abandoned) {
      if (channels_.end_listen(sub->channel(), ok && !abandoned ? sub : nullptr)) {
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
                         operation_ptr<notification> op) {
    sub->wait(std::move(op));
  }

  static request_ptr make_statement(std::string sql, operation_ptr<result> op, params args = {}) {
    auto r = std::make_unique<request>();
    r->sql = std::move(sql);
    r->args = std::move(args);
    r->op = std::move(op);
    return r;
  }

 private:
  enum class state { connecting, open, closed };

  // Called once the connector succeeded; returns an error if the session cannot be set up.
  std::exception_ptr adopt(conn_ptr conn) {
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
    state_ = state::open;
    open_ = true;
    pump();
    return nullptr;
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
  // going while anything moved (input read, output flushed, requests sent).
  void pump() {
    pumping_ = true;
    bool progress = true;
    while (progress && state_ == state::open) {
      progress = false;
      arm_waits();
      const short ev = socket_.ready_now(want_write_);
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
      if (send_queued()) progress = true;
      if (state_ == state::open && PQstatus(conn_.get()) == CONNECTION_BAD) lose_connection();
    }
    pumping_ = false;
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
    while (state_ == state::open && !queued_.empty() && !script_running_) {
      request& r = *queued_.front();
      if (r.abandoned()) {
        // Never sent, so nothing to read back; its hook still runs to fix reference counts.
        pop_front(queued_)->finish();
        continue;
      }
      if (r.type == request::kind::script) {
        if (!in_flight_.empty()) break;
        if (!start_script(r)) return true;
      } else if (!send_statement(r)) {
        return true;
      }
      in_flight_.push_back(pop_front(queued_));
      sent = true;
    }
    if (sent && state_ == state::open) flush();
    return sent;
  }

  bool send_statement(const request& r) {
    const auto values = r.args.pointers();
    if (PQsendQueryParams(conn_.get(), r.sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0) != 1 ||
        PQpipelineSync(conn_.get()) != 1) {
      // Nothing here depends on the statement itself, so the connection is unusable.
      lose_or(errc::protocol_error, "cannot send statement: ");
      return false;
    }
    return true;
  }

  // The simple query protocol (needed for multi-statement text) is not allowed in pipeline
  // mode, so the pipeline is idle here and is left for the duration of the script.
  bool start_script(const request& r) {
    if (PQexitPipelineMode(conn_.get()) != 1) {
      lose_or(errc::protocol_error, "cannot leave pipeline mode for a script: ");
      return false;
    }
    if (PQsendQuery(conn_.get(), r.sql.c_str()) != 1) {
      lose_or(errc::protocol_error, "cannot send script: ");
      return false;
    }
    script_running_ = true;
    return true;
  }

  bool end_script() {
    script_running_ = false;
    pop_front(in_flight_)->finish();
    if (state_ != state::open) return false;
    if (PQenterPipelineMode(conn_.get()) != 1) {
      lose_or(errc::protocol_error, "cannot re-enter pipeline mode after a script: ");
      return false;
    }
    return true;
  }

  // Hands complete answers to the requests in send order. In pipeline mode each request's
  // answer is: its result(s), a NULL, then PGRES_PIPELINE_SYNC. A script's ends with NULL.
  // Returns false once the connection is gone.
  bool read_results() {
    int nulls = 0;
    while (state_ == state::open && !in_flight_.empty()) {
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
      switch (PQresultStatus(res.get())) {
        case PGRES_PIPELINE_SYNC:
          pop_front(in_flight_)->finish();
          break;
        case PGRES_COPY_IN:
        case PGRES_COPY_OUT:
        case PGRES_COPY_BOTH:
          lose(errc::protocol_error, "COPY is not supported on a pgqueue::pg connection");
          return false;
        default:
          in_flight_.front()->add(std::move(res));
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

  // A libpq call failed: if the connection broke that is the real cause, else `code`.
  void lose_or(errc code, const std::string& what) {
    if (PQstatus(conn_.get()) == CONNECTION_BAD) return lose_connection();
    lose(code, what + libpq_message());
  }

  // The single way out of `open`: every pending request and subscription wait fails with the
  // same error, and libpq's socket is released before PQfinish closes it.
  void lose(errc code, std::string message) {
    if (state_ == state::closed) return;
    state_ = state::closed;
    open_ = false;
    closed_error_ = make_error(code, scrubber_.scrub(std::move(message)));
    socket_.release();
    auto in_flight = std::exchange(in_flight_, {});
    auto queued = std::exchange(queued_, {});
    for (auto& r : in_flight) r->fail(closed_error_);
    for (auto& r : queued) r->fail(closed_error_);
    channels_.fail_all(closed_error_);
    conn_.reset();
  }

  std::exception_ptr closed_error() const {
    return closed_error_ ? closed_error_ : make_error(errc::closed, "connection is not open");
  }

  static request_ptr pop_front(std::deque<request_ptr>& q) {
    auto r = std::move(q.front());
    q.pop_front();
    return r;
  }

  strand_type strand_;
  socket_watch socket_;
  conn_ptr conn_;
  secret_scrubber scrubber_;
  state state_ = state::connecting;
  std::atomic<bool> open_{false};
  std::atomic<int> pid_{0};
  std::deque<request_ptr> queued_;     // not sent yet, in submission order
  std::deque<request_ptr> in_flight_;  // sent, answers pending, in send order
  channel_registry channels_;
  std::exception_ptr closed_error_;
  std::string last_fatal_;
  bool pumping_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool want_write_ = false;
  bool script_running_ = false;
};

}  // namespace pgqueue::pg::detail
